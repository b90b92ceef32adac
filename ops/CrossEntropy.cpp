//===- CrossEntropy.cpp - cross-entropy on the caller's logits ------------===//
#include "tilejit/ops/CrossEntropy.h"

#include "ops/RowOpParts.h"
#include "runtime/CudaDriver.h"
#include "tilejit/Error.h"
#include "tilejit/Kernel.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

namespace tilejit {
namespace ops {
namespace {

void validate(const CrossEntropyArgs &a) {
  auto fail = [](const std::string &why) {
    throw Error("cross_entropy: " + why);
  };
  if (!isFloat(a.dtype))
    fail(std::string("the logits must be bf16, f16 or f32 (got ") +
         dtypeName(a.dtype) + ")");
  const int64_t most = std::numeric_limits<int32_t>::max();
  // The row-weight and sum kernels walk rows in i32 tiles of 1024.
  if (a.BT < 0 || a.BT > most - 1024)
    fail("BT = " + std::to_string(a.BT) + " must be in [0, 2^31 - 1024]");
  // Offsets within a row are i32: a row's last tile must not wrap.
  const int64_t mostV = most - 8192;
  if (a.V < 1 || a.V > mostV)
    fail("V = " + std::to_string(a.V) + " must be in [1, 2^31 - 8192]");
  bool reduced = a.reduction != Reduction::None;
  if (a.BT > 0 &&
      (!a.logits || !a.grad || !a.target || !a.rowLoss || !a.rowZLoss))
    fail("logits, grad, target, rowLoss and rowZLoss are required");
  if (reduced && !a.loss)
    fail("mean and sum write the loss: loss is required");
  if (reduced && a.gradOutput)
    fail("gradOutput is for reduction none (mean and sum scale afterwards)");
  if (!(a.labelSmoothing >= 0 && a.labelSmoothing <= 1))
    fail("label smoothing must be in [0, 1]");
  if (!(a.zLoss >= 0) || !std::isfinite(a.zLoss))
    fail("the z-loss scale must be finite and >= 0");
  if (!(a.softcap >= 0) || !std::isfinite(a.softcap))
    fail("the softcap must be finite and >= 0");
  if (!(a.gradScale > 0) || !std::isfinite(a.gradScale))
    fail("the gradient scale must be finite and > 0");
}

/// The workspace: the row weights' five statistics, the bad-target flag
/// when the caller has none, and 1 per row for none without gradOutput.
struct Layout {
  size_t stats = 0, bad = 32, ones = 48, bytes = 48;
};

Layout layout(const CrossEntropyArgs &a) {
  Layout l;
  if (a.reduction == Reduction::None && !a.gradOutput)
    l.bytes = l.ones + (size_t(a.BT) * 4 + 15) / 16 * 16;
  return l;
}

struct Kernels {
  const Kernel &weights;
  Kernel rows;
  const Kernel &sum;
};

/// The kernels for one dtype, weighting, softcapping and V (the row schedule
/// follows V: kernels_spec/Registry.cpp, withRowSchedules); the f32 row
/// weights and loss sum, which depend on none of them, compiled once.
const Kernels &kernelsFor(const CrossEntropyArgs &a) {
  static const Kernel weights =
      Kernel::compile("lce_row_weights", {DType::F32, {}, {}});
  static const Kernel sum =
      Kernel::compile("lce_loss_sum", {DType::F32, {}, {}});
  static std::mutex mutex;
  static std::map<std::tuple<DType, bool, bool, int64_t>,
                  std::unique_ptr<Kernels>>
      cache;
  bool hasWeight = a.classWeight != nullptr, hasSoftcap = a.softcap > 0;
  std::lock_guard<std::mutex> lock(mutex);
  std::unique_ptr<Kernels> &slot = cache[{a.dtype, hasWeight, hasSoftcap, a.V}];
  if (!slot) {
    KernelOptions rows{a.dtype,
                       {"HAS_WEIGHT=" + std::to_string(hasWeight),
                        "HAS_SOFTCAP=" + std::to_string(hasSoftcap)},
                       {{"V", a.V}}};
    slot = std::make_unique<Kernels>(
        Kernels{weights, Kernel::compile("cross_entropy", rows), sum});
  }
  return *slot;
}

} // namespace

size_t crossEntropyWorkspaceBytes(const CrossEntropyArgs &args) {
  validate(args);
  return layout(args).bytes;
}

void prepareCrossEntropy(const CrossEntropyArgs &args, Device device) {
  validate(args);
  const Kernels &k = kernelsFor(args);
  if (device == Device::Gpu)
    Kernel::compileForGpu({&k.weights, &k.rows, &k.sum});
}

void crossEntropy(const CrossEntropyArgs &a, void *workspace,
                  size_t workspaceBytes, Device device, CUstream stream) {
  validate(a);
  Layout l = layout(a);
  checkWorkspace("cross_entropy", workspace, workspaceBytes, l.bytes);
  bool cpu = device == Device::Cpu;
  bool hasWeight = a.classWeight != nullptr;
  bool none = a.reduction == Reduction::None;
  if (a.BT == 0) { // the loss of nothing is 0; nothing is launched
    for (void *p :
         {static_cast<void *>(a.loss), static_cast<void *>(a.badTarget)})
      if (p && cpu)
        std::memset(p, 0, p == a.loss ? 8 : 4);
      else if (p)
        cuda::memsetAsync(reinterpret_cast<CUdeviceptr>(p), 0,
                          p == a.loss ? 8 : 4, stream);
    return;
  }
  uint8_t *ws = static_cast<uint8_t *>(workspace);
  float *stats = reinterpret_cast<float *>(ws + l.stats);
  int32_t *bad =
      a.badTarget ? a.badTarget : reinterpret_cast<int32_t *>(ws + l.bad);
  const float *upstream = stats;
  if (none) {
    upstream = a.gradOutput;
    if (!upstream) {
      float *ones = reinterpret_cast<float *>(ws + l.ones);
      if (cpu)
        std::fill(ones, ones + a.BT, 1.f);
      else if (a.BT > 0)
        cuda::fillAsync(reinterpret_cast<CUdeviceptr>(ones), 0x3f800000u, 4,
                        size_t(a.BT), stream);
      upstream = ones;
    }
  }
  const Kernels &k = kernelsFor(a);
  // Without class weights the kernels read none: any f32 pointer will do.
  const float *w = hasWeight ? a.classWeight : stats;
  int64_t nw = hasWeight ? a.V : 5, cells = a.BT * a.V;
  runOrLaunch(device, stream, k.weights, 1,
              {bufferArg(a.target, DType::I64, a.BT, device),
               bufferArg(w, DType::F32, nw, device),
               bufferArg(stats, DType::F32, 5, device),
               bufferArg(bad, DType::I32, 1, device),
               KernelArg::i32(int32_t(a.BT)), KernelArg::i32(int32_t(a.V)),
               KernelArg::i64(a.ignoreIndex), KernelArg::i32(hasWeight),
               KernelArg::i32(a.reduction == Reduction::Mean)});
  runOrLaunch(device, stream, k.rows, a.BT,
              {bufferArg(a.logits, a.dtype, cells, device),
               bufferArg(a.grad, a.dtype, cells, device),
               bufferArg(a.target, DType::I64, a.BT, device),
               bufferArg(w, DType::F32, nw, device),
               bufferArg(upstream, DType::F32, none ? a.BT : 5, device),
               bufferArg(a.rowLoss, DType::F32, a.BT, device),
               bufferArg(a.rowZLoss, DType::F32, a.BT, device),
               KernelArg::i32(int32_t(a.V)), KernelArg::i64(a.ignoreIndex),
               KernelArg::f32(float(a.labelSmoothing)),
               KernelArg::f32(float(a.zLoss)), KernelArg::f32(float(a.softcap)),
               KernelArg::i32(none), KernelArg::f32(float(a.gradScale))});
  if (!none)
    runOrLaunch(device, stream, k.sum, 1,
                {bufferArg(a.rowLoss, DType::F32, a.BT, device),
                 bufferArg(a.rowZLoss, DType::F32, a.BT, device),
                 bufferArg(stats, DType::F32, 5, device),
                 bufferArg(a.loss, DType::F32, 2, device),
                 KernelArg::i32(int32_t(a.BT))});
}

} // namespace ops
} // namespace tilejit
