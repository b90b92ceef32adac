//===- DistillationOpsTest.cpp - tilejit/ops/Distillation.h ---------------===//
//
// The op on host memory in the interpreter against the fp64 row references
// (ref::klDivRow, ref::jsdRow) for each divergence and reduction: the loss,
// the rows and the gradient, into a buffer and in place, with and without
// labels; V = 1; an all-ignored batch; bad input. On the GPU, the rows of
// the vocab sizes whose compiled schedule keeps rows on chip, in place.
//
//===----------------------------------------------------------------------===//
#include "tilejit/ops/Distillation.h"

#include "kernels_spec/reference/JsdReference.h"
#include "kernels_spec/reference/KlDivReference.h"
#include "runtime/CudaDriver.h"
#include "tilejit/HostFloat.h"

#include "ExpectError.h"
#include "GpuTest.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

using namespace tilejit;
using namespace tilejit::ops;

namespace {

struct Problem {
  Divergence divergence;
  int64_t BT, V;
  std::vector<float> student, teacher, gradOutput;
  std::vector<int64_t> label;
  double temperature = 1.7, beta = 0.3;

  /// Normal logits, or their log-softmax for JSD (log-probabilities).
  Problem(Divergence d, int64_t bt, int64_t v, unsigned seed = 11)
      : divergence(d), BT(bt), V(v), student(bt * v), teacher(bt * v),
        gradOutput(bt), label(bt) {
    std::mt19937 gen(seed);
    std::normal_distribution<float> normal(0.f, 2.f);
    for (std::vector<float> *rows : {&student, &teacher}) {
      for (float &x : *rows)
        x = normal(gen);
      if (d == Divergence::Jsd)
        for (int64_t r = 0; r < BT; ++r)
          logSoftmax(&(*rows)[r * V]);
    }
    for (int64_t r = 0; r < BT; ++r) {
      gradOutput[r] = 0.25f * float(r + 1);
      label[r] = r % 3 == 1 ? -100 : r * 5 % V;
    }
  }

  void logSoftmax(float *row) const {
    double m = *std::max_element(row, row + V), s = 0;
    for (int64_t v = 0; v < V; ++v)
      s += std::exp(double(row[v]) - m);
    for (int64_t v = 0; v < V; ++v)
      row[v] = float(double(row[v]) - m - std::log(s));
  }
};

struct Outputs {
  float loss = -1;
  std::vector<float> rowLoss, grad;
};

DistillationArgs argsFor(const Problem &p, Reduction reduction, bool withLabels,
                         bool perRow) {
  DistillationArgs a;
  a.divergence = p.divergence;
  a.dtype = DType::F32;
  a.BT = p.BT;
  a.V = p.V;
  a.teacher = p.teacher.data();
  a.label = withLabels ? p.label.data() : nullptr;
  a.temperature = p.temperature;
  a.beta = p.beta;
  a.reduction = reduction;
  a.gradOutput = perRow ? p.gradOutput.data() : nullptr;
  return a;
}

Outputs run(const Problem &p, Reduction reduction, bool withLabels,
            bool inPlace, bool perRow) {
  Outputs o;
  o.rowLoss.assign(p.BT, -1.f);
  o.grad = inPlace ? p.student : std::vector<float>(p.BT * p.V, -1.f);
  DistillationArgs a = argsFor(p, reduction, withLabels, perRow);
  a.student = inPlace ? o.grad.data() : p.student.data();
  a.grad = o.grad.data();
  a.loss = &o.loss;
  a.rowLoss = o.rowLoss.data();
  std::vector<uint8_t> bytes(distillationWorkspaceBytes(a) + 16);
  void *ws = bytes.data() + (16 - uintptr_t(bytes.data()) % 16) % 16;
  distillation(a, ws, bytes.size() - 16, Device::Cpu, nullptr);
  return o;
}

/// The references' loss, rows and gradient for the same problem.
Outputs reference(const Problem &p, Reduction reduction, bool withLabels,
                  bool perRow) {
  Outputs o;
  o.rowLoss.assign(p.BT, 0.f);
  o.grad.assign(p.BT * p.V, 0.f);
  double sum = 0, counted = 0;
  std::vector<double> s(p.V), t(p.V), g(p.V);
  for (int64_t r = 0; r < p.BT; ++r)
    counted += !withLabels || p.label[r] != -100;
  double scale = reduction == Reduction::Mean ? 1 / std::max(counted, 1.0) : 1;
  for (int64_t r = 0; r < p.BT; ++r) {
    if (withLabels && p.label[r] == -100)
      continue;
    for (int64_t v = 0; v < p.V; ++v) {
      s[v] = p.student[r * p.V + v];
      t[v] = p.teacher[r * p.V + v];
    }
    double row;
    if (p.divergence == Divergence::Jsd)
      row = ref::jsdRow(s.data(), t.data(), p.V, p.beta, g.data());
    else if (p.divergence == Divergence::JsdLogits)
      row = ref::jsdLogitsRow(s.data(), t.data(), p.V, p.beta, p.temperature,
                              g.data());
    else
      row = ref::klDivRow(s.data(), t.data(), p.V, p.temperature,
                          p.divergence == Divergence::KlReverse, g.data());
    o.rowLoss[r] = float(row);
    sum += row;
    double up = perRow ? p.gradOutput[r] : scale;
    for (int64_t v = 0; v < p.V; ++v)
      o.grad[r * p.V + v] = float(up * g[v]);
  }
  o.loss = float(scale * sum);
  return o;
}

void expectNear(const std::vector<float> &got, const std::vector<float> &want,
                double rtol, double atol, const char *what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], atol + rtol * std::fabs(want[i]))
        << what << " " << i;
}

const Divergence kAll[] = {Divergence::KlForward, Divergence::KlReverse,
                           Divergence::Jsd, Divergence::JsdLogits};

// f32 rows: losses are sums of V terms of both signs in f32 (1e-5 relative
// to the row, 1e-6 absolute); gradients elementwise (1e-5 relative).
TEST(DistillationOp, MatchesTheReferencesForEachReduction) {
  for (Divergence d : kAll) {
    Problem p(d, 6, 777);
    for (Reduction red : {Reduction::Mean, Reduction::Sum, Reduction::None})
      for (bool labels : {true, false})
        for (bool inPlace : {false, true})
          for (bool perRow : {false, true}) {
            if (perRow && red != Reduction::None)
              continue;
            SCOPED_TRACE(::testing::Message()
                         << "divergence " << int(d) << " reduction " << int(red)
                         << " labels " << labels << " in place " << inPlace
                         << " per row " << perRow);
            Outputs got = run(p, red, labels, inPlace, perRow);
            Outputs want = reference(p, red, labels, perRow);
            expectNear(got.rowLoss, want.rowLoss, 1e-5, 1e-6, "row loss");
            expectNear(got.grad, want.grad, 1e-5, 1e-7, "grad");
            if (red == Reduction::None)
              EXPECT_EQ(got.loss, -1.f); // not written
            else
              EXPECT_NEAR(got.loss, want.loss, 1e-5 * std::fabs(want.loss));
          }
  }
}

// V = 13000: the kernels' default schedule splits each row over the
// programs of a cluster and keeps it on chip (kl_div, jsd_logits), written
// over the student.
TEST(DistillationOp, KeptRowsInPlaceMatchTheReferences) {
  for (Divergence d : kAll) {
    Problem p(d, 3, 13000, 4);
    SCOPED_TRACE(int(d));
    Outputs got = run(p, Reduction::Mean, true, true, false);
    Outputs want = reference(p, Reduction::Mean, true, false);
    expectNear(got.rowLoss, want.rowLoss, 1e-5, 1e-6, "row loss");
    expectNear(got.grad, want.grad, 1e-5, 1e-8, "grad");
    EXPECT_NEAR(got.loss, want.loss, 1e-5 * std::fabs(want.loss));
  }
}

TEST(DistillationOp, OneClassGivesZero) {
  for (Divergence d : kAll) {
    Problem p(d, 3, 1);
    Outputs got = run(p, Reduction::Sum, false, false, false);
    EXPECT_EQ(got.loss, 0.f) << int(d);
    for (float g : got.grad)
      ASSERT_NEAR(g, 0.f, 1e-7) << int(d);
  }
}

// Classes no distribution can take (-inf logits or log-probabilities in
// both rows, a masked vocab) add nothing: no 0 * -inf.
TEST(DistillationOp, ImpossibleClassesAddNothing) {
  const float inf = std::numeric_limits<float>::infinity();
  for (Divergence d : kAll) {
    Problem p(d, 3, 300);
    for (int64_t r = 0; r < p.BT; ++r)
      for (int64_t v : {int64_t(0), int64_t(17), int64_t(299)})
        p.student[r * p.V + v] = p.teacher[r * p.V + v] = -inf;
    if (d == Divergence::Jsd) // renormalize the rest
      for (std::vector<float> *rows : {&p.student, &p.teacher})
        for (int64_t r = 0; r < p.BT; ++r)
          p.logSoftmax(&(*rows)[r * p.V]);
    Outputs got = run(p, Reduction::Sum, true, false, false);
    Outputs want = reference(p, Reduction::Sum, true, false);
    SCOPED_TRACE(int(d));
    expectNear(got.rowLoss, want.rowLoss, 1e-5, 1e-6, "row loss");
    expectNear(got.grad, want.grad, 1e-5, 1e-7, "grad");
  }
}

TEST(DistillationOp, AllIgnoredGivesZeroNotNaN) {
  for (Divergence d : kAll) {
    Problem p(d, 4, 300);
    std::fill(p.label.begin(), p.label.end(), -100);
    Outputs got = run(p, Reduction::Mean, true, true, false);
    EXPECT_EQ(got.loss, 0.f) << int(d);
    for (float g : got.grad)
      ASSERT_EQ(g, 0.f) << int(d);
  }
}

TEST(DistillationOp, NothingToDoWritesAZeroLoss) {
  Problem p(Divergence::Jsd, 0, 5);
  DistillationArgs a = argsFor(p, Reduction::Mean, true, false);
  float loss = -1;
  a.loss = &loss;
  alignas(16) char ws[16];
  distillation(a, ws, sizeof ws, Device::Cpu, nullptr);
  EXPECT_EQ(loss, 0.f);
}

TEST(DistillationOp, BadInputIsAClearError) {
  Problem p(Divergence::KlForward, 2, 8);
  DistillationArgs a = argsFor(p, Reduction::Mean, true, false);
  a.dtype = DType::I32;
  expectError([&] { distillationWorkspaceBytes(a); }, {"kl_div", "bf16"});
  a.dtype = DType::F32;
  expectError([&] { distillationWorkspaceBytes(a); }, {"are required"});
  std::vector<float> grad(16), rows(2);
  float loss;
  a.student = p.student.data();
  a.grad = grad.data();
  a.rowLoss = rows.data();
  expectError([&] { distillationWorkspaceBytes(a); }, {"loss is required"});
  a.loss = &loss;
  a.temperature = 0;
  expectError([&] { distillationWorkspaceBytes(a); }, {"temperature"});
  a.temperature = 1e-300; // 0 in f32
  expectError([&] { distillationWorkspaceBytes(a); }, {"temperature"});
  a.temperature = 1e-39; // 1 / T overflows f32
  expectError([&] { distillationWorkspaceBytes(a); }, {"temperature"});
  a.temperature = 1;
  a.teacher = grad.data();
  expectError([&] { distillationWorkspaceBytes(a); }, {"overlap the teacher"});
  a.teacher = p.teacher.data();
  a.grad = const_cast<float *>(p.student.data()) + 1;
  expectError([&] { distillationWorkspaceBytes(a); }, {"overlaps the student"});
  a.grad = grad.data();
  a.gradOutput = p.gradOutput.data();
  expectError([&] { distillationWorkspaceBytes(a); }, {"reduction none"});
  a.gradOutput = nullptr;
  a.divergence = Divergence::Jsd;
  a.beta = 1.5;
  expectError([&] { distillationWorkspaceBytes(a); }, {"jsd", "beta"});
  a.beta = 1e-50; // 0 in f32: would select the forward KL
  expectError([&] { distillationWorkspaceBytes(a); }, {"jsd", "beta"});
  a.beta = 0.5;
  a.V = 0;
  expectError([&] { distillationWorkspaceBytes(a); }, {"V = 0"});
  a.V = 8;
  alignas(16) char ws[32];
  expectError([&] { distillation(a, ws, 8, Device::Cpu, nullptr); },
              {"the workspace has 8 bytes"});
  expectError([&] { distillation(a, ws + 4, 16, Device::Cpu, nullptr); },
              {"16-byte aligned"});
}

// The vocab sizes whose compiled schedule splits rows over a cluster and
// keeps them on chip for kl_div and jsd_logits (kernels_spec/Registry.cpp,
// withRowSchedules; jsd stays plain), bf16 rows, the gradient written over
// the student: every row against fp64.
// bf16 gradients: 2^-7 relative plus 1e-7; losses 1e-3 relative.
TEST(DistillationOpGpu, KeptRowsInPlaceMatchTheReferences) {
  TILEJIT_SKIP_WITHOUT_GPU();
  cuda::Device device = cuda::Device::open();
  for (Divergence d : kAll)
    for (int64_t V : {int64_t(32000), int64_t(151936)}) {
      SCOPED_TRACE(::testing::Message()
                   << "divergence " << int(d) << " V " << V);
      Problem p(d, 24, V, 5);
      std::vector<uint16_t> s(p.BT * V), t(p.BT * V);
      for (int64_t i = 0; i < p.BT * V; ++i) {
        s[i] = floatToBf16(p.student[i]);
        p.student[i] = bf16ToFloat(s[i]);
        t[i] = floatToBf16(p.teacher[i]);
        p.teacher[i] = bf16ToFloat(t[i]);
      }
      size_t bytes = size_t(p.BT * V) * 2;
      cuda::DeviceBuffer student(bytes), teacher(bytes), label(p.BT * 8),
          rows(p.BT * 4), loss(16);
      student.copyFromHost(s.data(), bytes);
      teacher.copyFromHost(t.data(), bytes);
      label.copyFromHost(p.label.data(), p.BT * 8);
      DistillationArgs a = argsFor(p, Reduction::Mean, true, false);
      a.dtype = DType::BF16;
      a.student = reinterpret_cast<const void *>(student.ptr());
      a.grad = reinterpret_cast<void *>(student.ptr());
      a.teacher = reinterpret_cast<const void *>(teacher.ptr());
      a.label = reinterpret_cast<const int64_t *>(label.ptr());
      a.loss = reinterpret_cast<float *>(loss.ptr());
      a.rowLoss = reinterpret_cast<float *>(rows.ptr());
      cuda::DeviceBuffer ws(distillationWorkspaceBytes(a));
      distillation(a, reinterpret_cast<void *>(ws.ptr()), ws.size(),
                   Device::Gpu, nullptr);
      cuda::synchronize();
      Outputs want = reference(p, Reduction::Mean, true, false);
      float gotLoss;
      std::vector<float> gotRows(p.BT);
      loss.copyToHost(&gotLoss, 4);
      rows.copyToHost(gotRows.data(), p.BT * 4);
      student.copyToHost(s.data(), bytes);
      EXPECT_NEAR(gotLoss, want.loss, 1e-3 * std::fabs(want.loss));
      expectNear(gotRows, want.rowLoss, 1e-3, 1e-5, "row loss");
      std::vector<float> grad(p.BT * V);
      for (int64_t i = 0; i < p.BT * V; ++i)
        grad[i] = bf16ToFloat(s[i]);
      expectNear(grad, want.grad, std::ldexp(1.0, -7), 1e-7, "grad");
    }
}

} // namespace
