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
#include "kernels_spec/Upstream.h"
#include "tilejit/KernelSpec.h"

using namespace tilejit::dsl;

namespace tilejit {
namespace {

struct JsdTerms {
  Value loss, grad;
};

/// The loss terms and the gradient of one tile of X = log Q and Y = log P.
JsdTerms jsdTerms(Value x, Value y, Value beta) {
  Value q = exp(x), p = exp(y);
  Value m = beta * p + (1.0 - beta) * q;
  Value logM = log(m);
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
  Value X = k.pointerArg("student_logp", c.dtype);
  Value Y = k.pointerArg("teacher_logp", c.dtype);
  Value label = k.pointerArg("label", DType::I64);
  Value loss = k.pointerArg("loss", DType::F32);
  Value grad = k.pointerArg("grad", c.dtype);
  Value upstream = k.pointerArg("upstream", DType::F32);
  Value beta = k.scalarArg("beta", DType::F32);
  Value ignoreIndex = k.scalarArg("ignore_index", DType::I64);
  Value perRow = k.scalarArg("per_row_upstream", DType::I32) != 0.0;
  Value V = k.scalarArg("V", DType::I32);

  Value row = k.programId(0);
  Value rowOffset = row.to(DType::I64) * V.to(DType::I64);
  Value x = X + rowOffset, y = Y + rowOffset, g = grad + rowOffset;
  Value ignored = k.param("HAS_LABEL") ? k.load(label, row) == ignoreIndex
                                       : k.constant(0, DType::I1);
  k.ifThen(
      ignored,
      [&] {
        k.store(loss, row, k.constant(0, DType::F32));
        k.forRange(0, V, BLOCK, [&](Value i) {
          Value offs = i + k.arange(BLOCK);
          k.store(g, offs, k.full(BLOCK, k.constant(0, c.dtype)), offs < V);
        });
      },
      [&] {
        Var rowLoss = k.constant(0, DType::F32);
        k.forRange(0, V, BLOCK, [&](Value i) {
          Value offs = i + k.arange(BLOCK);
          Value mask = offs < V;
          rowLoss = rowLoss + jsdTerms(k.load(x, offs, mask, 0).to(DType::F32),
                                       k.load(y, offs, mask, 0).to(DType::F32),
                                       beta)
                                  .loss.sum();
        });
        k.store(loss, row, rowLoss);
        Value scale = upstreamFactor(k, upstream, row, perRow);
        k.forRange(0, V, BLOCK, [&](Value i) {
          Value offs = i + k.arange(BLOCK);
          Value mask = offs < V;
          Value d = jsdTerms(k.load(x, offs, mask, 0).to(DType::F32),
                             k.load(y, offs, mask, 0).to(DType::F32), beta)
                        .grad;
          k.store(g, offs, (scale * d).to(c.dtype), mask);
        });
      });
  return k.finish();
}

/// The fp64 reference row by row (kernels_spec/reference/JsdReference.h).
void jsdReference(ReferenceArgs &a) {
  const HostTensor &x = a.in("student_logp"), &y = a.in("teacher_logp"),
                   &label = a.in("label");
  int64_t BT = a.size("BT"), V = a.size("V");
  double beta = a.scalar("beta");
  bool hasLabel = a.scalar("HAS_LABEL") != 0;
  bool perRow = a.scalar("per_row_upstream") != 0;
  const HostTensor &up = a.in("upstream");
  std::vector<double> &loss = a.out("loss"), &grad = a.out("grad");
  std::vector<double> xr(V), yr(V);
  for (int64_t r = 0; r < BT; ++r) {
    if (hasLabel && label[r] == a.scalar("ignore_index"))
      continue; // outputs start at 0
    for (int64_t v = 0; v < V; ++v) {
      xr[v] = x[r * V + v];
      yr[v] = y[r * V + v];
    }
    loss[r] = ref::jsdRow(xr.data(), yr.data(), V, beta, &grad[r * V]);
    for (int64_t v = 0; v < V; ++v)
      grad[r * V + v] *= up[perRow ? r : 0];
  }
}

} // namespace

KernelSpec jsdSpec() {
  KernelSpec s;
  s.name = "jsd";
  s.summary = "generalized Jensen-Shannon divergence of log-probabilities "
              "(LigerJSD): per-row loss and student gradient";
  s.params = {
      {"BLOCK_SIZE", {1024, 2048, 4096, 8192}, 2048, "vocab elements per tile"},
      {"num_warps", {4, 8, 16}, 8, "warps per program"},
      {"HAS_LABEL", {1, 0}, 1, "read labels, skip ignore_index rows", false}};
  s.dtypes = {DType::BF16, DType::F16, DType::F32};
  s.build = buildJsd;
  s.tuneKey = {{"BT", true}, {"V", false}};
  using A = ArgSpec;
  s.run.sizes = {{"BT", "tokens (rows)"}, {"V", "vocabulary size", 1}};
  s.run.grid = {"BT"};
  // Loss: f32 sums of V terms of both signs. Gradient: elementwise f32 with
  // the GPU's approximate exp and log, relative to Q_v <= 1.
  s.run.args = {
      A::input("student_logp", {"BT", "V"}, ArgFill::logSoftmax(2)),
      A::input("teacher_logp", {"BT", "V"}, ArgFill::logSoftmax(2)),
      A::input("label", {"BT"}, ArgFill::classIndex("V", 7, -100)),
      A::output("loss", {"BT"}, {1e-6, 1e-4}),
      A::output("grad", {"BT", "V"}, {1e-7, 1e-4}),
      A::input("upstream", {"BT"}, ArgFill::normal(0.5, 1)),
      A::scalar("beta", 0.5, 0, 1),
      A::scalar("ignore_index", -100),
      A::scalar("per_row_upstream", 1, 0, 1),
      A::sizeScalar("V", "V")};
  // bytesMoved unset: the roofline reads both inputs and the labels and
  // writes both outputs once (3 BT V elements), although this plain kernel
  // reads the inputs twice.
  s.run.reference = jsdReference;
  return s;
}

} // namespace tilejit
