//===- FusedCeTvdUnreduced.cpp - the CE+TVD forward and backward ops ------===//
#include "tilejit/ops/FusedCeTvd.h"

#include "kernels_spec/FusedCeTvdArgs.h"
#include "ops/FusedCeTvdParts.h"
#include "ops/TunedConfig.h"
#include "runtime/CudaDriver.h"
#include "tilejit/Error.h"
#include "tilejit/Kernel.h"
#include "tilejit/KernelSpec.h"

#include "llvm/ADT/StringExtras.h"

#include <array>
#include <chrono>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <type_traits>

namespace tilejit {
namespace ops {
namespace {

using namespace cetvd;

const char *const kLoop = "fused_ce_tvd_fwd";
const char *const kCluster = "fused_ce_tvd_fwd_cluster";
const char *const kBackward = "fused_ce_tvd_bwd";

int64_t rowStride(const CeTvdArgs &a) { return a.rowStride ? a.rowStride : a.V; }

/// The forward kernel `a` runs on `device`.
std::string forwardKernel(const CeTvdArgs &a, Device device) {
  if (!a.forwardKernel.empty())
    return a.forwardKernel;
  if (device == Device::Cpu)
    return kLoop;
  return currentGpuIdentity().ccMajor >= 9 ? kCluster : kLoop;
}

void validate(const CeTvdArgs &a, const char *what) {
  auto fail = [&](const std::string &why) {
    throw Error(std::string("fused_ce_tvd (") + what + "): " + why);
  };
  checkLogitRows(what, a.dtype, a.BT, a.V, rowStride(a), a.teacherStride);
  if (rowStride(a) < a.V)
    fail("the row stride " + std::to_string(rowStride(a)) +
         " must be >= V = " + std::to_string(a.V));
  if (a.BT > 0 && (!a.student || !a.teacher || !a.target))
    fail("student, teacher and target must not be null");
  if (!a.forwardKernel.empty() && a.forwardKernel != kLoop &&
      a.forwardKernel != kCluster)
    fail("unknown forward kernel '" + a.forwardKernel + "' (" + kLoop +
         " or " + kCluster + ")");
  for (const std::string &s : a.set)
    if (findKernel(kLoop).ownOverrides({s}).empty() &&
        findKernel(kCluster).ownOverrides({s}).empty() &&
        findKernel(kBackward).ownOverrides({s}).empty())
      fail("'" + s + "' names no parameter of the forward or backward kernel "
                     "(see tilejit list)");
}

/// One kernel for a shape and config, compiled once per process.
struct Built {
  Kernel kernel;
  int64_t cluster; ///< programs per row
  std::string config;
};

/// Whether every row of the logits (and of `grad`, when given) starts 16-byte
/// aligned, which lets the kernels skip their per-access alignment check.
bool rowsAligned(const CeTvdArgs &a, const void *grad = nullptr,
                 int64_t gradStride = 0) {
  size_t es = dtypeSize(a.dtype);
  return rowsStartAligned(a.student, rowStride(a), es) &&
         rowsStartAligned(a.teacher, rowStride(a), es) &&
         (!grad || rowsStartAligned(grad, gradStride, es));
}

const Built &kernelFor(const std::string &name, const CeTvdArgs &a,
                       bool aligned, Device device) {
  const KernelSpec &spec = findKernel(name);
  std::map<std::string, int64_t> shape = {
      {"BT", a.BT}, {"V", a.V}, {"IN_PLACE", 0}, {"ALIGNED", aligned}};
  std::vector<std::string> set = spec.ownOverrides(a.set);
  std::string key = name + "|" + dtypeName(a.dtype) + "|" +
                    spec.tuningShapeKey(shape) + "|" +
                    std::to_string(aligned) + "|" +
                    std::to_string(a.useTuned) + llvm::join(a.set, ",") +
                    (device == Device::Gpu ? "|gpu" : "|cpu");
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<Built>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  std::unique_ptr<Built> &slot = cache[key];
  if (slot)
    return *slot;
  std::string source = a.set.empty() ? "default" : "set";
  if (device == Device::Gpu && a.set.empty() && a.useTuned)
    set = tunedOverrides(spec, a.dtype, shape, currentGpuIdentity(), &source);
  dsl::Config c = spec.config(a.dtype, set, shape);
  int64_t cluster = c.params.count("CLUSTER_SIZE") ? c.get("CLUSTER_SIZE") : 1;
  slot = std::make_unique<Built>(
      Built{Kernel::compile(spec, {a.dtype, set, shape}), cluster,
            c.str() + " (" + source + ")"});
  return *slot;
}

/// Pointers to every buffer of the forward and backward (indexed by Buf),
/// the state's parts inside `state`.
std::array<void *, NumBufs> pointers(const CeTvdArgs &a, const void *state) {
  std::array<void *, NumBufs> p{};
  p[Student] = const_cast<void *>(a.student);
  p[Teacher] = const_cast<void *>(a.teacher);
  p[Target] = const_cast<int64_t *>(a.target);
  char *s = static_cast<char *>(const_cast<void *>(state));
  size_t part = align16(size_t(a.BT) * sizeof(float));
  Buf parts[] = {Sigma, MaxS, LogSumS, MaxT, LogSumT, FastSigns, BadTarget};
  for (size_t i = 0; i < std::size(parts); ++i)
    p[parts[i]] = s + i * part;
  return p;
}

/// Runs kernel `k` with its argument list on `device`.
void run(const Built &k, const CeTvdArgs &a, bool backward,
         const std::array<void *, NumBufs> &p, int64_t gradStride,
         Device device, CUstream stream) {
  Scalars s(a.V, rowStride(a), gradStride, a.ignoreIndex);
  int64_t logits = (a.BT - 1) * rowStride(a) + a.V;
  auto count = [&](Buf b) {
    return b == Student || b == Teacher ? logits
           : b == Grad                  ? (a.BT - 1) * gradStride + a.V
                                        : bufCount(b, a.BT, a.V);
  };
  std::vector<KernelArg> args = kernelArgs<KernelArg>(
      backward, s,
      [&](Buf b) {
        return KernelArg::pointer(p[b], bufDType(b, a.dtype), count(b));
      },
      [](auto x) {
        if constexpr (std::is_same_v<decltype(x), int32_t>)
          return KernelArg::i32(x);
        else
          return KernelArg::i64(x);
      });
  Grid grid{a.BT * k.cluster};
  if (device == Device::Gpu)
    k.kernel.launch(grid, args, stream);
  else
    k.kernel.runOnCpu(grid, args);
}

} // namespace

size_t ceTvdStateBytes(int64_t BT) {
  return 6 * align16(size_t(std::max<int64_t>(BT, 0)) * sizeof(float)) + 16;
}

void ceTvdForward(const CeTvdArgs &a, float *ce, float *tvd, void *state,
                  Device device, CUstream stream) {
  validate(a, "forward");
  if (a.BT == 0)
    return;
  if (!ce || !tvd || !state)
    throw Error("fused_ce_tvd (forward): ce, tvd and state must not be null");
  std::array<void *, NumBufs> p = pointers(a, state);
  p[Ce] = ce;
  p[Tvd] = tvd;
  if (device == Device::Gpu)
    cuda::memsetAsync(reinterpret_cast<CUdeviceptr>(p[BadTarget]), 0,
                      sizeof(int32_t), stream);
  else
    std::memset(p[BadTarget], 0, sizeof(int32_t));
  run(kernelFor(forwardKernel(a, device), a, rowsAligned(a), device), a,
      false, p, a.V, device, stream);
}

void ceTvdBackward(const CeTvdArgs &a, const void *state, const float *gradCe,
                   const float *gradTvd, void *grad, int64_t gradStride,
                   Device device, CUstream stream) {
  validate(a, "backward");
  int64_t gs = gradStride ? gradStride : a.V;
  if (gs < a.V)
    throw Error("fused_ce_tvd (backward): the gradient's row stride " +
                std::to_string(gs) + " must be >= V = " + std::to_string(a.V));
  if (a.BT == 0)
    return;
  if (!state || !gradCe || !gradTvd || !grad)
    throw Error("fused_ce_tvd (backward): state, gradCe, gradTvd and grad "
                "must not be null");
  size_t es = dtypeSize(a.dtype);
  if (extentsOverlap(grad, gs, a.student, rowStride(a), a.BT, a.V, es) ||
      extentsOverlap(grad, gs, a.teacher, rowStride(a), a.BT, a.V, es))
    throw Error("fused_ce_tvd (backward): grad must not overlap the student "
                "or teacher (the reduced op writes its gradient in place)");
  std::array<void *, NumBufs> p = pointers(a, state);
  p[GCe] = const_cast<float *>(gradCe);
  p[GTvd] = const_cast<float *>(gradTvd);
  p[Grad] = grad;
  run(kernelFor(kBackward, a, rowsAligned(a, grad, gs), device), a, true, p,
      gs, device, stream);
}

CeTvdPrepared prepareCeTvd(const CeTvdArgs &a) {
  validate(a, "prepare");
  // The backward's gradient is not known here: it is prepared for rows as
  // aligned as the logits' (a gradient laid out as the student, the usual
  // case); another alignment compiles on its first call.
  bool aligned = rowsAligned(a);
  CeTvdPrepared p;
  p.forwardKernel = forwardKernel(a, Device::Gpu);
  auto t0 = std::chrono::steady_clock::now();
  const Built &f = kernelFor(p.forwardKernel, a, aligned, Device::Gpu);
  const Built &b = kernelFor(kBackward, a, aligned, Device::Gpu);
  Kernel::compileForGpu({&f.kernel, &b.kernel});
  // Compiled side by side: both take the time of the two.
  p.forwardJitMs = p.backwardJitMs =
      std::chrono::duration<double, std::milli>(
          std::chrono::steady_clock::now() - t0)
          .count();
  p.forwardConfig = f.config;
  p.backwardConfig = b.config;
  return p;
}

} // namespace ops
} // namespace tilejit
