//===- ReferenceTest.cpp - tests of the fp64 CE+TVD reference -------------===//
//
// Checks the reference against the independent fp64 vectors and the numerics
// cases in tests/data, the hand-checked values of docs/semantics.md §1, a
// finite-difference gradient, the error paths, the host float conversions
// and the input generator.
//
//===----------------------------------------------------------------------===//
#include "kernels_spec/reference/CeTvdReference.h"
#include "kernels_spec/reference/Inputs.h"

#include "tilejit/Error.h"
#include "tilejit/HostFloat.h"

#include "llvm/Support/JSON.h"

#include "TestData.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <random>
#include <set>
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

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kVectorTol = 1e-9;
constexpr double kDefaultTol = 1e-6;

//===----------------------------------------------------------------------===//
// Test data (TestData.h reads it).
//===----------------------------------------------------------------------===//

// The cases of a data file whose "kernel" mentions fused_ce_tvd.
std::vector<json::Object> ceTvdCases(const json::Value &file) {
  std::vector<json::Object> out;
  for (const json::Value &c : *file.getAsObject()->getArray("cases")) {
    const json::Object &o = *c.getAsObject();
    if (o.getString("kernel")->contains("fused_ce_tvd"))
      out.push_back(o);
  }
  return out;
}

//===----------------------------------------------------------------------===//
// Comparison and buffer helpers.
//===----------------------------------------------------------------------===//

// |actual - expected| <= tol * max(1, |expected|); infinities must match.
void expectClose(double actual, double expected, double tol,
                 const std::string &what) {
  if (std::isinf(expected)) {
    EXPECT_EQ(actual, expected) << what;
    return;
  }
  EXPECT_LE(std::fabs(actual - expected),
            tol * std::max(1.0, std::fabs(expected)))
      << what << ": actual " << actual << ", expected " << expected;
}

void expectAllClose(const std::vector<double> &actual,
                    const std::vector<double> &expected, double tol,
                    const std::string &what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (size_t i = 0; i < actual.size(); ++i)
    expectClose(actual[i], expected[i], tol,
                what + "[" + std::to_string(i) + "]");
}

void expectNoNaN(const std::vector<double> &values, const std::string &what) {
  for (size_t i = 0; i < values.size(); ++i)
    EXPECT_FALSE(std::isnan(values[i])) << what << "[" << i << "]";
}

// A host buffer of `dtype` holding `values` (rounded through float).
std::vector<uint8_t> typedBuffer(const std::vector<double> &values,
                                 DType dtype) {
  std::vector<uint8_t> out(values.size() * dtypeSize(dtype));
  for (size_t i = 0; i < values.size(); ++i)
    storeFromDouble(out.data(), dtype, i, values[i]);
  return out;
}

// A CE+TVD problem with both logits in one dtype, for short test calls.
struct Batch {
  std::vector<uint8_t> student, teacher;
  std::vector<int64_t> target;
  DType dtype;
  int64_t BT, V;

  Batch(const std::vector<double> &s, const std::vector<double> &t,
        std::vector<int64_t> y, DType dtype)
      : student(typedBuffer(s, dtype)), teacher(typedBuffer(t, dtype)),
        target(std::move(y)), dtype(dtype), BT(target.size()),
        V(static_cast<int64_t>(s.size()) / BT) {}

  CeTvdForward forward() const {
    return ceTvdForward(student.data(), teacher.data(), dtype, target.data(),
                        BT, V, V);
  }
  std::vector<double> backward(double gCe, double gTvd) const {
    std::vector<double> gc(BT, gCe), gt(BT, gTvd), grad(BT * V);
    ceTvdBackward(student.data(), teacher.data(), dtype, target.data(), BT, V,
                  V, gc.data(), gt.data(), grad.data());
    return grad;
  }
  double loss(double alpha, double beta, bool mean) const {
    return ceTvdReducedLoss(student.data(), teacher.data(), dtype,
                            target.data(), BT, V, V, alpha, beta, mean);
  }
  std::vector<double> reducedGrad(double alpha, double beta, bool mean) const {
    std::vector<double> grad(BT * V);
    ceTvdReducedBackward(student.data(), teacher.data(), dtype, target.data(),
                         BT, V, V, alpha, beta, mean, grad.data());
    return grad;
  }
};

const DType kFloatTypes[] = {DType::F32, DType::BF16, DType::F16};

//===----------------------------------------------------------------------===//
// (a) Independent fp64 vectors.
//===----------------------------------------------------------------------===//

// Ignored rows have null lse/sigma in the vectors; the API reports 0.
std::vector<double> nullAsZero(std::vector<double> v) {
  for (double &x : v)
    if (std::isnan(x))
      x = 0.0;
  return v;
}

void checkVectorCase(const json::Object &c) {
  int64_t BT = *c.getInteger("BT"), V = *c.getInteger("V");
  int64_t ignore = *c.getInteger("ignore_index");
  std::vector<double> s = numbers(field(c, "student"));
  std::vector<double> t = numbers(field(c, "teacher"));
  std::vector<int64_t> y = integers(field(c, "target"));
  ASSERT_EQ(s.size(), size_t(BT * V));

  const json::Object &u = *c.getObject("unreduced");
  CeTvdForward f = ceTvdForward(s.data(), t.data(), y.data(), BT, V, V, ignore);
  expectAllClose(f.ce, numbers(field(u, "ce")), kVectorTol, "ce");
  expectAllClose(f.tvd, numbers(field(u, "tvd")), kVectorTol, "tvd");
  expectAllClose(f.lseS, nullAsZero(numbers(field(u, "lse_student"))),
                 kVectorTol, "lse_student");
  expectAllClose(f.lseT, nullAsZero(numbers(field(u, "lse_teacher"))),
                 kVectorTol, "lse_teacher");
  expectAllClose(f.sigma, nullAsZero(numbers(field(u, "sigma"))), kVectorTol,
                 "sigma");

  std::vector<double> gCe = numbers(field(u, "g_ce"));
  std::vector<double> gTvd = numbers(field(u, "g_tvd"));
  std::vector<double> grad(BT * V);
  ceTvdBackward(s.data(), t.data(), y.data(), BT, V, V, gCe.data(), gTvd.data(),
                grad.data(), ignore);
  expectAllClose(grad, numbers(field(u, "grad_student")), kVectorTol,
                 "grad_student");

  const json::Object &r = *c.getObject("reduced_mean");
  double alpha = *r.getNumber("alpha"), beta = *r.getNumber("beta");
  expectClose(ceTvdReducedLoss(s.data(), t.data(), y.data(), BT, V, V, alpha,
                               beta, /*mean=*/true, ignore),
              *r.getNumber("loss"), kVectorTol, "reduced_mean loss");
  ceTvdReducedBackward(s.data(), t.data(), y.data(), BT, V, V, alpha, beta,
                       /*mean=*/true, grad.data(), ignore);
  expectAllClose(grad, numbers(field(r, "grad_student")), kVectorTol,
                 "reduced_mean grad_student");
}

TEST(CeTvdReference, MatchesFp64Vectors) {
  std::vector<json::Object> cases = ceTvdCases(readJson("vectors.json"));
  ASSERT_GE(cases.size(), 3u);
  for (const json::Object &c : cases) {
    SCOPED_TRACE(c.getString("id")->str());
    checkVectorCase(c);
  }
}

// The typed (bf16/f16/f32) entry points must equal the fp64 entry point fed
// the same, already rounded values: they differ only in how rows are loaded.
TEST(CeTvdReference, TypedPathsMatchFp64PathOnRoundedInputs) {
  json::Object c = ceTvdCases(readJson("vectors.json"))[0];
  int64_t BT = *c.getInteger("BT"), V = *c.getInteger("V");
  std::vector<int64_t> y = integers(field(c, "target"));
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(dtypeName(dtype));
    Batch b(numbers(field(c, "student")), numbers(field(c, "teacher")), y,
            dtype);
    std::vector<double> s(BT * V), t(BT * V);
    for (int64_t i = 0; i < BT * V; ++i) {
      s[i] = loadAsDouble(b.student.data(), dtype, i);
      t[i] = loadAsDouble(b.teacher.data(), dtype, i);
    }
    CeTvdForward typed = b.forward();
    CeTvdForward f64 = ceTvdForward(s.data(), t.data(), y.data(), BT, V, V);
    EXPECT_EQ(typed.ce, f64.ce);
    EXPECT_EQ(typed.tvd, f64.tvd);
    EXPECT_EQ(typed.sigma, f64.sigma);
    std::vector<double> grad(BT * V);
    ceTvdReducedBackward(s.data(), t.data(), y.data(), BT, V, V, 0.7, 0.3, true,
                         grad.data());
    EXPECT_EQ(b.reducedGrad(0.7, 0.3, true), grad);
  }
}

// A row stride larger than V must skip the padding, whatever it holds.
TEST(CeTvdReference, HonoursRowStride) {
  json::Object c = ceTvdCases(readJson("vectors.json"))[0];
  int64_t BT = *c.getInteger("BT"), V = *c.getInteger("V"), stride = V + 5;
  std::vector<double> s = numbers(field(c, "student"));
  std::vector<double> t = numbers(field(c, "teacher"));
  std::vector<int64_t> y = integers(field(c, "target"));
  double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> ps(BT * stride, nan), pt(BT * stride, nan);
  for (int64_t r = 0; r < BT; ++r)
    for (int64_t v = 0; v < V; ++v) {
      ps[r * stride + v] = s[r * V + v];
      pt[r * stride + v] = t[r * V + v];
    }
  CeTvdForward dense = ceTvdForward(s.data(), t.data(), y.data(), BT, V, V);
  CeTvdForward strided =
      ceTvdForward(ps.data(), pt.data(), y.data(), BT, V, stride);
  EXPECT_EQ(dense.ce, strided.ce);
  EXPECT_EQ(dense.tvd, strided.tvd);
  std::vector<double> g1(BT * V), g2(BT * V);
  ceTvdReducedBackward(s.data(), t.data(), y.data(), BT, V, V, 1, 1, true,
                       g1.data());
  ceTvdReducedBackward(ps.data(), pt.data(), y.data(), BT, V, stride, 1, 1,
                       true, g2.data());
  EXPECT_EQ(g1, g2);
}

// Central differences of the reduced loss against the analytic gradient.
TEST(CeTvdReference, GradientMatchesFiniteDifferences) {
  const int64_t BT = 3, V = 6;
  std::mt19937_64 rng(42);
  std::normal_distribution<double> n(0.0, 1.5);
  std::vector<double> s(BT * V), t(BT * V);
  for (int64_t i = 0; i < BT * V; ++i) {
    s[i] = n(rng);
    t[i] = n(rng);
  }
  std::vector<int64_t> y = {4, -100, 1};
  const double alpha = 0.6, beta = 1.7, h = 1e-6;
  std::vector<double> grad(BT * V);
  ceTvdReducedBackward(s.data(), t.data(), y.data(), BT, V, V, alpha, beta,
                       true, grad.data());
  for (int64_t i = 0; i < BT * V; ++i) {
    std::vector<double> plus = s, minus = s;
    plus[i] += h;
    minus[i] -= h;
    double lp = ceTvdReducedLoss(plus.data(), t.data(), y.data(), BT, V, V,
                                 alpha, beta, true);
    double lm = ceTvdReducedLoss(minus.data(), t.data(), y.data(), BT, V, V,
                                 alpha, beta, true);
    EXPECT_NEAR(grad[i], (lp - lm) / (2 * h), 1e-7) << "element " << i;
  }
}

// 2^20 elements takes the multi-threaded path; single rows do not. Both
// must agree exactly, and the shuffled rows must land in the right place.
TEST(CeTvdReference, ThreadedRowsMatchSingleRows) {
  const int64_t BT = 64, V = 16384;
  CeTvdInputs in = makeCeTvdInputs(BT, V, DType::BF16, 5);
  const uint8_t *s = in.student.data(), *t = in.teacher.data();
  CeTvdForward all = ceTvdForward(s, t, in.dtype, in.target.data(), BT, V, V);
  std::vector<double> grads(BT * V), grad(V);
  ceTvdReducedBackward(s, t, in.dtype, in.target.data(), BT, V, V, 1, 1, false,
                       grads.data());
  for (int64_t r = 0; r < BT; ++r) {
    size_t off = r * V * dtypeSize(in.dtype);
    CeTvdForward one =
        ceTvdForward(s + off, t + off, in.dtype, &in.target[r], 1, V, V);
    EXPECT_EQ(all.ce[r], one.ce[0]) << "row " << r;
    EXPECT_EQ(all.tvd[r], one.tvd[0]) << "row " << r;
    ceTvdReducedBackward(s + off, t + off, in.dtype, &in.target[r], 1, V, V, 1,
                         1, false, grad.data());
    EXPECT_TRUE(std::equal(grad.begin(), grad.end(), grads.begin() + r * V))
        << "row " << r;
  }
}

//===----------------------------------------------------------------------===//
// (b) numerics.json cases.
//===----------------------------------------------------------------------===//

// Every fused_ce_tvd numerics case must have a test below; a new case in the
// data file fails here until one is written.
TEST(CeTvdNumerics, EveryCaseIsCovered) {
  std::set<std::string> covered = {"ce-all-neg-inf-but-target",
                                   "ce-all-very-negative",
                                   "mean-over-valid-rows",
                                   "target-grad-precision",
                                   "tvd-ties",
                                   "self-distillation",
                                   "large-common-offset"};
  std::vector<json::Object> cases = ceTvdCases(readJson("numerics.json"));
  EXPECT_GE(cases.size(), covered.size());
  for (const json::Object &c : cases)
    EXPECT_TRUE(covered.count(c.getString("id")->str()))
        << "numerics case " << c.getString("id")->str() << " has no test";
}

// Runs a numerics case that lists student/teacher/target and expects ce,
// tvd and the gradient for g_ce = g_tvd = 1, in each of `dtypes`.
void checkGradCase(const std::string &id, const std::vector<DType> &dtypes) {
  json::Object c = numericsCase(id);
  const json::Object &e = *c.getObject("expect");
  for (DType dtype : dtypes) {
    SCOPED_TRACE(id + " " + dtypeName(dtype));
    Batch b(numbers(field(c, "student")), numbers(field(c, "teacher")),
            integers(field(c, "target")), dtype);
    CeTvdForward f = b.forward();
    expectAllClose(f.ce, numbers(field(e, "ce")), kDefaultTol, "ce");
    expectAllClose(f.tvd, numbers(field(e, "tvd")), kDefaultTol, "tvd");
    std::vector<double> grad = b.backward(1.0, 1.0);
    expectNoNaN(grad, "grad");
    expectAllClose(grad, numbers(field(e, "grad_student_with_g_ce_1_g_tvd_1")),
                   kDefaultTol, "grad");
  }
}

TEST(CeTvdNumerics, AllNegInfButTarget) {
  checkGradCase("ce-all-neg-inf-but-target",
                {DType::F32, DType::BF16, DType::F16});
}

// fp16 cannot hold -1e5 (it overflows to -inf), so f32 and bf16 only.
TEST(CeTvdNumerics, AllVeryNegative) {
  checkGradCase("ce-all-very-negative", {DType::F32, DType::BF16});
}

// Our documented convention for a row with no finite logit at all.
TEST(CeTvdNumerics, EntirelyNegInfRowIsNotNaN) {
  std::vector<double> s(4, -kInf), t = {0, 0, 1, 2};
  Batch b(s, t, {2}, DType::F32);
  CeTvdForward f = b.forward();
  EXPECT_EQ(f.lseS[0], -kInf);
  EXPECT_EQ(f.ce[0], kInf);
  EXPECT_DOUBLE_EQ(f.tvd[0], 0.5);
  EXPECT_EQ(f.sigma[0], 0.0);
  std::vector<double> grad = b.backward(2.0, 1.0);
  EXPECT_EQ(grad, (std::vector<double>{0, 0, -2.0, 0}));
}

TEST(CeTvdNumerics, MeanOverValidRows) {
  json::Object c = numericsCase("mean-over-valid-rows");
  const json::Object &e = *c.getObject("expect");
  Batch b(numbers(field(c, "student")), numbers(field(c, "teacher")),
          integers(field(c, "target")), DType::F32);
  expectClose(b.loss(1, 0, true), *e.getNumber("loss_mean"), kDefaultTol,
              "loss_mean");
  expectClose(b.loss(1, 0, false), *e.getNumber("loss_sum"), kDefaultTol,
              "loss_sum");
  std::vector<double> grad = b.reducedGrad(1, 0, true);
  std::vector<double> row0(grad.begin(), grad.begin() + b.V);
  std::vector<double> row1(grad.begin() + b.V, grad.begin() + 2 * b.V);
  expectAllClose(row0, numbers(field(e, "grad_row0_mean")), kDefaultTol,
                 "grad_row0_mean");
  expectAllClose(row1, numbers(field(e, "grad_row1_mean")), kDefaultTol,
                 "grad_row1_mean");
}

TEST(CeTvdNumerics, AllRowsIgnored) {
  json::Object c = numericsCase("all-rows-ignored");
  const json::Object &e = *c.getObject("expect");
  Batch b(numbers(field(c, "student")), numbers(field(c, "teacher")),
          integers(field(c, "target")), DType::F32);
  for (bool mean : {true, false}) {
    SCOPED_TRACE(mean ? "mean" : "sum");
    EXPECT_EQ(b.loss(0.7, 0.3, mean),
              *e.getNumber(mean ? "loss_mean" : "loss_sum"));
    for (double g : b.reducedGrad(0.7, 0.3, mean))
      EXPECT_EQ(g, 0.0);
  }
}

// bf16 logits, all 0 but 17.25 at the target: p_y - 1 must not cancel.
TEST(CeTvdNumerics, TargetGradPrecision) {
  json::Object c = numericsCase("target-grad-precision");
  const json::Object &e = *c.getObject("expect");
  const int64_t V = *c.getInteger("V"), y = 7;
  std::vector<double> logits(V, 0.0);
  logits[y] = 17.25;
  Batch b(logits, logits, {y}, DType::BF16);
  expectClose(std::exp(-b.forward().ce[0]), *e.getNumber("p_target"),
              kDefaultTol, "p_target");
  std::vector<double> grad = b.reducedGrad(1, 0, /*mean=*/false);
  double expTarget = *e.getNumber("grad_target");
  double expOff = *e.getNumber("grad_off_target");
  EXPECT_NEAR(grad[y], expTarget, 0.01 * std::fabs(expTarget));
  EXPECT_NEAR(grad[0], expOff, 0.01 * expOff);
  EXPECT_NEAR(grad[V - 1], expOff, 0.01 * expOff);
}

// p_v == q_v exactly for the tied entries: sign(0) = 0 in the gradient.
TEST(CeTvdNumerics, TvdTies) {
  json::Object c = numericsCase("tvd-ties");
  const json::Object &e = *c.getObject("expect");
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(dtypeName(dtype));
    Batch b(numbers(field(c, "student")), numbers(field(c, "teacher")),
            integers(field(c, "target")), dtype);
    expectClose(b.forward().tvd[0], *e.getNumber("tvd"), kDefaultTol, "tvd");
    expectAllClose(b.backward(0.0, 1.0),
                   numbers(field(e, "grad_student_g_ce_0_g_tvd_1")),
                   kDefaultTol, "grad");
  }
}

// Ties where the teacher swaps two of the student's logits: summed in index
// order the two normalizers differ by one ulp for this row, which would
// turn the six ties into +-1 signs. They must stay exact ties.
TEST(CeTvdNumerics, PermutedTiesAreExact) {
  std::vector<double> s = {2.9, -0.5, -2.3, -2.0, -1.6, 1.5, -2.4, 2.5};
  std::vector<double> t = {-2.3, -0.5, 2.9, -2.0, -1.6, 1.5, -2.4, 2.5};
  std::vector<int64_t> y = {0};
  CeTvdForward f = ceTvdForward(s.data(), t.data(), y.data(), 1, 8, 8);
  EXPECT_EQ(f.lseS[0], f.lseT[0]);
  std::vector<double> gCe = {0.0}, gTvd = {1.0}, grad(8);
  ceTvdBackward(s.data(), t.data(), y.data(), 1, 8, 8, gCe.data(), gTvd.data(),
                grad.data());
  // Tied entries: sign(p - q) = 0, so the gradient is -0.5 * p * sigma.
  for (int v : {1, 3, 4, 5, 6, 7}) {
    double p = std::exp(s[v] - f.lseS[0]);
    EXPECT_NEAR(grad[v], -0.5 * p * f.sigma[0], 1e-12) << "element " << v;
  }
}

TEST(CeTvdNumerics, SelfDistillation) {
  numericsCase("self-distillation"); // still present in the data file
  const int64_t BT = 8, V = 1000;
  std::mt19937_64 rng(7);
  std::normal_distribution<double> n(0.0, 3.0);
  std::uniform_int_distribution<int64_t> tok(0, V - 1);
  std::vector<double> logits(BT * V);
  for (double &x : logits)
    x = n(rng);
  std::vector<int64_t> y(BT);
  for (int64_t &x : y)
    x = tok(rng);
  Batch b(logits, logits, y, DType::BF16);
  b.teacher = b.student; // bit-identical copy
  CeTvdForward f = b.forward();
  for (int64_t r = 0; r < BT; ++r) {
    EXPECT_EQ(f.tvd[r], 0.0) << "row " << r;
    EXPECT_EQ(f.sigma[r], 0.0) << "row " << r;
  }
  for (double g : b.backward(0.0, 1.0))
    ASSERT_EQ(g, 0.0);
}

// Rows of different lengths, so one Batch per row.
TEST(CeTvdNumerics, LargeCommonOffset) {
  json::Object c = numericsCase("large-common-offset");
  const json::Object &e = *c.getObject("expect");
  std::vector<double> ce = numbers(field(e, "ce"));
  const json::Array &rows = *c.getArray("logits");
  std::vector<int64_t> y = integers(field(c, "target"));
  for (size_t r = 0; r < rows.size(); ++r) {
    std::vector<double> logits = numbers(rows[r]);
    Batch b(logits, logits, {y[r]}, DType::F32);
    expectClose(b.forward().ce[0], ce[r], kDefaultTol, "ce");
    if (r == 0)
      expectAllClose(b.backward(1.0, 1.0), numbers(field(e, "grad_row0")),
                     kDefaultTol, "grad_row0");
  }
}

//===----------------------------------------------------------------------===//
// (c) Hand-checked values of docs/semantics.md §1.
//===----------------------------------------------------------------------===//

TEST(CeTvdReference, HandCheckedSemanticsValues) {
  Batch b({0, 0, 1, 2}, {0, 0, 2, 1}, {1}, DType::F32);
  EXPECT_NEAR(b.forward().tvd[0], 0.385780, 1e-6);
  std::vector<double> grad = b.backward(0.0, 1.0);
  std::vector<double> expected = {-0.015932, -0.015932, -0.155564, 0.187428};
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_NEAR(grad[i], expected[i], 1e-6) << "element " << i;
}

//===----------------------------------------------------------------------===//
// (d) Errors.
//===----------------------------------------------------------------------===//

// Expects a tilejit::Error whose message contains every string in `parts`.
template <typename Fn>
void expectError(Fn fn, const std::vector<std::string> &parts) {
  try {
    fn();
    ADD_FAILURE() << "no tilejit::Error thrown";
  } catch (const Error &e) {
    for (const std::string &p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "'" << e.what() << "' lacks '" << p << "'";
  }
}

TEST(CeTvdReference, OutOfRangeTargetThrows) {
  std::vector<double> s(3 * 4, 0.0);
  for (int64_t bad : {int64_t(4), int64_t(-1), int64_t(-101)}) {
    Batch b(s, s, {0, -100, bad}, DType::F32);
    std::string value = std::to_string(bad);
    expectError([&] { b.forward(); }, {"row 2", value});
    expectError([&] { b.backward(1, 1); }, {"row 2", value});
    expectError([&] { b.loss(1, 1, true); }, {"row 2", value});
    expectError([&] { b.reducedGrad(1, 1, true); }, {"row 2", value});
  }
  // A custom ignore_index makes -100 an ordinary (invalid) target.
  std::vector<int64_t> y = {-100};
  expectError([&] { ceTvdForward(s.data(), s.data(), y.data(), 1, 4, 4, -1); },
              {"row 0", "-100"});
}

TEST(CeTvdReference, BadShapesThrow) {
  std::vector<double> s(8, 0.0);
  std::vector<int64_t> y = {0, 0};
  expectError([&] { ceTvdForward(s.data(), s.data(), y.data(), -1, 4, 4); },
              {"BT"});
  expectError([&] { ceTvdForward(s.data(), s.data(), y.data(), 2, 0, 4); },
              {"V"});
  expectError([&] { ceTvdForward(s.data(), s.data(), y.data(), 2, 4, 3); },
              {"stride"});
  expectError(
      [&] { ceTvdForward(s.data(), s.data(), DType::I32, y.data(), 2, 4, 4); },
      {"dtype"});
  EXPECT_THROW(
      ceTvdReducedLoss(s.data(), s.data(), y.data(), -1, 4, 4, 1, 1, true),
      Error);
}

// An empty batch: no rows, and a reduced loss of 0 (mean and sum).
TEST(CeTvdReference, EmptyBatch) {
  std::vector<double> s(4, 0.0);
  std::vector<int64_t> y;
  EXPECT_EQ(ceTvdReducedLoss(s.data(), s.data(), y.data(), 0, 4, 4, 1, 1, true),
            0.0);
  EXPECT_EQ(
      ceTvdReducedLoss(s.data(), s.data(), y.data(), 0, 4, 4, 1, 1, false),
      0.0);
}

//===----------------------------------------------------------------------===//
// (e) Host float conversions.
//===----------------------------------------------------------------------===//

TEST(HostFloat, Bf16RoundsToNearestEven) {
  EXPECT_EQ(floatToBf16(1.0f), 0x3F80);
  EXPECT_EQ(floatToBf16(-2.0f), 0xC000);
  // Exactly halfway: ties go to the even neighbour.
  EXPECT_EQ(floatToBf16(floatFromBits(0x3F808000u)), 0x3F80);
  EXPECT_EQ(floatToBf16(floatFromBits(0x3F818000u)), 0x3F82);
  // Just above halfway rounds up; just below rounds down.
  EXPECT_EQ(floatToBf16(floatFromBits(0x3F808001u)), 0x3F81);
  EXPECT_EQ(floatToBf16(floatFromBits(0x3F807FFFu)), 0x3F80);
  EXPECT_EQ(floatToBf16(std::numeric_limits<float>::max()), 0x7F80);
  EXPECT_EQ(floatToBf16(-std::numeric_limits<float>::infinity()), 0xFF80);
  // A NaN whose payload lives only in the dropped bits stays NaN.
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBf16(floatFromBits(0x7F800001u)))));
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBf16(floatFromBits(0xFFC00000u)))));
}

TEST(HostFloat, HalfRoundsToNearestEven) {
  EXPECT_EQ(floatToHalf(1.0f), 0x3C00);
  EXPECT_EQ(floatToHalf(-2.0f), 0xC000);
  EXPECT_EQ(floatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3C00); // tie, even
  EXPECT_EQ(floatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  EXPECT_EQ(floatToHalf(65504.0f), 0x7BFF);
  EXPECT_EQ(floatToHalf(65519.0f), 0x7BFF);
  EXPECT_EQ(floatToHalf(65520.0f), 0x7C00); // tie rounds to even = inf
  EXPECT_EQ(floatToHalf(std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_EQ(floatToHalf(-std::numeric_limits<float>::infinity()), 0xFC00);
  // Subnormals: units of 2^-24.
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -14)), 0x0400);
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -25)), 0x0000); // tie, even
  EXPECT_EQ(floatToHalf(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(floatToHalf(std::ldexp(3.0f, -25)), 0x0002);    // tie, even
  EXPECT_EQ(floatToHalf(std::ldexp(5.0f, -25)), 0x0002);    // tie, even
  EXPECT_EQ(floatToHalf(std::ldexp(1023.5f, -24)), 0x0400); // to normal
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -30)), 0x0000);
  EXPECT_EQ(floatToHalf(-std::ldexp(1.0f, -30)), 0x8000);
  EXPECT_EQ(halfToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(halfToFloat(0x7BFF), 65504.0f);
  EXPECT_TRUE(std::isnan(halfToFloat(floatToHalf(floatFromBits(0x7F800001u)))));
}

// Every 16-bit pattern survives 16-bit -> float -> 16-bit unchanged.
TEST(HostFloat, AllPatternsRoundTrip) {
  for (uint32_t h = 0; h <= 0xFFFF; ++h) {
    auto bits = static_cast<uint16_t>(h);
    float viaBf16 = bf16ToFloat(bits), viaHalf = halfToFloat(bits);
    if (std::isnan(viaBf16))
      EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBf16(viaBf16))));
    else
      EXPECT_EQ(floatToBf16(viaBf16), bits) << std::hex << h;
    if (std::isnan(viaHalf))
      EXPECT_TRUE(std::isnan(halfToFloat(floatToHalf(viaHalf))));
    else
      EXPECT_EQ(floatToHalf(viaHalf), bits) << std::hex << h;
  }
}

// Float -> half must pick the nearer neighbour for random values.
TEST(HostFloat, HalfPicksNearestNeighbour) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> mag(-26.0f, 16.0f);
  for (int i = 0; i < 20000; ++i) {
    float f = std::ldexp(1.0f + (rng() % 1000) / 1000.0f, int(mag(rng)));
    uint16_t h = floatToHalf(f);
    double got = halfToFloat(h);
    double down = halfToFloat(h - 1), up = halfToFloat(h + 1);
    if (h == 0 || std::isinf(got))
      continue;
    EXPECT_LE(std::fabs(got - f), std::fabs(down - f)) << f;
    EXPECT_LE(std::fabs(got - f), std::fabs(up - f)) << f;
  }
}

TEST(HostFloat, TypedLoadStore) {
  for (DType dtype : kFloatTypes) {
    std::vector<uint8_t> buf(4 * dtypeSize(dtype));
    storeFromDouble(buf.data(), dtype, 2, -3.5);
    EXPECT_EQ(loadAsDouble(buf.data(), dtype, 2), -3.5) << dtypeName(dtype);
    EXPECT_EQ(loadAsDouble(buf.data(), dtype, 1), 0.0) << dtypeName(dtype);
  }
  uint16_t bf = 0;
  storeFromDouble(&bf, DType::BF16, 0, 1.0 + 1.0 / 256); // tie -> 1.0
  EXPECT_EQ(bf, 0x3F80);
  int64_t i64 = -7;
  EXPECT_EQ(loadAsDouble(&i64, DType::I64, 0), -7.0);
  int32_t i32 = 0;
  EXPECT_THROW(storeFromDouble(&i32, DType::I32, 0, 1.0), Error);
}

//===----------------------------------------------------------------------===//
// (f) Input generator.
//===----------------------------------------------------------------------===//

TEST(CeTvdInputs, DeterministicWithPaddingRows) {
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(dtypeName(dtype));
    const int64_t BT = 40, V = 3000;
    CeTvdInputs a = makeCeTvdInputs(BT, V, dtype, 1234);
    CeTvdInputs b = makeCeTvdInputs(BT, V, dtype, 1234);
    CeTvdInputs c = makeCeTvdInputs(BT, V, dtype, 1235);
    ASSERT_EQ(a.student.size(), size_t(BT * V) * dtypeSize(dtype));
    EXPECT_EQ(a.student, b.student);
    EXPECT_EQ(a.teacher, b.teacher);
    EXPECT_EQ(a.target, b.target);
    EXPECT_NE(a.student, c.student);
    for (int64_t r = 0; r < BT; ++r) {
      if (r % 7 == 6)
        EXPECT_EQ(a.target[r], kCeTvdIgnoreIndex) << "row " << r;
      else
        EXPECT_TRUE(a.target[r] >= 0 && a.target[r] < V) << "row " << r;
    }
  }
}

TEST(CeTvdInputs, TvdIsInsideTheUnitInterval) {
  for (DType dtype : kFloatTypes) {
    SCOPED_TRACE(dtypeName(dtype));
    CeTvdInputs in = makeCeTvdInputs(21, 4096, dtype, 99);
    CeTvdForward f =
        ceTvdForward(in.student.data(), in.teacher.data(), in.dtype,
                     in.target.data(), in.BT, in.V, in.V);
    double sum = 0;
    int64_t valid = 0;
    for (int64_t r = 0; r < in.BT; ++r) {
      if (in.target[r] == kCeTvdIgnoreIndex)
        continue;
      sum += f.tvd[r];
      ++valid;
      EXPECT_TRUE(std::isfinite(f.ce[r]));
    }
    EXPECT_EQ(valid, 18);
    EXPECT_GT(sum / valid, 0.05);
    EXPECT_LT(sum / valid, 0.95);
  }
}

TEST(CeTvdInputs, BadArgumentsThrow) {
  EXPECT_THROW(makeCeTvdInputs(-1, 8, DType::BF16, 1), Error);
  EXPECT_EQ(makeCeTvdInputs(0, 8, DType::BF16, 1).target.size(), 0u);
  EXPECT_THROW(makeCeTvdInputs(8, 0, DType::BF16, 1), Error);
  EXPECT_THROW(makeCeTvdInputs(8, 8, DType::I64, 1), Error);
}

} // namespace
