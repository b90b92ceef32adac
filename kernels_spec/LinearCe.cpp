//===- LinearCe.cpp - the per-chunk programs of the fused linear CE -------===//
//
// The chunk loop of the linear cross-entropy (docs/semantics.md §2) is:
// logits of a chunk of rows = h_chunk W^T (+ b); lce_logits_grad turns them,
// row by row, into the loss terms and, in place, into d loss / d logits;
// then dh_chunk = dz W and dW += dz^T h_chunk. The GEMMs are cuBLASLt's or
// lce_gemm's (LinearCeGemm.cpp); these programs are everything between
// them, and lce_logits, the logits GEMM with each row's max and sum-exp per
// block of columns folded into its epilogue, so that lce_logits_grad
// (PARTIALS=1) need not walk the row for them.
//
//===----------------------------------------------------------------------===//
#include "kernels_spec/LinearCe.h"

#include "kernels_spec/GemmProgram.h"
#include "kernels_spec/SoftmaxParts.h"

#include "tilejit/Error.h"

using namespace tilejit::dsl;

namespace tilejit {
namespace {

/// softcap(z) = c tanh(z / c) when c > 0; masked lanes (-inf) stay -inf.
Value softcapped(Value z, Value c, Value useCap) {
  return where(useCap && z != kNegInf, c * tanh(z / c), z);
}

TileModule buildLogitsGrad(const Config &cfg) {
  KernelBuilder k("lce_logits_grad", cfg);
  applyAligned(k);
  const int64_t BLOCK = k.param("BLOCK_SIZE");
  // Features compiled in (lceProblemFlags): a plain cross-entropy pays for
  // no tanh, division or extra load per element.
  const bool SOFTCAP = k.param("SOFTCAP"), SMOOTHING = k.param("SMOOTHING"),
             Z_LOSS = k.param("Z_LOSS"), BIAS = k.param("BIAS"),
             CLASS_WEIGHT = k.param("CLASS_WEIGHT");
  // NARROW_LOGITS: the GEMM wrote the logits in the input dtype (as
  // PyTorch's h @ W.T does) and dz overwrites them in place.
  // dz is written over the logits when both have one dtype; only then do
  // the two pointers give up __restrict__.
  const DType logitsType = k.param("NARROW_LOGITS") ? cfg.dtype : DType::F32;
  const bool inPlace = logitsType == cfg.dtype;
  auto pointer = [&](const char *name, DType t) {
    return inPlace ? k.aliasedPointerArg(name, t) : k.pointerArg(name, t);
  };
  Value logits = pointer("logits", logitsType);
  Value dzOut = pointer("dz", cfg.dtype);
  Value bias = k.pointerArg("bias", DType::F32);
  Value target = k.pointerArg("target", DType::I64);
  Value classWeight = k.pointerArg("class_weight", DType::F32);
  Value stats = k.pointerArg("stats", DType::F32);
  Value gradOutput = k.pointerArg("grad_output", DType::F32);
  Value rowLoss = k.pointerArg("row_loss", DType::F32);
  Value rowZLoss = k.pointerArg("row_z_loss", DType::F32);
  Value lseOut = k.pointerArg("lse", DType::F32);
  Value V = k.scalarArg("V", DType::I32);
  Value rowStride = k.scalarArg("row_stride", DType::I64);
  Value dzStride = k.scalarArg("dz_stride", DType::I64);
  Value firstRow = k.scalarArg("first_row", DType::I32);
  Value ignoreIndex = k.scalarArg("ignore_index", DType::I64);
  Value eps = k.scalarArg("label_smoothing", DType::F32);
  Value zLoss = k.scalarArg("z_loss", DType::F32);
  Value cap = k.scalarArg("softcap", DType::F32);
  Value hasBias = k.scalarArg("has_bias", DType::I32) != 0.0;
  Value hasWeight = k.scalarArg("has_class_weight", DType::I32) != 0.0;
  Value perRowUpstream = k.scalarArg("per_row_upstream", DType::I32) != 0.0;
  Value dzScale = k.scalarArg("dz_scale", DType::F32);
  Value partialMax = k.pointerArg("row_max", DType::F32);
  Value partialSum = k.pointerArg("row_sum", DType::F32);
  Value statsLd = k.scalarArg("stats_ld", DType::I64);
  Value blocks = k.scalarArg("blocks", DType::I32);

  Value local = k.programId(0); // row within the chunk
  Value row = local + firstRow; // row within the batch
  Value z = logits + local.to(DType::I64) * rowStride;
  Value dz = dzOut + local.to(DType::I64) * dzStride;
  Value y = k.load(target, row);
  Value useCap = cap > 0.0;
  // A target outside [0, V) (lce_row_weights reports it) counts as ignored:
  // loss and gradient 0, and no read outside the row.
  Value valid = y != ignoreIndex && y >= 0.0 && y < V.to(DType::I64);
  // An ignored row's target may be anything; read class 0 instead.
  Value yIdx = where(valid, y, k.constant(0, DType::I64));
  Value y32 = yIdx.to(DType::I32);
  Value f32Zero = k.constant(0, DType::F32);
  Value zero = k.full(BLOCK, f32Zero);
  Value wy = CLASS_WEIGHT ? k.load(classWeight, yIdx, hasWeight, 1.0)
                          : k.constant(1, DType::F32);
  auto weightAt = [&](Value offs, Value mask) {
    return where(mask, k.load(classWeight, offs, mask && hasWeight, 1.0), zero);
  };
  // The raw logit (GEMM output plus bias) and its softcapped value. `mask`
  // is std::nullopt for a tile wholly inside the row.
  auto logitAt = [&](Value offs, Mask mask) {
    Value raw = k.load(z, offs, mask, kNegInf).to(DType::F32);
    if (BIAS)
      raw = raw + k.load(bias, offs, (mask ? *mask : offs < V) && hasBias, 0.0);
    return std::make_pair(raw, SOFTCAP ? softcapped(raw, cap, useCap) : raw);
  };

  // Both passes walk the row UNROLL tiles per step and issue all of a
  // step's loads before using them: more bytes in flight per thread. The
  // steps and the tail's whole tiles have no masks, only the last partial
  // tile (fewer instructions per element: this loop is as much issue- as
  // memory-bound).
  const int64_t UNROLL = k.param("UNROLL");
  // Each unrolled tile is code and registers: more than 16 only bloats.
  if (UNROLL < 1 || UNROLL > 16)
    throw Error("lce_logits_grad: UNROLL must be in 1..16 (got " +
                std::to_string(UNROLL) + ")");
  using Tiles = const std::vector<Value> &;
  using Masks = const std::vector<Mask> &;
  auto forEachStep = [&](const std::function<void(Tiles, Masks)> &fn) {
    k.forTiles(k.constant(0, DType::I32), V, BLOCK, UNROLL, fn);
  };

  // The target logit: one load (an ignored row reads nothing), before any
  // barrier: with dz written over the logits in place, another warp's pass
  // 2 may overwrite it once pass 1's reductions are behind us.
  Value zy = logitAt(y32, valid).second;

  // Pass 1: the row's max and sum-exp, per lane: from the logits, or from
  // the per-block partials lce_logits folded in its epilogue.
  Var m = k.full(BLOCK, k.constant(kNegInf, DType::F32)), d = zero;
  if (k.param("PARTIALS")) {
    Value at = local.to(DType::I64) * statsLd;
    k.forRange(0, blocks, BLOCK, [&](Value j0) {
      Value j = j0 + k.arange(BLOCK);
      Value in = j < blocks;
      mergeState(m, d, k.load(partialMax + at, j, in, kNegInf),
                 k.load(partialSum + at, j, in, 0.0));
    });
  } else {
    forEachStep([&](Tiles offs, Masks masks) {
      std::vector<Value> x;
      for (size_t u = 0; u < offs.size(); ++u)
        x.push_back(logitAt(offs[u], masks[u]).second);
      onlineUpdateLanes(m, d, x);
    });
  }
  auto [rowMax, sumExp] = rowNormalizer(m, d);
  Value shift = safeShift(rowMax);
  Value logSum = log(sumExp);
  Value lse = shift + logSum;

  // Upstream factors of the CE part and of the (unweighted) z-loss part:
  // 1 / sum of w_y and 1 / n_valid (mean), 1 (sum), or the row's upstream
  // gradient (none).
  Value upstream = k.load(gradOutput, row, perRowUpstream, 0.0);
  auto factor = [&](int index) {
    return where(valid,
                 where(perRowUpstream, upstream,
                       k.load(stats, k.constant(index, DType::I32))),
                 f32Zero);
  };
  Value gCe = factor(0), gZ = factor(1);
  Value wSum = k.load(stats, k.constant(2, DType::I32));
  Value epsOverV = eps / V.to(DType::F32);
  // p - [v == y] is exact where p rounds to 1 (Sterbenz), so a confident
  // row's target gradient keeps its digits; the other terms add to it.
  Value targetFactor = gCe * (1.0 - eps) * wy;
  Value zFactor = gZ * 2.0 * zLoss * lse;
  // Pass 2: d loss / d logits, and sum_v w_v (z_v - max) for the smoothing
  // term (differences against the max keep a large common offset exact).
  Var wzShifted = zero;
  forEachStep([&](Tiles offs, Masks masks) {
    std::vector<std::pair<Value, Value>> z;
    for (size_t u = 0; u < offs.size(); ++u)
      z.push_back(logitAt(offs[u], masks[u]));
    for (size_t u = 0; u < offs.size(); ++u) {
      Value o = offs[u], inRow = o < V, zc = z[u].second;
      Value p = exp((zc - shift) - logSum);
      Value dzc = targetFactor * (p - (o == y32).to(DType::F32));
      if (SMOOTHING) {
        Value w = weightAt(o, inRow);
        wzShifted = wzShifted + w * where(inRow, zc - shift, zero);
        dzc = dzc + gCe * epsOverV * (wSum * p - w);
      }
      if (Z_LOSS)
        dzc = dzc + zFactor * p;
      if (SOFTCAP) {
        // Chain rule through the softcap: d(c tanh(r/c))/dr = 1 - tanh^2.
        Value t = zc / cap;
        dzc = dzc * where(useCap, 1.0 - t * t, 1.0 + zero);
      }
      k.store(dz, o, dzScale * dzc, masks[u]);
    }
  });
  // PyTorch's convention: the NLL term weighted by w_y, the smoothing term by
  // w_v inside the sum (reference/LinearCeReference.h).
  Value nll = (1.0 - eps) * wy * (logSum - (zy - shift));
  Value rowTerm = nll;
  // (Without smoothing the term is skipped: 0 * inf for -inf logits.)
  if (SMOOTHING)
    rowTerm =
        rowTerm +
        where(eps > 0.0, epsOverV * (wSum * logSum - wzShifted.sum()), f32Zero);
  Value zTerm = Z_LOSS ? zLoss * lse * lse : f32Zero;
  k.store(rowLoss, row, where(valid, rowTerm + zTerm, f32Zero));
  k.store(rowZLoss, row, where(valid, zTerm, f32Zero));
  k.store(lseOut, row, where(valid, lse, f32Zero));
  return k.finish();
}

TileModule buildLogits(const Config &cfg) {
  KernelBuilder k("lce_logits", cfg);
  const int64_t BM = k.param("BLOCK_M"), BN = k.param("BLOCK_N");
  // The per-row values are a tile of BLOCK_M elements, and a tile holds a
  // multiple of the program's threads.
  const int64_t threads = 32 * k.param("num_warps");
  if (BM % threads != 0)
    throw Error("lce_logits: BLOCK_M (" + std::to_string(BM) +
                ") must be a multiple of 32 num_warps (" +
                std::to_string(threads) + ")");
  const bool SOFTCAP = k.param("SOFTCAP"), BIAS = k.param("BIAS");
  const DType logitsType = k.param("NARROW_LOGITS") ? cfg.dtype : DType::F32;
  Value h = k.pointerArg("h", cfg.dtype);
  Value W = k.pointerArg("W", cfg.dtype);
  Value logits = k.pointerArg("logits", logitsType);
  Value bias = k.pointerArg("bias", DType::F32);
  Value rowMax = k.pointerArg("row_max", DType::F32);
  Value rowSum = k.pointerArg("row_sum", DType::F32);
  Value rows = k.scalarArg("rows", DType::I32);
  Value V = k.scalarArg("V", DType::I32);
  Value d = k.scalarArg("d", DType::I32);
  Value ldh = k.scalarArg("ldh", DType::I64);
  Value ldw = k.scalarArg("ldw", DType::I64);
  Value ldLogits = k.scalarArg("ld_logits", DType::I64);
  Value statsLd = k.scalarArg("stats_ld", DType::I64);
  Value cap = k.scalarArg("softcap", DType::F32);
  Value hasBias = k.scalarArg("has_bias", DType::I32) != 0.0;

  // z = h W^T: W (V x d) read as the d x V view W^T.
  GemmBlock b = gemmBlock(k, matrixView(k, h, rows, d, ldh, false),
                          matrixView(k, W, d, V, ldw, true), d);
  Value inZ = b.row < rows && b.col < V;
  Value z = b.acc.to(logitsType);
  k.store(logits, b.row.to(DType::I64) * ldLogits + b.col.to(DType::I64), z,
          inZ);
  // The row's terms from the logits as stored, which lce_logits_grad reads
  // back for the gradient: the two then agree on every softmax probability.
  Value x = z.to(DType::F32);
  if (BIAS)
    x = x + k.load(bias, b.col, inZ && hasBias, 0.0);
  if (SOFTCAP)
    x = softcapped(x, cap, cap > 0.0);
  x = where(inZ, x, kNegInf);
  Value m = x.maxRows(BN);
  Value s = exp(x - k.broadcastRows(safeShift(m), BN)).sumRows(BN);
  Value r = b.m0 + k.arange(BM);
  Value at = r.to(DType::I64) * statsLd + b.pn.to(DType::I64);
  k.store(rowMax, at, m, r < rows);
  k.store(rowSum, at, s, r < rows);
  return k.finish();
}

/// One program: the mean's denominator and the smoothing term's sum of
/// class weights, and 1 + the last row whose target is outside [0, V) and
/// not ignore_index (0: none) in bad_target, so that the targets are
/// checked on the device, without a host synchronization.
TileModule buildRowWeights(const Config &cfg) {
  KernelBuilder k("lce_row_weights", cfg);
  const int64_t BLOCK = k.param("BLOCK_SIZE");
  Value target = k.pointerArg("target", DType::I64);
  Value classWeight = k.pointerArg("class_weight", DType::F32);
  Value stats = k.pointerArg("stats", DType::F32);
  Value badTarget = k.pointerArg("bad_target", DType::I32);
  Value N = k.scalarArg("N", DType::I32);
  Value V = k.scalarArg("V", DType::I32);
  Value ignoreIndex = k.scalarArg("ignore_index", DType::I64);
  Value hasWeight = k.scalarArg("has_class_weight", DType::I32) != 0.0;
  Value mean = k.scalarArg("mean", DType::I32) != 0.0;
  Value zero = k.full(BLOCK, k.constant(0, DType::F32));
  Var den = zero, count = zero;
  Var bad = k.full(BLOCK, k.constant(0, DType::I32));
  k.forRange(0, N, BLOCK, [&](Value i) {
    Value offs = i + k.arange(BLOCK);
    Value inBatch = offs < N;
    Value y = k.load(target, offs, inBatch, 0.0);
    Value counted = inBatch && y != ignoreIndex;
    Value inVocab = y >= 0.0 && y < V.to(DType::I64);
    Value valid = counted && inVocab;
    bad = max(bad, where(counted && !inVocab, offs + 1, bad));
    den = den +
          where(valid, k.load(classWeight, y, valid && hasWeight, 1.0), zero);
    count = count + where(valid, 1.0, zero);
  });
  k.store(badTarget, k.constant(0, DType::I32), bad.max());
  Var wSum = zero;
  k.forRange(0, V, BLOCK, [&](Value i) {
    Value offs = i + k.arange(BLOCK);
    Value mask = offs < V;
    wSum = wSum +
           where(mask, k.load(classWeight, offs, mask && hasWeight, 1.0), zero);
  });
  // An all-ignored batch gives loss 0 and zero gradients, not 0/0.
  auto scale = [&](Value total) {
    return where(mean, where(total > 0.0, 1.0 / total, 0.0),
                 k.constant(1, DType::F32));
  };
  Value total = den.sum(), nValid = count.sum();
  k.store(stats, k.constant(0, DType::I32), scale(total));
  k.store(stats, k.constant(1, DType::I32), scale(nValid));
  k.store(stats, k.constant(2, DType::I32), wSum.sum());
  k.store(stats, k.constant(3, DType::I32), total);
  k.store(stats, k.constant(4, DType::I32), nValid);
  return k.finish();
}

/// One program: the reduced loss and its z-loss part, in a fixed order.
TileModule buildLossSum(const Config &cfg) {
  KernelBuilder k("lce_loss_sum", cfg);
  const int64_t BLOCK = k.param("BLOCK_SIZE");
  Value rowLoss = k.pointerArg("row_loss", DType::F32);
  Value rowZLoss = k.pointerArg("row_z_loss", DType::F32);
  Value stats = k.pointerArg("stats", DType::F32);
  Value loss = k.pointerArg("loss", DType::F32);
  Value N = k.scalarArg("N", DType::I32);
  Value zero = k.full(BLOCK, k.constant(0, DType::F32));
  Var ce = zero, z = zero;
  k.forRange(0, N, BLOCK, [&](Value i) {
    Value offs = i + k.arange(BLOCK);
    Value in = offs < N;
    Value zl = k.load(rowZLoss, offs, in, 0.0);
    ce = ce + (k.load(rowLoss, offs, in, 0.0) - zl);
    z = z + zl;
  });
  Value gCe = k.load(stats, k.constant(0, DType::I32));
  Value gZ = k.load(stats, k.constant(1, DType::I32));
  Value zTotal = gZ * z.sum();
  k.store(loss, k.constant(0, DType::I32), gCe * ce.sum() + zTotal);
  k.store(loss, k.constant(1, DType::I32), zTotal);
  return k.finish();
}

std::vector<ParamSpec> rowParams() {
  return {{"BLOCK_SIZE", {2048, 4096}, 2048, "vocab elements per tile"},
          {"num_warps", {4, 8, 16}, 8, "warps per program"},
          {"UNROLL", {1, 2}, 2, "tiles loaded per loop step"}};
}

/// What lce_logits_grad is specialized for, from the caller's `problem`
/// entries of the same names: the feature flags (an absent one compiles the
/// feature in: the general kernel) and NARROW_LOGITS (absent: f32 logits).
void lceProblemFlags(Config &c, const std::map<std::string, int64_t> &problem) {
  for (const char *feature :
       {"SOFTCAP", "SMOOTHING", "Z_LOSS", "BIAS", "CLASS_WEIGHT"})
    setSwitchFromProblem(c, problem, feature, true);
  setSwitchFromProblem(c, problem, "NARROW_LOGITS", false);
  setSwitchFromProblem(c, problem, "PARTIALS", false);
  deriveAligned(c, problem);
}

} // namespace

KernelSpec linearCeLogitsGradSpec() {
  KernelSpec s{"lce_logits_grad",
               "linear CE: loss terms of a chunk of logits rows, and d loss / "
               "d logits in place",
               rowParams(),
               {DType::BF16, DType::F16, DType::F32},
               buildLogitsGrad,
               {{"N", true}, {"V", false}}};
  s.deriveParams = lceProblemFlags;
  return s;
}

KernelSpec linearCeLogitsSpec() {
  // 256 x 128 blocks: as many products per byte copied as lce_gemm's
  // 128 x 256, with BLOCK_M a multiple of the 256 threads.
  std::vector<ParamSpec> params = gemmScheduleParams();
  for (ParamSpec &p : params)
    if (p.name == "BLOCK_M")
      p = {"BLOCK_M", {256}, 256, p.help};
    else if (p.name == "BLOCK_N") // 256 x 256 sums do not fit a program
      p = {"BLOCK_N", {64, 128}, 128, p.help};
    else if (p.name == "num_warps") // two warpgroups: 128 f32 sums a thread
      p = {"num_warps", {8}, 8, p.help};
  KernelSpec s{"lce_logits",
               "linear CE: a chunk's logits h W^T on tensor cores, with "
               "each row's max and sum-exp per block of columns",
               params,
               {DType::BF16, DType::F16},
               buildLogits,
               {{"rows", false}, {"V", false}, {"d", false}}};
  s.deriveParams = lceProblemFlags;
  return s;
}

KernelSpec linearCeLossSumSpec() {
  return {"lce_loss_sum",
          "linear CE: the reduced loss and z-loss from per-row terms",
          {{"BLOCK_SIZE", {1024}, 1024, "rows per tile"},
           {"num_warps", {8}, 8, "warps per program"}},
          {DType::F32},
          buildLossSum,
          {}};
}

KernelSpec linearCeRowWeightsSpec() {
  return {"lce_row_weights",
          "linear CE: the mean's denominator and the sum of class weights",
          {{"BLOCK_SIZE", {1024}, 1024, "rows per tile"},
           {"num_warps", {8}, 8, "warps per program"}},
          {DType::F32},
          buildRowWeights,
          {}};
}

} // namespace tilejit
