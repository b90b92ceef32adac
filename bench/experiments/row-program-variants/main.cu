// One-off harness (stop 10): variants of the emitted lce_logits_grad, timed
// (see gen.py; results in bench/results/2026-11-29-lce-session10.md).
#include "kernels.cuh"
#include <cstdio>
#include <vector>
#include <algorithm>
#include <random>
#include <cuda_runtime.h>
typedef void (*K)(__nv_bfloat16 *, __nv_bfloat16 *, float *, long long *, float *, float *, float *, float *, float *, float *, int, long long, long long, int, long long, float, float, float, int, int, int, float);
int main() {
  const int R = 2048, V = 128256;
  size_t n = size_t(R) * V;
  std::vector<__nv_bfloat16> h(n);
  std::mt19937 rng(1); std::normal_distribution<float> d(0.f, 2.f);
  for (size_t i = 0; i < n; ++i) h[i] = __float2bfloat16(d(rng));
  std::vector<long long> y(R); for (int i = 0; i < R; ++i) y[i] = (i % 7 == 0) ? -100LL : (long long)(rng() % V);
  __nv_bfloat16 *lg, *dz; long long *ty; float *stats, *up, *rl, *rz, *lse, *bias, *cw;
  cudaMalloc(&lg, n * 2); cudaMalloc(&dz, n * 2); cudaMalloc(&ty, R * 8);
  cudaMalloc(&stats, 64); cudaMalloc(&up, R * 4); cudaMalloc(&rl, R * 4); cudaMalloc(&rz, R * 4); cudaMalloc(&lse, R * 4);
  cudaMalloc(&bias, V * 4); cudaMalloc(&cw, V * 4);
  cudaMemcpy(lg, h.data(), n * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(ty, y.data(), R * 8, cudaMemcpyHostToDevice);
  float st[5] = {1.f / R, 1.f / R, float(V), float(R), float(R)};
  cudaMemcpy(stats, st, 20, cudaMemcpyHostToDevice);
  struct { const char *name; K k; int threads; } ks[] = {
#include "list.inc"
  };
  std::vector<float> ref(R), got(R);
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  for (int pass = 0; pass < 2; ++pass)
  for (auto &kk : ks) {
    cudaFuncAttributes at; cudaFuncGetAttributes(&at, kk.k);
    std::vector<float> ms;
    for (int it = 0; it < 25; ++it) {
      cudaEventRecord(a);
      kk.k<<<R, kk.threads>>>(lg, pass ? lg : dz, bias, ty, cw, stats, up, rl, rz, lse, V, V, V, 0, -100, 0.f, 0.f, 0.f, 0, 0, 0, 1.f);
      cudaEventRecord(b); cudaEventSynchronize(b);
      float t; cudaEventElapsedTime(&t, a, b); if (it >= 5) ms.push_back(t);
    }
    cudaError_t e = cudaGetLastError();
    std::sort(ms.begin(), ms.end());
    cudaMemcpy(got.data(), rl, R * 4, cudaMemcpyDeviceToHost);
    if (&kk == &ks[0]) ref = got;
    double maxd = 0; for (int i = 0; i < R; ++i) maxd = std::max(maxd, double(std::abs(got[i] - ref[i])));
    double med = ms[ms.size() / 2];
    printf("%s %-18s regs %3d  median %.4f ms  min %.4f  %.2f TB/s (3 passes) %.2f TB/s (2)  maxdiff %.2g  %s\n", pass ? "inplace" : "separate", kk.name, at.numRegs, med, ms[0],
           3.0 * n * 2 / med / 1e9, 2.0 * n * 2 / med / 1e9, maxd, cudaGetErrorString(e));
  }
  // Copy roofline: read + write n bf16.
  std::vector<float> ms;
  for (int it = 0; it < 25; ++it) { cudaEventRecord(a); cudaMemcpy(dz, lg, n * 2, cudaMemcpyDeviceToDevice); cudaEventRecord(b); cudaEventSynchronize(b); float t; cudaEventElapsedTime(&t, a, b); if (it >= 5) ms.push_back(t); }
  std::sort(ms.begin(), ms.end());
  printf("copy     median %.4f ms  %.2f TB/s (read+write)\n", ms[ms.size()/2], 2.0 * n * 2 / ms[ms.size()/2] / 1e9);
}
