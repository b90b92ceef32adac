//===- SoftmaxParts.h - softmax pieces shared by the CE+TVD kernels -*- C++
//-*-//
//
// DSL helpers (no MLIR) for kernels that normalize rows of logits: a max
// shift that never forms -inf - -inf, online max / sum-exp per lane, per
// thread group or per tile, and softmax from a saved (max, log sum-exp) pair.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_KERNELS_SPEC_SOFTMAXPARTS_H
#define TILEJIT_KERNELS_SPEC_SOFTMAXPARTS_H

#include "tilejit/DSL.h"

#include <functional>
#include <limits>
#include <tuple>
#include <utility>
#include <vector>

namespace tilejit {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

/// A row max that never produces -inf - -inf: while everything seen so far
/// is -inf the shift is 0 (exp(-inf - 0) = 0 keeps the sums right).
inline dsl::Value safeShift(dsl::Value m) {
  return dsl::where(m == kNegInf, 0.0, m);
}

/// The row's elements at `offs` as f32 times `invT` (logits at a
/// temperature), -inf where `mask` is off: classes of probability 0.
inline dsl::Value logitsOverT(dsl::KernelBuilder &k, dsl::Value row,
                              dsl::Value offs, dsl::Value mask,
                              dsl::Value invT) {
  return dsl::where(mask, k.load(row, offs, mask, 0).to(DType::F32) * invT,
                    kNegInf);
}

/// log softmax of a row from the per-lane (max, sum-exp) a walk folded with
/// softmaxFold: of(x) for a tile x of the row. The max comes off first, so
/// that logits sharing a large offset keep their differences.
struct RowLogSoftmax {
  dsl::Value shift, logSum;
  RowLogSoftmax(dsl::KernelBuilder &k, dsl::Value m, dsl::Value d) {
    auto [rowMax, sumExp] = k.softmaxTotal(m, d);
    shift = safeShift(rowMax);
    logSum = dsl::log(sumExp);
  }
  dsl::Value of(dsl::Value x) const { return (x - shift) - logSum; }
};

/// The log softmaxes of two rows from one walk over [0, V) in BLOCK_SIZE
/// tiles: tile(row, offs, mask) is a tile of `row` as f32, -inf where the
/// mask is off (a distillation loss's student and teacher).
inline std::pair<RowLogSoftmax, RowLogSoftmax> logSoftmaxOfRows(
    dsl::KernelBuilder &k, dsl::Value a, dsl::Value b, dsl::Value V,
    const std::function<dsl::Value(dsl::Value, dsl::Value, dsl::Value)>
        &tile) {
  const int64_t BLOCK = k.param("BLOCK_SIZE");
  dsl::Value negInf = k.full(BLOCK, k.constant(kNegInf, DType::F32));
  dsl::Value zeros = k.full(BLOCK, k.constant(0, DType::F32));
  dsl::Var ma = negInf, da = zeros, mb = negInf, db = zeros;
  k.forRange(0, V, BLOCK, [&](dsl::Value i) {
    dsl::Value offs = i + k.arange(BLOCK);
    dsl::Value mask = offs < V;
    std::tie(ma, da) = k.softmaxFold(ma, da, tile(a, offs, mask));
    std::tie(mb, db) = k.softmaxFold(mb, db, tile(b, offs, mask));
  });
  return {RowLogSoftmax(k, ma, da), RowLogSoftmax(k, mb, db)};
}

/// Online softmax normalizer, per lane: folds tile x into the running
/// per-lane (max m, sum d) with one exp per element (the smaller of x and m
/// is the one rescaled).
inline void onlineUpdate(dsl::Var &m, dsl::Var &d, dsl::Value x) {
  dsl::Value bigger = x > m;
  dsl::Value e =
      dsl::where(x == kNegInf, 0.0, dsl::exp(dsl::where(bigger, m - x, x - m)));
  d = dsl::where(bigger, d * e + 1.0, d + e);
  m = dsl::max(m, x);
}

/// Online softmax normalizer, per lane, over several tiles `xs` at once:
/// one max, one exp and one add per element, and a single rescale of d (one
/// more exp) per lane for all of them (onlineUpdate's compares and selects per
/// element make an instruction-bound loop of a bandwidth-bound one).
inline void onlineUpdateLanes(dsl::Var &m, dsl::Var &d,
                              const std::vector<dsl::Value> &xs) {
  dsl::Value mNew = m;
  for (const dsl::Value &x : xs)
    mNew = dsl::max(mNew, x);
  dsl::Value shift = safeShift(mNew);
  dsl::Value sum = dsl::exp(xs[0] - shift);
  for (size_t i = 1; i < xs.size(); ++i)
    sum = sum + dsl::exp(xs[i] - shift);
  d = d * dsl::exp(m - shift) + sum;
  m = mNew;
}

/// Folds per-lane partial states (max mj, sum-exp dj against mj) into the
/// running per-lane (m, d): the softmax normalizer of the union.
inline void mergeState(dsl::Var &m, dsl::Var &d, dsl::Value mj,
                       dsl::Value dj) {
  dsl::Value mNew = dsl::max(m, mj);
  dsl::Value shift = safeShift(mNew);
  d = d * dsl::exp(m - shift) + dj * dsl::exp(mj - shift);
  m = mNew;
}

constexpr double kLog2e = 1.4426950408889634;
constexpr double kLn2 = 0.6931471805599453;

/// log2(e) rounded to f32 (the factor the kernels multiply by), as
/// kLog2eHi + kLog2eLo where kLog2eHi has 15 significant bits: a bf16
/// value (8) times kLog2eHi is exact in f32.
constexpr double kLog2eHi = 1.44268798828125;
constexpr double kLog2eLo = 7.033348083496094e-06;

/// The largest |row max| the scaled form takes: below it a sum stays within
/// 2^30 V and logSumOf's correction within about 1e-6.
constexpr double kScaledMaxAbs = 4194304.0; // 2^22

/// c(m) = max(m, -4 kScaledMaxAbs) kLog2eHi: the scaled form's shift, exact
/// for bf16 m, and finite below 2.3e38 (-3e38 kLog2eHi would overflow; -inf
/// is raised too; a row max above that takes the exact form). A group
/// whose max is below the bound has a sum under 2^-100, or 0, while the row
/// max is in the scaled form's range, where its true weight is 0.
inline dsl::Value scaledShift(dsl::Value m) {
  return dsl::max(m, m.builder().constant(-4 * kScaledMaxAbs, DType::F32)) *
         kLog2eHi;
}

/// How a softmax normalizer keeps its sum d for a running max m.
/// Exact: d = sum exp(x - m). Scaled (bf16 logits only): d = sum 2^(x
/// log2(e) - c(m)), one multiply-add (an fma, which the compilers'
/// contraction cannot change) and one exp2 per element where Exact takes a
/// subtract, a multiply and an exp. Since c(m) = m log2(e) - m kLog2eLo, a
/// scaled d is the exact one times 2^(m kLog2eLo), which logSumOf takes
/// out; a rescale by 2^(c(m) - c(m')) rounds its exponent only where m and
/// m' are far apart, and the factor tiny.
enum class SumForm { Exact, Scaled };

/// The factor that moves a sum kept against max `from` to max `to`.
inline dsl::Value rescale(dsl::Value from, dsl::Value to, SumForm form) {
  return form == SumForm::Scaled
             ? dsl::exp2(scaledShift(from) - scaledShift(to))
             : dsl::exp(from - safeShift(to));
}

/// Online softmax normalizer per group of `cols` adjacent elements (m and d
/// hold one entry per group), over the tiles `xs` of one loop step, all of
/// the same layout: a max over each group's elements in every tile, one exp
/// per element and one rescale per group for all the tiles. With cols =
/// KernelBuilder::threadGroup each group is one thread's vector and the row
/// reductions stay in registers: about half the instructions of
/// onlineUpdate's per-element compares and selects, and no barriers.
inline void groupUpdate(dsl::Var &m, dsl::Var &d,
                        const std::vector<dsl::Value> &xs, int64_t cols,
                        SumForm form = SumForm::Exact) {
  dsl::Value mNew = m;
  for (const dsl::Value &x : xs)
    mNew = dsl::max(mNew, x.maxRows(cols));
  const bool scaled = form == SumForm::Scaled;
  dsl::Value shift = scaled ? scaledShift(mNew) : safeShift(mNew);
  dsl::KernelBuilder &k = mNew.builder();
  dsl::Value log2e = k.constant(kLog2e, DType::F32);
  dsl::Value sum;
  for (const dsl::Value &x : xs) {
    dsl::Value s = k.broadcastRows(shift, cols);
    dsl::Value e = scaled ? dsl::exp2(dsl::fma(x, log2e, -s)) : dsl::exp(x - s);
    e = e.sumRows(cols);
    sum = sum.valid() ? sum + e : e;
  }
  d = d * rescale(m, mNew, form) + sum;
  m = mNew;
}

/// log sum exp(x - M) from the sum d of a row of max M: log d, less M
/// kLog2eLo ln 2 in the scaled form (for M within kScaledMaxAbs).
inline dsl::Value logSumOf(dsl::Value M, dsl::Value d, SumForm form) {
  if (form == SumForm::Exact)
    return dsl::log(d);
  return dsl::log(d) - safeShift(M) * (kLog2eLo * 0.6931471805599453);
}

/// Online softmax state per lane (cols = 1: onlineUpdate, tile by tile, in
/// the exact form) or per group of `cols` adjacent elements (groupUpdate,
/// one rescale for the tiles `xs` of a step, the sums in `form`).
inline void stateUpdate(dsl::Var &m, dsl::Var &d,
                        const std::vector<dsl::Value> &xs, int64_t cols,
                        SumForm form = SumForm::Exact) {
  if (cols > 1)
    return groupUpdate(m, d, xs, cols, form);
  for (const dsl::Value &x : xs)
    onlineUpdate(m, d, x);
}

/// Online softmax normalizer over whole tiles: a block-wide max and sum
/// every tile (fewest instructions per element, two barriers per tile).
inline void tileUpdate(dsl::Var &m, dsl::Var &d, dsl::Value x) {
  dsl::Value mNew = dsl::max(m, x.max());
  dsl::Value shift = safeShift(mNew);
  d = d * dsl::exp(m - shift) + dsl::exp(x - shift).sum();
  m = mNew;
}

/// The (max, sum-exp) of a row from per-lane online state, the sum in
/// `form`.
inline std::pair<dsl::Value, dsl::Value>
rowNormalizer(dsl::Value m, dsl::Value d, SumForm form = SumForm::Exact) {
  dsl::Value rowMax = m.max();
  return {rowMax, (d * rescale(m, rowMax, form)).sum()};
}

/// log2 softmax(x) = (x - m) log2(e) - log(d) log2(e): the row max m is
/// subtracted before the (small) log-sum, so logits sharing a huge offset
/// keep their differences, which x - lse would round away; then one
/// multiply-add that scales for exp2 (one instruction less per element than
/// exp((x - m) - log d)). A row that is entirely -inf gives -inf.
inline dsl::Value log2SoftmaxAt(dsl::Value x, dsl::Value m, dsl::Value logSum) {
  dsl::Value isEmpty = m == kNegInf;
  dsl::Value log2e = m.builder().constant(kLog2e, DType::F32);
  // An explicit fma: every kernel rounds it alike, whatever NVRTC contracts.
  return dsl::fma(x.to(DType::F32) - dsl::where(isEmpty, 0.0, m), log2e,
                  -dsl::where(isEmpty, 0.0, logSum * kLog2e));
}

/// The largest |K| that log2SoftmaxFast takes: K's rounding then moves log2
/// p by at most 2^-18, p by under 3e-6 of itself (log2SoftmaxAt's own
/// rounding is about 1e-6), well inside what the tie tolerance of the
/// checks allows for a flipped sign (1e-5). Rows whose log-sum-exp m +
/// log d lies within +-88.7 qualify; the others take log2SoftmaxAt.
constexpr double kFastLog2Max = 128;

/// K = (m + log d) log2(e), the one per-row constant of log2SoftmaxFast.
inline dsl::Value log2Offset(dsl::Value m, dsl::Value logSum) {
  dsl::Value log2e = m.builder().constant(kLog2e, DType::F32);
  return dsl::fma(m, log2e, logSum * kLog2e);
}

/// log2 softmax(x) = x log2(e) - K as one fma, whose product is exact: one
/// instruction per element where log2SoftmaxAt takes two. Its error is
/// log2SoftmaxAt's plus K's rounding, so K must lie within kFastLog2Max.
inline dsl::Value log2SoftmaxFast(dsl::Value x, dsl::Value K) {
  dsl::Value log2e = K.builder().constant(kLog2e, DType::F32);
  return dsl::fma(x.to(DType::F32), log2e, -K);
}

/// What the fast form's p must be multiplied by. K's rounding scales every
/// p = 2^(x log2(e) - K) of a row by 2^r, r = (m + log d) log2(e) - K: a
/// little over 2^-18 (2.6e-6 of p) at |K| near 128. This returns 2^-r = 1 -
/// r ln 2, r from two fmas whose inner one rounds m log2(e) - K, about
/// -log(d) log2(e): as accurate as log2SoftmaxAt, which rounds log(d)
/// log2(e) too. Without it, sigma would be off by up to 2.6e-6 and a
/// confident row's target gradient g_ce (p_y - 1) by as much times g_ce.
inline dsl::Value log2OffsetScale(dsl::Value m, dsl::Value logSum,
                                  dsl::Value K) {
  dsl::KernelBuilder &k = K.builder();
  dsl::Value log2e = k.constant(kLog2e, DType::F32);
  dsl::Value r = dsl::fma(logSum, log2e, dsl::fma(m, log2e, -K));
  return dsl::fma(r, k.constant(-kLn2, DType::F32), k.constant(1, DType::F32));
}

/// p sign(p - q) from d = log2 p - log2 q (exp2 is monotonic): p with the
/// sign of d where |d| > 0, else 0, so bit-identical logs (a teacher equal
/// to the student) give exactly 0. A subtract, a compare, a sign copy and a
/// select per element. Two -inf logits give d = NaN (-inf - -inf); the
/// ordered compare turns it into 0, as the compares of log2 p and log2 q
/// did, and no NaN reaches a result. d is never subnormal (log2 p is 0 or
/// at least about 1e-7 in size), so flushing subnormals cannot turn a
/// difference into a tie.
inline dsl::Value signedByDifference(dsl::Value p, dsl::Value d) {
  return dsl::where(dsl::abs(d) > 0.0, dsl::copysign(p, d),
                    p.builder().constant(0, DType::F32));
}

/// A row's normalizers and the two forms its log2 p and log2 q take. Every
/// kernel that signs p - q for a row (pass 2's sigma, the gradient) must use
/// the form the forward chose for that row (its fast_signs output): near a
/// tie the two forms may sign differently, and each sign that disagrees with
/// sigma's moves that element, and the row's gradient sum, by g_tvd p.
struct RowLogs {
  dsl::Value maxS, logSumS, maxT, logSumT;
  /// log2SoftmaxFast's offsets and what its p and q are to be multiplied
  /// by (log2OffsetScale), from withOffsets().
  dsl::Value offsetS, offsetT, pScaleS, pScaleT;

  void withOffsets() {
    offsetS = log2Offset(maxS, logSumS);
    offsetT = log2Offset(maxT, logSumT);
    pScaleS = log2OffsetScale(maxS, logSumS, offsetS);
    pScaleT = log2OffsetScale(maxT, logSumT, offsetT);
  }
  /// log2 p and log2 q of x in the fast form (log2SoftmaxFast) or the
  /// exact one (log2SoftmaxAt).
  dsl::Value log2P(dsl::Value x, bool fast) const {
    return fast ? log2SoftmaxFast(x, offsetS) : log2SoftmaxAt(x, maxS, logSumS);
  }
  dsl::Value log2Q(dsl::Value x, bool fast) const {
    return fast ? log2SoftmaxFast(x, offsetT) : log2SoftmaxAt(x, maxT, logSumT);
  }
};

/// p sign(p - q) from gap = log2 p - log2 q in either form: the fast one a
/// plain sign copy (a rounding tie, gap +0, gives +p), the exact one
/// signedByDifference (a tie gives 0, so that a teacher equal to the student
/// gives exactly 0).
inline dsl::Value signedP(dsl::Value p, dsl::Value gap, bool fast) {
  return fast ? dsl::copysign(p, gap) : signedByDifference(p, gap);
}

} // namespace tilejit

#endif // TILEJIT_KERNELS_SPEC_SOFTMAXPARTS_H
