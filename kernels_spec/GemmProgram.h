//===- GemmProgram.h - one program's block of a tile-dot product *- C++ -*-===//
//
// The main loop a GEMM written in the DSL shares with every kernel that
// puts an epilogue after a product: program (i, j) of a 2-D grid owns the
// BLOCK_M x BLOCK_N block of op(A) op(B) at (i BLOCK_M, j BLOCK_N) and walks
// K in BLOCK_K steps of `dot` over blocks loaded through tensor descriptors.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_KERNELS_SPEC_GEMMPROGRAM_H
#define TILEJIT_KERNELS_SPEC_GEMMPROGRAM_H

#include "kernels_spec/BlockIndex.h"

namespace tilejit {

/// op(X) as a rows x cols view of X (leading dimension ld), or of X^T.
inline dsl::TensorDescriptor matrixView(dsl::KernelBuilder &k, dsl::Value X,
                                        dsl::Value rows, dsl::Value cols,
                                        dsl::Value ld, bool transposed) {
  dsl::Value one = k.constant(1, DType::I64);
  return transposed ? dsl::TensorDescriptor{X, rows, cols, one, ld}
                    : dsl::TensorDescriptor{X, rows, cols, ld, one};
}

/// A program's f32 block of op(A) op(B), where it starts, and the row and
/// column in the product of each of its elements (row-major BM x BN).
struct GemmBlock {
  dsl::Value acc, m0, n0, pn, row, col;
};

/// The block of program (programId(0), programId(1)) of op(A) (M x K) times
/// op(B) (K x N), with BLOCK_M, BLOCK_N, BLOCK_K and GROUP_M from the
/// config.
inline GemmBlock gemmBlock(dsl::KernelBuilder &k,
                           const dsl::TensorDescriptor &opA,
                           const dsl::TensorDescriptor &opB, dsl::Value K) {
  using dsl::Value;
  const int64_t BM = k.param("BLOCK_M"), BN = k.param("BLOCK_N"),
                BK = k.param("BLOCK_K"), GROUP_M = k.param("GROUP_M");
  // Programs run in launch order, x fastest; grouping GROUP_M row blocks
  // per column block keeps the blocks of A and B that programs running
  // together read in L2 (Triton's grouped ordering).
  Value gm = k.numPrograms(0), gn = k.numPrograms(1);
  Value pid = k.programId(0) + k.programId(1) * gm;
  Value width = gn * double(GROUP_M);
  Value firstM = (pid / width) * double(GROUP_M);
  Value groupRows = min(gm - firstM, k.constant(GROUP_M, DType::I32));
  Value pm = firstM + (pid % width) % groupRows;
  Value pn = (pid % width) / groupRows;
  Value m0 = pm * double(BM), n0 = pn * double(BN);
  dsl::Var acc = k.full(BM * BN, k.constant(0, DType::F32));
  k.forRange(0, K, BK, [&](Value k0) {
    acc = k.dot(k.loadBlock(opA, m0, k0, BM, BK),
                k.loadBlock(opB, k0, n0, BK, BN), acc, BM, BN, BK);
  });
  return {acc, m0, n0, pn, m0 + blockRow(k, BM * BN, BN),
          n0 + blockCol(k, BM * BN, BN)};
}

} // namespace tilejit

#endif // TILEJIT_KERNELS_SPEC_GEMMPROGRAM_H
