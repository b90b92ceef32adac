//===- CeTvdUnreducedOpsTest.cpp - the CE+TVD forward and backward ops ----===//
//
// ceTvdForward / ceTvdBackward (tilejit/ops/FusedCeTvd.h) on strided rows
// against the same op on contiguous rows (bit for bit) and the fp64
// reference; the state, the bad-target flag, an empty batch, bad arguments.
// On the CPU in CI; on the GPU with a caller's stream and in a CUDA graph.
//
//===----------------------------------------------------------------------===//
#include "tilejit/ops/FusedCeTvd.h"

#include "ops/harness/FusedCeTvdOp.h"
#include "runtime/CudaDriver.h"
#include "tilejit/Error.h"

#include "ExpectError.h"
#include "GpuTest.h"
#include "StridedRows.h"

#include <gtest/gtest.h>

#include <functional>

using namespace tilejit;

namespace {

/// Host buffers of one forward + backward with rows `stride` apart.
struct Call {
  std::vector<uint8_t> student, teacher, grad, state;
  std::vector<float> ce, tvd, gCe, gTvd;
  ops::CeTvdArgs args;
  int64_t gradStride;

  Call(const ref::CeTvdInputs &in, int64_t stride, int64_t gradStride)
      : gradStride(gradStride) {
    size_t es = dtypeSize(in.dtype);
    student = strided(in.student, in.BT, in.V, stride, es);
    teacher = strided(in.teacher, in.BT, in.V, stride, es);
    grad.assign(in.BT * gradStride * es, 0);
    state.assign(ops::ceTvdStateBytes(in.BT), 0);
    ce.assign(in.BT, -1);
    tvd.assign(in.BT, -1);
    defaultUpstream(in.BT, gCe, gTvd);
    args.dtype = in.dtype;
    args.BT = in.BT;
    args.V = in.V;
    args.student = student.data();
    args.teacher = teacher.data();
    args.rowStride = stride;
    args.target = in.target.data();
  }
  void forward() {
    ops::ceTvdForward(args, ce.data(), tvd.data(), state.data(),
                      ops::Device::Cpu);
  }
  void backward() {
    ops::ceTvdBackward(args, state.data(), gCe.data(), gTvd.data(),
                       grad.data(), gradStride, ops::Device::Cpu);
  }
  int32_t badTarget() const {
    int32_t bad;
    std::memcpy(&bad, state.data() + state.size() - 16, 4);
    return bad;
  }
};

TEST(CeTvdUnreducedOps, StridedRowsGiveTheContiguousBitsAndMatchTheReference) {
  for (DType dtype : {DType::BF16, DType::F32}) {
    ref::CeTvdInputs in = ref::makeCeTvdInputs(9, 3000, dtype, 5);
    Call want(in, 3000, 3000);
    want.forward();
    want.backward();
    EXPECT_EQ(want.badTarget(), 0);
    for (auto [stride, gradStride] : {std::pair<int64_t, int64_t>{3013, 3005},
                                      {3008, 3016}}) {
      SCOPED_TRACE(testing::Message() << dtypeName(dtype) << " stride "
                                      << stride << " grad " << gradStride);
      Call c(in, stride, gradStride);
      c.forward();
      c.backward();
      EXPECT_EQ(c.ce, want.ce);
      EXPECT_EQ(c.tvd, want.tvd);
      EXPECT_EQ(c.state, want.state);
      EXPECT_EQ(unstrided(c.grad, in.BT, in.V, gradStride, dtypeSize(dtype)),
                want.grad);
    }
    // The runner runs the same op: its check against the fp64 reference.
    CeTvdOutputs out = runCeTvdCpu(in, want.gCe, want.gTvd, {});
    EXPECT_EQ(out.ce, want.ce);
    EXPECT_EQ(out.grad, want.grad);
    CeTvdCheck check = checkCeTvd(in, want.gCe, want.gTvd, out);
    EXPECT_TRUE(check.passed) << check.summary;
  }
}

TEST(CeTvdUnreducedOps, BadTargetsAreFlaggedInTheState) {
  ref::CeTvdInputs in = ref::makeCeTvdInputs(6, 500, DType::F32, 3);
  in.target[2] = -5;
  Call c(in, 500, 500);
  c.forward();
  EXPECT_EQ(c.badTarget(), 3);
  EXPECT_EQ(c.ce[2], 0.f);
}

TEST(CeTvdUnreducedOps, EmptyBatchLaunchesNothing) {
  ops::CeTvdArgs a;
  a.V = 32000;
  ops::ceTvdForward(a, nullptr, nullptr, nullptr, ops::Device::Cpu);
  ops::ceTvdBackward(a, nullptr, nullptr, nullptr, nullptr, 0,
                     ops::Device::Cpu);
  EXPECT_EQ(ops::ceTvdStateBytes(0), 16u);
}

TEST(CeTvdUnreducedOps, BadArgumentsAreClearErrors) {
  ref::CeTvdInputs in = ref::makeCeTvdInputs(3, 100, DType::BF16, 1);
  auto with = [&](const std::function<void(Call &)> &edit, const char *part,
                  bool backward = false) {
    Call c(in, 100, 100);
    edit(c);
    expectError([&] { backward ? c.backward() : c.forward(); }, {part});
  };
  with([](Call &c) { c.args.rowStride = 99; }, "must be >= V");
  with([](Call &c) { c.args.teacherStride = 104; }, "teacher's row stride");
  with([](Call &c) { c.args.teacher = nullptr; }, "must not be null");
  with([](Call &c) { c.args.dtype = DType::I64; }, "bf16, f16 or f32");
  with([](Call &c) { c.args.forwardKernel = "fwd"; }, "unknown forward kernel");
  with([](Call &c) { c.args.set = {"NO_SUCH=1"}; }, "NO_SUCH");
  with([](Call &c) { c.gradStride = 10; }, "must be >= V", true);
  with([](Call &c) { c.grad = c.student; c.args.student = c.grad.data(); },
       "must not overlap the student", true);
}

TEST(CeTvdUnreducedOpsGpu, CallersStreamStridedRowsAndCudaGraph) {
  TILEJIT_SKIP_WITHOUT_GPU();
  cuda::Device device = cuda::Device::open();
  ref::CeTvdInputs in = ref::makeCeTvdInputs(64, 32000, DType::BF16, 11);
  std::vector<float> gCe, gTvd;
  defaultUpstream(in.BT, gCe, gTvd);
  CeTvdOutputs want = runCeTvdGpu(in, gCe, gTvd, {});
  size_t es = dtypeSize(in.dtype);
  const int64_t stride = 32013;
  Call host(in, stride, stride);
  auto upload = [](const void *p, size_t bytes) {
    cuda::DeviceBuffer b(bytes);
    b.copyFromHost(p, bytes);
    return b;
  };
  cuda::DeviceBuffer s = upload(host.student.data(), host.student.size()),
                     t = upload(host.teacher.data(), host.teacher.size()),
                     y = upload(in.target.data(), in.BT * 8),
                     gc = upload(gCe.data(), in.BT * 4),
                     gt = upload(gTvd.data(), in.BT * 4);
  cuda::DeviceBuffer ce(in.BT * 4), tvd(in.BT * 4), g(host.grad.size()),
      state(host.state.size());
  auto dev = [](const cuda::DeviceBuffer &b) {
    return reinterpret_cast<void *>(b.ptr());
  };
  ops::CeTvdArgs a = host.args;
  a.student = dev(s);
  a.teacher = dev(t);
  a.target = static_cast<const int64_t *>(dev(y));
  ops::prepareCeTvd(a);
  cuda::Stream stream;
  cuda::Graph graph = cuda::Graph::capture(stream, [&](CUstream st) {
    ops::ceTvdForward(a, static_cast<float *>(dev(ce)),
                      static_cast<float *>(dev(tvd)), dev(state),
                      ops::Device::Gpu, st);
    ops::ceTvdBackward(a, dev(state), static_cast<float *>(dev(gc)),
                       static_cast<float *>(dev(gt)), dev(g), stride,
                       ops::Device::Gpu, st);
  });
  for (int replay = 0; replay < 2; ++replay) {
    g.memset(0);
    graph.launch(stream.get());
    stream.synchronize();
    std::vector<float> gotCe(in.BT);
    ce.copyToHost(gotCe.data(), in.BT * 4);
    std::vector<uint8_t> grad(g.size());
    g.copyToHost(grad.data(), grad.size());
    EXPECT_EQ(gotCe, want.ce);
    EXPECT_EQ(unstrided(grad, in.BT, in.V, stride, es), want.grad);
  }
}

} // namespace
