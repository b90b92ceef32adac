//===- CrossEntropyOpsTest.cpp - tilejit/ops/CrossEntropy.h ---------------===//
//
// The op on host memory in the interpreter against the fp64 row reference
// (ref::crossEntropyRow) for each reduction: the loss, the rows and the
// gradient, into a buffer and in place; an all-ignored batch; bad input;
// on the GPU, rows whose elements lie past 2^31.
//
//===----------------------------------------------------------------------===//
#include "tilejit/ops/CrossEntropy.h"

#include "kernels_spec/reference/LinearCeReference.h"
#include "tilejit/HostFloat.h"

#include "ExpectError.h"
#include "GpuTest.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

using namespace tilejit;
using namespace tilejit::ops;

namespace {

constexpr int64_t BT = 6, V = 777;

struct Problem {
  std::vector<float> logits, weight, gradOutput;
  std::vector<int64_t> target;
  Problem() : logits(BT * V), weight(V), gradOutput(BT) {
    std::mt19937 gen(11);
    std::normal_distribution<float> normal(0.f, 2.f);
    for (float &x : logits)
      x = normal(gen);
    for (int64_t v = 0; v < V; ++v)
      weight[v] = 0.5f + float(v % 7) / 7;
    for (int64_t r = 0; r < BT; ++r)
      gradOutput[r] = 0.25f * float(r + 1);
    target = {3, -100, V - 1, 0, 400, -100};
  }
};

struct Outputs {
  std::vector<float> loss = std::vector<float>(2), rowLoss, rowZ, grad;
  int32_t bad = -1;
};

Outputs run(const Problem &p, Reduction reduction, bool inPlace,
            bool perRow) {
  Outputs o;
  o.rowLoss.assign(BT, -1.f);
  o.rowZ.assign(BT, -1.f);
  o.grad = p.logits;
  CrossEntropyArgs a;
  a.dtype = DType::F32;
  a.BT = BT;
  a.V = V;
  std::vector<float> logits = p.logits;
  a.logits = inPlace ? o.grad.data() : logits.data();
  a.grad = o.grad.data();
  a.target = p.target.data();
  a.classWeight = p.weight.data();
  a.gradOutput = perRow ? p.gradOutput.data() : nullptr;
  a.labelSmoothing = 0.1;
  a.zLoss = 1e-3;
  a.softcap = 9;
  a.reduction = reduction;
  a.loss = o.loss.data();
  a.rowLoss = o.rowLoss.data();
  a.rowZLoss = o.rowZ.data();
  a.badTarget = &o.bad;
  std::vector<uint8_t> ws(crossEntropyWorkspaceBytes(a));
  crossEntropy(a, ws.data(), ws.size(), Device::Cpu, nullptr);
  return o;
}

/// The reference's loss, rows and gradient for the same problem.
Outputs reference(const Problem &p, Reduction reduction, bool perRow) {
  ref::LinearCeParams params;
  params.labelSmoothing = 0.1;
  params.zLoss = 1e-3;
  params.softcap = 9;
  double wSum = 0, den = 0, n = 0;
  for (float w : p.weight)
    wSum += w;
  for (int64_t y : p.target)
    if (y != -100) {
      den += p.weight[y];
      n += 1;
    }
  double gCe = reduction == Reduction::Mean ? 1 / den : 1;
  double gZ = reduction == Reduction::Mean ? 1 / n : 1;
  Outputs o;
  o.rowLoss.assign(BT, 0.f);
  o.rowZ.assign(BT, 0.f);
  o.grad.assign(BT * V, 0.f);
  double ce = 0, zl = 0;
  std::vector<double> r(V), dr(V);
  for (int64_t row = 0; row < BT; ++row) {
    if (p.target[row] == -100)
      continue;
    for (int64_t v = 0; v < V; ++v)
      r[v] = p.logits[row * V + v];
    double g = reduction == Reduction::None && perRow ? p.gradOutput[row] : 1;
    ref::RowTerms t = ref::crossEntropyRow(
        r.data(), V, p.target[row], p.weight.data(), wSum, params,
        reduction == Reduction::None ? g : gCe,
        reduction == Reduction::None ? g : gZ, dr.data());
    o.rowLoss[row] = float(t.ce + t.zl);
    o.rowZ[row] = float(t.zl);
    ce += t.ce;
    zl += t.zl;
    for (int64_t v = 0; v < V; ++v)
      o.grad[row * V + v] = float(dr[v]);
  }
  o.loss = {float(gCe * ce + gZ * zl), float(gZ * zl)};
  return o;
}

void expectNear(const std::vector<float> &got, const std::vector<float> &want,
                double rtol, double atol, const char *what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], atol + rtol * std::fabs(want[i]))
        << what << " " << i;
}

TEST(CrossEntropyOp, MatchesTheReferenceForEachReduction) {
  Problem p;
  for (Reduction red : {Reduction::Mean, Reduction::Sum, Reduction::None})
    for (bool inPlace : {false, true})
      for (bool perRow : {false, true}) {
        if (perRow && red != Reduction::None)
          continue;
        SCOPED_TRACE(::testing::Message() << "reduction " << int(red)
                                          << " in place " << inPlace
                                          << " per row " << perRow);
        Outputs got = run(p, red, inPlace, perRow);
        Outputs want = reference(p, red, perRow);
        expectNear(got.rowLoss, want.rowLoss, 1e-5, 1e-6, "row loss");
        expectNear(got.rowZ, want.rowZ, 1e-5, 1e-7, "row z-loss");
        expectNear(got.grad, want.grad, 1e-4, 1e-7, "grad");
        if (red != Reduction::None)
          expectNear(got.loss, want.loss, 1e-5, 1e-6, "loss");
        EXPECT_EQ(got.bad, 0);
      }
}

TEST(CrossEntropyOp, GradScaleScalesTheStoredGradientOnly) {
  Problem p;
  Outputs plain = run(p, Reduction::Mean, false, false);
  CrossEntropyArgs a;
  a.dtype = DType::F32;
  a.BT = BT;
  a.V = V;
  std::vector<float> grad(BT * V), rows(BT), z(BT), loss(2);
  a.logits = p.logits.data();
  a.grad = grad.data();
  a.target = p.target.data();
  a.classWeight = p.weight.data();
  a.labelSmoothing = 0.1;
  a.zLoss = 1e-3;
  a.softcap = 9;
  a.loss = loss.data();
  a.rowLoss = rows.data();
  a.rowZLoss = z.data();
  a.gradScale = 4;
  std::vector<uint8_t> ws(crossEntropyWorkspaceBytes(a));
  crossEntropy(a, ws.data(), ws.size(), Device::Cpu, nullptr);
  EXPECT_EQ(loss, plain.loss);
  for (int64_t i = 0; i < BT * V; ++i)
    ASSERT_EQ(grad[i], 4 * plain.grad[i]) << i;
  a.gradScale = 0;
  expectError([&] { crossEntropyWorkspaceBytes(a); }, {"gradient scale"});
}

TEST(CrossEntropyOp, AllIgnoredAndOutOfRange) {
  Problem p;
  p.target = {-100, -100, V, -100, -7, -100};
  Outputs got = run(p, Reduction::Mean, true, false);
  EXPECT_EQ(got.loss[0], 0.f);
  for (float g : got.grad)
    ASSERT_EQ(g, 0.f);
  EXPECT_EQ(got.bad, 5); // 1 + the last bad row
}

TEST(CrossEntropyOp, BadInputIsAClearError) {
  Problem p;
  CrossEntropyArgs a;
  a.dtype = DType::I32;
  a.BT = BT;
  a.V = V;
  expectError([&] { crossEntropyWorkspaceBytes(a); }, {"bf16, f16 or f32"});
  a.dtype = DType::F32;
  expectError([&] { crossEntropyWorkspaceBytes(a); }, {"are required"});
  a.V = 0;
  expectError([&] { crossEntropyWorkspaceBytes(a); }, {"V = 0"});
  a.V = V;
  std::vector<float> buf(BT * V), rows(BT), loss(2);
  a.logits = a.grad = buf.data();
  a.target = p.target.data();
  a.rowLoss = a.rowZLoss = rows.data();
  a.loss = loss.data();
  a.gradOutput = p.gradOutput.data();
  expectError([&] { crossEntropyWorkspaceBytes(a); }, {"reduction none"});
  a.gradOutput = nullptr;
  a.labelSmoothing = 2;
  expectError([&] { crossEntropyWorkspaceBytes(a); }, {"label smoothing"});
  a.labelSmoothing = 0;
  char ws[8];
  expectError([&] { crossEntropy(a, ws, sizeof ws, Device::Cpu, nullptr); },
              {"the workspace has 8 bytes"});
}

// BT * V > 2^31 bf16 logits, gradient in place (4.3 GB): row 16384 starts
// exactly at element 2^31 and the last row lies past it, rows 0 and 16382
// below; each is checked against the fp64 reference, and ignored row 16390
// gives zeros. The logits follow a pattern of (row, v), so the host holds
// one row at a time.
TEST(CrossEntropyOpGpu, RowsPastTwoToThe31Elements) {
  TILEJIT_SKIP_WITHOUT_GPU();
  constexpr int64_t kBT = 16400, kV = 131072;
  static_assert(kBT * kV > (int64_t(1) << 31));
  auto logit = [](int64_t row, int64_t v) {
    return float((v * 7 + row * 13) % 97) / 16.f - 3.f;
  };
  cuda::Device device = cuda::Device::open();
  cuda::DeviceBuffer logits(size_t(kBT * kV) * 2), target(kBT * 8),
      rows(kBT * 4), zRows(kBT * 4);
  {
    std::vector<uint16_t> row(kV);
    for (int64_t r = 0; r < kBT; ++r) {
      for (int64_t v = 0; v < kV; ++v)
        row[v] = floatToBf16(logit(r, v));
      logits.copyFromHost(row.data(), kV * 2, size_t(r * kV) * 2);
    }
  }
  std::vector<int64_t> y(kBT);
  for (int64_t r = 0; r < kBT; ++r)
    y[r] = r % 7 == 3 ? -100 : (r * 7919) % kV;
  target.copyFromHost(y.data(), kBT * 8);
  CrossEntropyArgs a;
  a.dtype = DType::BF16;
  a.BT = kBT;
  a.V = kV;
  a.logits = reinterpret_cast<const void *>(logits.ptr());
  a.grad = reinterpret_cast<void *>(logits.ptr());
  a.target = reinterpret_cast<const int64_t *>(target.ptr());
  a.reduction = Reduction::None;
  a.rowLoss = reinterpret_cast<float *>(rows.ptr());
  a.rowZLoss = reinterpret_cast<float *>(zRows.ptr());
  cuda::DeviceBuffer ws(crossEntropyWorkspaceBytes(a));
  crossEntropy(a, reinterpret_cast<void *>(ws.ptr()), ws.size(), Device::Gpu,
               nullptr);
  cuda::synchronize();
  std::vector<float> loss(kBT);
  rows.copyToHost(loss.data(), kBT * 4);
  ref::LinearCeParams params;
  std::vector<double> r(kV), dr(kV);
  std::vector<uint16_t> got(kV);
  for (int64_t row : {int64_t(0), int64_t(16382), int64_t(16384), kBT - 1}) {
    ASSERT_NE(y[row], -100) << row;
    for (int64_t v = 0; v < kV; ++v)
      r[v] = bf16ToFloat(floatToBf16(logit(row, v)));
    ref::RowTerms t = ref::crossEntropyRow(r.data(), kV, y[row], nullptr,
                                           double(kV), params, 1, 1, dr.data());
    EXPECT_NEAR(loss[row], t.ce, 1e-4 * t.ce) << "row " << row;
    logits.copyToHost(got.data(), kV * 2, size_t(row * kV) * 2);
    for (int64_t v = 0; v < kV; ++v)
      ASSERT_NEAR(bf16ToFloat(got[v]), dr[v], 1e-7 + std::ldexp(std::fabs(dr[v]), -7))
          << "row " << row << ", v " << v;
  }
  ASSERT_EQ(y[16390], -100);
  EXPECT_EQ(loss[16390], 0.f);
  logits.copyToHost(got.data(), kV * 2, size_t(16390 * kV) * 2);
  for (int64_t v = 0; v < kV; ++v)
    ASSERT_EQ(got[v] & 0x7fff, 0) << "ignored row, v " << v;
}

} // namespace
