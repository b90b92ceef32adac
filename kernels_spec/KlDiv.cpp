//===- KlDiv.cpp - KL divergence between a student's and a teacher's rows -===//
//
// Distillation by Kullback-Leibler divergence on raw logits, as
// F.kl_div(log_softmax(s / T), log_softmax(t / T), log_target=True) sums it
// per row (forward KL) or with the roles swapped (reverse KL), one row of
// BT at a time. With q = softmax(s / T) of the student, p = softmax(t / T)
// of the teacher and T the temperature:
//
//   forward: KL(p || q) = sum_v p_v (log p_v - log q_v),
//            d/ds_v = (q_v - p_v) / T;
//   reverse: KL(q || p) = sum_v q_v (log q_v - log p_v),
//            d/ds_v = q_v (log q_v - log p_v - KL(q || p)) / T.
//
// `loss` holds the per-row divergences and `grad` their gradient with
// respect to the student's logits (the teacher gets none), each row's times
// its upstream factor read on the device: upstream[row] with
// per_row_upstream (the backward of reduction none), else upstream[0] (a
// reduced loss, e.g. a batch mean's 1 / n). Hinton's T^2 factor is the
// caller's. A row whose label is ignore_index has loss 0 and a zero
// gradient; with HAS_LABEL = 0 the labels are not read.
//
// One program per row, written the plain way: a pass for both rows' max and
// sum-exp, a pass for the loss (forward KL: and the gradient), and for the
// reverse KL a third for the gradient, which needs the row's whole sum.
//
//===----------------------------------------------------------------------===//
#include "kernels_spec/RowLoss.h"
#include "kernels_spec/SoftmaxParts.h"
#include "kernels_spec/reference/KlDivReference.h"
#include "kernels_spec/Upstream.h"
#include "tilejit/KernelSpec.h"

#include <tuple>

using namespace tilejit::dsl;

namespace tilejit {
namespace {

TileModule buildKlDiv(const Config &c) {
  KernelBuilder k("kl_div", c);
  const int64_t BLOCK = k.param("BLOCK_SIZE");
  Value temperature, reverse;
  DistillationRow r = distillationRow(k, "student", "teacher", [&] {
    temperature = k.scalarArg("temperature", DType::F32);
    reverse = k.scalarArg("reverse", DType::I32) != 0.0;
  });
  Value row = r.row, s = r.s, t = r.t, g = r.g, loss = r.loss, V = r.V;
  Value invT = 1.0 / temperature;
  auto scaled = [&](Value ptr, Value offs, Value mask) {
    return logitsOverT(k, ptr, offs, mask, invT);
  };
  Value f32Zero = k.constant(0, DType::F32);
  k.ifThen(
      r.ignored,
      [&] { storeIgnoredRow(k, {loss}, row, g, V, c.dtype); },
      [&] {
        // Pass 1: both rows' max and sum-exp.
        auto norms = logSoftmaxOfRows(k, s, t, V, scaled);
        RowLogSoftmax normQ = norms.first, normP = norms.second;
        Value zeros = k.full(BLOCK, f32Zero);
        Value gScale = upstreamFactor(k, r.upstream, row, r.perRow) * invT;
        // log q - log p at each element, and each distribution.
        auto terms = [&](Value offs, Value mask) {
          Value logQ = normQ.of(scaled(s, offs, mask));
          Value logP = normP.of(scaled(t, offs, mask));
          Value diff = where(mask, logQ - logP, 0.0);
          return std::make_tuple(exp(logQ), exp(logP), diff);
        };
        // Pass 2: the divergence (forward KL: and its gradient).
        Var kl = zeros;
        k.forRange(0, V, BLOCK, [&](Value i) {
          Value offs = i + k.arange(BLOCK);
          Value mask = offs < V;
          auto [q, p, diff] = terms(offs, mask);
          // A class the weighting distribution gives 0 adds nothing, even
          // where the other gives it -inf (0 * inf).
          kl = kl + where(reverse, where(q > 0.0, q * diff, 0.0),
                          where(p > 0.0, -p * diff, 0.0));
          k.ifThen(!reverse, [&] {
            k.store(g, offs, ((q - p) * gScale).to(c.dtype), mask);
          });
        });
        Value rowKl = kl.sum();
        k.store(loss, row, rowKl);
        // Pass 3 (reverse KL): its gradient, which needs the whole sum.
        k.ifThen(reverse, [&] {
          k.forRange(0, V, BLOCK, [&](Value i) {
            Value offs = i + k.arange(BLOCK);
            Value mask = offs < V;
            auto [q, p, diff] = terms(offs, mask);
            Value d = where(q > 0.0, q * (diff - rowKl) * gScale, 0.0);
            k.store(g, offs, d.to(c.dtype), mask);
          });
        });
      });
  return k.finish();
}

/// The fp64 reference row by row (kernels_spec/reference/KlDivReference.h).
void klDivReference(ReferenceArgs &a) {
  double temperature = a.scalar("temperature");
  bool reverse = a.scalar("reverse") != 0;
  distillationReference(
      a, "student", "teacher",
      [&](const double *s, const double *t, int64_t V, double *grad) {
        return ref::klDivRow(s, t, V, temperature, reverse, grad);
      });
}

} // namespace

KernelSpec klDivSpec() {
  KernelSpec s = rowLossSpec(
      "kl_div",
      "KL divergence, forward or reverse, between softmax(student / T) and "
      "softmax(teacher / T): per-row loss and student gradient",
      buildKlDiv, {hasLabelParam()});
  using A = ArgSpec;
  // Loss: f32 sums of V terms of both signs with the GPU's approximate exp
  // and log; gradient: elementwise, relative to q, p <= 1 (over T).
  s.run.args = distillationRunArgs(
      "student", "teacher", ArgFill::normal(2), {1e-5, 1e-4}, {1e-7, 5e-4},
      {A::scalar("temperature", 2, 1e-3), A::scalar("reverse", 0, 0, 1)});
  // bytesMoved unset: the roofline reads both inputs and the labels and
  // writes both outputs once, although this plain kernel reads the inputs
  // two or three times.
  s.run.reference = klDivReference;
  return s;
}

} // namespace tilejit
