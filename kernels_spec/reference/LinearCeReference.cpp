//===- LinearCeReference.cpp - fp64 reference for fused linear CE ---------===//
//
// Rows are processed in chunks, like the kernels: for each chunk, every row's
// logits are formed in fp64 from the exact input values (float holds bf16,
// f16 and f32 exactly), the row's loss terms and its logit gradient dz are
// computed, dh follows row by row, and dW/db accumulate the chunk's dz^T h
// one vocab row at a time. Rows are split among threads within a chunk and
// vocab rows within the dW update; every sum runs in a fixed order, so the
// results do not depend on the thread count.
//
//===----------------------------------------------------------------------===//
#include "kernels_spec/reference/LinearCeReference.h"

#include "tilejit/Error.h"
#include "tilejit/HostFloat.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <thread>

namespace tilejit {
namespace ref {

namespace {

using Reduction = LinearCeParams::Reduction;

constexpr double kInf = std::numeric_limits<double>::infinity();

// Logits (doubles) held per chunk: rows per chunk = max(1, this / V).
constexpr int64_t kChunkElements = int64_t(1) << 22;

void require(bool ok, const std::string &message) {
  if (!ok)
    throw Error("fused_linear_ce reference: " + message);
}

// Compensated (Neumaier) summation: error independent of the term count to
// first order, and deterministic for a fixed term order.
class Sum {
public:
  void add(double x) {
    double t = s + x;
    if (std::isfinite(t))
      c += std::fabs(s) >= std::fabs(x) ? (s - t) + x : (x - t) + s;
    s = t;
  }
  double value() const { return std::isfinite(s) ? s + c : s; }

private:
  double s = 0, c = 0;
};

// a * b for sizes, or an error naming `what` if it overflows int64.
int64_t product(int64_t a, int64_t b, const char *what) {
  int64_t out;
  require(!__builtin_mul_overflow(a, b, &out),
          std::string(what) + " has more than 2^63 elements");
  return out;
}

void requireBytes(const std::vector<uint8_t> &buf, int64_t elements,
                  size_t elemSize, const std::string &what) {
  int64_t bytes = product(elements, static_cast<int64_t>(elemSize), "a buffer");
  require(static_cast<int64_t>(buf.size()) == bytes,
          what + " has " + std::to_string(buf.size()) + " bytes, expected " +
              std::to_string(bytes) + " (" + std::to_string(elements) +
              " elements)");
}

void validate(const LinearCeInputs &in, const LinearCeParams &p) {
  require(in.N >= 0, "N must be >= 0 (got " + std::to_string(in.N) + ")");
  require(in.d > 0, "d must be positive (got " + std::to_string(in.d) + ")");
  require(in.V > 0, "V must be positive (got " + std::to_string(in.V) + ")");
  require(isFloat(in.dtype),
          std::string("h/W/bias dtype must be bf16, f16 or f32 (got ") +
              dtypeName(in.dtype) + ")");
  size_t es = dtypeSize(in.dtype);
  requireBytes(in.h, product(in.N, in.d, "h"), es, "h (N x d)");
  requireBytes(in.W, product(in.V, in.d, "W"), es, "W (V x d)");
  if (!in.bias.empty())
    requireBytes(in.bias, in.V, es, "bias (V)");
  require(static_cast<int64_t>(in.target.size()) == in.N,
          "target has " + std::to_string(in.target.size()) +
              " entries, expected N = " + std::to_string(in.N));
  require(in.classWeight.empty() ||
              static_cast<int64_t>(in.classWeight.size()) == in.V,
          "classWeight has " + std::to_string(in.classWeight.size()) +
              " entries, expected V = " + std::to_string(in.V) + " (or none)");
  if (p.reduction == Reduction::None)
    require(static_cast<int64_t>(in.gradOutput.size()) == in.N,
            "gradOutput has " + std::to_string(in.gradOutput.size()) +
                " entries, expected N = " + std::to_string(in.N) +
                " for reduction none");
  else
    require(in.gradOutput.empty(),
            "gradOutput must be empty for reduction mean/sum (got " +
                std::to_string(in.gradOutput.size()) + " entries)");
  require(std::isfinite(p.labelSmoothing) && p.labelSmoothing >= 0 &&
              p.labelSmoothing <= 1,
          "label smoothing must be in [0, 1] (got " +
              std::to_string(p.labelSmoothing) + ")");
  require(std::isfinite(p.softcap) && p.softcap >= 0,
          "softcap must be finite and >= 0 (0 = off; got " +
              std::to_string(p.softcap) + ")");
  require(std::isfinite(p.zLoss),
          "z-loss scale must be finite (got " + std::to_string(p.zLoss) + ")");
  for (int64_t row = 0; row < in.N; ++row) {
    int64_t y = in.target[row];
    require(y == p.ignoreIndex || (y >= 0 && y < in.V),
            "target " + std::to_string(y) + " at row " + std::to_string(row) +
                " is outside [0, " + std::to_string(in.V) +
                ") and is not ignore_index (" + std::to_string(p.ignoreIndex) +
                ")");
  }
}

// The buffer's values as float (exact for bf16, f16 and f32).
std::vector<float> toFloat(const std::vector<uint8_t> &buf, DType dtype) {
  size_t n = buf.size() / dtypeSize(dtype);
  std::vector<float> out(n);
  if (dtype == DType::F32) {
    std::memcpy(out.data(), buf.data(), n * sizeof(float));
    return out;
  }
  for (size_t i = 0; i < n; ++i) {
    uint16_t bits;
    std::memcpy(&bits, buf.data() + 2 * i, sizeof(bits));
    out[i] = dtype == DType::BF16 ? bf16ToFloat(bits) : halfToFloat(bits);
  }
  return out;
}

// Runs fn(item, scratch) for item in [0, count), on several threads when
// count * costPerItem is large. Each thread has its own Scratch.
template <typename Scratch, typename Fn>
void parallelFor(int64_t count, int64_t costPerItem, Fn fn) {
  unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  int64_t threads = std::min<int64_t>(hw, count);
  bool small = costPerItem < (int64_t(1) << 20) / std::max<int64_t>(count, 1);
  if (threads <= 1 || small) {
    Scratch s;
    for (int64_t i = 0; i < count; ++i)
      fn(i, s);
    return;
  }
  std::atomic<int64_t> next{0};
  auto worker = [&] {
    Scratch s;
    for (int64_t i = next++; i < count; i = next++)
      fn(i, s);
  };
  std::vector<std::thread> pool;
  for (int64_t t = 0; t < threads; ++t)
    pool.emplace_back(worker);
  for (std::thread &t : pool)
    t.join();
}

struct RowScratch {
  std::vector<double> r, dh;
};

struct Problem {
  const LinearCeInputs &in;
  const LinearCeParams &p;
  std::vector<float> h, W, bias;
  bool hasWeight;
  double weightSum; // W_sum = sum_v w_v (V without weights)
  double gCeScale;  // upstream of the CE part: 1/sum w_y, 1 or 0
  double gZScale;   // upstream of the z-loss: 1/n_valid, 1 or 0

  bool ignored(int64_t row) const { return in.target[row] == p.ignoreIndex; }
  double weight(int64_t v) const {
    return hasWeight ? static_cast<double>(in.classWeight[v]) : 1.0;
  }
};

// Forward and logit gradient of one row. Writes the row's outputs, its CE
// part (loss without z-loss) to ceRow[row] and its raw-logit gradient to dr.
void processRow(const Problem &pb, int64_t row, RowScratch &s, double *dr,
                std::vector<double> &ceRow, LinearCeResult &out) {
  const LinearCeInputs &in = pb.in;
  const LinearCeParams &p = pb.p;
  const int64_t V = in.V, d = in.d;
  if (pb.ignored(row)) {
    std::fill(dr, dr + V, 0.0);
    return; // rowLoss, zLossRow, lse, dh stay 0
  }
  // Raw logits r = h_i W^T + b.
  const float *hRow = pb.h.data() + row * d;
  s.r.resize(V);
  for (int64_t v = 0; v < V; ++v) {
    const float *wRow = pb.W.data() + v * d;
    double acc = 0;
    for (int64_t k = 0; k < d; ++k)
      acc += static_cast<double>(hRow[k]) * static_cast<double>(wRow[k]);
    if (!pb.bias.empty())
      acc += static_cast<double>(pb.bias[v]);
    s.r[v] = acc;
  }
  double g = p.reduction == Reduction::None
                 ? static_cast<double>(in.gradOutput[row])
                 : 1.0;
  RowTerms t = crossEntropyRow(
      s.r.data(), V, in.target[row],
      pb.hasWeight ? in.classWeight.data() : nullptr, pb.weightSum, p,
      g * pb.gCeScale, g * pb.gZScale, dr);
  ceRow[row] = t.ce;
  out.rowLoss[row] = t.ce + t.zl;
  out.zLossRow[row] = t.zl;
  out.lse[row] = t.lse;

  // dh_i = dr W.
  s.dh.assign(d, 0.0);
  for (int64_t v = 0; v < V; ++v) {
    double gv = dr[v];
    if (gv == 0)
      continue;
    const float *wRow = pb.W.data() + v * d;
    for (int64_t k = 0; k < d; ++k)
      s.dh[k] += gv * static_cast<double>(wRow[k]);
  }
  std::copy(s.dh.begin(), s.dh.end(), out.dh.begin() + row * d);
}

} // namespace

LinearCeResult linearCeReference(const LinearCeInputs &in,
                                 const LinearCeParams &p) {
  validate(in, p);
  const int64_t N = in.N, d = in.d, V = in.V;
  Problem pb{in,
             p,
             toFloat(in.h, in.dtype),
             toFloat(in.W, in.dtype),
             toFloat(in.bias, in.dtype),
             !in.classWeight.empty(),
             0,
             0,
             0};

  // Denominators of the mean: sum of target weights and n_valid.
  Sum weightSum, targetWeightSum;
  for (int64_t v = 0; v < V; ++v)
    weightSum.add(pb.weight(v));
  int64_t nValid = 0;
  for (int64_t row = 0; row < N; ++row) {
    if (pb.ignored(row))
      continue;
    ++nValid;
    targetWeightSum.add(pb.weight(in.target[row]));
  }
  pb.weightSum = weightSum.value();
  if (p.reduction == Reduction::Mean) {
    double den = targetWeightSum.value();
    pb.gCeScale = den != 0 ? 1.0 / den : 0.0;
    pb.gZScale = nValid > 0 ? 1.0 / static_cast<double>(nValid) : 0.0;
  } else {
    pb.gCeScale = pb.gZScale = 1.0;
  }

  LinearCeResult out;
  out.rowLoss.assign(N, 0.0);
  out.zLossRow.assign(N, 0.0);
  out.lse.assign(N, 0.0);
  out.dh.assign(product(N, d, "dh"), 0.0);
  out.dW.assign(product(V, d, "dW"), 0.0);
  if (!in.bias.empty())
    out.db.assign(V, 0.0);

  // Chunks of rows: the chunk's raw-logit gradients dr live only while the
  // chunk is processed.
  const int64_t chunkRows = std::max<int64_t>(1, kChunkElements / V);
  std::vector<double> dr, ceRow(N, 0.0);
  for (int64_t r0 = 0; r0 < N; r0 += chunkRows) {
    const int64_t rows = std::min(chunkRows, N - r0);
    dr.resize(rows * V);
    parallelFor<RowScratch>(rows, V * d, [&](int64_t i, RowScratch &s) {
      processRow(pb, r0 + i, s, dr.data() + i * V, ceRow, out);
    });
    // dW[v] += sum_i dr[i, v] h_i and db[v] += sum_i dr[i, v], rows in order.
    struct NoScratch {};
    parallelFor<NoScratch>(V, rows * d, [&](int64_t v, NoScratch &) {
      double *dwRow = out.dW.data() + v * d;
      for (int64_t i = 0; i < rows; ++i) {
        double gv = dr[i * V + v];
        if (gv == 0)
          continue;
        const float *hRow = pb.h.data() + (r0 + i) * d;
        for (int64_t k = 0; k < d; ++k)
          dwRow[k] += gv * static_cast<double>(hRow[k]);
        if (!out.db.empty())
          out.db[v] += gv;
      }
    });
  }

  // Reductions (rows in order).
  if (p.reduction != Reduction::None) {
    Sum ce, zl;
    for (int64_t row = 0; row < N; ++row) {
      if (pb.ignored(row))
        continue;
      ce.add(ceRow[row]);
      zl.add(out.zLossRow[row]);
    }
    double ceSum = ce.value(), zSum = zl.value();
    // A zero scale (nothing to average) gives 0, not 0 * inf.
    double ceTotal = pb.gCeScale != 0 ? ceSum * pb.gCeScale : 0.0;
    out.zLossTotal = pb.gZScale != 0 ? zSum * pb.gZScale : 0.0;
    out.loss = ceTotal + out.zLossTotal;
  }
  return out;
}

RowTerms crossEntropyRow(const double *r, int64_t V, int64_t y,
                         const float *w, double weightSum,
                         const LinearCeParams &p, double gCe, double gZ,
                         double *dr) {
  const double eps = p.labelSmoothing, c = p.softcap;
  auto weight = [&](int64_t v) {
    return w ? static_cast<double>(w[v]) : 1.0;
  };
  // The softcap (t keeps tanh for the chain rule).
  std::vector<double> z(r, r + V), t(c > 0 ? V : 0);
  if (c > 0)
    for (int64_t v = 0; v < V; ++v) {
      t[v] = std::tanh(r[v] / c);
      z[v] = c * t[v];
    }

  // lse with the row max subtracted; p goes to dr (overwritten by the
  // gradient below).
  RowTerms out;
  double m = *std::max_element(z.begin(), z.end());
  double logD;
  if (m == -kInf) {
    // No distribution: p = 0 everywhere, lse = -inf (loss +inf).
    std::fill(dr, dr + V, 0.0);
    logD = -kInf;
    out.lse = -kInf;
  } else {
    Sum sumExp;
    for (int64_t v = 0; v < V; ++v) {
      dr[v] = std::exp(z[v] - m);
      sumExp.add(dr[v]);
    }
    double denom = sumExp.value();
    for (int64_t v = 0; v < V; ++v)
      dr[v] /= denom; // dr holds p for now
    logD = std::log(denom);
    out.lse = m + logD;
  }
  // lse - z_v without cancelling a large common offset.
  auto gap = [&](int64_t v) { return m == -kInf ? kInf : logD - (z[v] - m); };

  // Loss terms; a zero coefficient skips its term (no 0 * inf).
  double wy = weight(y);
  double nllCoef = (1 - eps) * wy;
  out.ce = nllCoef != 0 ? nllCoef * gap(y) : 0.0;
  if (eps > 0) {
    Sum smooth;
    for (int64_t v = 0; v < V; ++v) {
      double wv = weight(v);
      if (wv != 0)
        smooth.add(wv * gap(v));
    }
    out.ce += (eps / static_cast<double>(V)) * smooth.value();
  }
  out.zl = p.zLoss != 0 ? p.zLoss * out.lse * out.lse : 0.0;

  // dz_v = gCe * [(1-eps) w_y (p_v - 1[v==y]) + (eps/V)(W_sum p_v - w_v)]
  //        + gZ * 2 lambda_z lse p_v, then dr_v = dz_v (1 - tanh^2).
  double smoothCoef = eps / static_cast<double>(V);
  double zCoef = gZ * 2 * p.zLoss * out.lse;
  for (int64_t v = 0; v < V; ++v) {
    double pv = dr[v];
    // The target entry as p_y - 1 in one step.
    double nllGrad = nllCoef * (v == y ? pv - 1.0 : pv);
    double smoothGrad =
        smoothCoef != 0 ? smoothCoef * (weightSum * pv - weight(v)) : 0.0;
    double dz = gCe * (nllGrad + smoothGrad);
    if (zCoef != 0 && pv != 0)
      dz += zCoef * pv;
    if (c > 0)
      dz *= 1.0 - t[v] * t[v];
    dr[v] = dz;
  }
  return out;
}

} // namespace ref
} // namespace tilejit
