//===- LinearCeFused.cpp - linear CE forward with the logits on chip ------===//
//
// lce_fused_fwd: each program owns BLOCK_M rows of h and walks the vocab in
// BLOCK_N-wide blocks; a block of logits is h_rows W_block^T, accumulated
// over the hidden size in BLOCK_K steps with tile `dot` (tensor cores), and
// folded at once into each row's online max / sum-exp. The N x V logits
// never exist in memory (the Cut Cross-Entropy idea, written in the DSL).
// Plain cross-entropy: per-row loss (ignored rows 0) and lse.
//
//===----------------------------------------------------------------------===//
#include "kernels_spec/BlockIndex.h"
#include "kernels_spec/LinearCe.h"

#include "kernels_spec/SoftmaxParts.h"

using namespace tilejit::dsl;

namespace tilejit {
namespace {

TileModule buildFusedForward(const Config &cfg) {
  KernelBuilder k("lce_fused_fwd", cfg);
  const int64_t BM = k.param("BLOCK_M"), BN = k.param("BLOCK_N"),
                BK = k.param("BLOCK_K");
  Value h = k.pointerArg("h", cfg.dtype);
  Value W = k.pointerArg("W", cfg.dtype);
  Value target = k.pointerArg("target", DType::I64);
  Value rowLoss = k.pointerArg("row_loss", DType::F32);
  Value lseOut = k.pointerArg("lse", DType::F32);
  Value N = k.scalarArg("N", DType::I32);
  Value d = k.scalarArg("d", DType::I32);
  Value V = k.scalarArg("V", DType::I32);
  Value ignoreIndex = k.scalarArg("ignore_index", DType::I64);

  Value rows = k.programId(0) * double(BM) + k.arange(BM);
  Value rowIn = rows < N;
  Value y = k.load(target, rows, rowIn, 0.0);
  // Row and column of each element of the BM x BK, BK x BN and BM x BN
  // blocks (row-major).
  Value aRow = k.programId(0) * double(BM) + blockRow(k, BM * BK, BK);
  Value aCol = blockCol(k, BM * BK, BK);
  Value bK = blockRow(k, BK * BN, BN), bN = blockCol(k, BK * BN, BN);
  Value cN = blockCol(k, BM * BN, BN);

  Value zeroRows = k.full(BM, k.constant(0, DType::F32));
  Var m = k.full(BM, k.constant(kNegInf, DType::F32)), sum = zeroRows;
  Var zy = zeroRows;
  Value yBlock = k.broadcastRows(y, BN);
  k.forRange(0, V, BN, [&](Value v0) {
    Var acc = k.full(BM * BN, k.constant(0, DType::F32));
    k.forRange(0, d, BK, [&](Value k0) {
      Value a =
          k.load(h, aRow * d + (k0 + aCol), aRow < N && k0 + aCol < d, 0.0);
      // Element (k, n) of the block of W^T is W[v0 + n, k0 + k].
      Value b =
          k.load(W, (v0 + bN) * d + (k0 + bK), v0 + bN < V && k0 + bK < d, 0.0);
      acc = k.dot(a, b, acc, BM, BN, BK);
    });
    Value col = v0 + cN;
    Value logits = where(col < V, acc, kNegInf);
    Value mNew = max(m, logits.maxRows(BN));
    Value shift = safeShift(mNew);
    sum = sum * exp(m - shift) +
          exp(logits - k.broadcastRows(shift, BN)).sumRows(BN);
    zy = zy + where(col.to(DType::I64) == yBlock, logits, 0.0).sumRows(BN);
    m = mNew;
  });
  Value shift = safeShift(m);
  Value logSum = log(sum);
  Value valid = rowIn && y != ignoreIndex;
  // Differences against the row max keep the gap of large common offsets.
  k.store(rowLoss, rows, where(valid, logSum - (zy - shift), 0.0), rowIn);
  k.store(lseOut, rows, where(valid, shift + logSum, 0.0), rowIn);
  return k.finish();
}

} // namespace

KernelSpec linearCeFusedForwardSpec() {
  return {"lce_fused_fwd",
          "linear CE forward with the logits on chip: per-row loss and lse "
          "from h and W (tile dot)",
          {{"BLOCK_M", {64}, 64, "rows of h per program"},
           {"BLOCK_N", {64}, 64, "vocab entries per block of logits"},
           {"BLOCK_K", {32}, 32, "hidden entries per dot step"},
           {"num_warps",
            {2},
            2,
            "warps per program (32 x num_warps <= "
            "BLOCK_M)"}},
          {DType::BF16, DType::F16},
          buildFusedForward,
          {{"N", true}, {"V", false}}};
}

} // namespace tilejit
