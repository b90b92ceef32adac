//===- Jsd.cpp - the generalized Jensen-Shannon divergence ----------------===//
//
// The distillation loss of Liger-Kernel's LigerJSD (liger_kernel/ops/jsd.py),
// one row of BT at a time. Its inputs are log-probabilities over the vocab:
// X = log Q of the student and Y = log P of the teacher. With a weight
// beta in [0, 1] and the mixture M = beta P + (1 - beta) Q, a row's loss is
//
//   JSD_beta(P, Q) = beta KL(P || M) + (1 - beta) KL(Q || M)
//                  = sum_v beta P Y + (1 - beta) Q X - M log M,
//
// and its gradient with respect to the student input (X itself, not the
// logits behind it) is
//
//   dJSD/dX_v = (1 - beta) Q_v (X_v - log M_v).
//
// At the ends of the interval the mixture collapses onto one distribution
// and JSD_beta would vanish; as Liger does, beta = 0 means the forward KL
// and beta = 1 the reverse KL instead:
//
//   beta = 0: KL(P || Q) = sum_v P (Y - X),  d/dX_v = -P_v;
//   beta = 1: KL(Q || P) = sum_v Q (X - Y),  d/dX_v = Q_v (X_v - Y_v) + Q_v.
//
// A row whose label is ignore_index (a padding token) has loss 0 and a zero
// gradient; with HAS_LABEL = 0 the labels are not read. `loss` holds the
// per-row losses and `grad` the gradient of the rows' losses, each times
// its upstream factor read on the device: upstream[row] with
// per_row_upstream (the backward of reduction none), else upstream[0] (a
// reduced loss: Liger's batchmean divides by the rows not ignored).
//
// One program per row, written the plain way: a first pass over V sums the
// loss, a second pass writes the gradient. Masked lanes read X = Y = 0
// (P = Q = M = 1), whose terms are exactly 0.
//
//===----------------------------------------------------------------------===//
#include "kernels_spec/reference/JsdReference.h"
#include "kernels_spec/RowLoss.h"
#include "kernels_spec/SoftmaxParts.h"
#include "kernels_spec/Upstream.h"
#include "tilejit/KernelSpec.h"

#include <limits>

using namespace tilejit::dsl;

namespace tilejit {
namespace {

struct JsdTerms {
  Value loss, grad;
};

/// The loss terms and the gradient of one tile of X = log Q and Y = log P.
/// A term whose weight is 0 adds 0, as its limit does: X and Y are taken
/// no lower than -FLT_MAX (0 * -inf would be NaN), and log M no lower than
/// log FLT_MIN (M = 0 where both probabilities underflow).
JsdTerms jsdTerms(KernelBuilder &k, Value x, Value y, Value beta) {
  Value lowest = k.constant(-std::numeric_limits<float>::max(), DType::F32);
  x = max(x, lowest);
  y = max(y, lowest);
  Value q = exp(x), p = exp(y);
  Value m = beta * p + (1.0 - beta) * q;
  Value logM =
      log(max(m, k.constant(std::numeric_limits<float>::min(), DType::F32)));
  Value mixLoss = beta * p * y + (1.0 - beta) * q * x - m * logM;
  Value mixGrad = (1.0 - beta) * q * (x - logM);
  Value forwardKl = p * (y - x), reverseKl = q * (x - y);
  Value isForward = beta == 0.0, isReverse = beta == 1.0;
  return {where(isForward, forwardKl, where(isReverse, reverseKl, mixLoss)),
          where(isForward, -p, where(isReverse, reverseKl + q, mixGrad))};
}

TileModule buildJsd(const Config &c) {
  KernelBuilder k("jsd", c);
  const int64_t BLOCK = k.param("BLOCK_SIZE");
  Value beta;
  DistillationRow r = distillationRow(k, "student_logp", "teacher_logp", [&] {
    beta = k.scalarArg("beta", DType::F32);
  });
  Value row = r.row, x = r.s, y = r.t, g = r.g, loss = r.loss, V = r.V;
  k.ifThen(
      r.ignored,
      [&] { storeIgnoredRow(k, {loss}, row, g, V, c.dtype); },
      [&] {
        auto terms = [&](Value offs, Value mask) {
          return jsdTerms(k, k.load(x, offs, mask, 0).to(DType::F32),
                          k.load(y, offs, mask, 0).to(DType::F32), beta);
        };
        Var rowLoss = k.constant(0, DType::F32);
        k.forRange(0, V, BLOCK, [&](Value i) {
          Value offs = i + k.arange(BLOCK);
          rowLoss = rowLoss + terms(offs, offs < V).loss.sum();
        });
        k.store(loss, row, rowLoss);
        Value scale = upstreamFactor(k, r.upstream, row, r.perRow);
        k.forRange(0, V, BLOCK, [&](Value i) {
          Value offs = i + k.arange(BLOCK);
          Value mask = offs < V;
          k.store(g, offs, (scale * terms(offs, mask).grad).to(c.dtype), mask);
        });
      });
  return k.finish();
}

/// The same divergence of raw logits at a temperature: X = log softmax(s
/// / T), Y = log softmax(t / T). Its gradient with respect to s needs the
/// row's sum of G = dJSD/dX (d/ds_v = (G_v - q_v sum_u G_u) / T), so a row
/// takes three passes: both rows' max and sum-exp, the loss and sum G, the
/// gradient. Masked lanes read -inf logits, whose terms are 0.
TileModule buildJsdLogits(const Config &c) {
  KernelBuilder k("jsd_logits", c);
  const int64_t BLOCK = k.param("BLOCK_SIZE");
  Value beta, temperature;
  DistillationRow r = distillationRow(k, "student", "teacher", [&] {
    beta = k.scalarArg("beta", DType::F32);
    temperature = k.scalarArg("temperature", DType::F32);
  });
  Value row = r.row, s = r.s, t = r.t, g = r.g, loss = r.loss, V = r.V;
  Value invT = 1.0 / temperature;
  auto scaled = [&](Value ptr, Value offs, Value mask) {
    return logitsOverT(k, ptr, offs, mask, invT);
  };
  k.ifThen(
      r.ignored,
      [&] { storeIgnoredRow(k, {loss}, row, g, V, c.dtype); },
      [&] {
        auto norms = logSoftmaxOfRows(k, s, t, V, scaled);
        RowLogSoftmax normQ = norms.first, normP = norms.second;
        Value zeros = k.full(BLOCK, k.constant(0, DType::F32));
        auto logQ = [&](Value offs, Value mask) {
          return normQ.of(scaled(s, offs, mask));
        };
        auto terms = [&](Value offs, Value mask) {
          return jsdTerms(k, logQ(offs, mask),
                          normP.of(scaled(t, offs, mask)), beta);
        };
        Var rowLoss = zeros, gSum = zeros;
        k.forRange(0, V, BLOCK, [&](Value i) {
          Value offs = i + k.arange(BLOCK);
          JsdTerms d = terms(offs, offs < V);
          rowLoss = rowLoss + d.loss;
          gSum = gSum + d.grad;
        });
        k.store(loss, row, rowLoss.sum());
        Value total = gSum.sum();
        Value scale = upstreamFactor(k, r.upstream, row, r.perRow) * invT;
        k.forRange(0, V, BLOCK, [&](Value i) {
          Value offs = i + k.arange(BLOCK);
          Value mask = offs < V;
          Value q = exp(logQ(offs, mask));
          Value d = (terms(offs, mask).grad - q * total) * scale;
          k.store(g, offs, d.to(c.dtype), mask);
        });
      });
  return k.finish();
}

/// The fp64 references row by row (kernels_spec/reference/JsdReference.h).
void jsdReference(ReferenceArgs &a) {
  double beta = a.scalar("beta");
  distillationReference(
      a, "student_logp", "teacher_logp",
      [&](const double *x, const double *y, int64_t V, double *grad) {
        return ref::jsdRow(x, y, V, beta, grad);
      });
}

void jsdLogitsReference(ReferenceArgs &a) {
  double beta = a.scalar("beta"), temperature = a.scalar("temperature");
  distillationReference(
      a, "student", "teacher",
      [&](const double *s, const double *t, int64_t V, double *grad) {
        return ref::jsdLogitsRow(s, t, V, beta, temperature, grad);
      });
}

} // namespace

KernelSpec jsdSpec() {
  KernelSpec s = rowLossSpec(
      "jsd",
      "generalized Jensen-Shannon divergence of log-probabilities "
      "(LigerJSD): per-row loss and student gradient",
      buildJsd, {hasLabelParam()});
  using A = ArgSpec;
  // Loss: f32 sums of V terms of both signs. Gradient: elementwise f32 with
  // the GPU's approximate exp and log, relative to Q_v <= 1.
  s.run.args = distillationRunArgs(
      "student_logp", "teacher_logp", ArgFill::logSoftmax(2), {1e-6, 1e-4},
      {1e-7, 1e-4}, {A::scalar("beta", 0.5, 0, 1)});
  // bytesMoved unset: the roofline reads both inputs and the labels and
  // writes both outputs once (3 BT V elements).
  s.run.reference = jsdReference;
  return s;
}

KernelSpec jsdLogitsSpec() {
  KernelSpec s = rowLossSpec("jsd_logits",
                             "generalized Jensen-Shannon divergence of logits "
                             "at a temperature: per-row loss and student "
                             "gradient",
                             buildJsdLogits, {hasLabelParam()});
  using A = ArgSpec;
  // As jsd, and the gradient's sum over the row: relative to q_v <= 1, over T.
  s.run.args = distillationRunArgs(
      "student", "teacher", ArgFill::normal(2), {1e-5, 1e-4}, {1e-7, 5e-4},
      {A::scalar("beta", 0.5, 0, 1), A::scalar("temperature", 2, 1e-3)});
  s.run.reference = jsdLogitsReference;
  return s;
}

} // namespace tilejit
