//===- FusedCeTvd.cpp - CE+TVD forward and backward in the DSL ------------===//
#include "kernels_spec/FusedCeTvd.h"
#include "kernels_spec/FusedCeTvdForward.h"
#include "kernels_spec/SoftmaxParts.h"

#include <array>
#include <limits>

using namespace tilejit::dsl;

namespace tilejit {
namespace {

std::vector<ParamSpec> rowKernelParams() {
  return {
      {"BLOCK_SIZE", {1024, 2048, 4096, 8192}, 2048, "vocab elements per tile"},
      {"num_warps", {2, 4, 8, 16}, 8, "warps per program"}};
}

/// Pass 1 with state per lane (cols = 1) or per group of `cols` adjacent
/// elements: (max, sum-exp) of the student and teacher rows.
std::array<Value, 4> laneNormalizers(KernelBuilder &k, Value s, Value t,
                                     Value V, int64_t BLOCK, int64_t cols) {
  Value negInf = k.full(BLOCK / cols, k.constant(kNegInf, DType::F32));
  Value zero = k.full(BLOCK / cols, k.constant(0, DType::F32));
  Var mS = negInf, dS = zero, mT = negInf, dT = zero;
  k.forRange(0, V, BLOCK, [&](Value i) {
    Value offs = i + k.arange(BLOCK);
    Value mask = offs < V;
    stateUpdate(mS, dS, {k.load(s, offs, mask, kNegInf).to(DType::F32)}, cols);
    stateUpdate(mT, dT, {k.load(t, offs, mask, kNegInf).to(DType::F32)}, cols);
  });
  auto [rowMaxS, rowSumS] = rowNormalizer(mS, dS);
  auto [rowMaxT, rowSumT] = rowNormalizer(mT, dT);
  return {rowMaxS, rowSumS, rowMaxT, rowSumT};
}

/// Pass 1 with block-wide reductions every tile.
std::array<Value, 4> tileNormalizers(KernelBuilder &k, Value s, Value t,
                                     Value V, int64_t BLOCK) {
  Var mS = k.constant(kNegInf, DType::F32), dS = k.constant(0, DType::F32);
  Var mT = k.constant(kNegInf, DType::F32), dT = k.constant(0, DType::F32);
  k.forRange(0, V, BLOCK, [&](Value i) {
    Value offs = i + k.arange(BLOCK);
    Value mask = offs < V;
    tileUpdate(mS, dS, k.load(s, offs, mask, kNegInf).to(DType::F32));
    tileUpdate(mT, dT, k.load(t, offs, mask, kNegInf).to(DType::F32));
  });
  return {mS, dS, mT, dT};
}

TileModule buildForward(const Config &c) {
  KernelBuilder k("fused_ce_tvd_fwd", c);
  applyAligned(k);
  const int64_t BLOCK = k.param("BLOCK_SIZE");
  CeTvdForwardArgs args = declareForwardArgs(k, c.dtype);
  Value V = args.V, rowStride = args.rowStride;
  Value row = k.programId(0);
  Value rowOffset = row.to(DType::I64) * rowStride;
  Value s = args.student + rowOffset, t = args.teacher + rowOffset;
  Value y = k.load(args.target, row);
  Value ignored = y == args.ignoreIndex;
  Value inRange = y >= 0.0 && y < V.to(DType::I64);

  Var ce = k.constant(0, DType::F32), tvd = k.constant(0, DType::F32);
  Var sigma = k.constant(0, DType::F32);
  Var maxS = k.constant(0, DType::F32), logSumS = k.constant(0, DType::F32);
  Var maxT = k.constant(0, DType::F32), logSumT = k.constant(0, DType::F32);
  k.ifThen(!ignored && !inRange, [&] {
    k.store(args.badTarget, k.constant(0, DType::I32), row + 1.0);
  });
  k.ifThen(!ignored && inRange, [&] {
    // Pass 1: max and sum-exp of both rows in one sweep.
    Value zero = k.full(BLOCK, k.constant(0, DType::F32));
    int64_t mode = k.param("LANE_STATS");
    auto [mS, dS, mT, dT] =
        mode == 0
            ? tileNormalizers(k, s, t, V, BLOCK)
            : laneNormalizers(k, s, t, V, BLOCK,
                              mode == 2 ? k.threadGroup(BLOCK, c.dtype) : 1);
    maxS = mS;
    logSumS = log(dS);
    maxT = mT;
    logSumT = log(dT);

    // Pass 2: TVD and sigma from p and q, computed identically for both so
    // that a teacher equal to the student gives exactly zero; the signs in
    // the exact form (fast_signs = 0), as the backward takes them.
    RowLogs logs{maxS, logSumS, maxT, logSumT};
    Var absSum = zero, sig = zero; // per lane, reduced once after the loop
    k.forRange(0, V, BLOCK, [&](Value i) {
      Value offs = i + k.arange(BLOCK);
      Value mask = offs < V;
      Value lp = logs.log2P(k.load(s, offs, mask, kNegInf), /*fast=*/false);
      Value lq = logs.log2Q(k.load(t, offs, mask, kNegInf), /*fast=*/false);
      Value p = exp2(lp);
      absSum = absSum + abs(p - exp2(lq));
      sig = sig + signedP(p, lp - lq, /*fast=*/false);
    });
    tvd = 0.5 * absSum.sum();
    sigma = sig.sum();
    // Differences against the row max keep the gap when logits share a
    // large offset (docs/semantics.md §1).
    Value sy = k.load(s, y).to(DType::F32);
    ce = log(dS) - (sy - mS);
  });
  storeRowOutputs(k, args, row,
                  {ce, tvd, sigma, maxS, logSumS, maxT, logSumT,
                   k.constant(0, DType::F32)});
  return k.finish();
}

TileModule buildBackward(const Config &c) {
  KernelBuilder k("fused_ce_tvd_bwd", c);
  applyAligned(k);
  const int64_t BLOCK = k.param("BLOCK_SIZE");
  Value student = k.pointerArg("student", c.dtype);
  Value teacher = k.pointerArg("teacher", c.dtype);
  Value target = k.pointerArg("target", DType::I64);
  Value sigmaIn = k.pointerArg("sigma", DType::F32);
  Value maxSIn = k.pointerArg("max_s", DType::F32);
  Value logSumSIn = k.pointerArg("logsum_s", DType::F32);
  Value maxTIn = k.pointerArg("max_t", DType::F32);
  Value logSumTIn = k.pointerArg("logsum_t", DType::F32);
  Value fastSignsIn = k.pointerArg("fast_signs", DType::F32);
  Value gCeIn = k.pointerArg("g_ce", DType::F32);
  Value gTvdIn = k.pointerArg("g_tvd", DType::F32);
  Value grad = k.pointerArg("grad", c.dtype);
  Value V = k.scalarArg("V", DType::I32);
  Value rowStride = k.scalarArg("row_stride", DType::I64);
  Value gradStride = k.scalarArg("grad_stride", DType::I64);
  Value ignoreIndex = k.scalarArg("ignore_index", DType::I64);

  Value row = k.programId(0);
  Value row64 = row.to(DType::I64);
  Value s = student + row64 * rowStride, t = teacher + row64 * rowStride;
  Value g = grad + row64 * gradStride;
  Value y = k.load(target, row);
  Value valid = y != ignoreIndex && y >= 0.0 && y < V.to(DType::I64);
  k.ifThen(
      valid,
      [&] {
        RowLogs logs{k.load(maxSIn, row), k.load(logSumSIn, row),
                     k.load(maxTIn, row), k.load(logSumTIn, row)};
        logs.withOffsets();
        Value sigma = k.load(sigmaIn, row);
        Value gCe = k.load(gCeIn, row), gTvd = k.load(gTvdIn, row);
        // Each element signed in the form the forward's sigma was.
        auto walk = [&](bool fast) {
          k.forRange(0, V, BLOCK, [&](Value i) {
            Value offs = i + k.arange(BLOCK);
            Value mask = offs < V;
            Value lp = logs.log2P(k.load(s, offs, mask, kNegInf), fast);
            Value lq = logs.log2Q(k.load(t, offs, mask, kNegInf), fast);
            Value p = fast ? exp2(lp) * logs.pScaleS : exp2(lp);
            // p_y - 1 is formed in fp32 before the store rounds it.
            Value onehot = (offs.to(DType::I64) == y).to(DType::F32);
            Value dce = gCe * (p - onehot);
            Value dtvd = gTvd * 0.5 * (signedP(p, lp - lq, fast) - p * sigma);
            k.store(g, offs, dce + dtvd, mask);
          });
        };
        k.ifThen(
            k.load(fastSignsIn, row) != 0.0, [&] { walk(true); },
            [&] { walk(false); });
      },
      [&] {
        k.forRange(0, V, BLOCK, [&](Value i) {
          Value offs = i + k.arange(BLOCK);
          k.store(g, offs, k.constant(0, DType::F32), offs < V);
        });
      });
  return k.finish();
}

const std::vector<DType> kDtypes = {DType::BF16, DType::F16, DType::F32};
/// BT is bucketed (rows are independent: only the number of waves changes);
/// V is exact (it sets the trip count and the masked tail of every row).
const std::vector<TuneKeyArg> kTuneKey = {{"BT", true}, {"V", false}};

} // namespace

KernelSpec fusedCeTvdForwardSpec() {
  std::vector<ParamSpec> params = rowKernelParams();
  params.push_back({"LANE_STATS",
                    {0, 1, 2},
                    2,
                    "pass 1 keeps softmax state per lane (1), per thread's "
                    "vector group (2), or reduces across the block every "
                    "tile (0)"});
  KernelSpec s{"fused_ce_tvd_fwd",
               "CE+TVD forward: per-row ce, tvd and saved lse_s, lse_t, sigma",
               params,
               kDtypes,
               buildForward,
               kTuneKey};
  s.deriveParams = deriveAligned;
  return s;
}

KernelSpec fusedCeTvdBackwardSpec() {
  KernelSpec s{"fused_ce_tvd_bwd",
               "CE+TVD backward: student gradient from per-row g_ce, g_tvd",
               rowKernelParams(),
               kDtypes,
               buildBackward,
               kTuneKey};
  s.deriveParams = deriveAligned;
  return s;
}

} // namespace tilejit
