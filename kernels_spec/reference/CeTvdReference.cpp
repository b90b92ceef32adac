//===- CeTvdReference.cpp - fp64 reference for fused CE + TVD -------------===//
//
// One row at a time: load both rows as double, softmax with the row max
// subtracted, then the per-row terms of docs/semantics.md §1. Sums use an
// exactly rounded accumulator so that a teacher row that permutes the
// student's values gets a bit-identical normalizer; otherwise p_v - q_v would
// be +-1 ulp instead of an exact tie and sign() would pick a wrong
// subgradient.
//
//===----------------------------------------------------------------------===//
#include "kernels_spec/reference/CeTvdReference.h"

#include "tilejit/Error.h"
#include "tilejit/HostFloat.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <string>
#include <thread>

namespace tilejit {
namespace ref {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// An untyped (BT, V) logits matrix: bf16/f16/f32 by `dtype`, or fp64.
struct Logits {
  const void *data;
  DType dtype;
  bool isF64;
};

struct Problem {
  Logits student, teacher;
  const int64_t *target;
  int64_t BT, V, rowStride, ignoreIndex;

  bool ignored(int64_t row) const { return target[row] == ignoreIndex; }
};

// Correctly rounded floating-point sum (Shewchuk's non-overlapping partials).
// The result is independent of the order in which terms are added.
// Non-finite terms (only from +inf/NaN logits) are summed apart, so that
// a NaN cannot grow the partials list on every add.
class ExactSum {
public:
  void add(double x) {
    if (!std::isfinite(x)) {
      nonFinite += x;
      return;
    }
    size_t kept = 0;
    for (double y : parts) {
      if (std::fabs(x) < std::fabs(y))
        std::swap(x, y);
      double hi = x + y;
      double lo = y - (hi - x);
      if (lo != 0.0)
        parts[kept++] = lo;
      x = hi;
    }
    parts.resize(kept);
    parts.push_back(x);
  }

  double value() const {
    if (nonFinite != 0.0 || std::isnan(nonFinite))
      return nonFinite;
    if (parts.empty())
      return 0.0;
    size_t n = parts.size() - 1;
    double hi = parts[n];
    double lo = 0.0;
    while (n > 0) {
      double x = hi;
      double y = parts[--n];
      hi = x + y;
      lo = y - (hi - x);
      if (lo != 0.0)
        break;
    }
    // hi + lo is exact; if the partials below push past the halfway point in
    // lo's direction, hi must round the other way.
    if (n > 0 &&
        ((lo < 0 && parts[n - 1] < 0) || (lo > 0 && parts[n - 1] > 0))) {
      double twice = lo * 2;
      double candidate = hi + twice;
      if (candidate - hi == twice)
        hi = candidate;
    }
    return hi;
  }

private:
  std::vector<double> parts; // increasing magnitude, non-overlapping
  double nonFinite = 0.0;
};

double sign(double x) { return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0); }

template <typename T, typename Convert>
void convertRow(const void *base, int64_t offset, int64_t V, double *out,
                Convert convert) {
  const T *row = static_cast<const T *>(base) + offset;
  for (int64_t v = 0; v < V; ++v)
    out[v] = convert(row[v]);
}

void loadRow(const Logits &l, int64_t offset, int64_t V, double *out) {
  auto same = [](auto x) { return static_cast<double>(x); };
  if (l.isF64)
    return convertRow<double>(l.data, offset, V, out, same);
  if (l.dtype == DType::F32)
    return convertRow<float>(l.data, offset, V, out, same);
  if (l.dtype == DType::BF16)
    return convertRow<uint16_t>(l.data, offset, V, out, bf16ToFloat);
  convertRow<uint16_t>(l.data, offset, V, out, halfToFloat);
}

struct Softmax {
  double max;  // row max (-inf for an all -inf row)
  double logD; // log sum_v exp(z_v - max); -inf for an all -inf row
};

// Replaces the logits `z` by softmax(z). An all -inf row becomes all 0.
Softmax softmaxInPlace(std::vector<double> &z) {
  double m = *std::max_element(z.begin(), z.end());
  if (m == -kInf) {
    std::fill(z.begin(), z.end(), 0.0);
    return {m, -kInf};
  }
  ExactSum d;
  for (double &x : z) {
    x = std::exp(x - m); // -inf - m = -inf, exp -> 0: no NaN
    d.add(x);
  }
  double denom = d.value();
  for (double &x : z)
    x /= denom;
  return {m, std::log(denom)};
}

// Everything the forward and backward passes need about one row.
struct RowState {
  std::vector<double> p, q;
  double ce = 0, tvd = 0, lseS = 0, lseT = 0, sigma = 0;
};

// Fills `st` for a non-ignored row: p, q and the per-row terms.
void computeRow(const Problem &pb, int64_t row, RowState &st) {
  st.p.resize(pb.V);
  st.q.resize(pb.V);
  int64_t offset = row * pb.rowStride;
  loadRow(pb.student, offset, pb.V, st.p.data());
  loadRow(pb.teacher, offset, pb.V, st.q.data());
  double sTarget = st.p[pb.target[row]];
  Softmax s = softmaxInPlace(st.p);
  Softmax t = softmaxInPlace(st.q);
  // ce = (lse - m) - (s_y - m): never forms lse - s_y with a large offset.
  st.ce = s.max == -kInf ? kInf : s.logD - (sTarget - s.max);
  st.lseS = s.max + s.logD;
  st.lseT = t.max + t.logD;
  ExactSum absDiff, sigma;
  for (int64_t v = 0; v < pb.V; ++v) {
    double diff = st.p[v] - st.q[v];
    absDiff.add(std::fabs(diff));
    sigma.add(st.p[v] * sign(diff));
  }
  st.tvd = 0.5 * absDiff.value();
  st.sigma = sigma.value();
}

// Runs fn(row, state) for every row, in parallel when the input is large.
// Each row's result depends only on that row, so the split does not matter.
template <typename Fn> void forEachRow(const Problem &pb, Fn fn) {
  unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  int64_t threads = std::min<int64_t>(hw, pb.BT);
  if (pb.BT * pb.V < (int64_t(1) << 20) || threads <= 1) {
    RowState st;
    for (int64_t row = 0; row < pb.BT; ++row)
      fn(row, st);
    return;
  }
  std::atomic<int64_t> next{0};
  auto worker = [&] {
    RowState st;
    for (int64_t row = next++; row < pb.BT; row = next++)
      fn(row, st);
  };
  std::vector<std::thread> pool;
  for (int64_t i = 0; i < threads; ++i)
    pool.emplace_back(worker);
  for (std::thread &t : pool)
    t.join();
}

void require(bool ok, const std::string &message) {
  if (!ok)
    throw Error("fused_ce_tvd reference: " + message);
}

// Checks shapes, pointers and targets up front so that worker threads never
// throw and no output is half written.
void validate(const Problem &pb) {
  require(pb.BT >= 0, "BT must be >= 0 (got " + std::to_string(pb.BT) + ")");
  require(pb.V > 0, "V must be positive (got " + std::to_string(pb.V) + ")");
  require(pb.rowStride >= pb.V,
          "row stride " + std::to_string(pb.rowStride) +
              " is smaller than V = " + std::to_string(pb.V));
  require(pb.BT == 0 || (pb.student.data && pb.teacher.data && pb.target),
          "null student, teacher or target pointer");
  require(pb.student.isF64 || isFloat(pb.student.dtype),
          std::string("logits dtype must be bf16, f16 or f32 (got ") +
              dtypeName(pb.student.dtype) + ")");
  for (int64_t row = 0; row < pb.BT; ++row) {
    int64_t y = pb.target[row];
    require(pb.ignored(row) || (y >= 0 && y < pb.V),
            "target " + std::to_string(y) + " at row " + std::to_string(row) +
                " is outside [0, " + std::to_string(pb.V) +
                ") and is not ignore_index (" + std::to_string(pb.ignoreIndex) +
                ")");
  }
}

CeTvdForward forward(const Problem &pb) {
  validate(pb);
  CeTvdForward out;
  for (auto *v : {&out.ce, &out.tvd, &out.lseS, &out.lseT, &out.sigma})
    v->assign(pb.BT, 0.0);
  forEachRow(pb, [&](int64_t row, RowState &st) {
    if (pb.ignored(row))
      return;
    computeRow(pb, row, st);
    out.ce[row] = st.ce;
    out.tvd[row] = st.tvd;
    out.lseS[row] = st.lseS;
    out.lseT[row] = st.lseT;
    out.sigma[row] = st.sigma;
  });
  return out;
}

void backward(const Problem &pb, const double *gCe, const double *gTvd,
              double *gradOut) {
  validate(pb);
  require(pb.BT == 0 || (gCe && gTvd && gradOut), "null gradient pointer");
  forEachRow(pb, [&](int64_t row, RowState &st) {
    double *grad = gradOut + row * pb.V;
    if (pb.ignored(row)) {
      std::fill(grad, grad + pb.V, 0.0);
      return;
    }
    computeRow(pb, row, st);
    double halfTvd = 0.5 * gTvd[row];
    for (int64_t v = 0; v < pb.V; ++v) {
      double p = st.p[v];
      double tvdTerm = halfTvd * p * (sign(p - st.q[v]) - st.sigma);
      grad[v] = gCe[row] * p + tvdTerm;
    }
    // The target entry as p_y - 1 in one step, not (p_y * g) - g.
    int64_t y = pb.target[row];
    double p = st.p[y];
    grad[y] =
        gCe[row] * (p - 1.0) + halfTvd * p * (sign(p - st.q[y]) - st.sigma);
  });
}

// Per-row upstream gradient of the reduced loss: 1/n_valid for mean.
double reductionScale(const Problem &pb, bool mean) {
  if (!mean)
    return 1.0;
  int64_t valid = 0;
  for (int64_t row = 0; row < pb.BT; ++row)
    valid += !pb.ignored(row);
  return valid > 0 ? 1.0 / static_cast<double>(valid) : 0.0;
}

double reducedLoss(const Problem &pb, double alpha, double beta, bool mean) {
  CeTvdForward f = forward(pb);
  double sumCe = 0, sumTvd = 0;
  for (int64_t row = 0; row < pb.BT; ++row) {
    sumCe += f.ce[row];
    sumTvd += f.tvd[row];
  }
  double scale = reductionScale(pb, mean);
  return scale == 0.0 ? 0.0 : (alpha * sumCe + beta * sumTvd) * scale;
}

void reducedBackward(const Problem &pb, double alpha, double beta, bool mean,
                     double *gradOut) {
  validate(pb);
  double scale = reductionScale(pb, mean);
  std::vector<double> gCe(pb.BT, alpha * scale), gTvd(pb.BT, beta * scale);
  backward(pb, gCe.data(), gTvd.data(), gradOut);
}

Problem typedProblem(const void *student, const void *teacher, DType dtype,
                     const int64_t *target, int64_t BT, int64_t V,
                     int64_t rowStride, int64_t ignoreIndex) {
  Logits s{student, dtype, false}, t{teacher, dtype, false};
  return {s, t, target, BT, V, rowStride, ignoreIndex};
}

Problem f64Problem(const double *student, const double *teacher,
                   const int64_t *target, int64_t BT, int64_t V,
                   int64_t rowStride, int64_t ignoreIndex) {
  // dtype is unused for fp64 operands; F32 keeps validate() quiet.
  Logits s{student, DType::F32, true}, t{teacher, DType::F32, true};
  return {s, t, target, BT, V, rowStride, ignoreIndex};
}

} // namespace

CeTvdForward ceTvdForward(const void *student, const void *teacher, DType dtype,
                          const int64_t *target, int64_t BT, int64_t V,
                          int64_t rowStride, int64_t ignoreIndex) {
  return forward(typedProblem(student, teacher, dtype, target, BT, V, rowStride,
                              ignoreIndex));
}

CeTvdForward ceTvdForward(const double *student, const double *teacher,
                          const int64_t *target, int64_t BT, int64_t V,
                          int64_t rowStride, int64_t ignoreIndex) {
  return forward(
      f64Problem(student, teacher, target, BT, V, rowStride, ignoreIndex));
}

void ceTvdBackward(const void *student, const void *teacher, DType dtype,
                   const int64_t *target, int64_t BT, int64_t V,
                   int64_t rowStride, const double *gCe, const double *gTvd,
                   double *gradOut, int64_t ignoreIndex) {
  backward(typedProblem(student, teacher, dtype, target, BT, V, rowStride,
                        ignoreIndex),
           gCe, gTvd, gradOut);
}

void ceTvdBackward(const double *student, const double *teacher,
                   const int64_t *target, int64_t BT, int64_t V,
                   int64_t rowStride, const double *gCe, const double *gTvd,
                   double *gradOut, int64_t ignoreIndex) {
  backward(f64Problem(student, teacher, target, BT, V, rowStride, ignoreIndex),
           gCe, gTvd, gradOut);
}

double ceTvdReducedLoss(const void *student, const void *teacher, DType dtype,
                        const int64_t *target, int64_t BT, int64_t V,
                        int64_t rowStride, double alpha, double beta, bool mean,
                        int64_t ignoreIndex) {
  return reducedLoss(typedProblem(student, teacher, dtype, target, BT, V,
                                  rowStride, ignoreIndex),
                     alpha, beta, mean);
}

double ceTvdReducedLoss(const double *student, const double *teacher,
                        const int64_t *target, int64_t BT, int64_t V,
                        int64_t rowStride, double alpha, double beta, bool mean,
                        int64_t ignoreIndex) {
  return reducedLoss(
      f64Problem(student, teacher, target, BT, V, rowStride, ignoreIndex),
      alpha, beta, mean);
}

void ceTvdReducedBackward(const void *student, const void *teacher, DType dtype,
                          const int64_t *target, int64_t BT, int64_t V,
                          int64_t rowStride, double alpha, double beta,
                          bool mean, double *gradOut, int64_t ignoreIndex) {
  reducedBackward(typedProblem(student, teacher, dtype, target, BT, V,
                               rowStride, ignoreIndex),
                  alpha, beta, mean, gradOut);
}

void ceTvdReducedBackward(const double *student, const double *teacher,
                          const int64_t *target, int64_t BT, int64_t V,
                          int64_t rowStride, double alpha, double beta,
                          bool mean, double *gradOut, int64_t ignoreIndex) {
  reducedBackward(
      f64Problem(student, teacher, target, BT, V, rowStride, ignoreIndex),
      alpha, beta, mean, gradOut);
}

} // namespace ref
} // namespace tilejit
