//===- FusedCeTvdCluster.cpp - CE+TVD with each row split over a cluster --===//
//
// A row is split over the CLUSTER_SIZE programs of a thread-block cluster:
// program r of the cluster owns the SLICE-wide slice starting at r * SLICE
// and walks it in BLOCK_SIZE tiles. Pass 1 reads the slice from memory
// (online max / sum-exp); the programs combine their partial normalizers
// through distributed shared memory (tile.cluster_reduce); pass 2 (TVD,
// sigma) reads the slice again, from L2 where it is still there, else from
// HBM. Each loop step has UNROLL tiles' loads in flight, and pass 2 walks
// backward so that it meets pass 1's latest tiles first.
//
// The reduced kernel adds pass 3 (the gradient). With KEEP, a shared array
// of the slice holds the student from pass 1 for pass 2, then p sign(p - q)
// from pass 2 for pass 3, so that pass 2 re-reads only the teacher and pass
// 3 reads nothing unless pass 2 took its exact form and met a tie (on the
// H200 at BT 4096, V 151936, bf16: HBM reads 3.69 to 2.48 GB, 1.648 to
// 1.386 ms). With COPY_AHEAD, pass 1 fills the array with cp.async copies
// issued loop steps ahead, which hold no registers.
//
//===----------------------------------------------------------------------===//
#include "kernels_spec/FusedCeTvd.h"
#include "kernels_spec/FusedCeTvdForward.h"
#include "kernels_spec/SoftmaxParts.h"

#include "tilejit/Error.h"

#include <algorithm>
#include <limits>
#include <optional>

using namespace tilejit::dsl;

namespace tilejit {
namespace {

using CO = KernelBuilder::ClusterOp;

/// The arguments and the slice every cluster kernel starts from.
struct RowSlice {
  Value row, rank, s, t, y, V, start, end, ignored, inRange;
};

/// This program's cluster: program id / CLUSTER_SIZE.
Value clusterId(KernelBuilder &k) {
  return k.programId(0) / double(k.clusterSize());
}

/// This program's slice of its cluster's row (row c for cluster c).
RowSlice rowSlice(KernelBuilder &k, Value student, Value teacher, Value target,
                  Value V, Value rowStride, Value ignoreIndex) {
  RowSlice r;
  const int64_t C = k.clusterSize(), SLICE = k.param("SLICE");
  r.row = clusterId(k);
  r.rank = k.programId(0) - r.row * double(C);
  Value rowOffset = r.row.to(DType::I64) * rowStride;
  r.s = student + rowOffset;
  r.t = teacher + rowOffset;
  r.y = k.load(target, r.row);
  r.V = V;
  r.start = r.rank * double(SLICE);
  r.end = min(r.start + double(SLICE), V);
  r.ignored = r.y == ignoreIndex;
  r.inRange = r.y >= 0.0 && r.y < V.to(DType::I64);
  return r;
}

/// One BLOCK_SIZE tile of a program's slice: its offsets, its mask
/// (std::nullopt in whole tiles) and the inputs its walk loads there.
struct SliceTile {
  Value offs;
  Mask mask;
  Value s, t; ///< null where the walk does not load them
};

/// How forEachTile walks the slice: which inputs it loads, the student
/// from `studentCopy` (a shared array holding the slice) when that is set,
/// and with `backward` the whole steps go from the slice's end to its start
/// (forTilesBackward).
struct Walk {
  bool backward = false;
  bool student = true, teacher = true;
  Value studentCopy;
  /// With studentCopy set and copyAhead = A > 0 (forward walks only), the
  /// walk fills studentCopy itself: cp.async copies each step's student
  /// tiles A steps before the step reads them back, so that A steps' loads
  /// are in flight without holding registers (the tail's tiles lie in one
  /// step's copies).
  int64_t copyAhead = 0;
  /// With prefetchAhead = P > 0 (forward walks only), each step asks for
  /// the inputs it loads from memory P steps later into L2
  /// (KernelBuilder::prefetchL2), so that those loads wait less without
  /// holding registers.
  int64_t prefetchAhead = 0;
  /// Tiles per step (walks without copies ahead); 0: UNROLL.
  int64_t unroll = 0;
};

/// Copies the student's tiles of the step starting at `first` (an i32
/// scalar; a step past the slice's end copies nothing) into `copy`, the
/// slice's shared array, as one cp.async group. The offsets are forTiles',
/// so each element lands from the lane that will load it.
void copyStudentStep(KernelBuilder &k, const RowSlice &r, Value copy,
                     Value first) {
  const int64_t BLOCK = k.param("BLOCK_SIZE"), UNROLL = k.param("UNROLL");
  // Each branch forms its own offsets, as in the kernel timed on the H200
  // (offsets hoisted above the branch give different PTX).
  auto copies = [&](bool masked) {
    for (int64_t u = 0; u < UNROLL; ++u) {
      Value offs = first + double(u * BLOCK) + k.arange(BLOCK);
      k.copyAsync(copy, offs - r.start, r.s, offs,
                  masked ? Mask(offs < r.end) : std::nullopt);
    }
  };
  k.ifThen(
      first + double(UNROLL * BLOCK) <= r.end, [&] { copies(false); },
      [&] { copies(true); });
  k.commitCopies();
}

/// body(tiles) for each loop step over this program's slice (forTiles'
/// walk): UNROLL tiles per whole step, unmasked, then the tail one tile per
/// call (the whole ones unmasked, the partial one masked). A step loads the
/// inputs of all its tiles before the body runs, so UNROLL tiles' loads are
/// in flight at once. With copies ahead, each call copies a step's worth
/// ahead; the tail's tiles all lie in the step its first call waits for.
void forEachStep(
    KernelBuilder &k, const RowSlice &r,
    const std::function<void(const std::vector<SliceTile> &)> &body,
    Walk walk = {}) {
  const int64_t BLOCK = k.param("BLOCK_SIZE");
  const int64_t UNROLL = walk.unroll ? walk.unroll : k.param("UNROLL");
  const int64_t STEP = UNROLL * BLOCK;
  const int64_t ahead = walk.studentCopy.valid() ? walk.copyAhead : 0;
  if (ahead && (walk.backward || walk.unroll))
    throw Error("CE+TVD cluster kernels: copies ahead need a forward walk "
                "of UNROLL tiles per step");
  std::optional<Var> aheadFirst; // the next step to copy
  if (ahead) {
    for (int64_t j = 0; j < ahead; ++j)
      copyStudentStep(k, r, walk.studentCopy, r.start + double(j * STEP));
    aheadFirst.emplace(r.start + double(ahead * STEP));
  }
  const int64_t prefetch = walk.backward ? 0 : walk.prefetchAhead;
  auto prefetchStep = [&](Value first) {
    Value lo = min(first, r.end);
    Value count = min(first + double(STEP), r.end) - lo;
    if (walk.teacher)
      k.prefetchL2(r.t, lo, count);
    if (walk.student && !walk.studentCopy.valid())
      k.prefetchL2(r.s, lo, count);
  };
  std::optional<Var> prefetchFirst; // the next step to prefetch
  if (prefetch) {
    for (int64_t j = 1; j < prefetch; ++j)
      prefetchStep(r.start + double(j * STEP));
    prefetchFirst.emplace(r.start + double(prefetch * STEP));
  }
  auto step = [&](const std::vector<Value> &offs,
                  const std::vector<Mask> &masks) {
    if (prefetch) {
      prefetchStep(*prefetchFirst);
      *prefetchFirst = *prefetchFirst + double(STEP);
    }
    std::vector<SliceTile> tiles;
    if (ahead) {
      // This step's group is the (ahead + 1)-th newest once the next is in
      // (a tail call's tiles lie in that of its first call, or older).
      copyStudentStep(k, r, walk.studentCopy, *aheadFirst);
      *aheadFirst = *aheadFirst + double(STEP);
      k.waitOwnCopies(ahead);
    }
    for (size_t u = 0; u < offs.size(); ++u) {
      SliceTile x{offs[u], masks[u], Value(), Value()};
      if (walk.student && walk.studentCopy.valid())
        x.s = k.load(walk.studentCopy, offs[u] - r.start, masks[u], kNegInf);
      else if (walk.student)
        x.s = k.load(r.s, offs[u], masks[u], kNegInf);
      if (walk.teacher)
        x.t = k.load(r.t, offs[u], masks[u], kNegInf);
      tiles.push_back(x);
    }
    body(tiles);
  };
  if (walk.backward)
    k.forTilesBackward(r.start, r.end, BLOCK, UNROLL, step);
  else
    k.forTiles(r.start, r.end, BLOCK, UNROLL, step);
  if (ahead) // the groups left are past the end: empty
    k.waitOwnCopies(0);
}

/// forEachStep with body(tile) for each tile of a step in turn.
void forEachTile(KernelBuilder &k, const RowSlice &r,
                 const std::function<void(const SliceTile &)> &body,
                 Walk walk = {}) {
  forEachStep(
      k, r,
      [&](const std::vector<SliceTile> &tiles) {
        for (const SliceTile &x : tiles)
          body(x);
      },
      walk);
}

/// The row's bad target is reported once, by the cluster's first program.
void flagBadTarget(KernelBuilder &k, const RowSlice &r, Value badTarget) {
  k.ifThen(!r.ignored && !r.inRange && r.rank == 0.0,
           [&] { k.store(badTarget, k.constant(0, DType::I32), r.row + 1.0); });
}

/// The row's normalizers and per-row results, identical in every program
/// of the cluster.
struct RowStats : RowLogs {
  Value ce, tvd, sigma;
  Value targetLogit; ///< the student's logit at y, as f32
  /// With FAST_LOG2, whether this row's pass 2 signs (and so sigma) came
  /// from the fast form; null without.
  Value fastSigns;
  /// With KEEP, whether every kept p sign(p - q) of this program's slice
  /// holds p: after the fast walk (which signs a rounding tie +p), or after
  /// an exact walk that met no tie (log2 p = log2 q, sign 0).
  Value noTies;

  /// What p from pass 2's last walk (its sums, the kept p sign) is to be
  /// multiplied by: the fast form's pScaleS after the fast walk, else 1.
  /// With FAST_LOG2 only.
  Value lastWalkPScale() const { return where(fastSigns, pScaleS, 1.0); }
};

/// body(fast) in the form this program's pass 2 signs came from, so that
/// pass 3 signs each element as sigma did: a branch per form with FAST_LOG2.
void inSignForm(KernelBuilder &k, const RowStats &st,
                const std::function<void(bool fast)> &body) {
  if (!st.fastSigns.valid())
    return body(false);
  k.ifThen(
      st.fastSigns, [&] { body(true); }, [&] { body(false); });
}

/// What the passes keep of the slice in shared memory (the cluster kernels'
/// KEEP): with `studentCopy` set, pass 1 copies the student's slice there
/// and pass 2 reads it back from there; `keep(tile, p sign(p - q))` runs in
/// each pass 2 walk for each tile (the last walk's values stay). Pass 3
/// reads them unless pass 2 took its exact walk and met a tie there.
struct SliceKeeping {
  Value studentCopy;
  std::function<void(const SliceTile &, Value signedP)> keep;
};

/// Passes 1 and 2 of docs/semantics.md §1 over this program's slice, combined
/// across the cluster. p and q are formed by the same operations, so a
/// teacher equal to the student gives p == q bit for bit.
RowStats rowStats(KernelBuilder &k, const RowSlice &r,
                  const SliceKeeping &keeping = {}) {
  const int64_t BLOCK = k.param("BLOCK_SIZE");
  Value copy = keeping.studentCopy;
  // COPY_AHEAD: pass 1's walk copies the student into the array itself
  // (deriveSlice leaves it on only where it applies).
  Walk pass1;
  pass1.prefetchAhead = k.param("PREFETCH_L2");
  if (copy.valid() && k.param("COPY_AHEAD")) {
    pass1.studentCopy = copy;
    pass1.copyAhead = k.param("COPY_AHEAD");
  }
  // This program's (max, sum-exp) of its slice, from a walk that copies
  // the student into the KEEP array where `copying` (and pass 1's own
  // copies do not): per thread's vector group, the sums in `form`. (Per
  // lane, or with a block reduction every tile, never won on the H200: the
  // forward took 1.325 ms per lane against 1.074 per group.)
  struct SliceNorm {
    std::pair<Value, Value> s, t;
  };
  auto sliceNorm = [&](const Walk &walk, SumForm form, bool copying) {
    auto copyStudent = [&](const SliceTile &x) {
      if (copying && copy.valid() && !walk.studentCopy.valid())
        k.store(copy, x.offs - r.start, x.s.to(copy.dtype()), x.mask);
    };
    SliceNorm out;
    const int64_t cols = k.threadGroup(BLOCK, k.config().dtype);
    Value negInf = k.full(BLOCK / cols, k.constant(kNegInf, DType::F32));
    Value noSum = k.full(BLOCK / cols, k.constant(0, DType::F32));
    Var mS = negInf, dS = noSum, mT = negInf, dT = noSum;
    // Per group, one rescale per step for all its tiles (2 exps fewer per
    // 16 pairs than one per tile).
    forEachStep(
        k, r,
        [&](const std::vector<SliceTile> &tiles) {
          std::vector<Value> xs, xt;
          for (const SliceTile &x : tiles) {
            copyStudent(x);
            xs.push_back(x.s.to(DType::F32));
            xt.push_back(x.t.to(DType::F32));
          }
          stateUpdate(mS, dS, xs, cols, form);
          stateUpdate(mT, dT, xt, cols, form);
        },
        walk);
    out.s = rowNormalizer(mS, dS, form);
    out.t = rowNormalizer(mT, dT, form);
    return out;
  };
  // The scaled form where its shift is exact: bf16 logits.
  const SumForm form =
      k.config().dtype == DType::BF16 ? SumForm::Scaled : SumForm::Exact;
  SliceNorm slice = sliceNorm(pass1, form, /*copying=*/true);
  // A program's sum, rescaled to the row max M.
  auto rescaled = [&](const std::pair<Value, Value> &part, Value M, SumForm f) {
    return part.second * rescale(part.first, M, f);
  };
  // The target logit, read once by the cluster's first program. No program
  // writes a gradient before the cluster reductions below, and the first
  // program's share of them carries this value, so an in-place run cannot
  // have overwritten it.
  Value sy = k.load(r.s, r.y, r.rank == 0.0, 0.0).to(DType::F32);
  auto m = k.clusterReduce(CO::Max, {slice.s.first, slice.t.first});
  Value shareS = rescaled(slice.s, m[0], form);
  Value shareT = rescaled(slice.t, m[1], form);
  auto d = k.clusterReduce(CO::Sum, {shareS, shareT, sy});
  Var logSumS = logSumOf(m[0], d[0], form);
  Var logSumT = logSumOf(m[1], d[1], form);
  // This program's share of the student's and the teacher's probability
  // mass, for pass 2's max form (which rows beyond the scaled form's range,
  // below, never take: their offsets are far beyond kFastLog2Max).
  Value massS = shareS / d[0], massT = shareT / d[1];
  if (form == SumForm::Scaled) {
    // A row max beyond kScaledMaxAbs (or -inf): pass 1 again in the exact
    // form, the student from the KEEP array where pass 1 filled it. Group
    // maxima below -kScaledMaxAbs need nothing of the kind while the row
    // max is in range: their sums, a bf16 step (2^15 or more) below it,
    // are 0 in either form.
    // (Each compared alone: a NaN max of one input must not hide the other.)
    k.ifThen(abs(m[0]) > kScaledMaxAbs || abs(m[1]) > kScaledMaxAbs, [&] {
      Walk again;
      again.studentCopy = copy;
      SliceNorm exact = sliceNorm(again, SumForm::Exact, /*copying=*/false);
      auto d2 =
          k.clusterReduce(CO::Sum, {rescaled(exact.s, m[0], SumForm::Exact),
                                    rescaled(exact.t, m[1], SumForm::Exact)});
      logSumS = log(d2[0]);
      logSumT = log(d2[1]);
    });
  }
  RowStats st;
  st.maxS = m[0];
  st.logSumS = logSumS;
  st.maxT = m[1];
  st.logSumT = logSumT;
  // Differences against the row max keep the gap when logits share a large
  // offset (docs/semantics.md §1).
  st.targetLogit = d[2];
  st.ce = st.logSumS - (d[2] - m[0]);

  // Pass 2 walks the slice backward: it meets pass 1's latest tiles first,
  // and a pass 3 that re-reads the inputs, forward again, meets pass 2's
  // (on the H200 at BT 4096, V 151936, bf16: HBM reads 3.93 to 3.72 GB and
  // 1.655 to 1.637 ms for the loss + gradient, 4.27 to 4.12 GB and 0.971 to
  // 0.950 ms for the forward).
  // Its sums are kept per thread's vector group (tile-assign-layout's
  // groups), not per element: fewer registers, and no spills.
  const int64_t cols = k.threadGroup(BLOCK, k.config().dtype);
  Value groupZero = k.full(BLOCK / cols, k.constant(0, DType::F32));
  Value noGap = k.full(
      BLOCK, k.constant(std::numeric_limits<double>::infinity(), DType::F32));
  Var absSum = groupZero, sig = groupZero, tieGap = noGap;
  // One walk in the fast form (log2SoftmaxFast, its sign a plain sign copy)
  // or the exact one (log2SoftmaxAt, signedByDifference). With `ties`, each
  // lane keeps the smallest |log2 p - log2 q| it met: that of the slice is 0
  // if and only if it has a tie (minNum skips the NaN gaps of -inf logits,
  // where p = 0 anyway).
  //
  // Where pass 2 keeps no p sign per element (the forward, and the loss +
  // gradient kernel with KEEP=0, whose pass 3 re-reads the logits), it
  // takes the fast form's max form: one exp per pair where the sign forms
  // take two. With e = max(p, q) = exp2(max(log2 p, log2 q)), it sums
  // S = sum e and C = sum e sign(p - q) = A - (S - A), A being the sum of p
  // over p > q. Since e = (p + q + |p - q|) / 2, the slice's sum |p - q| is
  // 2 S - P - Q and its sum p sign(p - q) = 2 A - P = C + S - P (without
  // ties), where P and Q are the slice's shares of the probability mass from
  // pass 1 (massS, massT). (The fast form's p and q carry scales of their
  // own, taken off after the walk: see below.)
  auto pass2 = [&](bool fast, bool maxForm, bool ties, const Walk &walk) {
    absSum = groupZero;
    sig = groupZero;
    if (ties)
      tieGap = noGap;
    forEachTile(
        k, r,
        [&](const SliceTile &x) {
          Value lp = st.log2P(x.s, fast), lq = st.log2Q(x.t, fast);
          Value gap = lp - lq;
          if (maxForm) {
            Value e = exp2(max(lp, lq));
            absSum = absSum + e.sumRows(cols);
            sig = sig + copysign(e, gap).sumRows(cols);
          } else {
            Value p = exp2(lp);
            Value pSign = signedP(p, gap, fast);
            absSum = absSum + abs(p - exp2(lq)).sumRows(cols);
            sig = sig + pSign.sumRows(cols);
            if (keeping.keep)
              keeping.keep(x, pSign);
          }
          if (ties)
            tieGap = minNum(tieGap, abs(gap));
        },
        walk);
  };
  auto noTie = [&] { return tieGap.min() > 0.0; };
  const bool keep = static_cast<bool>(keeping.keep);
  const bool maxForm = k.param("FAST_LOG2") && !keep;
  Walk walk{/*backward=*/true, /*student=*/true, /*teacher=*/true, copy};
  Value zero = k.constant(0, DType::F32);
  if (!k.param("FAST_LOG2")) {
    pass2(/*fast=*/false, /*maxForm=*/false, /*ties=*/keep, walk);
    if (keep)
      st.noTies = noTie();
  } else {
    // The fast form's sign copy gives a tie (gap +0) +p (+q in the max
    // form), and its offsets round too much beyond kFastLog2Max: those
    // rows walk pass 2 again in the exact form (the student from memory
    // where the KEEP array now holds p sign(p - q)), which gives a teacher
    // equal to the student exactly 0. A second walk, of one tile per step,
    // not a branch around the fast one: either way ptxas spilled in the
    // loss + gradient kernel.
    //
    // Ties are looked for per row, not per element: with the student's and
    // the teacher's offsets apart, a gap of exactly 0 is a rounding tie,
    // whose fp64 sign is either way (as for any |gap| within rounding), so
    // +p is as right as 0. Equal offsets (a teacher equal to the student,
    // or one that differs only where p = q = 0) take the exact walk. One
    // min per pair less in the fast walk, and no block reduction after it.
    st.withOffsets();
    Value fastLogs =
        abs(st.offsetS) < kFastLog2Max && abs(st.offsetT) < kFastLog2Max;
    pass2(/*fast=*/true, maxForm, /*ties=*/false, walk);
    st.fastSigns = fastLogs && st.offsetS != st.offsetT;
    Var noTies = st.fastSigns;
    k.ifThen(!st.fastSigns, [&] {
      Walk exact = walk;
      if (keep)
        exact.studentCopy = Value();
      exact.unroll = 1;
      pass2(/*fast=*/false, /*maxForm=*/false, /*ties=*/keep, exact);
      if (keep)
        noTies = noTie();
    });
    st.noTies = noTies;
  }
  Value absSlice = absSum.sum(), sigSlice = sig.sum();
  if (maxForm) {
    // After the fast walk (the max form), S = cS A + cT B and C = cS A - cT
    // B, with A the sum of p where the gap is +0 or more, B that of q where
    // it is below 0, and cS, cT the fast form's scales (1 / pScaleS, 1 /
    // pScaleT); after the exact walk (the sign form), the sums themselves.
    Value twoA = (absSlice + sigSlice) * st.pScaleS;
    Value twoB = (absSlice - sigSlice) * st.pScaleT;
    absSlice = where(st.fastSigns, twoA + twoB - massS - massT, absSlice);
    sigSlice = where(st.fastSigns, twoA - massS, sigSlice);
  } else if (st.fastSigns.valid()) {
    // The sign form's sum of p sign(p - q) scales as p does. (Its sum of
    // |p - q| is left as it is: TVD off by at most |cS - 1| TVD + |cS -
    // cT| / 2, under 3e-6.)
    sigSlice = sigSlice * st.lastWalkPScale();
  }
  auto t = k.clusterReduce(CO::Sum, {absSlice, sigSlice});
  st.tvd = 0.5 * t[0];
  // 2 A + 2 B - P - Q cancels: a TVD within rounding of 0 could come out
  // below.
  if (maxForm)
    st.tvd = max(st.tvd, zero);
  st.sigma = t[1];
  return st;
}

/// The loss + gradient kernel keeps p sign(p - q) in the KEEP array, in the
/// logits' type (that of the gradient it becomes), times this scale: 2^15
/// for f16, whose range would lose small p (p <= 1 stays below its max of
/// 65504, and every p from 2^-29 up keeps f16's full precision; smaller ones
/// keep an absolute error of 2^-40, far below the f16 gradient's own
/// rounding while |d loss / d ce_i| is below 2^15), none for bf16 and f32.
std::optional<double> keptScale(DType dtype) {
  if (dtype == DType::F16)
    return 32768.0;
  return std::nullopt;
}

/// The forward of one row: its eight results, stored by the cluster's first
/// program.
void forwardRow(KernelBuilder &k, const CeTvdForwardArgs &args,
                const RowSlice &r, const SliceKeeping &keeping) {
  flagBadTarget(k, r, args.badTarget);
  Value zero = k.constant(0, DType::F32);
  Var ce = zero, tvd = zero, sigma = zero;
  Var maxS = zero, logSumS = zero, maxT = zero, logSumT = zero;
  Var fastSigns = zero;
  k.ifThen(!r.ignored && r.inRange, [&] {
    RowStats st = rowStats(k, r, keeping);
    ce = st.ce;
    tvd = st.tvd;
    sigma = st.sigma;
    maxS = st.maxS;
    logSumS = st.logSumS;
    maxT = st.maxT;
    logSumT = st.logSumT;
    if (st.fastSigns.valid())
      fastSigns = st.fastSigns.to(DType::F32);
  });
  k.ifThen(r.rank == 0.0, [&] {
    storeRowOutputs(k, args, r.row,
                    {ce, tvd, sigma, maxS, logSumS, maxT, logSumT, fastSigns});
  });
}

TileModule buildForwardCluster(const Config &c) {
  KernelBuilder k("fused_ce_tvd_fwd_cluster", c);
  applyAligned(k);
  CeTvdForwardArgs args = declareForwardArgs(k, c.dtype);
  // KEEP: pass 2 reads the student's slice from where pass 1 copied it.
  SliceKeeping keeping;
  if (k.param("KEEP"))
    keeping.studentCopy = k.sharedArray(k.param("SLICE"), c.dtype);
  RowSlice r = rowSlice(k, args.student, args.teacher, args.target, args.V,
                        args.rowStride, args.ignoreIndex);
  forwardRow(k, args, r, keeping);
  return k.finish();
}

TileModule buildLossGrad(const Config &c) {
  KernelBuilder k("fused_ce_tvd_loss_grad", c);
  applyAligned(k);
  // IN_PLACE (from the caller): the gradient is written over the student,
  // so the two give up __restrict__.
  auto pointer = [&](const char *name) {
    return k.param("IN_PLACE") ? k.aliasedPointerArg(name, c.dtype)
                               : k.pointerArg(name, c.dtype);
  };
  Value student = pointer("student");
  Value teacher = k.pointerArg("teacher", c.dtype);
  Value target = k.pointerArg("target", DType::I64);
  Value weights = k.pointerArg("weights", DType::F32);
  Value ceOut = k.pointerArg("ce", DType::F32);
  Value tvdOut = k.pointerArg("tvd", DType::F32);
  Value grad = pointer("grad");
  Value badTarget = k.pointerArg("bad_target", DType::I32);
  Value V = k.scalarArg("V", DType::I32);
  Value rowStride = k.scalarArg("row_stride", DType::I64);
  Value gradStride = k.scalarArg("grad_stride", DType::I64);
  Value ignoreIndex = k.scalarArg("ignore_index", DType::I64);

  RowSlice r = rowSlice(k, student, teacher, target, V, rowStride, ignoreIndex);
  flagBadTarget(k, r, badTarget);
  Value g = grad + r.row.to(DType::I64) * gradStride;
  Value kept;
  if (k.param("KEEP"))
    kept = k.sharedArray(k.param("SLICE"), c.dtype);
  Value zero = k.constant(0, DType::F32);
  Var ce = zero, tvd = zero;
  k.ifThen(
      !r.ignored && r.inRange,
      [&] {
        // KEEP: the array holds the student's slice from pass 1 for pass 2,
        // then each element's p sign(p - q) from pass 2 for pass 3, at its
        // place in the slice and read back by the lane that wrote it. A tie
        // of the exact walk (log2 p = log2 q, sign 0) loses p, so a slice
        // with one re-reads its inputs in pass 3 (also one whose tie has
        // p = 0, needlessly).
        SliceKeeping keeping;
        const std::optional<double> scale = keptScale(c.dtype);
        if (kept.valid()) {
          keeping.studentCopy = kept;
          keeping.keep = [&](const SliceTile &x, Value signedP) {
            Value scaled = scale ? signedP * *scale : signedP;
            k.store(kept, x.offs - r.start, scaled.to(kept.dtype()), x.mask);
          };
        }
        RowStats st = rowStats(k, r, keeping);
        ce = st.ce;
        tvd = st.tvd;
        // d loss / d ce_i and d loss / d tvd_i: alpha, beta over n_valid
        // (mean) or alone (sum), from ce_tvd_row_weights.
        Value gCe = k.load(weights, k.constant(0, DType::I32));
        Value gTvd = k.load(weights, k.constant(1, DType::I32));
        // Pass 3. Each element is read before it is written, by the same
        // program, so the gradient may overwrite the student in place.
        // d/dx_v = gCe (p_v - [v = y]) + gTvd / 2 p_v (sign_v - sigma)
        //        = p_v c(sign_v) for v != y, with the three values of
        // c(s) = gCe + gTvd / 2 (s - sigma) formed once per row.
        Value half = 0.5 * gTvd;
        Value cTie = gCe - half * st.sigma;
        Value cAbove = cTie + half, cBelow = cTie - half;
        // The fast form's p times st.pScaleS is p (log2OffsetScale); the
        // scale goes into the constants.
        auto pScaled = [&](Value c, bool fast) {
          return fast ? c * st.pScaleS : c;
        };
        auto gradFromLogits = [&](bool fast) {
          Value above = pScaled(cAbove, fast), below = pScaled(cBelow, fast);
          Value tie = pScaled(cTie, fast);
          forEachTile(k, r, [&](const SliceTile &x) {
            // One exp per element: the sign of p - q comes from log2 p and
            // log2 q in the form pass 2's did, as pass 2 took it: the sign
            // bit of their difference in the fast form (a +0 gap is +, as
            // copysign gave sigma), three-way in the exact form (the
            // difference has the sign of p - q: it is never subnormal, see
            // signedByDifference).
            Value lp = st.log2P(x.s, fast), lq = st.log2Q(x.t, fast);
            Value c =
                fast ? where(copysign(k.constant(1, DType::F32), lp - lq) > 0.0,
                             above, below)
                     : where(lp > lq, above, where(lp < lq, below, tie));
            k.store(g, x.offs, exp2(lp) * c, x.mask);
          });
        };
        // From the kept p sign: p c(sign) = |p sign| cTie + gTvd / 2 p sign
        // where no element of the slice ties; a program that met a tie
        // re-reads its inputs. A kept scale (exactly: a power of 2) and the
        // fast form's come off the constants.
        auto gradFromKept = [&] {
          Value cKept = cTie, halfKept = half;
          if (st.fastSigns.valid()) {
            cKept = cKept * st.lastWalkPScale();
            halfKept = halfKept * st.lastWalkPScale();
          }
          if (scale) {
            cKept = cKept * (1 / *scale);
            halfKept = halfKept * (1 / *scale);
          }
          forEachTile(
              k, r,
              [&](const SliceTile &x) {
                Value u =
                    k.load(kept, x.offs - r.start, x.mask, 0.0).to(DType::F32);
                k.store(g, x.offs, abs(u) * cKept + halfKept * u, x.mask);
              },
              Walk{/*backward=*/false, /*student=*/false, /*teacher=*/false});
        };
        if (kept.valid())
          // A slice with a tie had its pass 2 signs from the exact form.
          k.ifThen(st.noTies, gradFromKept, [&] { gradFromLogits(false); });
        else
          inSignForm(k, st, gradFromLogits);
        // The target's element, rewritten once by the program whose slice
        // holds it (after every lane's store above), with p_y - 1 formed
        // in fp32: exact for p_y >= 1/2, where p_y c - gCe would cancel.
        k.barrier();
        k.ifThen(
            r.y >= r.start.to(DType::I64) && r.y < r.end.to(DType::I64), [&] {
              // p_y in the exact form, its sign as sigma's: from the kept p
              // sign (its sign bit, which survives an underflow to +-0,
              // after the fast walk or an exact one without ties; three-way
              // after an exact one with, whose ties kept 0), else from the
              // logs in the row's form.
              Value ty = k.load(r.t, r.y);
              Value lp = log2SoftmaxAt(st.targetLogit, st.maxS, st.logSumS);
              Value lq = log2SoftmaxAt(ty, st.maxT, st.logSumT);
              Value p = exp2(lp);
              Value pSign;
              if (kept.valid()) {
                Value at = r.y.to(DType::I32) - r.start;
                Value u = k.load(kept, at).to(DType::F32);
                pSign = where(st.noTies, copysign(p, u), p * sign(u));
              } else if (st.fastSigns.valid()) {
                Value fastGap =
                    st.log2P(st.targetLogit, true) - st.log2Q(ty, true);
                pSign = where(st.fastSigns, copysign(p, fastGap),
                              signedByDifference(p, lp - lq));
              } else {
                pSign = signedByDifference(p, lp - lq);
              }
              k.store(g, r.y, gCe * (p - 1.0) + half * (pSign - p * st.sigma));
            });
      },
      [&] {
        k.forTiles(r.start, r.end, k.param("BLOCK_SIZE"), 1,
                   [&](const std::vector<Value> &offs,
                       const std::vector<Mask> &masks) {
                     k.store(g, offs[0], zero, masks[0]);
                   });
      });
  k.ifThen(r.rank == 0.0, [&] {
    k.store(ceOut, r.row, ce);
    k.store(tvdOut, r.row, tvd);
  });
  return k.finish();
}

/// One program: n_valid and the loss weights of every row.
TileModule buildRowWeights(const Config &c) {
  KernelBuilder k("ce_tvd_row_weights", c);
  const int64_t BLOCK = k.param("BLOCK_SIZE");
  Value target = k.pointerArg("target", DType::I64);
  Value weights = k.pointerArg("weights", DType::F32);
  Value BT = k.scalarArg("BT", DType::I32);
  Value ignoreIndex = k.scalarArg("ignore_index", DType::I64);
  Value alpha = k.scalarArg("alpha", DType::F32);
  Value beta = k.scalarArg("beta", DType::F32);
  Value mean = k.scalarArg("mean", DType::I32);
  Var count = k.full(BLOCK, k.constant(0, DType::I32));
  k.forRange(0, BT, BLOCK, [&](Value i) {
    Value offs = i + k.arange(BLOCK);
    Value inBatch = offs < BT;
    Value y = k.load(target, offs, inBatch, 0);
    count = count + (inBatch && y != ignoreIndex).to(DType::I32);
  });
  Value n = count.sum().to(DType::F32);
  // An all-ignored batch gives loss 0 and zero gradients.
  Value scale = where(mean != 0.0, where(n > 0.0, 1.0 / n, 0.0),
                      k.constant(1, DType::F32));
  k.store(weights, k.constant(0, DType::I32), alpha * scale);
  k.store(weights, k.constant(1, DType::I32), beta * scale);
  k.store(weights, k.constant(2, DType::I32), n);
  return k.finish();
}

/// One program: loss = w_ce sum ce + w_tvd sum tvd, in a fixed order.
TileModule buildLossSum(const Config &c) {
  KernelBuilder k("ce_tvd_loss_sum", c);
  const int64_t BLOCK = k.param("BLOCK_SIZE");
  Value ceIn = k.pointerArg("ce", DType::F32);
  Value tvdIn = k.pointerArg("tvd", DType::F32);
  Value weights = k.pointerArg("weights", DType::F32);
  Value loss = k.pointerArg("loss", DType::F32);
  Value BT = k.scalarArg("BT", DType::I32);
  Value zero = k.full(BLOCK, k.constant(0, DType::F32));
  Var sumCe = zero, sumTvd = zero;
  k.forRange(0, BT, BLOCK, [&](Value i) {
    Value offs = i + k.arange(BLOCK);
    Value inBatch = offs < BT;
    sumCe = sumCe + k.load(ceIn, offs, inBatch, 0);
    sumTvd = sumTvd + k.load(tvdIn, offs, inBatch, 0);
  });
  Value gCe = k.load(weights, k.constant(0, DType::I32));
  Value gTvd = k.load(weights, k.constant(1, DType::I32));
  k.store(loss, k.constant(0, DType::I32),
          gCe * sumCe.sum() + gTvd * sumTvd.sum());
  return k.finish();
}

const std::vector<DType> kDtypes = {DType::BF16, DType::F16, DType::F32};
const std::vector<TuneKeyArg> kTuneKey = {{"BT", true}, {"V", false}};

/// The cluster kernels' tuning space; the defaults are the fastest configs
/// measured on the H200 at BT = 4096, V = 151936, bf16. 16 warps per program
/// never won in either kernel, so they are left to --set; UNROLL 1 never won
/// either, so the tuner keeps its default.
/// REGISTER_BUDGET 48 fits 5 programs of 8 warps per SM (the KEEP array allows
/// 5 at V = 151936), and COPY_AHEAD frees the registers that pass 1 held the
/// student's loads in: together, 1.207 to 1.131 ms for the reduced loss +
/// gradient, where either alone gained nothing or lost.
/// PREFETCH_L2 (1 step ahead in the reduced kernel, 2 in the forward): 1.120
/// to 1.110 ms and 0.852 to 0.835 ms; its other values are left to --set.
/// FAST_LOG2 (pass 2 in one fma per log-probability): bf16 1.111 to 1.077 ms
/// and 0.835 to 0.820 ms. With it, pass 2 takes one exp per pair where it
/// keeps no p sign (the max form): the bf16 forward 0.818-0.825 to
/// 0.781-0.795 ms. Its walk looks for ties per row, not per pair, which
/// makes it as fast or faster for f16 and fp32 too (fp32 forward 1.385 to
/// 1.324 ms, f16 1.214 to 1.106 ms).
std::vector<ParamSpec> clusterParams(int64_t cluster, int64_t block,
                                     int64_t copyAhead, int64_t prefetch,
                                     const char *clusterHelp) {
  return {{"CLUSTER_SIZE", {2, 4, 8, 16}, cluster, clusterHelp},
          {"BLOCK_SIZE", {1024, 2048}, block, "vocab elements per tile"},
          {"num_warps", {4, 8}, 8, "warps per program"},
          {"UNROLL",
           {1, 2},
           2,
           "tiles per loop step, whose loads are all in flight before the "
           "step's math",
           /*tuned=*/false},
          {"COPY_AHEAD",
           {0, 1, 2},
           copyAhead,
           "with KEEP, pass 1 copies the student's tiles into the KEEP "
           "array this many loop steps before it reads them (cp.async), "
           "without holding registers; 0: loads them through "
           "registers"},
          {"PREFETCH_L2",
           {0, 1, 2},
           prefetch,
           "pass 1 asks for the inputs it loads this many loop steps "
           "later into L2 (cp.async.bulk.prefetch, sm_90), holding no "
           "registers; 0: no prefetch",
           /*tuned=*/false},
          {"FAST_LOG2",
           {0, 1},
           1,
           "1: pass 2 forms log2 p and log2 q in one fma each and signs p "
           "by a sign copy (where no p sign is kept: one exp2 of "
           "max(log2 p, log2 q) per pair), walking again in the exact form "
           "where a row's student and teacher offsets are equal (a tie is then "
           "likely) or 128 or more; 0: the exact form only",
           /*tuned=*/false},
          {"REGISTER_BUDGET",
           {48, 64},
           64,
           "registers per thread the launch bounds plan for: as many "
           "programs per SM as this and the KEEP array allow (ptxas may "
           "use more where the array allows fewer). By default 48 for bf16 "
           "rows of a multiple of 16 bytes, where 5 programs per SM fit "
           "without spills; 64 otherwise"}};
}

/// Each program's share of a row of V, a whole number of tiles.
int64_t sliceOf(const dsl::Config &c, int64_t V) {
  int64_t cluster = c.get("CLUSTER_SIZE"), block = c.get("BLOCK_SIZE");
  int64_t slice = (V + cluster - 1) / cluster;
  return (slice + block - 1) / block * block;
}

/// Shared memory the cluster kernels take besides the KEEP array (block
/// reductions, cluster slots and mbarriers), rounded up: 864 bytes at most
/// (clusters of 16).
constexpr int64_t kStaticSharedBytes = 2048;

/// The largest KEEP array a program can have.
constexpr int64_t kMaxKeptBytes = kMaxSharedArrayBytes - kStaticSharedBytes;

/// Bytes of the KEEP array of a program of `c` for rows of V.
int64_t keptBytes(const dsl::Config &c, int64_t V) {
  return sliceOf(c, V) * int64_t(dtypeSize(c.dtype));
}

/// min_programs_per_sm (the launch bounds' minimum blocks): as many programs
/// per SM as REGISTER_BUDGET registers per thread and the KEEP array allow,
/// so that ptxas keeps under the registers that many programs leave. Uncapped,
/// ptxas gave the KEEP kernel 77 registers (3 programs of 8 warps per SM),
/// 12% slower than at 64 (1.557 against 1.384 ms).
void deriveProgramsPerSm(dsl::Config &c, int64_t V) {
  constexpr int64_t kRegistersPerSm = 65536, kSharedPerSm = 228 * 1024;
  int64_t programs =
      kRegistersPerSm / (c.get("REGISTER_BUDGET") * 32 * c.get("num_warps"));
  if (c.get("KEEP")) // each program also reserves 1 KiB for the system
    programs = std::min(
        programs, kSharedPerSm / (keptBytes(c, V) + kStaticSharedBytes + 1024));
  c.params["min_programs_per_sm"] = std::max<int64_t>(1, programs);
}

/// SLICE, each program's share of a row; refuses a KEEP array that does
/// not fit in a block's shared memory; ALIGNED; COPY_AHEAD 0 where it has
/// no effect (no KEEP), so that configs print what runs;
/// min_programs_per_sm.
void deriveSlice(dsl::Config &c, const std::map<std::string, int64_t> &shape) {
  auto v = shape.find("V");
  if (v == shape.end() || v->second <= 0)
    throw Error("CE+TVD cluster kernels: the shape needs V > 0");
  int64_t V = v->second, bytes = keptBytes(c, V);
  c.params["SLICE"] = sliceOf(c, V);
  deriveAligned(c, shape);
  if (c.get("KEEP") && bytes > kMaxKeptBytes)
    throw Error(
        "CE+TVD cluster kernels: KEEP=1 needs " + std::to_string(bytes) +
        " bytes of shared memory per program at V = " + std::to_string(V) +
        ", CLUSTER_SIZE = " + std::to_string(c.get("CLUSTER_SIZE")) +
        " (at most " + std::to_string(kMaxKeptBytes) +
        "); use a larger CLUSTER_SIZE or KEEP=0");
  if (!c.get("KEEP"))
    c.params["COPY_AHEAD"] = 0;
  deriveProgramsPerSm(c, V);
}

/// deriveSlice; IN_PLACE from the caller's entry of that name (absent: 1,
/// the form that is right either way).
void deriveLossGrad(dsl::Config &c,
                    const std::map<std::string, int64_t> &shape) {
  deriveSlice(c, shape);
  setSwitchFromProblem(c, shape, "IN_PLACE", true);
}

/// Defaults by shape, for what `overridden` leaves: CLUSTER_SIZE, the largest
/// of 2, 4 and 8 that leaves each program a slice of at least 16000
/// elements (measured on the H200: 8 at V = 151936 and 128256, 2 at V =
/// 32000, where 8 programs of 4000 elements ran 1.6x slower); KEEP on where
/// its array fits. Both cluster kernels take them: as the combines need no
/// cluster barrier, the bf16 forward is faster this way than with 2 programs
/// and no KEEP at every shape measured (0.896 against 0.929 ms at BT 4096,
/// V 151936).
/// REGISTER_BUDGET 48 for bf16 with aligned rows, measured faster in both
/// kernels; 64 elsewhere, where 48 made ptxas spill (f16, f32 at small V,
/// unaligned bf16).
void defaultsByVocab(dsl::Config &c,
                     const std::map<std::string, int64_t> &shape,
                     const std::set<std::string> &overridden) {
  auto v = shape.find("V");
  if (v == shape.end())
    return;
  if (!overridden.count("CLUSTER_SIZE")) {
    int64_t cluster = 2;
    while (cluster < 8 && v->second / (2 * cluster) >= 16000)
      cluster *= 2;
    c.params["CLUSTER_SIZE"] = cluster;
  }
  if (!overridden.count("KEEP"))
    c.params["KEEP"] = keptBytes(c, v->second) <= kMaxKeptBytes;
  if (!overridden.count("REGISTER_BUDGET"))
    c.params["REGISTER_BUDGET"] =
        c.dtype == DType::BF16 && rowsAreAligned(c, shape) ? 48 : 64;
}

constexpr const char *kClusterHelp =
    "programs (blocks) per row; by default the largest of 2, 4, 8 that "
    "leaves each program 16000 or more elements of V";

std::vector<ParamSpec> singleProgramParams() {
  return {{"BLOCK_SIZE", {1024}, 1024, "rows per tile"},
          {"num_warps", {8}, 8, "warps per program"}};
}

} // namespace

KernelSpec fusedCeTvdForwardClusterSpec() {
  // No COPY_AHEAD by default: without a pass 3 the forward fits 48
  // registers anyway, and copying ahead was slower there (0.880 ms against
  // 0.907-0.965 for 1-3 steps ahead).
  // Its pass 1 prefetches both inputs 2 steps ahead.
  std::vector<ParamSpec> params = clusterParams(8, 2048, 0, 2, kClusterHelp);
  params.push_back({"KEEP",
                    {0, 1},
                    1,
                    "1: a shared array keeps the student's slice from pass 1, "
                    "so pass 2 re-reads only the teacher; by default 1 where "
                    "it fits in shared memory"});
  KernelSpec s{"fused_ce_tvd_fwd_cluster",
               "CE+TVD forward, each row split over a cluster of programs "
               "(sm_90)",
               params,
               kDtypes,
               buildForwardCluster,
               kTuneKey};
  s.shapeDefaults = defaultsByVocab;
  s.deriveParams = deriveSlice;
  return s;
}

KernelSpec fusedCeTvdLossGradSpec() {
  std::vector<ParamSpec> params = clusterParams(8, 2048, 1, 1, kClusterHelp);
  params.push_back({"KEEP",
                    {0, 1},
                    1,
                    "1: a shared array keeps the student's slice from pass 1 "
                    "(pass 2 re-reads only the teacher), then p sign(p - q) "
                    "from pass 2, rounded to the gradient's dtype (f16 "
                    "scaled by 2^15) (pass 3 "
                    "re-reads nothing unless pass 2 took its exact form and "
                    "met a tie); 0: passes "
                    "2 and 3 re-read both inputs. By default 1 where the "
                    "array fits in shared memory"});
  KernelSpec s{"fused_ce_tvd_loss_grad",
               "CE+TVD reduced loss terms and the student gradient in one "
               "launch, each row split over a cluster of programs (sm_90)",
               params,
               kDtypes,
               buildLossGrad,
               // In place, the gradient's stores go over the rows being read:
               // an entry of its own.
               {{"BT", true}, {"V", false}, {"IN_PLACE", false}}};
  s.shapeDefaults = defaultsByVocab;
  s.deriveParams = deriveLossGrad;
  return s;
}

KernelSpec ceTvdRowWeightsSpec() {
  return {"ce_tvd_row_weights",
          "n_valid and the per-row loss weights of the reduced CE+TVD",
          singleProgramParams(),
          {DType::F32},
          buildRowWeights,
          {}};
}

KernelSpec ceTvdLossSumSpec() {
  return {"ce_tvd_loss_sum",     "the reduced CE+TVD loss from per-row terms",
          singleProgramParams(), {DType::F32},
          buildLossSum,          {}};
}

} // namespace tilejit
