//===- LinearCeReferenceTest.cpp - tests of the fp64 linear CE reference --===//
//
// Checks the fused linear cross-entropy reference (docs/semantics.md §2):
// dh, dW and db against central finite differences with every feature on,
// the loss against plain CE and PyTorch's label-smoothing/weight formula
// written out independently here, the numerics.json cases that name
// fused_linear_ce (logits expressed as h with W = identity, or through W or
// the bias), the dtypes, and the error paths.
//
//===----------------------------------------------------------------------===//
#include "kernels_spec/reference/LinearCeReference.h"

#include "tilejit/Error.h"
#include "tilejit/HostFloat.h"

#include "llvm/Support/JSON.h"

#include "TestData.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#ifndef TILEJIT_TEST_DATA_DIR
#error "TILEJIT_TEST_DATA_DIR must name the tests/data directory"
#endif

using namespace tilejit;
using namespace tilejit::ref;
namespace json = llvm::json;
using namespace tilejit::testdata;
using Reduction = LinearCeParams::Reduction;

namespace {

// The case must be one the linear CE has to handle.
void expectLinearCeCase(const json::Object &c) {
  llvm::StringRef kernel = *c.getString("kernel");
  EXPECT_TRUE(kernel.contains("fused_linear_ce") ||
              kernel.contains("all reduced losses") ||
              kernel.contains("logits CE"))
      << kernel.str();
}

//===----------------------------------------------------------------------===//
// Comparison and input helpers.
//===----------------------------------------------------------------------===//

// |actual - expected| <= tol * max(1, |expected|).
void expectClose(double actual, double expected, double tol,
                 const std::string &what) {
  EXPECT_LE(std::fabs(actual - expected),
            tol * std::max(1.0, std::fabs(expected)))
      << what << ": actual " << actual << ", expected " << expected;
}

void expectAllClose(const double *actual, const std::vector<double> &expected,
                    double tol, const std::string &what) {
  for (size_t i = 0; i < expected.size(); ++i)
    expectClose(actual[i], expected[i], tol,
                what + "[" + std::to_string(i) + "]");
}

void expectAllClose(const std::vector<double> &actual,
                    const std::vector<double> &expected, double tol,
                    const std::string &what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  expectAllClose(actual.data(), expected, tol, what);
}

void expectAllZero(const std::vector<double> &v, const std::string &what) {
  for (size_t i = 0; i < v.size(); ++i)
    EXPECT_EQ(v[i], 0.0) << what << "[" << i << "]";
}

// A host buffer of `dtype` holding `values` (rounded through float).
std::vector<uint8_t> typedBuffer(const std::vector<double> &values,
                                 DType dtype) {
  std::vector<uint8_t> out(values.size() * dtypeSize(dtype));
  for (size_t i = 0; i < values.size(); ++i)
    storeFromDouble(out.data(), dtype, i, values[i]);
  return out;
}

LinearCeInputs makeInputs(int64_t N, int64_t d, int64_t V, DType dtype,
                          const std::vector<double> &h,
                          const std::vector<double> &W,
                          const std::vector<double> &bias,
                          std::vector<int64_t> target) {
  LinearCeInputs in;
  in.N = N;
  in.d = d;
  in.V = V;
  in.dtype = dtype;
  in.h = typedBuffer(h, dtype);
  in.W = typedBuffer(W, dtype);
  in.bias = typedBuffer(bias, dtype);
  in.target = std::move(target);
  return in;
}

std::vector<double> identity(int64_t n) {
  std::vector<double> eye(n * n, 0.0);
  for (int64_t i = 0; i < n; ++i)
    eye[i * n + i] = 1.0;
  return eye;
}

// Logits (N, V) expressed as h = logits, W = I (d = V), no bias: z equals
// the logits and dh equals the logit gradient.
LinearCeInputs identityInputs(const std::vector<double> &logits, int64_t V,
                              std::vector<int64_t> target,
                              DType dtype = DType::F32) {
  int64_t N = static_cast<int64_t>(target.size());
  return makeInputs(N, V, V, dtype, logits, identity(V), {}, std::move(target));
}

// Row `row` of a row-major (rows, cols) matrix.
std::vector<double> rowOf(const std::vector<double> &m, int64_t cols,
                          int64_t row) {
  return {m.begin() + row * cols, m.begin() + (row + 1) * cols};
}

// Uniform values on the grid k / 2^11 in [-limit, limit]. With limit <= 2,
// a value plus or minus 2^-9 or 2^-10 is still exact in f32.
std::vector<double> gridValues(size_t n, double limit, std::mt19937 &rng) {
  std::uniform_real_distribution<double> dist(-limit, limit);
  std::vector<double> out(n);
  for (double &x : out)
    x = std::round(dist(rng) * 2048.0) / 2048.0;
  return out;
}

// The scalar whose gradient the reference returns: the reduced loss, or
// sum_i g_i loss_i for reduction none.
double objective(const LinearCeInputs &in, const LinearCeParams &p) {
  LinearCeResult r = linearCeReference(in, p);
  if (p.reduction != Reduction::None)
    return r.loss;
  double s = 0;
  for (int64_t i = 0; i < in.N; ++i)
    s += static_cast<double>(in.gradOutput[i]) * r.rowLoss[i];
  return s;
}

// d objective / d buf[index] (an f32 buffer) by central differences with
// Richardson extrapolation (steps 2^-9 and 2^-10, error O(step^4)). The
// perturbed values stay exact in f32 because the inputs lie on the 2^-11
// grid with magnitude below 4.
double finiteDifference(LinearCeInputs &in, const LinearCeParams &p,
                        std::vector<uint8_t> LinearCeInputs::*buf,
                        size_t index) {
  float *x = reinterpret_cast<float *>((in.*buf).data()) + index;
  const float x0 = *x;
  auto central = [&](float step) {
    *x = x0 + step;
    double up = objective(in, p);
    *x = x0 - step;
    double down = objective(in, p);
    *x = x0;
    return (up - down) / (2.0 * static_cast<double>(step));
  };
  double coarse = central(1.0f / 512), fine = central(1.0f / 1024);
  return (4.0 * fine - coarse) / 3.0;
}

const char *reductionName(Reduction r) {
  return r == Reduction::Mean ? "mean" : (r == Reduction::Sum ? "sum" : "none");
}

//===----------------------------------------------------------------------===//
// Gradients against finite differences.
//===----------------------------------------------------------------------===//

TEST(LinearCeReference, GradientsMatchFiniteDifferencesWithEveryFeature) {
  const int64_t N = 5, d = 4, V = 7;
  std::mt19937 rng(1234);
  std::vector<double> h = gridValues(N * d, 2.0, rng);
  std::vector<double> W = gridValues(V * d, 2.0, rng);
  std::vector<double> b = gridValues(V, 1.0, rng);
  LinearCeInputs base =
      makeInputs(N, d, V, DType::F32, h, W, b, {3, 0, -100, 6, 2});
  base.classWeight = {0.5f, 1.25f, 2.0f, 0.75f, 1.0f, 1.5f, 0.25f};

  LinearCeParams p;
  p.labelSmoothing = 0.1;
  p.zLoss = 0.05;
  p.softcap = 3.0;

  // Some logits must be large enough for the softcap to bend them.
  double maxAbs = 0;
  for (int64_t i = 0; i < N; ++i)
    for (int64_t v = 0; v < V; ++v) {
      double z = b[v];
      for (int64_t k = 0; k < d; ++k)
        z += h[i * d + k] * W[v * d + k];
      maxAbs = std::max(maxAbs, std::fabs(z));
    }
  ASSERT_GT(maxAbs, p.softcap);

  for (Reduction red : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
    SCOPED_TRACE(reductionName(red));
    p.reduction = red;
    LinearCeInputs in = base;
    if (red == Reduction::None)
      in.gradOutput = {1.5f, -0.75f, 2.0f, 0.5f, -1.25f};
    LinearCeResult r = linearCeReference(in, p);
    ASSERT_EQ(r.dh.size(), size_t(N * d));
    ASSERT_EQ(r.dW.size(), size_t(V * d));
    ASSERT_EQ(r.db.size(), size_t(V));

    const double tol = 1e-8;
    for (int64_t i = 0; i < N * d; ++i)
      expectClose(r.dh[i], finiteDifference(in, p, &LinearCeInputs::h, i), tol,
                  "dh[" + std::to_string(i) + "]");
    for (int64_t i = 0; i < V * d; ++i)
      expectClose(r.dW[i], finiteDifference(in, p, &LinearCeInputs::W, i), tol,
                  "dW[" + std::to_string(i) + "]");
    for (int64_t i = 0; i < V; ++i)
      expectClose(r.db[i], finiteDifference(in, p, &LinearCeInputs::bias, i),
                  tol, "db[" + std::to_string(i) + "]");

    // The ignored row: no loss, no gradient, lse reported as 0.
    EXPECT_EQ(r.rowLoss[2], 0.0);
    EXPECT_EQ(r.zLossRow[2], 0.0);
    EXPECT_EQ(r.lse[2], 0.0);
    for (int64_t k = 0; k < d; ++k)
      EXPECT_EQ(r.dh[2 * d + k], 0.0);
    // The z-loss is part of rowLoss and is returned on its own.
    for (int64_t i : {0, 1, 3, 4}) {
      expectClose(r.zLossRow[i], p.zLoss * r.lse[i] * r.lse[i], 1e-14,
                  "zLossRow");
      EXPECT_GT(r.rowLoss[i], r.zLossRow[i]);
    }
  }
}

//===----------------------------------------------------------------------===//
// The loss against formulas written out here.
//===----------------------------------------------------------------------===//

// eps = 0, no weights, z-loss or softcap: plain mean cross-entropy, checked
// with logits, softmax and gradients computed directly. Large enough for
// several row chunks and threads.
TEST(LinearCeReference, PlainMeanCrossEntropyByHand) {
  const int64_t N = 1500, d = 3, V = 3000;
  std::mt19937 rng(77);
  std::vector<double> h = gridValues(N * d, 2.0, rng);
  std::vector<double> W = gridValues(V * d, 2.0, rng);
  std::vector<double> b = gridValues(V, 1.0, rng);
  std::vector<int64_t> target(N);
  std::uniform_int_distribution<int64_t> cls(0, V - 1);
  for (int64_t i = 0; i < N; ++i)
    target[i] = i % 7 == 3 ? -100 : cls(rng);
  LinearCeInputs in = makeInputs(N, d, V, DType::F32, h, W, b, target);
  LinearCeResult r = linearCeReference(in, LinearCeParams());

  int64_t nValid = 0;
  for (int64_t y : target)
    nValid += y != -100;
  double loss = 0;
  std::vector<double> lse(N, 0.0), dh(N * d, 0.0), dW(V * d, 0.0), db(V, 0.0);
  std::vector<double> z(V);
  for (int64_t i = 0; i < N; ++i) {
    if (target[i] == -100)
      continue;
    for (int64_t v = 0; v < V; ++v) {
      z[v] = b[v];
      for (int64_t k = 0; k < d; ++k)
        z[v] += h[i * d + k] * W[v * d + k];
    }
    double sumExp = 0;
    for (int64_t v = 0; v < V; ++v)
      sumExp += std::exp(z[v]); // |z| < 13: no overflow
    lse[i] = std::log(sumExp);
    loss += lse[i] - z[target[i]];
    for (int64_t v = 0; v < V; ++v) {
      double g = (std::exp(z[v]) / sumExp - (v == target[i])) / nValid;
      for (int64_t k = 0; k < d; ++k) {
        dh[i * d + k] += g * W[v * d + k];
        dW[v * d + k] += g * h[i * d + k];
      }
      db[v] += g;
    }
  }
  loss /= nValid;

  expectClose(r.loss, loss, 1e-12, "loss");
  EXPECT_EQ(r.zLossTotal, 0.0);
  expectAllClose(r.lse, lse, 1e-12, "lse");
  expectAllClose(r.dh, dh, 1e-12, "dh");
  expectAllClose(r.dW, dW, 1e-12, "dW");
  expectAllClose(r.db, db, 1e-12, "db");
}

// PyTorch's cross_entropy with class weights and label smoothing
// (aten/src/ATen/native/LossNLL.cpp, cross_entropy_loss_label_smoothing):
//   (1 - eps) * nll_loss(logp, y, w) + (eps / V) * smooth,
//   smooth_i = -sum_v w_v logp_v, mean dividing both by sum_i w_{y_i};
// here on softcapped logits, plus lambda_z lse^2 averaged over valid rows.
TEST(LinearCeReference, WeightedSmoothingFollowsPyTorchConvention) {
  const int64_t N = 4, V = 5;
  std::vector<double> logits = {0.5,   -1.0, 2.0,  0.25, -0.75, //
                                1.5,   0.0,  -0.5, 0.75, -2.0,  //
                                -1.25, 0.5,  1.0,  0.0,  0.25,  //
                                0.0,   2.5,  -1.5, 1.0,  0.5};
  std::vector<int64_t> target = {2, -100, 0, 4};
  std::vector<float> w = {0.5f, 1.5f, 2.0f, 1.0f, 0.75f};
  const double eps = 0.15, lambda = 0.02, c = 1.75;

  double nllSum = 0, smoothSum = 0, zSum = 0, wySum = 0;
  std::vector<double> rowLoss(N, 0.0);
  for (int64_t i = 0; i < N; ++i) {
    if (target[i] == -100)
      continue;
    std::vector<double> z(V);
    double sumExp = 0;
    for (int64_t v = 0; v < V; ++v) {
      z[v] = c * std::tanh(logits[i * V + v] / c);
      sumExp += std::exp(z[v]);
    }
    double lse = std::log(sumExp);
    double nll = -w[target[i]] * (z[target[i]] - lse);
    double smooth = 0;
    for (int64_t v = 0; v < V; ++v)
      smooth -= w[v] * (z[v] - lse);
    double zl = lambda * lse * lse;
    rowLoss[i] = (1 - eps) * nll + eps / V * smooth + zl;
    nllSum += nll;
    smoothSum += smooth;
    zSum += zl;
    wySum += w[target[i]];
  }
  double ceSum = (1 - eps) * nllSum + eps / V * smoothSum;

  LinearCeParams p;
  p.labelSmoothing = eps;
  p.zLoss = lambda;
  p.softcap = c;
  for (Reduction red : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
    SCOPED_TRACE(reductionName(red));
    p.reduction = red;
    LinearCeInputs in = identityInputs(logits, V, target);
    in.classWeight = w;
    if (red == Reduction::None)
      in.gradOutput.assign(N, 1.0f);
    LinearCeResult r = linearCeReference(in, p);
    expectAllClose(r.rowLoss, rowLoss, 1e-13, "rowLoss");
    if (red == Reduction::Mean) {
      expectClose(r.loss, ceSum / wySum + zSum / 3, 1e-13, "mean loss");
      expectClose(r.zLossTotal, zSum / 3, 1e-13, "mean z-loss");
    } else if (red == Reduction::Sum) {
      expectClose(r.loss, ceSum + zSum, 1e-13, "sum loss");
      expectClose(r.zLossTotal, zSum, 1e-13, "sum z-loss");
    } else {
      EXPECT_EQ(r.loss, 0.0);
      EXPECT_EQ(r.zLossTotal, 0.0);
    }
  }
}

// Values worked by hand: uniform logits (V = 4), w = [1, 2, 3, 4], y = 1,
// eps = 0.2: logp = -log 4 everywhere, so
//   loss = 0.8 * w_y log 4 + (0.2 / 4) * (sum w) log 4 = 2.1 log 4,
// and mean divides by w_y = 2. Gradient (mean, W_sum = 10, p = 1/4):
//   dz_v = [0.8 * 2 (1/4 - 1[v == 1]) + 0.05 (10/4 - w_v)] / 2
//        = [0.2375, -0.5875, 0.1875, 0.1625].
TEST(LinearCeReference, WeightedSmoothingHandValues) {
  LinearCeInputs in = identityInputs({0, 0, 0, 0}, 4, {1});
  in.classWeight = {1, 2, 3, 4};
  LinearCeParams p;
  p.labelSmoothing = 0.2;
  LinearCeResult r = linearCeReference(in, p);
  expectClose(r.loss, 1.05 * std::log(4.0), 1e-15, "mean loss");
  expectClose(r.rowLoss[0], 2.1 * std::log(4.0), 1e-15, "row loss");
  expectAllClose(r.dh, {0.2375, -0.5875, 0.1875, 0.1625}, 1e-15, "dz");
}

// bf16, f16 and f32 buffers holding the same (exactly representable)
// values give identical results.
TEST(LinearCeReference, DTypesReadTheSameValues) {
  const int64_t N = 3, d = 5, V = 6;
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> q(-16, 16);
  auto eighths = [&](size_t n) {
    std::vector<double> out(n);
    for (double &x : out)
      x = q(rng) / 8.0;
    return out;
  };
  std::vector<double> h = eighths(N * d), W = eighths(V * d), b = eighths(V);
  LinearCeParams p;
  p.labelSmoothing = 0.05;
  p.zLoss = 1e-3;
  p.softcap = 2.5;
  LinearCeResult ref = linearCeReference(
      makeInputs(N, d, V, DType::F32, h, W, b, {0, 5, -100}), p);
  for (DType t : {DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtypeName(t));
    LinearCeResult r =
        linearCeReference(makeInputs(N, d, V, t, h, W, b, {0, 5, -100}), p);
    EXPECT_EQ(r.loss, ref.loss);
    EXPECT_EQ(r.rowLoss, ref.rowLoss);
    EXPECT_EQ(r.dh, ref.dh);
    EXPECT_EQ(r.dW, ref.dW);
    EXPECT_EQ(r.db, ref.db);
  }
}

//===----------------------------------------------------------------------===//
// numerics.json cases.
//===----------------------------------------------------------------------===//

TEST(LinearCeNumerics, LabelSmoothingWithIgnore) {
  json::Object c = numericsCase("label-smoothing-with-ignore");
  expectLinearCeCase(c);
  std::vector<double> logits = numbers(field(c, "logits"));
  std::vector<int64_t> target = integers(field(c, "target"));
  const int64_t N = target.size(), V = logits.size() / N;
  const json::Object &e = *c.getObject("expect");
  double perRow = number(field(e, "loss_per_row_valid"));
  double lossSum = number(field(e, "loss_sum"));
  std::vector<double> grad0 = numbers(field(e, "grad_row0_sum"));
  std::vector<double> grad1 = numbers(field(e, "grad_row1"));

  LinearCeParams p;
  p.labelSmoothing = number(field(c, "label_smoothing"));
  p.reduction = Reduction::Sum;
  LinearCeResult r = linearCeReference(identityInputs(logits, V, target), p);
  expectClose(r.loss, lossSum, 1e-14, "loss_sum");
  expectAllClose(r.rowLoss, {perRow, 0, perRow, 0}, 1e-14, "rowLoss");
  expectAllClose(rowOf(r.dh, V, 0), grad0, 1e-14, "grad_row0_sum");
  expectAllClose(rowOf(r.dh, V, 1), grad1, 1e-14, "grad_row1");
  expectAllZero(rowOf(r.dh, V, 3), "grad_row3");

  // Mean over the two valid rows: half of each.
  p.reduction = Reduction::Mean;
  r = linearCeReference(identityInputs(logits, V, target), p);
  expectClose(r.loss, lossSum / 2, 1e-14, "loss_mean");
  for (double &g : grad0)
    g /= 2;
  expectAllClose(rowOf(r.dh, V, 0), grad0, 1e-14, "grad_row0_mean");
  expectAllZero(rowOf(r.dh, V, 1), "grad_row1_mean");
}

TEST(LinearCeNumerics, ReductionNonePerRowUpstream) {
  json::Object c = numericsCase("reduction-none-per-row-upstream");
  expectLinearCeCase(c);
  std::vector<double> logits = numbers(field(c, "logits"));
  std::vector<int64_t> target = integers(field(c, "target"));
  std::vector<double> gradOutput = numbers(field(c, "grad_output"));
  const int64_t N = target.size(), V = logits.size() / N;
  std::vector<double> expect =
      numbers(field(*c.getObject("expect"), "grad_logits"));
  LinearCeParams p;
  p.reduction = Reduction::None;

  // (a) z = h with W = I: dh is the logit gradient.
  LinearCeInputs in = identityInputs(logits, V, target);
  in.gradOutput.assign(gradOutput.begin(), gradOutput.end());
  LinearCeResult r = linearCeReference(in, p);
  expectAllClose(r.dh, expect, 1e-15, "grad_logits");
  EXPECT_EQ(r.rowLoss[2], 0.0);

  // (b) z = b with W = 0 and arbitrary h (the case's rows are all equal):
  // the per-row upstream must be in dz before dW = dz^T h and
  // db = sum_i dz_i are reduced.
  for (int64_t i = 1; i < N; ++i)
    ASSERT_EQ(rowOf(logits, V, i), rowOf(logits, V, 0));
  const int64_t d = 3;
  std::vector<double> h = {1.0,  -2.0, 0.5, 0.25, 3.0,  -1.0,
                           -4.0, 2.0,  1.5, 0.75, -0.5, 2.5};
  in = makeInputs(N, d, V, DType::F32, h, std::vector<double>(V * d, 0.0),
                  rowOf(logits, V, 0), target);
  in.gradOutput.assign(gradOutput.begin(), gradOutput.end());
  r = linearCeReference(in, p);
  std::vector<double> dW(V * d, 0.0), db(V, 0.0);
  for (int64_t i = 0; i < N; ++i)
    for (int64_t v = 0; v < V; ++v) {
      db[v] += expect[i * V + v];
      for (int64_t k = 0; k < d; ++k)
        dW[v * d + k] += expect[i * V + v] * h[i * d + k];
    }
  expectAllClose(r.dW, dW, 1e-15, "dW");
  expectAllClose(r.db, db, 1e-15, "db");
  expectAllZero(r.dh, "dh with W = 0");
}

TEST(LinearCeNumerics, MeanOverValidRows) {
  json::Object c = numericsCase("mean-over-valid-rows");
  expectLinearCeCase(c);
  std::vector<double> logits = numbers(field(c, "student"));
  std::vector<int64_t> target = integers(field(c, "target"));
  const int64_t N = target.size(), V = logits.size() / N;
  const json::Object &e = *c.getObject("expect");
  LinearCeParams p;
  LinearCeResult r = linearCeReference(identityInputs(logits, V, target), p);
  expectClose(r.loss, number(field(e, "loss_mean")), 1e-14, "loss_mean");
  expectAllClose(rowOf(r.dh, V, 0), numbers(field(e, "grad_row0_mean")), 1e-15,
                 "grad_row0_mean");
  expectAllClose(rowOf(r.dh, V, 1), numbers(field(e, "grad_row1_mean")), 1e-15,
                 "grad_row1_mean");
  p.reduction = Reduction::Sum;
  r = linearCeReference(identityInputs(logits, V, target), p);
  expectClose(r.loss, number(field(e, "loss_sum")), 1e-14, "loss_sum");
}

TEST(LinearCeNumerics, AllRowsIgnored) {
  json::Object c = numericsCase("all-rows-ignored");
  expectLinearCeCase(c);
  std::vector<double> logits = numbers(field(c, "student"));
  std::vector<int64_t> target = integers(field(c, "target"));
  const int64_t N = target.size(), V = logits.size() / N;
  // With every feature on, so that no term divides 0 by 0.
  LinearCeParams p;
  p.labelSmoothing = 0.1;
  p.zLoss = 1e-2;
  p.softcap = 5;
  for (Reduction red : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
    SCOPED_TRACE(reductionName(red));
    p.reduction = red;
    LinearCeInputs in = identityInputs(logits, V, target);
    in.bias.assign(V * sizeof(float), 0);
    in.classWeight.assign(V, 2.0f);
    if (red == Reduction::None)
      in.gradOutput.assign(N, 1.0f);
    LinearCeResult r = linearCeReference(in, p);
    EXPECT_EQ(r.loss, 0.0);
    EXPECT_EQ(r.zLossTotal, 0.0);
    expectAllZero(r.rowLoss, "rowLoss");
    expectAllZero(r.dh, "dh");
    expectAllZero(r.dW, "dW");
    expectAllZero(r.db, "db");
  }
}

// Rows of different lengths are separate problems. Every logit carries the
// offset 1e8 (exact in f32 and in the product with W = I).
TEST(LinearCeNumerics, LargeCommonOffset) {
  json::Object c = numericsCase("large-common-offset");
  expectLinearCeCase(c);
  const json::Array &rows = *c.getArray("logits");
  std::vector<int64_t> target = integers(field(c, "target"));
  const json::Object &e = *c.getObject("expect");
  std::vector<double> ce = numbers(field(e, "ce"));
  LinearCeParams p;
  p.reduction = Reduction::Sum;
  for (size_t i = 0; i < rows.size(); ++i) {
    SCOPED_TRACE("row " + std::to_string(i));
    std::vector<double> logits = numbers(rows[i]);
    int64_t V = logits.size();
    LinearCeResult r =
        linearCeReference(identityInputs(logits, V, {target[i]}), p);
    expectClose(r.loss, ce[i], 1e-15, "ce");
    if (i == 0)
      expectAllClose(r.dh, numbers(field(e, "grad_row0")), 1e-15, "grad_row0");
    // The same through the bias (h = 0): the offset lives in b.
    LinearCeInputs viaBias =
        makeInputs(1, 1, V, DType::F32, {0.0}, std::vector<double>(V, 1.0),
                   logits, {target[i]});
    expectClose(linearCeReference(viaBias, p).loss, ce[i], 1e-15,
                "ce via bias");
  }
}

// bf16 logits (V = 32000, all 0 but the target's 17.25) as W (V, 1) with
// h = [1]: dW[v, 0] is the logit gradient.
TEST(LinearCeNumerics, TargetGradPrecision) {
  json::Object c = numericsCase("target-grad-precision");
  expectLinearCeCase(c);
  const int64_t V = *c.getInteger("V"), y = 7;
  const json::Object &e = *c.getObject("expect");
  std::vector<double> W(V, 0.0);
  W[y] = 17.25;
  LinearCeParams p;
  p.reduction = Reduction::Sum;
  LinearCeResult r =
      linearCeReference(makeInputs(1, 1, V, DType::BF16, {1.0}, W, {}, {y}), p);
  expectClose(std::exp(-r.loss), number(field(e, "p_target")), 1e-13,
              "p_target");
  double gradTarget = number(field(e, "grad_target"));
  double gradOff = number(field(e, "grad_off_target"));
  EXPECT_NEAR(r.dW[y], gradTarget, 1e-12 * std::fabs(gradTarget));
  EXPECT_NEAR(r.dW[0], gradOff, 1e-12 * gradOff);
  EXPECT_NEAR(r.dW[V - 1], gradOff, 1e-12 * gradOff);
}

//===----------------------------------------------------------------------===//
// Errors.
//===----------------------------------------------------------------------===//

TEST(LinearCeReference, RejectsBadInputs) {
  auto base = [] {
    LinearCeInputs in = makeInputs(3, 2, 4, DType::F32, std::vector(6, 0.5),
                                   std::vector(8, 0.25), {}, {0, 3, -100});
    return in;
  };
  struct Bad {
    const char *what;
    std::function<void(LinearCeInputs &, LinearCeParams &)> edit;
  };
  const Bad cases[] = {
      {"N = -1",
       [](LinearCeInputs &in, LinearCeParams &) {
         in.N = -1;
         in.h.clear();
         in.target.clear();
       }},
      {"d = 0",
       [](LinearCeInputs &in, LinearCeParams &) {
         in.d = 0;
         in.h.clear();
         in.W.clear();
       }},
      {"V = 0",
       [](LinearCeInputs &in, LinearCeParams &) {
         in.V = 0;
         in.W.clear();
       }},
      {"N < 0", [](LinearCeInputs &in, LinearCeParams &) { in.N = -3; }},
      {"integer dtype",
       [](LinearCeInputs &in, LinearCeParams &) { in.dtype = DType::I32; }},
      {"h too short",
       [](LinearCeInputs &in, LinearCeParams &) { in.h.resize(20); }},
      {"W too long",
       [](LinearCeInputs &in, LinearCeParams &) { in.W.resize(36); }},
      {"h in the wrong dtype",
       [](LinearCeInputs &in, LinearCeParams &) { in.dtype = DType::BF16; }},
      {"bias of the wrong length",
       [](LinearCeInputs &in, LinearCeParams &) {
         in.bias.assign(3 * sizeof(float), 0);
       }},
      {"target of the wrong length",
       [](LinearCeInputs &in, LinearCeParams &) { in.target.push_back(0); }},
      {"target = V",
       [](LinearCeInputs &in, LinearCeParams &) { in.target[1] = 4; }},
      {"negative target that is not ignore_index",
       [](LinearCeInputs &in, LinearCeParams &) { in.target[1] = -1; }},
      {"-100 with another ignore_index",
       [](LinearCeInputs &, LinearCeParams &p) { p.ignoreIndex = -1; }},
      {"classWeight of the wrong length",
       [](LinearCeInputs &in, LinearCeParams &) {
         in.classWeight.assign(3, 1.0f);
       }},
      {"gradOutput with reduction mean",
       [](LinearCeInputs &in, LinearCeParams &) {
         in.gradOutput.assign(3, 1.0f);
       }},
      {"no gradOutput with reduction none",
       [](LinearCeInputs &, LinearCeParams &p) {
         p.reduction = Reduction::None;
       }},
      {"gradOutput of the wrong length",
       [](LinearCeInputs &in, LinearCeParams &p) {
         p.reduction = Reduction::None;
         in.gradOutput.assign(2, 1.0f);
       }},
      {"eps < 0",
       [](LinearCeInputs &, LinearCeParams &p) { p.labelSmoothing = -0.1; }},
      {"eps > 1",
       [](LinearCeInputs &, LinearCeParams &p) { p.labelSmoothing = 1.5; }},
      {"eps NaN",
       [](LinearCeInputs &, LinearCeParams &p) {
         p.labelSmoothing = std::numeric_limits<double>::quiet_NaN();
       }},
      {"negative softcap",
       [](LinearCeInputs &, LinearCeParams &p) { p.softcap = -1; }},
      {"infinite z-loss",
       [](LinearCeInputs &, LinearCeParams &p) {
         p.zLoss = std::numeric_limits<double>::infinity();
       }},
  };
  {
    LinearCeInputs in = base();
    LinearCeParams p;
    EXPECT_NO_THROW(linearCeReference(in, p)) << "the base case is valid";
    p.labelSmoothing = 1;
    EXPECT_NO_THROW(linearCeReference(in, p)) << "eps = 1 is valid";
  }
  for (const Bad &b : cases) {
    LinearCeInputs in = base();
    LinearCeParams p;
    b.edit(in, p);
    EXPECT_THROW(linearCeReference(in, p), Error) << b.what;
  }

  // The bad-target message names the row and the value.
  LinearCeInputs in = base();
  in.target[1] = 7;
  try {
    linearCeReference(in, LinearCeParams());
    ADD_FAILURE() << "no error for target 7";
  } catch (const Error &e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("row 1"), std::string::npos) << msg;
    EXPECT_NE(msg.find("target 7"), std::string::npos) << msg;
  }
}

} // namespace
