// One-off experiment (stop 11): the reduced CE+TVD loss + student gradient
// from persistent clusters that keep two rows in shared memory. Each
// cluster of C blocks walks rows clusterId, clusterId + nClusters, ...; a
// block's slice of the next row is already on its way (one bulk async copy
// per tensor, completion on an mbarrier) while the current row is computed
// from shared memory, so each logit is read from HBM once and copies overlap
// the math. Pass 1 takes a per-thread max first, then one exp per element
// (no online rescaling): 2 exps per (student, teacher) pair; pass 2 two more;
// pass 3 one more, or none when pass 2 leaves signed p in shared memory
// (PSTORE). Not tilejit code: it tells whether the design is worth building
// into the compiler. Semantics: shared/semantics.md §1.
// Assumes V % 8 == 0 (bulk copies need 16-byte-aligned rows and sizes) and
// leaves the attribute calls' return codes unchecked (a one-off).
// Build: nvcc -O3 -arch=sm_90a -std=c++17 -o cetvd-persistent main.cu
// (UNROLL: replace "#pragma unroll UNROLL" by a number first, e.g. with sed)
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>
namespace cg = cooperative_groups;

__device__ __forceinline__ unsigned smemAddr(const void *p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbarInit(uint64_t *b) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smemAddr(b)) : "memory");
}
__device__ __forceinline__ void mbarExpect(uint64_t *b, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smemAddr(b)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void bulkCopy(void *dst, const void *src, unsigned bytes, uint64_t *b) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               ::"r"(smemAddr(dst)), "l"(src), "r"(bytes), "r"(smemAddr(b)) : "memory");
}
__device__ __forceinline__ void mbarWait(uint64_t *b, unsigned parity) {
  unsigned ok;
  do {
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p; }"
                 : "=r"(ok) : "r"(smemAddr(b)), "r"(parity) : "memory");
  } while (!ok);
}

template <int THREADS, typename F> __device__ float blockCombine(float v, F op, float *scratch) {
  for (int o = 16; o; o >>= 1) v = op(v, __shfl_xor_sync(~0u, v, o));
  __syncthreads();
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  v = scratch[0];
  for (int w = 1; w < THREADS / 32; ++w) v = op(v, scratch[w]);
  return v;
}
// Combines two floats per thread over the block with one shared-memory round.
template <int THREADS, typename F> __device__ float2 blockCombine2(float2 v, F op, float2 *scratch) {
  for (int o = 16; o; o >>= 1) { v.x = op(v.x, __shfl_xor_sync(~0u, v.x, o)); v.y = op(v.y, __shfl_xor_sync(~0u, v.y, o)); }
  __syncthreads();
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  v = scratch[0];
  for (int w = 1; w < THREADS / 32; ++w) { v.x = op(v.x, scratch[w].x); v.y = op(v.y, scratch[w].y); }
  return v;
}
__host__ __device__ __forceinline__ float bf(__nv_bfloat16 x) { return __bfloat162float(x); }

// One cluster exchange per call, alternating between two slot sets so that
// a single cluster barrier per exchange suffices.
template <int K> struct Exchange {
  float *slots; // [2][K]
  int parity = 0;
  __device__ void run(cg::cluster_group &cl, const float (&v)[K], float (&all)[16][K]) {
    float *slot = slots + parity * K;
    if (threadIdx.x < K) slot[threadIdx.x] = v[threadIdx.x];
    cl.sync();
    for (unsigned r = 0; r < cl.num_blocks(); ++r) {
      float *remote = cl.map_shared_rank(slot, r);
      for (int k = 0; k < K; ++k) all[r][k] = remote[k];
    }
    parity ^= 1;
  }
};

template <int C, int THREADS, bool PSTORE, int MODE = 0>
__global__ void __launch_bounds__(THREADS, 1) cetvd_pipe(
    const __nv_bfloat16 *__restrict__ student, const __nv_bfloat16 *__restrict__ teacher,
    const long long *__restrict__ target, float gCe, float gTvd, float *__restrict__ ceOut,
    float *__restrict__ tvdOut, __nv_bfloat16 *__restrict__ grad, int BT, int V, int slice) {
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ uint64_t bar[2];
  __shared__ float2 scratch[32];
  __shared__ float slots[2 * 4];
  cg::cluster_group cl = cg::this_cluster();
  Exchange<4> ex{slots};
  const int rank = cl.block_rank(), clusterId = blockIdx.x / C, nClusters = gridDim.x / C;
  const int start = rank * slice, n = max(min(V - start, slice), 0);
  const unsigned bytes = n * 2;
  __nv_bfloat16 *stage[2] = {reinterpret_cast<__nv_bfloat16 *>(smem),
                             reinterpret_cast<__nv_bfloat16 *>(smem) + 2 * slice};
  float *pbuf = reinterpret_cast<float *>(smem + 8 * size_t(slice));
  if (threadIdx.x == 0) { mbarInit(&bar[0]); mbarInit(&bar[1]); }
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  __syncthreads();
  auto yAt = [&](int row) { return row < BT ? target[row] : -100LL; };
  auto issue = [&](int row, long long yRow, int s) {
    if (MODE == 1 && row >= clusterId + 2 * nClusters) return;
    if (threadIdx.x == 0 && row < BT && n > 0 && yRow != -100) {
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
      mbarExpect(&bar[s], 2 * bytes);
      bulkCopy(stage[s], student + (long long)row * V + start, bytes, &bar[s]);
      bulkCopy(stage[s] + slice, teacher + (long long)row * V + start, bytes, &bar[s]);
    }
  };
  long long y0 = yAt(clusterId), y1 = yAt(clusterId + nClusters);
  issue(clusterId, y0, 0);
  issue(clusterId + nClusters, y1, 1);
  unsigned phase[2] = {0, 0};
  int it = 0;
  for (int row = clusterId; row < BT; row += nClusters, ++it) {
    const int s = it & 1;
    long long y = y0, y2 = yAt(row + 2 * nClusters);
    y0 = y1; y1 = y2;
    __nv_bfloat16 *g = grad + (long long)row * V + start;
    if (y == -100) { // uniform over the cluster
      for (int i = threadIdx.x * 8; i < n; i += THREADS * 8)
        *reinterpret_cast<uint4 *>(g + i) = make_uint4(0, 0, 0, 0);
      if (rank == 0 && threadIdx.x == 0) ceOut[row] = tvdOut[row] = 0.f;
      issue(row + 2 * nClusters, y2, s);
      continue;
    }
    if (n > 0 && (MODE != 1 || it < 2)) { mbarWait(&bar[s], phase[s]); phase[s] ^= 1; }
    if (MODE == 2) { // copies, waits and cluster exchanges only
      float all2[16][4];
      ex.run(cl, {0.f, 0.f, 0.f, 0.f}, all2);
      ex.run(cl, {0.f, 0.f, 0.f, 0.f}, all2);
      for (int i = threadIdx.x * 8; i < n; i += THREADS * 8)
        *reinterpret_cast<uint4 *>(g + i) = make_uint4(0, 0, 0, 0);
      __syncthreads();
      issue(row + 2 * nClusters, y2, s);
      continue;
    }
    const __nv_bfloat16 *ss = stage[s], *st = stage[s] + slice;
    // Pass 1a: per-lane max; 1b: per-lane sum of exp against the thread max.
    float msl[8], mtl[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) msl[j] = mtl[j] = -INFINITY;
#pragma unroll UNROLL
    for (int i = threadIdx.x * 8; i < n; i += THREADS * 8) {
      uint4 vs = *reinterpret_cast<const uint4 *>(ss + i), vt = *reinterpret_cast<const uint4 *>(st + i);
      const __nv_bfloat16 *ps = reinterpret_cast<const __nv_bfloat16 *>(&vs), *pt = reinterpret_cast<const __nv_bfloat16 *>(&vt);
#pragma unroll
      for (int j = 0; j < 8; ++j) { msl[j] = fmaxf(msl[j], bf(ps[j])); mtl[j] = fmaxf(mtl[j], bf(pt[j])); }
    }
    float ms = msl[0], mt = mtl[0];
#pragma unroll
    for (int j = 1; j < 8; ++j) { ms = fmaxf(ms, msl[j]); mt = fmaxf(mt, mtl[j]); }
    const float L2E = 1.4426950408889634f;
    float dsl[8] = {}, dtl[8] = {};
    {
      float ms2 = ms == -INFINITY ? 0.f : ms * L2E, mt2 = mt == -INFINITY ? 0.f : mt * L2E;
#pragma unroll UNROLL
      for (int i = threadIdx.x * 8; i < n; i += THREADS * 8) {
        uint4 vs = *reinterpret_cast<const uint4 *>(ss + i), vt = *reinterpret_cast<const uint4 *>(st + i);
        const __nv_bfloat16 *ps = reinterpret_cast<const __nv_bfloat16 *>(&vs), *pt = reinterpret_cast<const __nv_bfloat16 *>(&vt);
#pragma unroll
        for (int j = 0; j < 8; ++j) { dsl[j] += exp2f(fmaf(bf(ps[j]), L2E, -ms2)); dtl[j] += exp2f(fmaf(bf(pt[j]), L2E, -mt2)); }
      }
    }
    float ds = 0, dt = 0;
#pragma unroll
    for (int j = 0; j < 8; ++j) { ds += dsl[j]; dt += dtl[j]; }
    // Block: (max, sum) pairs combined with one rescale per thread.
    float2 M = blockCombine2<THREADS>(make_float2(ms, mt), [](float a, float b) { return fmaxf(a, b); }, scratch);
    float Ms = M.x, Mt = M.y;
    ds = ms == -INFINITY ? 0.f : ds * __expf(ms - Ms);
    dt = mt == -INFINITY ? 0.f : dt * __expf(mt - Mt);
    float2 D = blockCombine2<THREADS>(make_float2(ds, dt), [](float a, float b) { return a + b; }, scratch);
    ds = D.x; dt = D.y;
    float sy = (y >= start && y < start + n) ? bf(ss[y - start]) : 0.f;
    float all[16][4];
    ex.run(cl, {Ms, ds, Mt, dt}, all);
    float As = -INFINITY, At = -INFINITY, Ds = 0, Dt = 0;
    for (int r = 0; r < C; ++r) { As = fmaxf(As, all[r][0]); At = fmaxf(At, all[r][2]); }
    for (int r = 0; r < C; ++r) {
      if (all[r][0] != -INFINITY) Ds += all[r][1] * __expf(all[r][0] - As);
      if (all[r][2] != -INFINITY) Dt += all[r][3] * __expf(all[r][2] - At);
    }
    float lseS = As + __logf(Ds), lseT = At + __logf(Dt);
    float ls2 = lseS * L2E, lt2 = lseT * L2E;
    // Pass 2: sum |p - q| and sigma = sum p sign(p - q).
    float absl[8] = {}, sigl[8] = {};
#pragma unroll UNROLL
    for (int i = threadIdx.x * 8; i < n; i += THREADS * 8) {
      uint4 vs = *reinterpret_cast<const uint4 *>(ss + i), vt = *reinterpret_cast<const uint4 *>(st + i);
      const __nv_bfloat16 *ps = reinterpret_cast<const __nv_bfloat16 *>(&vs), *pt = reinterpret_cast<const __nv_bfloat16 *>(&vt);
      float pw[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        float lp = fmaf(bf(ps[j]), L2E, -ls2), lq = fmaf(bf(pt[j]), L2E, -lt2);
        float p = exp2f(lp), q = exp2f(lq);
        absl[j] += fabsf(p - q);
        sigl[j] += lp == lq ? 0.f : (lp > lq ? p : -p);
        if (PSTORE) {
          unsigned b = __float_as_uint(p) & ~1u;
          b |= lp == lq ? 1u : (lp < lq ? 0x80000000u : 0u);
          pw[j] = __uint_as_float(b);
        }
      }
      if (PSTORE) {
        *reinterpret_cast<float4 *>(pbuf + i) = make_float4(pw[0], pw[1], pw[2], pw[3]);
        *reinterpret_cast<float4 *>(pbuf + i + 4) = make_float4(pw[4], pw[5], pw[6], pw[7]);
      }
    }
    float absSum = 0, sig = 0;
#pragma unroll
    for (int j = 0; j < 8; ++j) { absSum += absl[j]; sig += sigl[j]; }
    float2 T = blockCombine2<THREADS>(make_float2(absSum, sig), [](float a, float b) { return a + b; }, scratch);
    absSum = T.x; sig = T.y;
    ex.run(cl, {absSum, sig, sy, 0.f}, all);
    float tvd = 0, sigma = 0, syAll = 0;
    for (int r = 0; r < C; ++r) { tvd += all[r][0]; sigma += all[r][1]; syAll += all[r][2]; }
    tvd *= 0.5f;
    if (rank == 0 && threadIdx.x == 0) { ceOut[row] = lseS - syAll; tvdOut[row] = tvd; }
    // Pass 3: the gradient, 16 bytes per store.
    const int yl = int(y) - start;
    const float a0 = gTvd * 0.5f, c0 = gCe - a0 * sigma;
#pragma unroll UNROLL
    for (int i = threadIdx.x * 8; i < n; i += THREADS * 8) {
      uint4 out;
      __nv_bfloat16 *po = reinterpret_cast<__nv_bfloat16 *>(&out);
      if (PSTORE) {
        float4 w0 = *reinterpret_cast<const float4 *>(pbuf + i), w1 = *reinterpret_cast<const float4 *>(pbuf + i + 4);
        float w[8] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          unsigned b = __float_as_uint(w[j]);
          float p = __uint_as_float(b & 0x7ffffffeu);
          float sg = (b & 1u) ? 0.f : ((b >> 31) ? -1.f : 1.f);
          float v = p * fmaf(a0, sg, c0) - (i + j == yl ? gCe : 0.f);
          po[j] = __float2bfloat16_rn(v);
        }
      } else {
        uint4 vs = *reinterpret_cast<const uint4 *>(ss + i), vt = *reinterpret_cast<const uint4 *>(st + i);
        const __nv_bfloat16 *ps = reinterpret_cast<const __nv_bfloat16 *>(&vs), *pt = reinterpret_cast<const __nv_bfloat16 *>(&vt);
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          float lp = fmaf(bf(ps[j]), L2E, -ls2), lq = fmaf(bf(pt[j]), L2E, -lt2);
          float p = exp2f(lp), sg = lp == lq ? 0.f : (lp > lq ? 1.f : -1.f);
          float v = p * fmaf(a0, sg, c0) - (i + j == yl ? gCe : 0.f);
          po[j] = __float2bfloat16_rn(v);
        }
      }
      *reinterpret_cast<uint4 *>(g + i) = out;
    }
    __syncthreads(); // every thread is done with stage s
    issue(row + 2 * nClusters, y2, s);
  }
  cl.sync(); // no block exits while another reads its slots
}

__global__ void copyKernel(const uint4 *a, uint4 *b, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) b[i] = a[i];
}

template <int C, int THREADS, bool PSTORE, int MODE = 0>
void runVariant(int BT, int V, const __nv_bfloat16 *s, const __nv_bfloat16 *t, const long long *y,
                float gCe, float gTvd, float *ce, float *tvd, __nv_bfloat16 *g, double copyMs, std::vector<float> &hce,
                std::vector<float> &htvd, std::vector<__nv_bfloat16> &hg, int maxClusters = 1 << 30) {
  int slice = ((V + C - 1) / C + 7) / 8 * 8;
  size_t smemBytes = size_t(2) * 2 * slice * 2 + (PSTORE ? size_t(4) * slice : 0);
  auto k = cetvd_pipe<C, THREADS, PSTORE, MODE>;
  cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smemBytes));
  if (C > 8) cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  cudaLaunchConfig_t cfg = {};
  cfg.blockDim = dim3(THREADS); cfg.dynamicSmemBytes = smemBytes;
  cudaLaunchAttribute attr; attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = C; attr.val.clusterDim.y = 1; attr.val.clusterDim.z = 1;
  cfg.attrs = &attr; cfg.numAttrs = 1;
  cfg.gridDim = dim3(C * 64);
  int clusters = 0;
  cudaError_t oe = cudaOccupancyMaxActiveClusters(&clusters, k, &cfg);
  clusters = std::min(std::min(clusters, maxClusters), BT);
  if (clusters <= 0) { printf("C=%d threads=%d pstore=%d: no cluster fits (%s)\n", C, THREADS, PSTORE, cudaGetErrorString(oe)); cudaGetLastError(); return; }
  cfg.gridDim = dim3(clusters * C);
  cudaEvent_t e[21];
  for (auto &x : e) cudaEventCreate(&x);
  for (int w = 0; w < 3; ++w) cudaLaunchKernelEx(&cfg, k, s, t, y, gCe, gTvd, ce, tvd, g, BT, V, slice);
  cudaEventRecord(e[0]);
  for (int i = 0; i < 20; ++i) { cudaLaunchKernelEx(&cfg, k, s, t, y, gCe, gTvd, ce, tvd, g, BT, V, slice); cudaEventRecord(e[i + 1]); }
  cudaEventSynchronize(e[20]);
  std::vector<float> ms;
  for (int i = 0; i < 20; ++i) { float x; cudaEventElapsedTime(&x, e[i], e[i + 1]); ms.push_back(x); }
  std::sort(ms.begin(), ms.end());
  cudaError_t err = cudaGetLastError();
  double med = ms[10], bytes = 3.0 * BT * double(V) * 2;
  cudaFuncAttributes fa; cudaFuncGetAttributes(&fa, k);
  printf("pipe mode %d C=%2d threads=%4d pstore=%d regs %3d smem %6zu B clusters %3d  median %.4f ms  %.2f TB/s  %.3f of the copy-rate roofline  %s\n",
         MODE, C, THREADS, PSTORE, fa.numRegs, smemBytes, clusters, med, bytes / med / 1e9, copyMs * 1.5 / med, cudaGetErrorString(err));
  cudaMemset(ce, 0xFF, BT * 4); cudaMemset(g, 0xFF, size_t(16) * V * 2);
  cudaLaunchKernelEx(&cfg, k, s, t, y, gCe, gTvd, ce, tvd, g, BT, V, slice);
  cudaDeviceSynchronize();
  cudaMemcpy(hce.data(), ce, BT * 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(htvd.data(), tvd, BT * 4, cudaMemcpyDeviceToHost);
  cudaMemcpy(hg.data(), g, size_t(8) * V * 2, cudaMemcpyDeviceToHost);
}

int main(int argc, char **argv) {
  const int BT = argc > 1 ? atoi(argv[1]) : 4096, V = argc > 2 ? atoi(argv[2]) : 151936;
  size_t n = size_t(BT) * V;
  std::vector<__nv_bfloat16> hs(n), ht(n);
  std::mt19937 rng(3); std::normal_distribution<float> d(0.f, 2.f);
  for (size_t i = 0; i < n; ++i) { float x = d(rng); hs[i] = __float2bfloat16(x); ht[i] = __float2bfloat16(x + 0.5f * d(rng)); }
  for (int v = 0; v < V; ++v) ht[size_t(3) * V + v] = hs[size_t(3) * V + v]; // row 3: self-distillation
  std::vector<long long> hy(BT);
  for (int i = 0; i < BT; ++i) hy[i] = i % 7 == 6 ? -100LL : (long long)(rng() % V);
  int nValid = 0; for (auto v : hy) nValid += v != -100;
  float gCe = 1.f / nValid, gTvd = 1.f / nValid;
  __nv_bfloat16 *s, *t, *g; long long *y; float *ce, *tvd;
  cudaMalloc(&s, n * 2); cudaMalloc(&t, n * 2); cudaMalloc(&g, n * 2); cudaMalloc(&y, BT * 8);
  cudaMalloc(&ce, BT * 4); cudaMalloc(&tvd, BT * 4);
  cudaMemcpy(s, hs.data(), n * 2, cudaMemcpyHostToDevice); cudaMemcpy(t, ht.data(), n * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(y, hy.data(), BT * 8, cudaMemcpyHostToDevice);
  std::vector<float> cms;
  for (int i = 0; i < 12; ++i) {
    cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
    cudaEventRecord(a); copyKernel<<<132 * 8, 512>>>((const uint4 *)s, (uint4 *)g, n * 2 / 16); cudaEventRecord(b);
    cudaEventSynchronize(b); float x; cudaEventElapsedTime(&x, a, b); if (i >= 2) cms.push_back(x);
  }
  std::sort(cms.begin(), cms.end());
  double copyMs = cms[cms.size() / 2];
  printf("BT %d V %d bf16; copy: %.4f ms, %.2f TB/s; roofline of 3 units: %.4f ms\n", BT, V, copyMs, 2.0 * n * 2 / copyMs / 1e9, copyMs * 1.5);
  std::vector<float> hce(BT), htvd(BT); std::vector<__nv_bfloat16> hg(size_t(8) * V);
  auto check = [&] {
    double worstCe = 0, worstTvd = 0, worstG = 0;
    for (int r = 0; r < 8; ++r) {
      std::vector<double> lp(V), lq(V);
      double ms = -1e30, mt = -1e30;
      for (int v = 0; v < V; ++v) { ms = std::max(ms, (double)bf(hs[size_t(r) * V + v])); mt = std::max(mt, (double)bf(ht[size_t(r) * V + v])); }
      double ds = 0, dt = 0;
      for (int v = 0; v < V; ++v) { ds += exp(bf(hs[size_t(r) * V + v]) - ms); dt += exp(bf(ht[size_t(r) * V + v]) - mt); }
      double tv = 0, sg = 0;
      for (int v = 0; v < V; ++v) {
        lp[v] = bf(hs[size_t(r) * V + v]) - ms - log(ds); lq[v] = bf(ht[size_t(r) * V + v]) - mt - log(dt);
        tv += fabs(exp(lp[v]) - exp(lq[v])); sg += lp[v] == lq[v] ? 0 : (lp[v] > lq[v] ? exp(lp[v]) : -exp(lp[v]));
      }
      tv *= 0.5;
      bool ign = hy[r] == -100;
      double ceRef = ign ? 0 : -lp[hy[r]], tvdRef = ign ? 0 : tv;
      worstCe = std::max(worstCe, fabs(hce[r] - ceRef) / std::max(1.0, fabs(ceRef)));
      worstTvd = std::max(worstTvd, fabs(htvd[r] - tvdRef));
      for (int v = 0; v < V; ++v) {
        double p = exp(lp[v]), sgn = lp[v] == lq[v] ? 0 : (lp[v] > lq[v] ? 1 : -1);
        double ref = ign ? 0 : gCe * (p - (v == hy[r])) + gTvd * 0.5 * p * (sgn - sg);
        double err = fabs(bf(hg[size_t(r) * V + v]) - ref);
        if (!(err <= worstG)) worstG = err; // NaN-sticky
      }
    }
    printf("   rows 0-7 against fp64: ce rel err %.2e, tvd abs err %.2e (row 3 self-distilled: tvd %.1e), grad abs err %.2e (grad scale %.1e)\n",
           worstCe, worstTvd, htvd[3], worstG, gCe);
  };
  runVariant<8, 256, false>(BT, V, s, t, y, gCe, gTvd, ce, tvd, g, copyMs, hce, htvd, hg); check();
  runVariant<8, 256, false, 1>(BT, V, s, t, y, gCe, gTvd, ce, tvd, g, copyMs, hce, htvd, hg);
  runVariant<8, 256, false, 2>(BT, V, s, t, y, gCe, gTvd, ce, tvd, g, copyMs, hce, htvd, hg);
  runVariant<8, 512, false, 1>(BT, V, s, t, y, gCe, gTvd, ce, tvd, g, copyMs, hce, htvd, hg);
  runVariant<8, 512, false, 2>(BT, V, s, t, y, gCe, gTvd, ce, tvd, g, copyMs, hce, htvd, hg);
}
