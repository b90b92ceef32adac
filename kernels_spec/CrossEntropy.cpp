//===- CrossEntropy.cpp - cross-entropy over rows of logits ---------------===//
//
// PyTorch's F.cross_entropy on (BT, V) logits with class-index targets, as
// Liger-Kernel's cross-entropy kernel runs it: one program per row, a
// first pass over V for the row's max and sum-exp, a second that writes the
// gradient (over the logits when `grad` is `logits`). With z the logits
// (softcapped: z = c tanh(r / c) when softcap c > 0), p = softmax(z),
// lse = log sum_v exp(z_v), eps the label smoothing, w the class weights (1
// without), W = sum_v w_v, a row with target y has (docs/semantics.md §2)
//
//   ce = (1 - eps) w_y (lse - z_y) + (eps / V) sum_v w_v (lse - z_v),
//   zl = lse_square_scale lse^2                                (z-loss),
//   d (g_ce ce + g_z zl) / dz_v = g_ce [(1 - eps) w_y (p_v - [v == y])
//                                  + (eps / V) (W p_v - w_v)]
//                                + g_z 2 lse_square_scale lse p_v,
//
// times 1 - tanh^2(r_v / c) through the softcap. `loss` gets ce + zl per
// row and `z_loss` zl; the gradient is stored times `grad_scale`. The
// upstream factors come from `upstream`: per row
// (g_ce = g_z = upstream[row], the backward of reduction none) or, with
// per_row_upstream = 0, upstream[0] and upstream[1] for every row (mean:
// 1 / sum of the valid rows' w_y and 1 / their count; sum: 1 and 1). A row
// whose target is ignore_index, or outside [0, V) (docs/semantics.md §5),
// has loss 0 and a zero gradient.
//
//===----------------------------------------------------------------------===//
#include "kernels_spec/RowLoss.h"
#include "kernels_spec/SoftmaxParts.h"
#include "kernels_spec/Upstream.h"
#include "kernels_spec/reference/LinearCeReference.h"
#include "tilejit/KernelSpec.h"

#include <tuple>

using namespace tilejit::dsl;

namespace tilejit {
namespace {

TileModule buildCrossEntropy(const Config &c) {
  KernelBuilder k("cross_entropy", c);
  const int64_t BLOCK = k.param("BLOCK_SIZE");
  const bool HAS_WEIGHT = k.param("HAS_WEIGHT");
  // Without it the softcap argument is not read (no tanh per element).
  const bool HAS_SOFTCAP = k.param("HAS_SOFTCAP");
  // In place, grad is logits: the same element is read, then written.
  Value logits = k.aliasedPointerArg("logits", c.dtype);
  Value grad = k.aliasedPointerArg("grad", c.dtype);
  Value target = k.pointerArg("target", DType::I64);
  Value classWeight = k.pointerArg("class_weight", DType::F32);
  Value upstream = k.pointerArg("upstream", DType::F32);
  Value loss = k.pointerArg("loss", DType::F32);
  Value zLossOut = k.pointerArg("z_loss", DType::F32);
  Value V = k.scalarArg("V", DType::I32);
  Value ignoreIndex = k.scalarArg("ignore_index", DType::I64);
  Value eps = k.scalarArg("label_smoothing", DType::F32);
  Value lambda = k.scalarArg("lse_square_scale", DType::F32);
  Value cap = k.scalarArg("softcap", DType::F32);
  Value perRow = k.scalarArg("per_row_upstream", DType::I32) != 0.0;
  // The gradient is stored times grad_scale: an f16 caller whose later
  // factor is large (a GradScaler's) stores it larger, so that entries
  // under f16's smallest subnormal keep their digits.
  Value gradScale = k.scalarArg("grad_scale", DType::F32);

  Value row = k.programId(0);
  Value rowOffset = row.to(DType::I64) * V.to(DType::I64);
  Value z = logits + rowOffset, g = grad + rowOffset;
  Value y = k.load(target, row);
  Value valid = y != ignoreIndex && y >= 0.0 && y < V.to(DType::I64);
  Value yIdx = where(valid, y, k.constant(0, DType::I64)).to(DType::I32);
  auto softcap = [&](Value r) {
    return HAS_SOFTCAP ? where(cap > 0.0, cap * tanh(r / cap), r) : r;
  };
  // Per-class weights enter only the smoothing term: without smoothing
  // they are not read.
  Value smoothing = eps > 0.0;
  auto weightAt = [&](Value offs, Value mask) {
    return HAS_WEIGHT ? k.load(classWeight, offs, mask && smoothing, 0)
                      : where(mask, 1.0, k.full(BLOCK, k.constant(0, DType::F32)));
  };
  // Read before the first pass's reductions: past them, in place, another
  // warp's second pass may have overwritten it.
  Value zy = softcap(k.load(z, yIdx).to(DType::F32));
  Value wy = HAS_WEIGHT ? k.load(classWeight, yIdx) : k.constant(1, DType::F32);
  Value f32Zero = k.constant(0, DType::F32);

  k.ifThen(
      !valid,
      [&] {
        k.store(loss, row, f32Zero);
        k.store(zLossOut, row, f32Zero);
        k.forRange(0, V, BLOCK, [&](Value i) {
          Value offs = i + k.arange(BLOCK);
          k.store(g, offs, k.full(BLOCK, k.constant(0, c.dtype)), offs < V);
        });
      },
      [&] {
        // Pass 1: max and sum-exp per lane, and the class weights' sum.
        Var m = k.full(BLOCK, k.constant(kNegInf, DType::F32));
        Var d = k.full(BLOCK, f32Zero), wSum = k.full(BLOCK, f32Zero);
        k.forRange(0, V, BLOCK, [&](Value i) {
          Value offs = i + k.arange(BLOCK);
          Value mask = offs < V;
          Value x = where(mask, softcap(k.load(z, offs, mask, 0).to(DType::F32)),
                          kNegInf);
          std::tie(m, d) = k.softmaxFold(m, d, x);
          if (HAS_WEIGHT)
            wSum = wSum + weightAt(offs, mask);
        });
        auto [rowMax, sumExp] = k.softmaxTotal(m, d);
        Value shift = safeShift(rowMax), logSum = log(sumExp);
        Value lse = shift + logSum;
        Value W = HAS_WEIGHT ? wSum.sum() : V.to(DType::F32);
        Value gCe = upstreamFactor(k, upstream, row, perRow, 0);
        Value gZ = upstreamFactor(k, upstream, row, perRow, 1);
        Value nllFactor = gCe * (1.0 - eps) * wy;
        Value smoothFactor = gCe * eps / V.to(DType::F32);
        Value zFactor = gZ * 2.0 * lambda * lse;
        // dz_v = pFactor p_v - nllFactor [v == y] - smoothFactor w_v, its
        // factors times grad_scale.
        Value pFactor = gradScale * (nllFactor + smoothFactor * W + zFactor);
        Value yFactor = gradScale * nllFactor;
        Value wFactor = gradScale * smoothFactor;

        // Pass 2: the gradient, and sum_v w_v (z_v - max) for the smoothing
        // term (against the max: a large common offset cancels exactly).
        Var wzShifted = k.full(BLOCK, f32Zero);
        k.forRange(0, V, BLOCK, [&](Value i) {
          Value offs = i + k.arange(BLOCK);
          Value mask = offs < V;
          Value x = softcap(k.load(z, offs, mask, 0).to(DType::F32));
          Value p = exp((x - shift) - logSum);
          Value w = weightAt(offs, mask);
          Value dz = pFactor * p - wFactor * w -
                     where(offs == yIdx, yFactor, f32Zero);
          if (HAS_SOFTCAP) {
            Value t = x / cap;
            dz = where(cap > 0.0, dz * (1.0 - t * t), dz);
          }
          k.store(g, offs, dz.to(c.dtype), mask);
          // A class of weight 0 adds nothing, even at a logit of -inf.
          wzShifted = wzShifted + where(mask && w != 0.0, w * (x - shift), 0.0);
        });
        Value ce = (1.0 - eps) * wy * (logSum - (zy - shift));
        // Without smoothing the term is skipped (0 * inf for -inf logits).
        ce = ce + where(eps > 0.0,
                        eps / V.to(DType::F32) * (W * logSum - wzShifted.sum()),
                        f32Zero);
        Value zl = lambda * lse * lse;
        k.store(loss, row, ce + zl);
        k.store(zLossOut, row, zl);
      });
  return k.finish();
}

/// The fp64 reference row by row (kernels_spec/reference/LinearCeReference.h).
void crossEntropyReference(ReferenceArgs &a) {
  const HostTensor &x = a.in("logits"), &target = a.in("target"),
                   &weight = a.in("class_weight"), &up = a.in("upstream");
  int64_t BT = a.size("BT"), V = a.size("V");
  bool hasWeight = a.scalar("HAS_WEIGHT") != 0;
  bool perRow = a.scalar("per_row_upstream") != 0;
  ref::LinearCeParams p;
  p.labelSmoothing = a.scalar("label_smoothing");
  p.zLoss = a.scalar("lse_square_scale");
  p.softcap = a.scalar("softcap");
  std::vector<float> w(V, 1.f);
  double weightSum = 0;
  for (int64_t v = 0; v < V; ++v) {
    if (hasWeight)
      w[v] = static_cast<float>(weight[v]);
    weightSum += w[v];
  }
  std::vector<double> &loss = a.out("loss"), &zLoss = a.out("z_loss"),
                      &grad = a.out("grad");
  std::vector<double> r(V);
  for (int64_t row = 0; row < BT; ++row) {
    double y = target[row];
    if (y == a.scalar("ignore_index") || y < 0 || y >= double(V))
      continue; // outputs start at 0
    for (int64_t v = 0; v < V; ++v)
      r[v] = x[row * V + v];
    double gCe = perRow ? up[row] : up[0], gZ = perRow ? up[row] : up[1];
    double scale = a.scalar("grad_scale");
    ref::RowTerms t =
        ref::crossEntropyRow(r.data(), V, int64_t(y), w.data(), weightSum, p,
                             scale * gCe, scale * gZ, &grad[row * V]);
    loss[row] = t.ce + t.zl;
    zLoss[row] = t.zl;
  }
}

} // namespace

KernelSpec crossEntropySpec() {
  KernelSpec s = rowLossSpec(
      "cross_entropy",
      "cross-entropy of rows of logits (ignore_index, label smoothing, "
      "z-loss, softcap, class weights): per-row loss and its gradient, in "
      "place or into a buffer",
      buildCrossEntropy,
      {{"HAS_WEIGHT", {0, 1}, 1, "read class weights", false},
       {"HAS_SOFTCAP", {0, 1}, 1, "apply the softcap argument", false}});
  using A = ArgSpec;
  // Loss: f32 sums over V with the GPU's approximate exp and log; gradient:
  // elementwise, relative to the upstream factor (p <= 1).
  s.run.args = {
      A::input("logits", {"BT", "V"}, ArgFill::normal(2)),
      A::output("grad", {"BT", "V"}, {1e-6, 5e-4}),
      A::input("target", {"BT"}, ArgFill::classIndex("V", 7, -100)),
      A::input("class_weight", {"V"}, ArgFill::normal(0.25, 1)),
      A::input("upstream", {"BT"}, ArgFill::normal(0.5, 1)),
      A::output("loss", {"BT"}, {1e-4, 1e-5}),
      A::output("z_loss", {"BT"}, {1e-4, 1e-5}),
      A::sizeScalar("V", "V"),
      A::scalar("ignore_index", -100),
      A::scalar("label_smoothing", 0.1, 0, 1),
      A::scalar("lse_square_scale", 1e-4, 0),
      A::scalar("softcap", 0, 0),
      A::scalar("per_row_upstream", 1, 0, 1),
      A::scalar("grad_scale", 1)};
  // Reads the logits and writes the gradient once (2 BT V elements): the
  // second pass re-reads the row, from L2 where it still is.
  s.run.bytesMoved = [](const std::map<std::string, int64_t> &sz, DType t) {
    return 2.0 * double(sz.at("BT")) * double(sz.at("V")) * dtypeSize(t);
  };
  s.run.reference = crossEntropyReference;
  return s;
}

} // namespace tilejit
