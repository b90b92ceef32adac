//===- CeTvdOpsTest.cpp - the reduced CE+TVD on the caller's memory -------===//
//
// tilejit/ops/FusedCeTvd.h against the host-vector runner (the same kernels
// and config, so the same bits) and the fp64 reference: contiguous, strided
// and in place, an empty batch, bad targets, bad arguments. On the CPU in
// CI; on the GPU with a caller's stream and inside a CUDA graph.
//
//===----------------------------------------------------------------------===//
#include "tilejit/ops/FusedCeTvd.h"

#include "ops/harness/FusedCeTvdReducedOp.h"
#include "runtime/CudaDriver.h"
#include "tilejit/Error.h"

#include "ExpectError.h"
#include "GpuTest.h"
#include "StridedRows.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>

using namespace tilejit;
using ops::CeTvdReducedArgs;

namespace {

/// Host buffers of one call and the results it produced.
struct HostCall {
  std::vector<uint8_t> student, teacher, grad;
  std::vector<float> ce, tvd;
  float loss = -1;
  int32_t bad = -1;
  CeTvdReducedArgs args;
  std::vector<uint8_t> workspace;

  HostCall(const ref::CeTvdInputs &in, int64_t stride, int64_t gradStride,
           bool inPlace, bool mean) {
    size_t es = dtypeSize(in.dtype);
    student = strided(in.student, in.BT, in.V, stride, es);
    teacher = strided(in.teacher, in.BT, in.V, stride, es);
    grad.assign(in.BT * gradStride * es, 0);
    ce.assign(in.BT, -1);
    tvd.assign(in.BT, -1);
    args.dtype = in.dtype;
    args.BT = in.BT;
    args.V = in.V;
    args.student = student.data();
    args.teacher = teacher.data();
    args.rowStride = stride;
    args.target = in.target.data();
    args.grad = inPlace ? student.data() : grad.data();
    args.gradStride = inPlace ? stride : gradStride;
    args.loss = &loss;
    args.ce = ce.data();
    args.tvd = tvd.data();
    args.badTarget = &bad;
    args.alpha = 0.75;
    args.beta = 1.5;
    args.mean = mean;
    workspace.resize(ops::ceTvdReducedWorkspaceBytes(args));
  }
  void run() {
    ops::ceTvdReduced(args, workspace.data(), workspace.size(),
                      ops::Device::Cpu);
  }
  /// The gradient with the row stride removed.
  std::vector<uint8_t> gradRows(const ref::CeTvdInputs &in) const {
    bool inPlace = args.grad == args.student;
    return unstrided(inPlace ? student : grad, in.BT, in.V, args.gradStride,
                     dtypeSize(in.dtype));
  }
};

CeTvdReducedOutputs runner(const ref::CeTvdInputs &in, bool mean,
                           bool inPlace) {
  CeTvdReducedOptions o;
  o.alpha = 0.75;
  o.beta = 1.5;
  o.mean = mean;
  o.inPlace = inPlace;
  return runCeTvdReducedCpu(in, o);
}

TEST(CeTvdOps, ContiguousStridedAndInPlaceGiveTheRunnersBits) {
  for (DType dtype : {DType::BF16, DType::F32}) {
    ref::CeTvdInputs in = ref::makeCeTvdInputs(9, 3000, dtype, 5);
    CeTvdReducedOutputs want = runner(in, true, false);
    struct Case {
      int64_t stride, gradStride;
      bool inPlace;
    } cases[] = {{3000, 3000, false},  // contiguous
                 {3013, 3005, false},  // rows not 16-byte aligned
                 {3008, 3016, false},  // aligned, padded rows
                 {3000, 3000, true},   // in place
                 {3021, 3021, true}};  // in place, strided
    for (const Case &c : cases) {
      SCOPED_TRACE(testing::Message()
                   << dtypeName(dtype) << " stride " << c.stride << " grad "
                   << c.gradStride << (c.inPlace ? " in place" : ""));
      HostCall call(in, c.stride, c.gradStride, c.inPlace, true);
      call.run();
      EXPECT_EQ(call.loss, want.loss);
      EXPECT_EQ(call.ce, want.ce);
      EXPECT_EQ(call.tvd, want.tvd);
      EXPECT_EQ(call.bad, 0);
      EXPECT_EQ(call.gradRows(in), want.grad);
    }
    // Against the fp64 reference, through the runner's check.
    HostCall sum(in, 3013, 3005, false, false);
    sum.run();
    CeTvdReducedOutputs got;
    got.loss = sum.loss;
    got.nValid = float(
        std::count_if(in.target.begin(), in.target.end(),
                      [](int64_t y) { return y != ref::kCeTvdIgnoreIndex; }));
    got.ce = sum.ce;
    got.tvd = sum.tvd;
    got.grad = sum.gradRows(in);
    CeTvdReducedOptions o;
    o.alpha = 0.75;
    o.beta = 1.5;
    o.mean = false;
    CeTvdCheck c = checkCeTvdReduced(in, o, got);
    EXPECT_TRUE(c.passed) << c.summary;
  }
}

TEST(CeTvdOps, TheRunnerReportsTheOpsConfig) {
  ref::CeTvdInputs in = ref::makeCeTvdInputs(4, 2000, DType::BF16, 4);
  auto endsWith = [](const std::string &s, const std::string &tail) {
    return s.size() >= tail.size() &&
           s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
  };
  CeTvdReducedOptions o;
  for (bool tuned : {false, true}) { // no tuned config on the CPU
    o.useTuned = tuned;
    std::string config = runCeTvdReducedCpu(in, o).config;
    EXPECT_NE(config.find("CLUSTER_SIZE="), std::string::npos) << config;
    EXPECT_TRUE(endsWith(config, " (default)")) << config;
  }
  o.overrides = {"CLUSTER_SIZE=4"};
  std::string config = runCeTvdReducedCpu(in, o).config;
  EXPECT_NE(config.find("CLUSTER_SIZE=4"), std::string::npos) << config;
  EXPECT_TRUE(endsWith(config, " (set)")) << config;
}

TEST(CeTvdOps, PerRowOutputsAndFlagMayLiveInTheWorkspace) {
  ref::CeTvdInputs in = ref::makeCeTvdInputs(5, 1000, DType::BF16, 2);
  HostCall call(in, 1000, 1000, false, true);
  size_t withOutputs = call.workspace.size();
  call.args.ce = call.args.tvd = nullptr;
  call.args.badTarget = nullptr;
  call.workspace.resize(ops::ceTvdReducedWorkspaceBytes(call.args));
  EXPECT_GT(call.workspace.size(), withOutputs);
  call.run();
  EXPECT_EQ(call.loss, runner(in, true, false).loss);
}

TEST(CeTvdOps, EmptyBatchWritesZeroAndLaunchesNothing) {
  float loss = 7;
  CeTvdReducedArgs a;
  a.V = 32000;
  a.loss = &loss;
  ops::ceTvdReduced(a, nullptr, 0, ops::Device::Cpu);
  EXPECT_EQ(loss, 0.f);
}

TEST(CeTvdOps, BadTargetsAreFlaggedWithoutSynchronizing) {
  ref::CeTvdInputs in = ref::makeCeTvdInputs(6, 500, DType::F32, 3);
  in.target[4] = 500; // outside [0, V)
  HostCall call(in, 500, 500, false, true);
  call.run();
  EXPECT_EQ(call.bad, 5);
}

TEST(CeTvdOps, BadArgumentsAreClearErrors) {
  ref::CeTvdInputs in = ref::makeCeTvdInputs(3, 100, DType::BF16, 1);
  auto with = [&](const std::function<void(HostCall &)> &edit,
                  const char *part) {
    HostCall call(in, 100, 100, false, true);
    edit(call);
    expectError([&] { call.run(); }, {part});
  };
  with([](HostCall &c) { c.args.rowStride = 99; }, "must be >= V");
  with([](HostCall &c) { c.args.teacherStride = 104; }, "teacher's row stride");
  with([](HostCall &c) { c.args.gradStride = 50; }, "must be >= V");
  with([](HostCall &c) { c.args.teacher = nullptr; }, "must not be null");
  with([](HostCall &c) { c.args.loss = nullptr; }, "no loss output");
  with([](HostCall &c) { c.workspace.resize(4); }, "workspace has 4 bytes");
  with([](HostCall &c) { c.args.alpha = 1e39; }, "f32 range");
  with([](HostCall &c) { c.args.dtype = DType::I32; }, "bf16, f16 or f32");
  with([](HostCall &c) { c.args.V = 0; }, "V = 0");
  with(
      [](HostCall &c) {
        c.args.grad = c.student.data();
        c.args.gradStride = 200;
      },
      "in-place gradient");
  with([](HostCall &c) { c.args.grad = c.teacher.data(); }, "not overlap the teacher");
  with([](HostCall &c) { c.args.set = {"NO_SUCH=1"}; }, "NO_SUCH");
  with(
      [](HostCall &c) {
        c.args.grad = c.student.data() + 10; // overlapping, not in place
      },
      "overlaps the student");
}

TEST(CeTvdOpsGpu, CallersStreamStridesInPlaceAndCudaGraph) {
  TILEJIT_SKIP_WITHOUT_GPU();
  cuda::Device device = cuda::Device::open();
  ref::CeTvdInputs in = ref::makeCeTvdInputs(64, 32000, DType::BF16, 11);
  CeTvdReducedOptions o;
  o.alpha = 0.75;
  o.beta = 1.5;
  CeTvdReducedOutputs want = runCeTvdReducedGpu(in, o);
  size_t es = dtypeSize(in.dtype);
  for (int64_t stride : {int64_t(32000), int64_t(32013)})
    for (bool inPlace : {false, true}) {
      SCOPED_TRACE(testing::Message() << "stride " << stride
                                      << (inPlace ? " in place" : ""));
      HostCall host(in, stride, stride, inPlace, true);
      cuda::DeviceBuffer s(host.student.size()), t(host.teacher.size()),
          y(in.BT * 8), g(host.grad.size()), loss(4), ws(host.workspace.size());
      cuda::DeviceBuffer ce(in.BT * 4), tvd(in.BT * 4), bad(4);
      s.copyFromHost(host.student.data(), s.size());
      t.copyFromHost(host.teacher.data(), t.size());
      y.copyFromHost(in.target.data(), y.size());
      CeTvdReducedArgs a = host.args;
      auto dev = [](const cuda::DeviceBuffer &b) {
        return reinterpret_cast<void *>(b.ptr());
      };
      a.student = dev(s);
      a.teacher = dev(t);
      a.target = static_cast<const int64_t *>(dev(y));
      a.grad = inPlace ? dev(s) : dev(g);
      a.loss = static_cast<float *>(dev(loss));
      a.ce = static_cast<float *>(dev(ce));
      a.tvd = static_cast<float *>(dev(tvd));
      a.badTarget = static_cast<int32_t *>(dev(bad));
      cuda::Stream stream;
      ops::prepareCeTvdReduced(a);
      auto enqueue = [&](CUstream st) {
        ops::ceTvdReduced(a, dev(ws), ws.size(), ops::Device::Gpu, st);
      };
      // In place the student is overwritten: the graph replays on a fresh
      // copy each time.
      cuda::Graph graph = cuda::Graph::capture(stream, enqueue);
      for (int replay = 0; replay < 2; ++replay) {
        s.copyFromHost(host.student.data(), s.size());
        graph.launch(stream.get());
        stream.synchronize();
        float l = 0;
        int32_t flag = -1;
        loss.copyToHost(&l, 4);
        bad.copyToHost(&flag, 4);
        std::vector<uint8_t> grad(inPlace ? s.size() : g.size());
        (inPlace ? s : g).copyToHost(grad.data(), grad.size());
        EXPECT_EQ(l, want.loss);
        EXPECT_EQ(flag, 0);
        EXPECT_EQ(unstrided(grad, in.BT, in.V, stride, es), want.grad);
      }
    }
}

} // namespace
