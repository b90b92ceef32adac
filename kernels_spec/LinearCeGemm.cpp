//===- LinearCeGemm.cpp - the chunk loop's GEMMs written in the DSL -------===//
//
// lce_gemm: C = alpha op(A) op(B) + beta C with tile `dot` (tensor cores),
// the chunk loop's alternative to cuBLASLt. Program (i, j) of a 2-D grid
// owns the BLOCK_M x BLOCK_N block of C at (i BLOCK_M, j BLOCK_N) and walks
// K in BLOCK_K steps. TRANS_A / TRANS_B read A or B transposed through the
// load offsets; C_F32 picks an f32 or an input-dtype C.
//
//===----------------------------------------------------------------------===//
#include "kernels_spec/BlockIndex.h"
#include "kernels_spec/LinearCe.h"

using namespace tilejit::dsl;

namespace tilejit {
namespace {

TileModule buildGemm(const Config &cfg) {
  KernelBuilder k("lce_gemm", cfg);
  const int64_t BM = k.param("BLOCK_M"), BN = k.param("BLOCK_N"),
                BK = k.param("BLOCK_K");
  const bool TRANS_A = k.param("TRANS_A"), TRANS_B = k.param("TRANS_B");
  Value A = k.pointerArg("A", cfg.dtype);
  Value B = k.pointerArg("B", cfg.dtype);
  Value C = k.pointerArg("C", k.param("C_F32") ? DType::F32 : cfg.dtype);
  Value M = k.scalarArg("M", DType::I32);
  Value N = k.scalarArg("N", DType::I32);
  Value K = k.scalarArg("K", DType::I32);
  Value lda = k.scalarArg("lda", DType::I64);
  Value ldb = k.scalarArg("ldb", DType::I64);
  Value ldc = k.scalarArg("ldc", DType::I64);
  Value alpha = k.scalarArg("alpha", DType::F32);
  Value beta = k.scalarArg("beta", DType::F32);

  Value m0 = k.programId(0) * double(BM), n0 = k.programId(1) * double(BN);
  Value aRow = m0 + blockRow(k, BM * BK, BK), aK = blockCol(k, BM * BK, BK);
  Value bK = blockRow(k, BK * BN, BN), bCol = n0 + blockCol(k, BK * BN, BN);
  // Element (r, c) of X with leading dimension ld, or of X^T.
  auto at = [](Value r, Value c, Value ld, bool transposed) {
    Value r64 = r.to(DType::I64), c64 = c.to(DType::I64);
    return transposed ? c64 * ld + r64 : r64 * ld + c64;
  };

  Var acc = k.full(BM * BN, k.constant(0, DType::F32));
  k.forRange(0, K, BK, [&](Value k0) {
    Value ak = k0 + aK, bk = k0 + bK;
    Value a = k.load(A, at(aRow, ak, lda, TRANS_A), aRow < M && ak < K, 0.0);
    Value b = k.load(B, at(bk, bCol, ldb, TRANS_B), bk < K && bCol < N, 0.0);
    acc = k.dot(a, b, acc, BM, BN, BK);
  });
  Value cRow = m0 + blockRow(k, BM * BN, BN),
        cCol = n0 + blockCol(k, BM * BN, BN);
  Value inC = cRow < M && cCol < N;
  Value cOffs = at(cRow, cCol, ldc, false);
  // beta = 0 must not read C: it may hold anything, NaN included.
  Value old = k.load(C, cOffs, inC && beta != 0.0, 0.0).to(DType::F32);
  k.store(C, cOffs, alpha * acc + beta * old, inC);
  return k.finish();
}

} // namespace

KernelSpec linearCeGemmSpec() {
  return {"lce_gemm",
          "linear CE chunk GEMM in the DSL: C = alpha op(A) op(B) + beta C "
          "(tile dot)",
          {{"BLOCK_M", {64}, 64, "rows of C per program"},
           {"BLOCK_N", {64}, 64, "columns of C per program"},
           {"BLOCK_K", {32}, 32, "K per dot step"},
           {"num_warps", {2}, 2, "warps per program"},
           {"TRANS_A", {0, 1}, 0, "op(A) = A^T"},
           {"TRANS_B", {0, 1}, 0, "op(B) = B^T"},
           {"C_F32", {0, 1}, 1, "C in f32 (1) or the input dtype (0)"}},
          {DType::BF16, DType::F16},
          buildGemm,
          {}};
}

} // namespace tilejit
