//===- FusedCeTvdOnChip.cpp - CE+TVD with each row held on chip -----------===//
//
// A row is split over the CLUSTER_SIZE programs of a thread-block cluster;
// each program loads its BLOCK_SIZE-wide slice of the student and teacher
// rows once and keeps it in registers while the row's max, sum-exp, TVD and
// sigma are combined across the cluster (tile.cluster_reduce, distributed
// shared memory on sm_90). The logits are read from memory exactly once.
//
//===----------------------------------------------------------------------===//
#include "kernels_spec/FusedCeTvd.h"

#include "tilejit/Error.h"

#include <limits>

using namespace tilejit::dsl;

namespace tilejit {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();
/// Logits of each row kept per thread and tensor (two f32 registers each,
/// student and teacher); beyond this the slice spills out of registers.
constexpr int64_t kMaxOnChipPerThread = 48;
using CO = KernelBuilder::ClusterOp;

/// Per-row results of one on-chip row, identical in every program of the
/// cluster.
struct OnChipRow {
  Value ce, tvd, sigma, maxS, logSumS, maxT, logSumT;
  Value p, q, diff; ///< this program's slice of softmax(s), softmax(t), p - q
};

/// The CE+TVD math of semantics.md §1 on a row whose slice `xs`, `xt` (f32,
/// -inf where masked) this program holds. p and q are formed by the same
/// operations, so a teacher equal to the student gives p == q bit for bit.
OnChipRow onChipRow(KernelBuilder &k, Value xs, Value xt, Value offs,
                    Value y) {
  OnChipRow r;
  auto m = k.clusterReduce(CO::Max, {xs.max(), xt.max()});
  // A row that is entirely -inf shifts by 0 (exp(-inf) = 0, no NaN).
  Value es = exp(xs - where(m[0] == kNegInf, 0.0, m[0]));
  Value et = exp(xt - where(m[1] == kNegInf, 0.0, m[1]));
  // The target logit comes from the registers of the program holding it (a
  // second read could see a gradient already written in place).
  Value syLocal = where(offs.to(DType::I64) == y, xs, 0.0).sum();
  auto d = k.clusterReduce(CO::Sum, {es.sum(), et.sum(), syLocal});
  r.p = es * where(d[0] > 0.0, 1.0 / d[0], 0.0);
  r.q = et * where(d[1] > 0.0, 1.0 / d[1], 0.0);
  r.diff = r.p - r.q;
  auto t = k.clusterReduce(CO::Sum,
                           {abs(r.diff).sum(), (r.p * sign(r.diff)).sum()});
  r.tvd = 0.5 * t[0];
  r.sigma = t[1];
  r.maxS = m[0];
  r.logSumS = log(d[0]);
  r.maxT = m[1];
  r.logSumT = log(d[1]);
  // Differences against the row max keep the gap when logits share a large
  // offset (semantics.md §1).
  r.ce = r.logSumS - (d[2] - m[0]);
  return r;
}

/// The arguments and the slice every on-chip kernel starts from.
struct RowSlice {
  Value row, rank, s, t, y, V, offs, mask, ignored, inRange;
};

RowSlice rowSlice(KernelBuilder &k, Value student, Value teacher,
                  Value target, Value V, Value rowStride, Value ignoreIndex) {
  RowSlice r;
  const int64_t C = k.clusterSize(), BLOCK = k.param("BLOCK_SIZE");
  Value pid = k.programId(0);
  r.row = pid / double(C);
  r.rank = pid - r.row * double(C);
  Value rowOffset = r.row.to(DType::I64) * rowStride;
  r.s = student + rowOffset;
  r.t = teacher + rowOffset;
  r.y = k.load(target, r.row);
  r.V = V;
  r.offs = r.rank * double(BLOCK) + k.arange(BLOCK);
  r.mask = r.offs < V;
  r.ignored = r.y == ignoreIndex;
  r.inRange = r.y >= 0.0 && r.y < V.to(DType::I64);
  return r;
}

/// The row's bad target is reported once, by the cluster's first program.
void flagBadTarget(KernelBuilder &k, const RowSlice &r, Value badTarget) {
  k.ifThen(!r.ignored && !r.inRange && r.rank == 0.0, [&] {
    k.store(badTarget, k.constant(0, DType::I32), r.row + 1.0);
  });
}

std::pair<Value, Value> loadSlice(KernelBuilder &k, const RowSlice &r) {
  return {k.load(r.s, r.offs, r.mask, kNegInf).to(DType::F32),
          k.load(r.t, r.offs, r.mask, kNegInf).to(DType::F32)};
}

TileModule buildForwardOnChip(const Config &c) {
  KernelBuilder k("fused_ce_tvd_fwd_cluster", c);
  Value student = k.pointerArg("student", c.dtype);
  Value teacher = k.pointerArg("teacher", c.dtype);
  Value target = k.pointerArg("target", DType::I64);
  Value ceOut = k.pointerArg("ce", DType::F32);
  Value tvdOut = k.pointerArg("tvd", DType::F32);
  Value sigmaOut = k.pointerArg("sigma", DType::F32);
  Value maxSOut = k.pointerArg("max_s", DType::F32);
  Value logSumSOut = k.pointerArg("logsum_s", DType::F32);
  Value maxTOut = k.pointerArg("max_t", DType::F32);
  Value logSumTOut = k.pointerArg("logsum_t", DType::F32);
  Value badTarget = k.pointerArg("bad_target", DType::I32);
  Value V = k.scalarArg("V", DType::I32);
  Value rowStride = k.scalarArg("row_stride", DType::I64);
  Value ignoreIndex = k.scalarArg("ignore_index", DType::I64);

  RowSlice r = rowSlice(k, student, teacher, target, V, rowStride,
                        ignoreIndex);
  flagBadTarget(k, r, badTarget);
  Value zero = k.constant(0, DType::F32);
  Var ce = zero, tvd = zero, sigma = zero;
  Var maxS = zero, logSumS = zero, maxT = zero, logSumT = zero;
  k.ifThen(!r.ignored && r.inRange, [&] {
    auto [xs, xt] = loadSlice(k, r);
    OnChipRow o = onChipRow(k, xs, xt, r.offs, r.y);
    ce = o.ce;
    tvd = o.tvd;
    sigma = o.sigma;
    maxS = o.maxS;
    logSumS = o.logSumS;
    maxT = o.maxT;
    logSumT = o.logSumT;
  });
  k.ifThen(r.rank == 0.0, [&] {
    k.store(ceOut, r.row, ce);
    k.store(tvdOut, r.row, tvd);
    k.store(sigmaOut, r.row, sigma);
    k.store(maxSOut, r.row, maxS);
    k.store(logSumSOut, r.row, logSumS);
    k.store(maxTOut, r.row, maxT);
    k.store(logSumTOut, r.row, logSumT);
  });
  return k.finish();
}

TileModule buildLossGrad(const Config &c) {
  KernelBuilder k("fused_ce_tvd_loss_grad", c);
  Value student = k.pointerArg("student", c.dtype);
  Value teacher = k.pointerArg("teacher", c.dtype);
  Value target = k.pointerArg("target", DType::I64);
  Value weights = k.pointerArg("weights", DType::F32);
  Value ceOut = k.pointerArg("ce", DType::F32);
  Value tvdOut = k.pointerArg("tvd", DType::F32);
  Value grad = k.pointerArg("grad", c.dtype);
  Value badTarget = k.pointerArg("bad_target", DType::I32);
  Value V = k.scalarArg("V", DType::I32);
  Value rowStride = k.scalarArg("row_stride", DType::I64);
  Value gradStride = k.scalarArg("grad_stride", DType::I64);
  Value ignoreIndex = k.scalarArg("ignore_index", DType::I64);

  RowSlice r = rowSlice(k, student, teacher, target, V, rowStride,
                        ignoreIndex);
  flagBadTarget(k, r, badTarget);
  Value g = grad + r.row.to(DType::I64) * gradStride;
  Value zero = k.constant(0, DType::F32);
  Var ce = zero, tvd = zero;
  k.ifThen(
      !r.ignored && r.inRange,
      [&] {
        auto [xs, xt] = loadSlice(k, r);
        OnChipRow o = onChipRow(k, xs, xt, r.offs, r.y);
        ce = o.ce;
        tvd = o.tvd;
        // d loss / d ce_i and d loss / d tvd_i: alpha, beta over n_valid
        // (mean) or alone (sum), from ce_tvd_row_weights.
        Value gCe = k.load(weights, k.constant(0, DType::I32));
        Value gTvd = k.load(weights, k.constant(1, DType::I32));
        // p_y - 1 is formed in fp32 before the store rounds it.
        Value onehot = (r.offs.to(DType::I64) == r.y).to(DType::F32);
        Value dce = gCe * (o.p - onehot);
        Value dtvd = gTvd * 0.5 * o.p * (sign(o.diff) - o.sigma);
        k.store(g, r.offs, dce + dtvd, r.mask);
      },
      [&] { k.store(g, r.offs, zero, r.mask); });
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

std::vector<ParamSpec> onChipParams() {
  return {{"CLUSTER_SIZE", {2, 4, 8, 16}, 8, "programs (blocks) per row"},
          {"num_warps", {4, 8, 16, 32}, 16, "warps per program"}};
}

/// BLOCK_SIZE covers a row with CLUSTER_SIZE slices, in whole 16-byte groups
/// of every thread.
void deriveSlice(dsl::Config &c, const std::map<std::string, int64_t> &shape) {
  auto v = shape.find("V");
  if (v == shape.end())
    throw Error("CE+TVD on chip: the shape lacks V");
  int64_t cluster = c.get("CLUSTER_SIZE"), threads = 32 * c.get("num_warps");
  int64_t group = threads * 8;
  int64_t slice = (v->second + cluster - 1) / cluster;
  int64_t block = (slice + group - 1) / group * group;
  if (block / threads > kMaxOnChipPerThread)
    throw Error("CE+TVD on chip: V = " + std::to_string(v->second) +
                " needs " + std::to_string(block / threads) +
                " logits per thread with CLUSTER_SIZE=" +
                std::to_string(cluster) + " num_warps=" +
                std::to_string(c.get("num_warps")) + " (at most " +
                std::to_string(kMaxOnChipPerThread) +
                "); use more programs or warps");
  c.params["BLOCK_SIZE"] = block;
}

std::vector<ParamSpec> singleProgramParams() {
  return {{"BLOCK_SIZE", {1024}, 1024, "rows per tile"},
          {"num_warps", {8}, 8, "warps per program"}};
}

} // namespace

KernelSpec fusedCeTvdForwardOnChipSpec() {
  KernelSpec s{"fused_ce_tvd_fwd_cluster",
               "CE+TVD forward, each row read once and held on chip by a "
               "cluster of programs (sm_90)",
               onChipParams(), kDtypes, buildForwardOnChip, kTuneKey};
  s.deriveParams = deriveSlice;
  return s;
}

KernelSpec fusedCeTvdLossGradSpec() {
  KernelSpec s{"fused_ce_tvd_loss_grad",
               "CE+TVD reduced loss terms and the student gradient in one "
               "pass, row held on chip by a cluster of programs (sm_90)",
               onChipParams(), kDtypes, buildLossGrad, kTuneKey};
  s.deriveParams = deriveSlice;
  return s;
}

KernelSpec ceTvdRowWeightsSpec() {
  return {"ce_tvd_row_weights",
          "n_valid and the per-row loss weights of the reduced CE+TVD",
          singleProgramParams(), {DType::F32}, buildRowWeights, {}};
}

KernelSpec ceTvdLossSumSpec() {
  return {"ce_tvd_loss_sum", "the reduced CE+TVD loss from per-row terms",
          singleProgramParams(), {DType::F32}, buildLossSum, {}};
}

} // namespace tilejit
