//===- FusedCeTvd.cpp - the reduced CE+TVD loss on the caller's memory ----===//
#include "tilejit/ops/FusedCeTvd.h"

#include "ops/FusedCeTvdParts.h"
#include "ops/TunedConfig.h"
#include "runtime/Autotuner.h"
#include "runtime/CudaDriver.h"
#include "tilejit/Error.h"
#include "tilejit/HostFloat.h"
#include "tilejit/Kernel.h"
#include "tilejit/KernelSpec.h"

#include "llvm/ADT/StringExtras.h"

#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <optional>

namespace tilejit {
namespace ops {
namespace {

const char *const kLossGrad = "fused_ce_tvd_loss_grad";
const char *const kLossGradMath = "ce_tvd_loss_grad";
const char *const kWeights = "ce_tvd_row_weights";
const char *const kLossSum = "ce_tvd_loss_sum";

/// The workspace: the row weights (alpha / n_valid, beta / n_valid,
/// n_valid), then what the caller did not provide: the bad-target flag and
/// the per-row terms. Each part 16-byte aligned.
struct Layout {
  size_t weights = 0, bad = 0, ce = 0, tvd = 0, bytes = 0;
};

Layout layout(const CeTvdReducedArgs &a) {
  Layout l;
  size_t at = align16(3 * sizeof(float));
  auto take = [&](bool needed, size_t bytes) {
    size_t here = at;
    if (needed)
      at += align16(bytes);
    return here;
  };
  l.bad = take(!a.badTarget, sizeof(int32_t));
  l.ce = take(!a.ce, a.BT * sizeof(float));
  l.tvd = take(!a.tvd, a.BT * sizeof(float));
  l.bytes = at;
  return l;
}

int64_t rowStride(const CeTvdReducedArgs &a) {
  return a.rowStride ? a.rowStride : a.V;
}
int64_t gradStride(const CeTvdReducedArgs &a) {
  return a.gradStride ? a.gradStride : rowStride(a);
}
bool inPlace(const CeTvdReducedArgs &a) { return a.grad == a.student; }

void validate(const CeTvdReducedArgs &a) {
  auto fail = [](const std::string &why) {
    throw Error("fused_ce_tvd (reduced): " + why);
  };
  checkLogitRows("reduced", a.dtype, a.BT, a.V, rowStride(a), a.teacherStride);
  if (rowStride(a) < a.V || gradStride(a) < a.V)
    fail("row strides (" + std::to_string(rowStride(a)) + " for the logits, " +
         std::to_string(gradStride(a)) + " for the gradient) must be >= V = " +
         std::to_string(a.V));
  if (!a.loss)
    fail("no loss output");
  if (a.BT > 0 && (!a.student || !a.teacher || !a.target || !a.grad))
    fail("student, teacher, target and grad must not be null");
  if (inPlace(a) && gradStride(a) != rowStride(a))
    fail("an in-place gradient (grad == student) needs the student's row "
         "stride");
  size_t es = dtypeSize(a.dtype);
  if (!inPlace(a) && extentsOverlap(a.grad, gradStride(a), a.student,
                                    rowStride(a), a.BT, a.V, es))
    fail("grad overlaps the student without being it (in place: grad == "
         "student, with its stride)");
  if (extentsOverlap(a.grad, gradStride(a), a.teacher, rowStride(a), a.BT,
                     a.V, es))
    fail("grad must not overlap the teacher");
  checkF32Scalar("fused_ce_tvd (reduced): alpha", a.alpha);
  checkF32Scalar("fused_ce_tvd (reduced): beta", a.beta);
  if (!a.lossGradKernel.empty() && a.lossGradKernel != kLossGrad &&
      a.lossGradKernel != kLossGradMath)
    fail("loss + gradient kernel '" + a.lossGradKernel + "': it is " +
         kLossGrad + " or " + kLossGradMath);
}

/// Whether every row of every logits buffer starts 16-byte aligned, which
/// lets the kernel skip its per-access alignment check.
bool rowsAligned(const CeTvdReducedArgs &a) {
  size_t es = dtypeSize(a.dtype);
  return rowsStartAligned(a.student, rowStride(a), es) &&
         rowsStartAligned(a.teacher, rowStride(a), es) &&
         rowsStartAligned(a.grad, gradStride(a), es);
}

/// The three kernels of one shape and config, compiled once per process.
struct Kernels {
  Kernel weights, lossGrad, lossSum;
  int64_t cluster; ///< programs per row of lossGrad
  std::string config;
};

const Kernels &kernelsFor(const CeTvdReducedArgs &a, Device device) {
  bool aligned = rowsAligned(a), place = inPlace(a);
  std::map<std::string, int64_t> shape = {
      {"BT", a.BT}, {"V", a.V}, {"IN_PLACE", place}, {"ALIGNED", aligned}};
  const KernelSpec &spec = findKernel(
      a.lossGradKernel.empty() ? kLossGrad : a.lossGradKernel.c_str());
  std::vector<std::string> set = a.set;
  std::string source = set.empty() ? "default" : "set";
  std::string key = spec.name + "|" + dtypeName(a.dtype) + "|" +
                    spec.tuningShapeKey(shape) + "|" + std::to_string(place) +
                    std::to_string(aligned) + std::to_string(a.useTuned) +
                    "|" + llvm::join(set, ",") +
                    (device == Device::Gpu ? "|gpu" : "|cpu");
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<Kernels>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  std::unique_ptr<Kernels> &slot = cache[key];
  if (slot)
    return *slot;
  if (device == Device::Gpu && set.empty() && a.useTuned)
    set = tunedOverrides(spec, a.dtype, shape, currentGpuIdentity(), &source);
  dsl::Config c = spec.config(a.dtype, set, shape);
  auto helper = [](const char *name) {
    return Kernel::compile(name, {DType::F32, {}, {}});
  };
  slot = std::make_unique<Kernels>(Kernels{
      helper(kWeights), Kernel::compile(spec, {a.dtype, set, shape}),
      helper(kLossSum),
      c.params.count("CLUSTER_SIZE") ? c.get("CLUSTER_SIZE") : 1,
      spec.name + " " + c.str() + " (" + source + ")"});
  return *slot;
}

} // namespace

void checkLogitRows(const char *what, DType dtype, int64_t BT, int64_t V,
                    int64_t rowStride, int64_t teacherStride) {
  auto fail = [&](const std::string &why) {
    throw Error(std::string("fused_ce_tvd (") + what + "): " + why);
  };
  if (!isFloat(dtype))
    fail(std::string("the logits must be bf16, f16 or f32 (got ") +
         dtypeName(dtype) + ")");
  const int64_t most = std::numeric_limits<int32_t>::max();
  if (BT < 0 || BT > most)
    fail("BT = " + std::to_string(BT) + " must be in [0, 2^31)");
  if (V <= 0 || V > most)
    fail("V = " + std::to_string(V) + " must be in [1, 2^31)");
  if (teacherStride != 0 && teacherStride != rowStride)
    fail("the teacher's row stride " + std::to_string(teacherStride) +
         " differs from the student's " + std::to_string(rowStride) +
         ": the kernels take one stride (make one of them contiguous)");
}

size_t ceTvdReducedWorkspaceBytes(const CeTvdReducedArgs &args) {
  validate(args);
  return layout(args).bytes;
}

std::string prepareCeTvdReduced(const CeTvdReducedArgs &args) {
  validate(args);
  const Kernels &k = kernelsFor(args, Device::Gpu);
  Kernel::compileForGpu({&k.weights, &k.lossGrad, &k.lossSum});
  return k.config;
}

std::string ceTvdReducedConfig(const CeTvdReducedArgs &args, Device device) {
  validate(args);
  return kernelsFor(args, device).config;
}

const Kernel &ceTvdReducedLossGrad(const CeTvdReducedArgs &args) {
  prepareCeTvdReduced(args);
  return kernelsFor(args, Device::Gpu).lossGrad;
}

size_t ceTvdReducedValidCountOffset() {
  return Layout{}.weights + 2 * sizeof(float);
}

void ceTvdReduced(const CeTvdReducedArgs &a, void *workspace,
                  size_t workspaceBytes, Device device, CUstream stream) {
  validate(a);
  bool gpu = device == Device::Gpu;
  if (a.BT == 0) { // the loss of nothing is 0, for mean as for sum
    for (void *p : {static_cast<void *>(a.loss),
                    static_cast<void *>(a.badTarget)}) {
      if (!p)
        continue;
      if (gpu)
        cuda::memsetAsync(reinterpret_cast<CUdeviceptr>(p), 0, 4, stream);
      else
        std::memset(p, 0, 4);
    }
    return;
  }
  Layout l = layout(a);
  if (!workspace || workspaceBytes < l.bytes)
    throw Error("fused_ce_tvd (reduced): the workspace has " +
                std::to_string(workspace ? workspaceBytes : 0) +
                " bytes; this call needs " + std::to_string(l.bytes) +
                " (ceTvdReducedWorkspaceBytes)");
  if (reinterpret_cast<uintptr_t>(workspace) % 16)
    throw Error("fused_ce_tvd (reduced): the workspace must be 16-byte "
                "aligned");
  const Kernels &k = kernelsFor(a, device);
  char *ws = static_cast<char *>(workspace);
  float *weights = reinterpret_cast<float *>(ws + l.weights);
  int32_t *bad = a.badTarget ? a.badTarget
                             : reinterpret_cast<int32_t *>(ws + l.bad);
  float *ce = a.ce ? a.ce : reinterpret_cast<float *>(ws + l.ce);
  float *tvd = a.tvd ? a.tvd : reinterpret_cast<float *>(ws + l.tvd);

  const int64_t logits = (a.BT - 1) * rowStride(a) + a.V;
  const int64_t grads = (a.BT - 1) * gradStride(a) + a.V;
  using A = KernelArg;
  std::vector<A> weightArgs = {
      A::pointer(a.target, DType::I64, a.BT), A::pointer(weights, DType::F32, 3),
      A::i32(int32_t(a.BT)), A::i64(a.ignoreIndex),
      A::f32(float(a.alpha)), A::f32(float(a.beta)), A::i32(a.mean)};
  std::vector<A> lossGradArgs = {
      A::pointer(a.student, a.dtype, logits),
      A::pointer(a.teacher, a.dtype, logits),
      A::pointer(a.target, DType::I64, a.BT),
      A::pointer(weights, DType::F32, 3),
      A::pointer(ce, DType::F32, a.BT),
      A::pointer(tvd, DType::F32, a.BT),
      A::pointer(a.grad, a.dtype, grads),
      A::pointer(bad, DType::I32, 1),
      A::i32(int32_t(a.V)),
      A::i64(rowStride(a)),
      A::i64(gradStride(a)),
      A::i64(a.ignoreIndex)};
  std::vector<A> lossSumArgs = {
      A::pointer(ce, DType::F32, a.BT), A::pointer(tvd, DType::F32, a.BT),
      A::pointer(weights, DType::F32, 3), A::pointer(a.loss, DType::F32, 1),
      A::i32(int32_t(a.BT))};
  Grid rows{a.BT * k.cluster};
  if (gpu) {
    cuda::memsetAsync(reinterpret_cast<CUdeviceptr>(bad), 0, sizeof(int32_t),
                      stream);
    k.weights.launch({1}, weightArgs, stream);
    k.lossGrad.launch(rows, lossGradArgs, stream);
    k.lossSum.launch({1}, lossSumArgs, stream);
  } else {
    *bad = 0;
    k.weights.runOnCpu({1}, weightArgs);
    k.lossGrad.runOnCpu(rows, lossGradArgs);
    k.lossSum.runOnCpu({1}, lossSumArgs);
  }
}

} // namespace ops
} // namespace tilejit
