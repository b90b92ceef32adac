//===- Distillation.cpp - KL and JS divergence on the caller's rows -------===//
#include "tilejit/ops/Distillation.h"

#include "ops/RowOpParts.h"
#include "runtime/CudaDriver.h"
#include "tilejit/Error.h"
#include "tilejit/Kernel.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>

namespace tilejit {
namespace ops {
namespace {

const char *kernelName(Divergence d) {
  return d == Divergence::Jsd         ? "jsd"
         : d == Divergence::JsdLogits ? "jsd_logits"
                                      : "kl_div";
}

bool isJsd(Divergence d) {
  return d == Divergence::Jsd || d == Divergence::JsdLogits;
}

void validate(const DistillationArgs &a) {
  std::string op = kernelName(a.divergence);
  auto fail = [&](const std::string &why) { throw Error(op + ": " + why); };
  if (a.divergence != Divergence::KlForward &&
      a.divergence != Divergence::KlReverse && !isJsd(a.divergence))
    fail("unknown divergence");
  if (!isFloat(a.dtype))
    fail(std::string("the rows must be bf16, f16 or f32 (got ") +
         dtypeName(a.dtype) + ")");
  const int64_t twoTo31 = int64_t(1) << 31;
  // row_scale and row_loss_total walk rows in i32 tiles of 1024.
  if (a.BT < 0 || a.BT > twoTo31 - 1024)
    fail("BT = " + std::to_string(a.BT) + " must be in [0, 2^31 - 1024]");
  // Offsets within a row are i32: a row's last tile must not wrap.
  if (a.V < 1 || a.V > twoTo31 - 8192)
    fail("V = " + std::to_string(a.V) + " must be in [1, 2^31 - 8192]");
  bool reduced = a.reduction != Reduction::None;
  if (a.BT > 0 && (!a.student || !a.teacher || !a.grad || !a.rowLoss))
    fail("student, teacher, grad and rowLoss are required");
  if (reduced && !a.loss)
    fail("mean and sum write the loss: loss is required");
  if (reduced && a.gradOutput)
    fail("gradOutput is for reduction none (mean and sum scale afterwards)");
  size_t es = dtypeSize(a.dtype);
  if (a.grad != a.student &&
      extentsOverlap(a.grad, a.V, a.student, a.V, a.BT, a.V, es))
    fail("grad overlaps the student without being it (in place: grad == "
         "student)");
  if (extentsOverlap(a.grad, a.V, a.teacher, a.V, a.BT, a.V, es))
    fail("grad must not overlap the teacher");
  // The kernels take beta and 1 / T as f32; beta's ends select the KL
  // forms, so a beta that only rounds to 0 or 1 would switch to them.
  if (isJsd(a.divergence) &&
      (!(a.beta >= 0 && a.beta <= 1) || (a.beta != 0 && float(a.beta) == 0) ||
       (a.beta != 1 && float(a.beta) == 1)))
    fail("beta must be in [0, 1], and 0 or 1 only if it is (it is an f32 "
         "there)");
  if (a.divergence != Divergence::Jsd &&
      (!(a.temperature > 0) || !std::isfinite(float(a.temperature)) ||
       !std::isfinite(1.0f / float(a.temperature))))
    fail("the temperature must be > 0, with T and 1 / T finite in f32");
}

/// The workspace: the gradient's factor for every row (row_scale's).
constexpr size_t kWorkspaceBytes = 16;

struct Kernels {
  const Kernel &scale;
  Kernel rows;
  const Kernel &total;
};

/// The row kernel for one divergence family, dtype, labelling and V (the
/// row schedule follows V: kernels_spec/Registry.cpp, withRowSchedules);
/// the f32 scale and total, which depend on none of them, compiled once.
const Kernels &kernelsFor(const DistillationArgs &a) {
  static const Kernel scale =
      Kernel::compile("row_scale", {DType::F32, {}, {}});
  static const Kernel total =
      Kernel::compile("row_loss_total", {DType::F32, {}, {}});
  static std::mutex mutex;
  static std::map<std::tuple<std::string, DType, bool, int64_t>,
                  std::unique_ptr<Kernels>>
      cache;
  const char *name = kernelName(a.divergence);
  bool hasLabel = a.label != nullptr;
  std::lock_guard<std::mutex> lock(mutex);
  std::unique_ptr<Kernels> &slot = cache[{name, a.dtype, hasLabel, a.V}];
  if (!slot) {
    KernelOptions rows{
        a.dtype, {"HAS_LABEL=" + std::to_string(hasLabel)}, {{"V", a.V}}};
    slot = std::make_unique<Kernels>(
        Kernels{scale, Kernel::compile(name, rows), total});
  }
  return *slot;
}

} // namespace

size_t distillationWorkspaceBytes(const DistillationArgs &args) {
  validate(args);
  return kWorkspaceBytes;
}

void prepareDistillation(const DistillationArgs &args, Device device) {
  validate(args);
  const Kernels &k = kernelsFor(args);
  if (device == Device::Gpu)
    Kernel::compileForGpu({&k.scale, &k.rows, &k.total});
}

void distillation(const DistillationArgs &a, void *workspace,
                  size_t workspaceBytes, Device device, CUstream stream) {
  validate(a);
  std::string op = kernelName(a.divergence);
  checkWorkspace(op, workspace, workspaceBytes, kWorkspaceBytes);
  bool cpu = device == Device::Cpu;
  bool none = a.reduction == Reduction::None;
  if (a.BT == 0) { // the loss of nothing is 0; nothing is launched
    if (a.loss && cpu)
      *a.loss = 0;
    else if (a.loss)
      cuda::memsetAsync(reinterpret_cast<CUdeviceptr>(a.loss), 0, sizeof(float),
                        stream);
    return;
  }
  const Kernels &k = kernelsFor(a);
  float *scale = static_cast<float *>(workspace);
  bool hasLabel = a.label != nullptr;
  // Without labels row_scale reads none: any i64 pointer will do.
  const void *label = hasLabel ? static_cast<const void *>(a.label) : scale;
  int64_t labels = hasLabel ? a.BT : 1, cells = a.BT * a.V;
  runOrLaunch(device, stream, k.scale, 1,
              {bufferArg(label, DType::I64, labels, device),
               bufferArg(scale, DType::F32, 1, device),
               KernelArg::i32(int32_t(a.BT)), KernelArg::i64(a.ignoreIndex),
               KernelArg::i32(hasLabel),
               KernelArg::i32(a.reduction == Reduction::Mean)});
  // Reduction none without gradOutput: row_scale wrote 1 for every row.
  bool perRow = none && a.gradOutput;
  const float *upstream = perRow ? a.gradOutput : scale;
  std::vector<KernelArg> args = {
      bufferArg(a.student, a.dtype, cells, device),
      bufferArg(a.teacher, a.dtype, cells, device),
      bufferArg(label, DType::I64, labels, device),
      bufferArg(a.rowLoss, DType::F32, a.BT, device),
      bufferArg(a.grad, a.dtype, cells, device),
      bufferArg(upstream, DType::F32, perRow ? a.BT : 1, device)};
  if (isJsd(a.divergence)) {
    args.push_back(KernelArg::f32(float(a.beta)));
    if (a.divergence == Divergence::JsdLogits)
      args.push_back(KernelArg::f32(float(a.temperature)));
  } else {
    args.push_back(KernelArg::f32(float(a.temperature)));
    args.push_back(KernelArg::i32(a.divergence == Divergence::KlReverse));
  }
  args.push_back(KernelArg::i64(a.ignoreIndex));
  args.push_back(KernelArg::i32(perRow));
  args.push_back(KernelArg::i32(int32_t(a.V)));
  runOrLaunch(device, stream, k.rows, a.BT, args);
  if (!none)
    runOrLaunch(device, stream, k.total, 1,
                {bufferArg(a.rowLoss, DType::F32, a.BT, device),
                 bufferArg(scale, DType::F32, 1, device),
                 bufferArg(a.loss, DType::F32, 1, device),
                 KernelArg::i32(int32_t(a.BT))});
}

} // namespace ops
} // namespace tilejit
