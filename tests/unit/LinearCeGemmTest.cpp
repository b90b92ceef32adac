//===- LinearCeGemmTest.cpp - lce_gemm against an fp64 product -----------===//
#include "GpuTest.h"
#include "kernels_spec/LinearCe.h"
#include "ops/SpecRun.h"
#include "tilejit/Compiler.h"
#include "tilejit/HostFloat.h"
#include "tilejit/Interpreter.h"
#include "tilejit/KernelSpec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace tilejit;

namespace {

/// Row-major storage of op(X) (rows x cols), or of X^T, with `pad` spare
/// elements per stored row (ld = stored cols + pad).
struct Stored {
  std::vector<uint8_t> data;
  int64_t ld;
  double at(int64_t r, int64_t c, bool transposed, DType t) const {
    int64_t i = transposed ? c * ld + r : r * ld + c;
    return loadAsFloats(data.data() + i * dtypeSize(t), t, 1)[0];
  }
};

Stored randomMatrix(int64_t rows, int64_t cols, bool transposed, DType t,
                    std::mt19937 &rng) {
  int64_t storedRows = transposed ? cols : rows;
  int64_t storedCols = transposed ? rows : cols;
  Stored s{{}, storedCols + 3};
  s.data.resize(storedRows * s.ld * dtypeSize(t));
  std::normal_distribution<float> dist(0.f, 1.f);
  for (int64_t i = 0; i < storedRows * s.ld; ++i)
    storeFromDouble(s.data.data(), t, i, dist(rng));
  return s;
}

/// C (M x N, ldc = N + 1) = alpha op(A) op(B) + beta C in the interpreter
/// for every transpose, C dtype and beta, with M, N, K not multiples of the
/// blocks and padded leading dimensions, against an fp64 product. (On the
/// GPU the kernel runs inside the chunk loop: LinearCeGpu.DslGemms.)
TEST(LinearCeGemm, InterpreterMatchesFp64) {
  const int64_t M = 70, N = 50, K = 40;
  const DType t = DType::BF16;
  const KernelSpec &spec = findKernel("lce_gemm");
  std::mt19937 rng(3);
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (bool cF32 : {false, true})
        for (float beta : {0.f, 0.5f}) {
          Stored A = randomMatrix(M, K, ta, t, rng);
          Stored B = randomMatrix(K, N, tb, t, rng);
          DType ct = cF32 ? DType::F32 : t;
          Stored C = randomMatrix(M, N, false, ct, rng);
          C.data.resize(M * (N + 1) * dtypeSize(ct));
          C.ld = N + 1;
          if (beta == 0.f) // beta = 0 must not read C: NaN shows if it does
            for (int64_t i = 0; i < M * C.ld; ++i)
              storeFromDouble(C.data.data(), ct, i, NAN);
          Stored before = C;
          float alpha = 1.5f;
          dsl::Config c = spec.config(t, {"TRANS_A=" + std::to_string(ta),
                                          "TRANS_B=" + std::to_string(tb),
                                          "C_F32=" + std::to_string(cF32)});
          TileModule m = spec.build(c);
          std::vector<InterpArg> scalars = {int32_t(M), int32_t(N), int32_t(K),
                                            A.ld,       B.ld,       C.ld,
                                            alpha,      beta};
          optimizeTile(m);
          std::vector<InterpArg> args = {
              InterpBuffer{A.data.data(), t, int64_t(A.data.size() / 2)},
              InterpBuffer{B.data.data(), t, int64_t(B.data.size() / 2)},
              InterpBuffer{C.data.data(), ct,
                           int64_t(C.data.size() / dtypeSize(ct))}};
          args.insert(args.end(), scalars.begin(), scalars.end());
          int64_t bm = c.get("BLOCK_M"), bn = c.get("BLOCK_N");
          interpret(m.operation(), "lce_gemm",
                    {(M + bm - 1) / bm, (N + bn - 1) / bn, 1}, args);
          double worst = 0;
          for (int64_t i = 0; i < M; ++i)
            for (int64_t j = 0; j < N; ++j) {
              double want = 0;
              for (int64_t kk = 0; kk < K; ++kk)
                want += A.at(i, kk, ta, t) * B.at(kk, j, tb, t);
              want = alpha * want +
                     (beta == 0.f ? 0.0 : beta * before.at(i, j, false, ct));
              double got = C.at(i, j, false, ct);
              // f32 sums of exact products; a bf16 C adds one rounding.
              double tol = (cF32 ? 1e-5 : 8e-3) * (std::fabs(want) + 1.0);
              worst = std::max(worst, std::fabs(got - want) / tol);
            }
          EXPECT_LE(worst, 1.0) << "transA " << ta << " transB " << tb
                                << " cF32 " << cF32 << " beta " << beta;
        }
}

// `tilejit run lce_gemm` (its run spec): the grid follows the config's
// blocks, the leading dimensions follow TRANS_A / TRANS_B, and the result
// matches the fp64 product in every transpose at sizes no block divides.
TEST(LinearCeGemm, RunsFromItsSpecInEveryTranspose) {
  const KernelSpec &spec = findKernel("lce_gemm");
  for (const char *ta : {"TRANS_A=0", "TRANS_A=1"})
    for (const char *tb : {"TRANS_B=0", "TRANS_B=1"}) {
      SpecRunOptions o;
      o.dtype = DType::BF16;
      o.sizes = {{"M", 100}, {"N", 72}, {"K", 88}};
      o.set = {ta, tb, "BLOCK_M=64", "BLOCK_N=64", "BLOCK_K=32",
               "num_warps=4", "C_F32=0"};
      SpecRun r(spec, o);
      EXPECT_EQ(r.grid().x, 2);
      EXPECT_EQ(r.grid().y, 2);
      r.runOnCpu();
      for (const OutputCheck &c : r.check())
        EXPECT_TRUE(c.passed) << ta << " " << tb << " " << c.name << " "
                              << c.worstRatio;
    }
  SpecRunOptions o;
  o.sizes = {{"M", 8}, {"N", 8}, {"K", 8}};
  o.dtype = DType::BF16;
  o.set = {"beta=1"};
  EXPECT_THROW(SpecRun(spec, o), Error); // C is an output: beta stays 0
}

// `tilejit bench lce_gemm` counts 2 M N K FLOP; a kernel that declares no
// product counts none and has no vendor product to time.
TEST(LinearCeGemm, DeclaresItsProductForBench) {
  SpecRunOptions o;
  o.dtype = DType::BF16;
  o.sizes = {{"M", 100}, {"N", 72}, {"K", 88}};
  SpecRun r(findKernel("lce_gemm"), o);
  EXPECT_EQ(r.flops(), 2.0 * 100 * 72 * 88);
  EXPECT_THROW(r.vendorGemmMs(1), Error); // nothing on the GPU yet
  SpecRunOptions j;
  j.sizes = {{"BT", 4}, {"V", 64}};
  SpecRun jsd(findKernel("jsd"), j);
  EXPECT_EQ(jsd.flops(), 0);
  EXPECT_THROW(jsd.vendorGemmMs(1), Error);
}

// The product the spec declares is the kernel's: cuBLASLt on the declared
// operands, leading dimensions and transposes matches the fp64 reference,
// as the kernel does, in every transpose.
TEST(LinearCeGemmGpu, CublasLtOnTheDeclaredOperandsMatchesTheReference) {
  TILEJIT_SKIP_WITHOUT_GPU();
  for (const char *ta : {"TRANS_A=0", "TRANS_A=1"})
    for (const char *tb : {"TRANS_B=0", "TRANS_B=1"}) {
      SpecRunOptions o;
      o.dtype = DType::BF16;
      o.gpu = true;
      o.sizes = {{"M", 200}, {"N", 136}, {"K", 264}};
      o.set = {ta, tb};
      SpecRun r(findKernel("lce_gemm"), o);
      r.runOnGpu();
      for (const OutputCheck &c : r.check())
        EXPECT_TRUE(c.passed) << ta << " " << tb << " lce_gemm " << c.name;
      EXPECT_GT(r.vendorGemmMs(2, /*copyOutput=*/true), 0);
      for (const OutputCheck &c : r.check())
        EXPECT_TRUE(c.passed) << ta << " " << tb << " cuBLASLt " << c.name;
    }
}

} // namespace

namespace {

// lce_logits in the interpreter: the logits h W^T it stores (f32, or bf16
// with NARROW_LOGITS) against an fp64 product, and each row's max and
// sum-exp per block of 128 columns against fp64 sums over the stored
// logits plus the bias under the softcap, with rows and V that no block
// divides (the last block has 44 columns, the second program 44 rows).
TEST(LinearCeLogits, PartialsMatchFp64) {
  const int64_t rows = 300, V = 300, d = 40;
  const DType t = DType::BF16;
  const KernelSpec &spec = findKernel("lce_logits");
  std::mt19937 rng(5);
  Stored h = randomMatrix(rows, d, false, t, rng);
  Stored W = randomMatrix(V, d, false, t, rng);
  std::vector<float> bias(V);
  std::normal_distribution<float> dist(0.f, 1.f);
  for (float &b : bias)
    b = dist(rng);
  for (bool narrow : {false, true})
    for (bool features : {false, true}) {
      dsl::Config c = spec.config(t, {},
                                  {{"NARROW_LOGITS", narrow},
                                   {"BIAS", features},
                                   {"SOFTCAP", features}});
      const int64_t bm = c.get("BLOCK_M"), bn = c.get("BLOCK_N");
      const int64_t blocks = (V + bn - 1) / bn;
      const float cap = features ? 4.f : 0.f;
      DType zt = narrow ? t : DType::F32;
      std::vector<uint8_t> z(rows * V * dtypeSize(zt));
      std::vector<float> rowMax(rows * blocks, NAN), rowSum(rows * blocks, NAN);
      TileModule m = spec.build(c);
      optimizeTile(m);
      std::vector<InterpArg> args = {
          InterpBuffer{h.data.data(), t, int64_t(h.data.size() / 2)},
          InterpBuffer{W.data.data(), t, int64_t(W.data.size() / 2)},
          InterpBuffer{z.data(), zt, rows * V},
          InterpBuffer{bias.data(), DType::F32, V},
          InterpBuffer{rowMax.data(), DType::F32, rows * blocks},
          InterpBuffer{rowSum.data(), DType::F32, rows * blocks},
          int32_t(rows), int32_t(V), int32_t(d), h.ld, W.ld, V, blocks, cap,
          int32_t(features)};
      interpret(m.operation(), "lce_logits",
                {(rows + bm - 1) / bm, blocks, 1}, args);
      double worstZ = 0, worstM = 0, worstS = 0;
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < blocks; ++j) {
          double mx = -INFINITY;
          std::vector<double> x;
          for (int64_t v = j * bn; v < std::min(V, (j + 1) * bn); ++v) {
            double want = 0;
            for (int64_t k = 0; k < d; ++k)
              want += h.at(i, k, false, t) * W.at(v, k, false, t);
            double got = loadAsFloats(z.data() + (i * V + v) * dtypeSize(zt),
                                      zt, 1)[0];
            double tol = (narrow ? 8e-3 : 1e-5) * (std::fabs(want) + 1.0);
            worstZ = std::max(worstZ, std::fabs(got - want) / tol);
            double xv = got + (features ? bias[v] : 0.0);
            if (features)
              xv = cap * std::tanh(xv / cap);
            x.push_back(xv);
            mx = std::max(mx, xv);
          }
          double sum = 0;
          for (double xv : x)
            sum += std::exp(xv - mx);
          worstM = std::max(worstM, std::fabs(rowMax[i * blocks + j] - mx) /
                                        (1e-5 * (std::fabs(mx) + 1.0)));
          worstS = std::max(worstS, std::fabs(rowSum[i * blocks + j] - sum) /
                                        (1e-5 * sum));
        }
      EXPECT_LE(worstZ, 1.0) << "narrow " << narrow << " features " << features;
      EXPECT_LE(worstM, 1.0) << "narrow " << narrow << " features " << features;
      EXPECT_LE(worstS, 1.0) << "narrow " << narrow << " features " << features;
    }
}

} // namespace
