//===- CeTvd.cpp - the reduced CE+TVD loss and gradient, as math ----------===//
//
// docs/semantics.md §1 one row at a time, written the plain way: the
// student's cross-entropy against the target plus the total variation
// distance between the student's and the teacher's softmax, with p =
// softmax(s), q = softmax(t):
//
//   ce    = (lse_s - m_s) - (s_y - m_s)
//   tvd   = 0.5 sum_v |p_v - q_v|
//   sigma = sum_v p_v sign(p_v - q_v)
//   d/ds_v = g_ce (p_v - [v == y]) + g_tvd 0.5 p_v (sign(p_v - q_v) - sigma)
//
// with g_ce = weights[0] and g_tvd = weights[1] (ce_tvd_row_weights: alpha
// and beta over n_valid for a mean). Three walks over the row: both rows'
// max and sum-exp; TVD and sigma; the gradient. How the walks are scheduled
// (rows split over a cluster, kept on chip, loads ahead) is the compiler's.
// The arguments are fused_ce_tvd_loss_grad's, so that the reduced op can
// run either.
//
// An ignored row writes ce = tvd = 0 and a zero gradient row; a target
// outside [0, V) that is not ignore_index writes row + 1 into bad_target
// (docs/semantics.md §5) and is treated as ignored.
//
//===----------------------------------------------------------------------===//
#include "kernels_spec/RowLoss.h"
#include "kernels_spec/SoftmaxParts.h"
#include "kernels_spec/reference/CeTvdReference.h"
#include "tilejit/KernelSpec.h"


using namespace tilejit::dsl;

namespace tilejit {
namespace {

TileModule buildCeTvdLossGrad(const Config &c) {
  KernelBuilder k("ce_tvd_loss_grad", c);
  const int64_t BLOCK = k.param("BLOCK_SIZE");
  // grad may be the student (in place): each element is read, then written.
  Value S = k.aliasedPointerArg("student", c.dtype);
  Value T = k.pointerArg("teacher", c.dtype);
  Value target = k.pointerArg("target", DType::I64);
  Value weights = k.pointerArg("weights", DType::F32);
  Value ceOut = k.pointerArg("ce", DType::F32);
  Value tvdOut = k.pointerArg("tvd", DType::F32);
  Value grad = k.aliasedPointerArg("grad", c.dtype);
  Value badTarget = k.pointerArg("bad_target", DType::I32);
  Value V = k.scalarArg("V", DType::I32);
  Value rowStride = k.scalarArg("row_stride", DType::I64);
  Value gradStride = k.scalarArg("grad_stride", DType::I64);
  Value ignoreIndex = k.scalarArg("ignore_index", DType::I64);

  Value row = k.programId(0);
  Value s = S + row.to(DType::I64) * rowStride;
  Value t = T + row.to(DType::I64) * rowStride;
  Value g = grad + row.to(DType::I64) * gradStride;
  Value y = k.load(target, row);
  Value ignored = y == ignoreIndex;
  Value inVocab = y >= 0.0 && y < V.to(DType::I64);
  k.ifThen(!ignored && !inVocab, [&] {
    k.store(badTarget, k.constant(0, DType::I32), row + 1.0);
  });
  auto logits = [&](Value ptr, Value offs, Value mask) {
    return where(mask, k.load(ptr, offs, mask, 0).to(DType::F32), kNegInf);
  };
  Value zero = k.constant(0, DType::F32), one = k.constant(1, DType::F32);
  k.ifThen(
      ignored || !inVocab,
      [&] { storeIgnoredRow(k, {ceOut, tvdOut}, row, g, V, c.dtype); },
      [&] {
        // Read before the walks' reductions: past them, in place, the
        // program of a split row that holds y may have written its
        // gradient there.
        Value yv = y.to(DType::I32);
        Value targetLogit = k.load(s, yv).to(DType::F32);
        auto norms = logSoftmaxOfRows(k, s, t, V, logits);
        RowLogSoftmax logP = norms.first, logQ = norms.second;
        Value zeros = k.full(BLOCK, zero);
        auto probs = [&](Value offs, Value mask) {
          return std::make_pair(exp(logP.of(logits(s, offs, mask))),
                                exp(logQ.of(logits(t, offs, mask))));
        };
        Var absDiff = zeros, signedP = zeros;
        k.forRange(0, V, BLOCK, [&](Value i) {
          Value offs = i + k.arange(BLOCK);
          auto [p, q] = probs(offs, offs < V);
          absDiff = absDiff + abs(p - q);
          signedP = signedP + p * sign(p - q);
        });
        Value sigma = signedP.sum();
        k.store(ceOut, row, -logP.of(targetLogit));
        k.store(tvdOut, row, 0.5 * absDiff.sum());
        Value gCe = k.load(weights, k.constant(0, DType::I32));
        Value halfTvd = 0.5 * k.load(weights, k.constant(1, DType::I32));
        k.forRange(0, V, BLOCK, [&](Value i) {
          Value offs = i + k.arange(BLOCK);
          Value mask = offs < V;
          auto [p, q] = probs(offs, mask);
          Value d = gCe * (p - where(offs == yv, one, zero)) +
                    halfTvd * p * (sign(p - q) - sigma);
          k.store(g, offs, d.to(c.dtype), mask);
        });
      });
  return k.finish();
}

/// The fp64 reference (kernels_spec/reference/CeTvdReference.h) with the
/// rows' upstream gradients weights[0] and weights[1].
void ceTvdLossGradReference(ReferenceArgs &a) {
  const HostTensor &s = a.in("student"), &t = a.in("teacher"),
                   &target = a.in("target"), &w = a.in("weights");
  int64_t BT = a.size("BT"), V = a.size("V");
  const auto *y = static_cast<const int64_t *>(target.data);
  ref::CeTvdForward f =
      ref::ceTvdForward(s.data, t.data, s.dtype, y, BT, V, V,
                        int64_t(a.scalar("ignore_index")));
  std::vector<double> gCe(BT, w[0]), gTvd(BT, w[1]);
  ref::ceTvdBackward(s.data, t.data, s.dtype, y, BT, V, V, gCe.data(),
                     gTvd.data(), a.out("grad").data(),
                     int64_t(a.scalar("ignore_index")));
  a.out("ce") = f.ce;
  a.out("tvd") = f.tvd;
}

} // namespace

KernelSpec ceTvdLossGradSpec() {
  KernelSpec s = rowLossSpec("ce_tvd_loss_grad",
                             "CE+TVD reduced loss terms and the student "
                             "gradient, written one program per row (the "
                             "compiler schedules the walks)",
                             buildCeTvdLossGrad);
  using A = ArgSpec;
  // docs/semantics.md §1's tolerances: ce 1e-4 and tvd 2e-5 absolute; the
  // gradient elementwise, relative to p <= 1 (beyond the mass of near ties,
  // which random logits almost never hold).
  s.run.args = {A::input("student", {"BT", "V"}, ArgFill::normal(2)),
                A::input("teacher", {"BT", "V"}, ArgFill::normal(2)),
                A::input("target", {"BT"}, ArgFill::classIndex("V", 7, -100)),
                A::input("weights", {"3"}, ArgFill::normal(0.5, 1)),
                A::output("ce", {"BT"}, {1e-4, 0}),
                A::output("tvd", {"BT"}, {2e-5, 0}),
                A::output("grad", {"BT", "V"}, {1e-7, 1e-4}),
                A::input("bad_target", {}, ArgFill::zeros()),
                A::sizeScalar("V", "V"),
                A::sizeScalar("row_stride", "V"),
                A::sizeScalar("grad_stride", "V"),
                A::scalar("ignore_index", -100)};
  s.run.reference = ceTvdLossGradReference;
  return s;
}

} // namespace tilejit
