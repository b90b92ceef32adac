// A kernel of one's own: the log-sum-exp of each row of logits,
//   lse_r = m_r + log sum_v exp(x_rv - m_r),  m_r = max_v x_rv,
// written in tilejit's DSL, registered under a name, compiled for a config
// and run through the library: in the CPU interpreter, and on the GPU when
// there is one. Checked against a double-precision reference; exits 1 on a
// mismatch.
#include "tilejit/Kernel.h"
#include "tilejit/KernelSpec.h"

#include <cmath>
#include <cstdio>
#include <vector>

#ifdef HAVE_CUDART
#include <cuda_runtime.h>
#endif

using namespace tilejit;
using namespace tilejit::dsl;

/// One program per row: a pass for the max, a pass for the sum.
TileModule buildRowLse(const Config &c) {
  KernelBuilder k("row_lse", c);
  Value x = k.pointerArg("x", c.dtype);
  Value lse = k.pointerArg("lse", DType::F32);
  Value V = k.scalarArg("V", DType::I32);
  const int64_t BLOCK = k.param("BLOCK_SIZE");
  Value row = k.programId(0);
  Value xRow = x + row.to(DType::I64) * V.to(DType::I64);
  Var m = k.constant(-INFINITY, DType::F32);
  k.forRange(0, V, BLOCK, [&](Value i) {
    Value offs = i + k.arange(BLOCK);
    m = max(m, k.load(xRow, offs, offs < V, -INFINITY).to(DType::F32).max());
  });
  Var s = k.constant(0, DType::F32);
  k.forRange(0, V, BLOCK, [&](Value i) {
    Value offs = i + k.arange(BLOCK);
    Value xv = k.load(xRow, offs, offs < V, -INFINITY).to(DType::F32);
    s = s + exp(xv - m).sum();
  });
  k.store(lse, row, m + log(s));
  return k.finish();
}

static int check(const char *where, const std::vector<float> &got,
                 const std::vector<float> &x, int64_t rows, int64_t V) {
  double worst = 0;
  for (int64_t r = 0; r < rows; ++r) {
    double m = -INFINITY, s = 0;
    for (int64_t v = 0; v < V; ++v)
      m = std::fmax(m, x[r * V + v]);
    for (int64_t v = 0; v < V; ++v)
      s += std::exp(x[r * V + v] - m);
    double want = m + std::log(s);
    worst = std::fmax(worst, std::fabs(got[r] - want) / std::fabs(want));
  }
  bool ok = worst <= 1e-5; // f32 sums of V terms
  std::printf("%s: %lld rows of %lld, max relative error %.2e: %s\n", where,
              (long long)rows, (long long)V, worst, ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

int main() {
  registerKernel({"row_lse",
                  "log-sum-exp of each row",
                  {{"BLOCK_SIZE", {1024, 2048}, 1024, "elements per tile"},
                   {"num_warps", {4, 8}, 4, "warps per program"}},
                  {DType::F32},
                  buildRowLse,
                  {{"V", false}}});
  const int64_t rows = 16, V = 5000;
  std::vector<float> x(rows * V), lse(rows, 0.f);
  for (int64_t i = 0; i < rows * V; ++i)
    x[i] = float(4 * std::sin(0.001 * i * i));

  Kernel k = Kernel::compile("row_lse", {DType::F32, {"BLOCK_SIZE=2048"}, {}});
  std::printf("%s (%s), parameters:", k.name().c_str(), k.config().c_str());
  for (const KernelParam &p : k.params())
    std::printf(" %s", p.name.c_str());
  std::printf("\n");
  k.runOnCpu({rows}, {KernelArg::pointer(x.data(), DType::F32, rows * V),
                      KernelArg::pointer(lse.data(), DType::F32, rows),
                      KernelArg::i32(int32_t(V))});
  int status = check("cpu", lse, x, rows, V);

#ifdef HAVE_CUDART
  int gpus = 0;
  if (cudaGetDeviceCount(&gpus) != cudaSuccess || gpus == 0) {
    std::printf("gpu: none here, skipped\n");
    return status;
  }
  float *dx = nullptr, *dlse = nullptr;
  cudaMalloc(&dx, x.size() * sizeof(float));
  cudaMalloc(&dlse, rows * sizeof(float));
  cudaMemcpy(dx, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice);
  cudaStream_t stream;
  cudaStreamCreate(&stream);
  k.launch({rows},
           {KernelArg::pointer(dx, DType::F32), KernelArg::pointer(dlse, DType::F32),
            KernelArg::i32(int32_t(V))},
           stream);
  std::vector<float> fromGpu(rows);
  cudaMemcpyAsync(fromGpu.data(), dlse, rows * sizeof(float),
                  cudaMemcpyDeviceToHost, stream);
  cudaStreamSynchronize(stream);
  status |= check("gpu", fromGpu, x, rows, V);
  cudaFree(dx);
  cudaFree(dlse);
  cudaStreamDestroy(stream);
#endif
  return status;
}
