//===- LinearCeOpsTest.cpp - the linear CE op on the caller's memory ------===//
//
// tilejit/ops/LinearCe.h with strided input, weight and grad-input rows
// against the contiguous call (bit for bit) and the fp64 reference, every
// feature at once; the device-side target check, an empty batch, bad
// arguments. On the CPU in CI; on the GPU with a caller's stream, the
// workspace from the caller, and in a CUDA graph.
//
//===----------------------------------------------------------------------===//
#include "tilejit/ops/LinearCe.h"

#include "ops/harness/LinearCeOp.h"
#include "runtime/CudaDriver.h"
#include "tilejit/Error.h"
#include "tilejit/HostFloat.h"

#include "ExpectError.h"
#include "GpuTest.h"
#include "StridedRows.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

using namespace tilejit;

namespace {

/// Every feature at once: bias, class weights, label smoothing, z-loss,
/// softcap, sum reduction, three chunks.
LinearCeOptions everyFeature() {
  LinearCeOptions o;
  o.params.reduction = ref::LinearCeParams::Reduction::Sum;
  o.params.labelSmoothing = 0.1;
  o.params.zLoss = 1e-4;
  o.params.softcap = 30;
  o.chunkRows = 16;
  o.overrides = {"BLOCK_SIZE=1024", "num_warps=4"};
  return o;
}

/// Host buffers of one call with rows of x, W and dx `stride` apart.
struct Call {
  std::vector<uint8_t> x, W, dx, dW, db, ws;
  std::vector<float> bias, rowLoss;
  float loss[2] = {-1, -1};
  int32_t bad = -1;
  ops::LinearCeArgs args;

  Call(const ref::LinearCeInputs &in, const LinearCeOptions &o,
       int64_t stride, ops::Device device = ops::Device::Cpu) {
    size_t es = dtypeSize(in.dtype);
    x = strided(in.h, in.N, in.d, stride, es);
    W = strided(in.W, in.V, in.d, stride, es);
    dx.assign(in.N * stride * es, 0);
    dW.assign(in.V * in.d * 4, 0);
    bias = loadAsFloats(in.bias.data(), in.dtype, in.V);
    db.assign(in.V * 4, 0);
    rowLoss.assign(in.N, -1);
    args = linearCeArgs(in, o);
    args.input = x.data();
    args.inputStride = stride;
    args.weight = W.data();
    args.weightStride = stride;
    args.bias = bias.data();
    args.target = in.target.data();
    args.classWeight = in.classWeight.data();
    args.loss = loss;
    args.rowLoss = rowLoss.data();
    args.gradInput = dx.data();
    args.gradInputStride = stride;
    args.gradWeight = dW.data();
    args.gradBias = db.data();
    args.badTarget = &bad;
    ws.resize(ops::linearCeWorkspaceBytes(args, device));
  }
  void run() {
    ops::linearCe(args, ws.data(), ws.size(), ops::Device::Cpu);
  }
};

TEST(LinearCeOps, StridedRowsGiveTheContiguousBitsAndMatchTheReference) {
  for (DType dtype : {DType::BF16, DType::F32}) {
    SCOPED_TRACE(dtypeName(dtype));
    ref::LinearCeInputs in = makeLinearCeInputs(40, 24, 300, dtype, true,
                                                true, 7);
    LinearCeOptions o = everyFeature();
    Call want(in, o, in.d);
    want.run();
    EXPECT_EQ(want.bad, 0);
    Call c(in, o, in.d + 5);
    c.run();
    EXPECT_EQ(c.loss[0], want.loss[0]);
    EXPECT_EQ(c.rowLoss, want.rowLoss);
    EXPECT_EQ(unstrided(c.dx, in.N, in.d, in.d + 5, dtypeSize(dtype)),
              want.dx);
    EXPECT_EQ(c.dW, want.dW);
    EXPECT_EQ(c.db, want.db);
    // The runner runs the same op; its check is against the fp64 reference.
    LinearCeOutputs out = runLinearCeCpu(in, o);
    EXPECT_EQ(out.loss, want.loss[0]);
    EXPECT_EQ(out.chunks, 3);
    LinearCeCheck check = checkLinearCe(in, o, out, 1e-5, 1e-5);
    EXPECT_TRUE(check.passed) << check.summary;
  }
}

TEST(LinearCeOps, SampledRowsCheckFindsAWrongRow) {
  ref::LinearCeInputs in =
      makeLinearCeInputs(40, 24, 300, DType::F32, true, true, 7);
  LinearCeOptions o = everyFeature(); // reduction sum
  LinearCeOutputs out = runLinearCeCpu(in, o);
  std::vector<int64_t> rows = {0, 5, 17, 39};
  LinearCeCheck c = checkLinearCeRows(in, o, out, rows, 1e-5, 1e-5);
  EXPECT_TRUE(c.passed) << c.summary;
  out.dh[17 * in.d + 3] *= 1.01f;
  EXPECT_FALSE(checkLinearCeRows(in, o, out, rows, 1e-5, 1e-5).passed);
  // Mean with class weights and z-loss: the two upstream factors differ.
  o.params.reduction = ref::LinearCeParams::Reduction::Mean;
  expectError([&] { checkLinearCeRows(in, o, out, rows, 1e-5, 1e-5); },
              {"sampled check takes reduction sum"});
}

TEST(LinearCeOps, BadTargetsAreFlaggedOnTheDeviceAndCountAsIgnored) {
  ref::LinearCeInputs in =
      makeLinearCeInputs(10, 8, 50, DType::F32, true, true, 3);
  LinearCeOptions o = everyFeature();
  in.target[3] = 50; // V
  in.target[7] = -2;
  Call c(in, o, in.d);
  c.run();
  EXPECT_EQ(c.bad, 8); // 1 + the last bad row
  EXPECT_EQ(c.rowLoss[3], 0.f);
  EXPECT_EQ(c.rowLoss[7], 0.f);
  for (int64_t k = 0; k < in.d; ++k)
    EXPECT_EQ(loadAsDouble(c.dx.data(), DType::F32, 3 * in.d + k), 0.0);
  expectError([&] { runLinearCeCpu(in, o); },
              {"target -2 at row 7", "outside [0, 50)"});
}

TEST(LinearCeOps, EmptyBatchZeroesTheWeightGradients) {
  ref::LinearCeInputs in =
      makeLinearCeInputs(0, 8, 50, DType::F32, true, false, 3);
  Call c(in, everyFeature(), in.d);
  std::fill(c.dW.begin(), c.dW.end(), 0x55);
  EXPECT_EQ(c.ws.size(), 0u);
  c.run();
  EXPECT_EQ(c.loss[0], 0.f);
  EXPECT_EQ(c.dW, std::vector<uint8_t>(c.dW.size(), 0));
  EXPECT_EQ(c.db, std::vector<uint8_t>(c.db.size(), 0));
}

TEST(LinearCeOps, BadArgumentsAreClearErrors) {
  ref::LinearCeInputs in =
      makeLinearCeInputs(6, 8, 50, DType::BF16, true, true, 3);
  auto with = [&](const std::function<void(Call &)> &edit, const char *part) {
    Call c(in, everyFeature(), in.d);
    edit(c);
    expectError([&] { c.run(); }, {part});
  };
  with([](Call &c) { c.args.inputStride = 7; }, "must be >= d");
  with([](Call &c) { c.args.gradBias = nullptr; }, "gradBias");
  with([](Call &c) { c.args.target = nullptr; }, "must not be null");
  with([](Call &c) { c.args.loss = nullptr; }, "no loss output");
  with([](Call &c) { c.ws.resize(16); }, "workspace has 16 bytes");
  with([](Call &c) { c.args.labelSmoothing = 2; }, "label smoothing");
  with([](Call &c) { c.args.dtype = DType::I32; }, "bf16, f16 or f32");
  with([](Call &c) { c.args.set = {"TRANS_A=1"}; }, "cannot be pinned");
  with([](Call &c) { c.args.reduction = ops::Reduction::None; }, "gradOutput");
}

TEST(LinearCeOpsGpu, CallersStreamStridedRowsAndCudaGraph) {
  TILEJIT_SKIP_WITHOUT_GPU();
  cuda::Device device = cuda::Device::open();
  ref::LinearCeInputs in =
      makeLinearCeInputs(1000, 256, 32000, DType::BF16, true, true, 5);
  LinearCeOptions o = everyFeature();
  o.chunkRows = 384;
  o.overrides = {};
  LinearCeOutputs want = runLinearCeGpu(in, o);
  LinearCeCheck check = checkLinearCe(in, o, want, 1e-3, 1e-2);
  EXPECT_TRUE(check.passed) << check.summary;
  const int64_t stride = in.d + 8;
  Call host(in, o, stride, ops::Device::Gpu);
  auto upload = [](const void *p, size_t bytes) {
    cuda::DeviceBuffer b(bytes);
    b.copyFromHost(p, bytes);
    return b;
  };
  cuda::DeviceBuffer x = upload(host.x.data(), host.x.size()),
                     W = upload(host.W.data(), host.W.size()),
                     b = upload(host.bias.data(), in.V * 4),
                     y = upload(in.target.data(), in.N * 8),
                     cw = upload(in.classWeight.data(), in.V * 4);
  cuda::DeviceBuffer dx(host.dx.size()), dW(host.dW.size()),
      db(host.db.size()), loss(8), rowLoss(in.N * 4), bad(4),
      ws(host.ws.size());
  auto dev = [](const cuda::DeviceBuffer &buf) {
    return reinterpret_cast<void *>(buf.ptr());
  };
  ops::LinearCeArgs a = host.args;
  a.input = dev(x);
  a.weight = dev(W);
  a.bias = static_cast<const float *>(dev(b));
  a.target = static_cast<const int64_t *>(dev(y));
  a.classWeight = static_cast<const float *>(dev(cw));
  a.loss = static_cast<float *>(dev(loss));
  a.rowLoss = static_cast<float *>(dev(rowLoss));
  a.gradInput = dev(dx);
  a.gradWeight = dev(dW);
  a.gradBias = dev(db);
  a.badTarget = static_cast<int32_t *>(dev(bad));
  cuda::Stream stream;
  ops::prepareLinearCe(a, dev(ws), ws.size(), {}, stream.get());
  cuda::Graph graph = cuda::Graph::capture(stream, [&](CUstream st) {
    ops::linearCe(a, dev(ws), ws.size(), ops::Device::Gpu, st);
  });
  for (int replay = 0; replay < 2; ++replay) {
    dW.memset(0);
    graph.launch(stream.get());
    stream.synchronize();
    float l[2];
    int32_t flag = -1;
    loss.copyToHost(l, 8);
    bad.copyToHost(&flag, 4);
    EXPECT_EQ(flag, 0);
    EXPECT_NEAR(l[0], want.loss, 1e-3 * std::fabs(want.loss));
    std::vector<uint8_t> grad(dx.size());
    dx.copyToHost(grad.data(), grad.size());
    std::vector<float> got = loadAsFloats(
        unstrided(grad, in.N, in.d, stride, 2).data(), DType::BF16,
        in.N * in.d);
    double num = 0, den = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      num += (got[i] - want.dh[i]) * (got[i] - want.dh[i]);
      den += want.dh[i] * want.dh[i];
    }
    EXPECT_LT(std::sqrt(num / den), 1e-2);
  }
}

} // namespace
