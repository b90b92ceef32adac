//===- RowMean.cpp - a batch mean of per-row losses on the device ---------===//
//
// The distillation losses (kl_div, jsd) count a row unless its label is
// ignore_index, as LigerJSD and LigerKLDIVLoss do; their "batchmean" divides
// the rows' sum by that count n. Two one-program kernels keep the count and
// the sum on the device, so that a call never waits for the host:
//
//   row_scale:      scale[0] = 1 / max(n, 1) (mean; 1 / max(N, 1) without
//                   labels), or 1 (sum). An all-ignored batch gives 0
//                   losses and gradients, not 0 / 0.
//   row_loss_total: loss[0] = scale[0] * sum_i row_loss[i], the sum taken in
//                   a fixed order (the same result on every run).
//
//===----------------------------------------------------------------------===//
#include "tilejit/KernelSpec.h"

using namespace tilejit::dsl;

namespace tilejit {
namespace {

TileModule buildRowScale(const Config &c) {
  KernelBuilder k("row_scale", c);
  const int64_t BLOCK = k.param("BLOCK_SIZE");
  Value label = k.pointerArg("label", DType::I64);
  Value scale = k.pointerArg("scale", DType::F32);
  Value N = k.scalarArg("N", DType::I32);
  Value ignoreIndex = k.scalarArg("ignore_index", DType::I64);
  Value hasLabel = k.scalarArg("has_label", DType::I32) != 0.0;
  Value mean = k.scalarArg("mean", DType::I32) != 0.0;
  Value zero = k.full(BLOCK, k.constant(0, DType::F32));
  Var count = zero;
  k.forRange(0, N, BLOCK, [&](Value i) {
    Value offs = i + k.arange(BLOCK);
    Value inBatch = offs < N;
    Value y = k.load(label, offs, inBatch && hasLabel, 0.0);
    Value counted = inBatch && (!hasLabel || y != ignoreIndex);
    count = count + where(counted, 1.0, zero);
  });
  Value n = count.sum();
  k.store(scale, k.constant(0, DType::I32),
          where(mean, 1.0 / where(n > 1.0, n, 1.0), k.constant(1, DType::F32)));
  return k.finish();
}

TileModule buildRowLossTotal(const Config &c) {
  KernelBuilder k("row_loss_total", c);
  const int64_t BLOCK = k.param("BLOCK_SIZE");
  Value rowLoss = k.pointerArg("row_loss", DType::F32);
  Value scale = k.pointerArg("scale", DType::F32);
  Value loss = k.pointerArg("loss", DType::F32);
  Value N = k.scalarArg("N", DType::I32);
  Var total = k.full(BLOCK, k.constant(0, DType::F32));
  k.forRange(0, N, BLOCK, [&](Value i) {
    Value offs = i + k.arange(BLOCK);
    total = total + k.load(rowLoss, offs, offs < N, 0.0);
  });
  Value s = k.load(scale, k.constant(0, DType::I32));
  k.store(loss, k.constant(0, DType::I32), s * total.sum());
  return k.finish();
}

std::vector<ParamSpec> oneProgramParams() {
  return {{"BLOCK_SIZE", {1024}, 1024, "rows per tile"},
          {"num_warps", {8}, 8, "warps per program"}};
}

} // namespace

KernelSpec rowScaleSpec() {
  return {"row_scale",
          "a batch mean's 1 / n over the rows whose label is not "
          "ignore_index (1 for a sum)",
          oneProgramParams(),
          {DType::F32},
          buildRowScale,
          {}};
}

KernelSpec rowLossTotalSpec() {
  return {"row_loss_total",
          "the per-row losses' sum times scale[0], in a fixed order",
          oneProgramParams(),
          {DType::F32},
          buildRowLossTotal,
          {}};
}

} // namespace tilejit
