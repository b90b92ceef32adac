//===- FusedCeTvdTune.cpp - CE+TVD tuning targets on the GPU --------------===//
#include "ops/harness/FusedCeTvdTune.h"
#include "ops/TunedConfig.h"

#include "kernels_spec/FusedCeTvdArgs.h"
#include "ops/harness/FusedCeTvdOp.h"
#include "runtime/Cache.h"
#include "runtime/CudaDriver.h"
#include "tilejit/CachedCompile.h"
#include "tilejit/Error.h"
#include "tilejit/KernelSpec.h"

#include <cmath>
#include <cstring>
#include <optional>

namespace tilejit {

namespace {

/// What a loaded candidate takes per block, for the tuner's limit check:
/// its threads, registers, and static plus dynamic shared memory.
KernelResources candidateResources(const CompiledKernel &k,
                                   const cuda::Function &fn) {
  return {static_cast<int>(k.threads), fn.numRegs(),
          fn.sharedBytes() + static_cast<int>(k.dynamicSharedBytes)};
}

const char *const kBwd = "fused_ce_tvd_bwd";

using namespace cetvd;

const char *const kNames[NumBufs] = {
    "student",    "teacher",    "target",   "ce",    "tvd",
    "sigma",      "max_s",      "logsum_s", "max_t", "logsum_t",
    "fast_signs", "bad_target", "g_ce",     "g_tvd", "grad"};

/// A compiled and loaded kernel.
struct LoadedCandidate : TuneCandidate, OwnModuleKernel {};

/// Index of the first Inf/NaN element of a dtype buffer, or -1.
int64_t firstNonFinite(const uint8_t *data, DType dtype, int64_t n) {
  // All exponent bits set: Inf or NaN (the 0xFF.. poison is a NaN).
  auto scan = [&](auto mask) -> int64_t {
    using T = decltype(mask);
    auto bad = [&](int64_t i) {
      T bits;
      std::memcpy(&bits, data + i * sizeof(T), sizeof(T));
      return (bits & mask) == mask;
    };
    bool any = false;
    for (int64_t i = 0; i < n; ++i) // branch-free: vectorizes
      any |= bad(i);
    for (int64_t i = 0; any && i < n; ++i)
      if (bad(i))
        return i;
    return -1;
  };
  switch (dtype) {
  case DType::BF16:
    return scan(uint16_t(0x7F80));
  case DType::F16:
    return scan(uint16_t(0x7C00));
  default:
    return scan(uint32_t(0x7F800000));
  }
}

/// The device, the buffers of one forward + backward, and host staging.
class Session {
public:
  Session(const ref::CeTvdInputs &in, const std::vector<float> &gCe,
          const std::vector<float> &gTvd, const CeTvdTuneOptions &options)
      : In(in), GCeHost(gCe), GTvdHost(gTvd), Dev(cuda::Device::open()),
        Timer(Dev), Rows(sampleCheckRows(in.BT, options.checkRows)),
        ScalarArgs(in) {
    Copts.arch = options.arch.empty() ? Dev.archString() : options.arch;
    for (int i = 0; i < NumBufs; ++i) {
      Buf b = static_cast<Buf>(i);
      Bytes[b] = bufCount(b, in.BT, in.V) * dtypeSize(bufDType(b, in.dtype));
      Buffers.emplace_back(Bytes[b]);
      Ptrs[b] = Buffers.back().ptr();
    }
    Buffers[Student].copyFromHost(in.student.data(), Bytes[Student]);
    Buffers[Teacher].copyFromHost(in.teacher.data(), Bytes[Teacher]);
    Buffers[Target].copyFromHost(in.target.data(), Bytes[Target]);
    Buffers[GCe].copyFromHost(gCe.data(), Bytes[GCe]);
    Buffers[GTvd].copyFromHost(gTvd.data(), Bytes[GTvd]);
  }

  const cuda::Device &device() const { return Dev; }
  const std::string &arch() const { return Copts.arch; }
  L2FlushTimer &timer() { return Timer; }

  std::unique_ptr<LoadedCandidate> compileKernel(const char *name,
                                        const TuneParams &params) const {
    const KernelSpec &spec = findKernel(name);
    auto k = std::make_unique<LoadedCandidate>();
    k->compiled =
        compileCached(spec.build(spec.config(In.dtype, paramOverrides(params),
                                             {{"BT", In.BT}, {"V", In.V}})),
                      Copts);
    return k;
  }

  KernelResources load(LoadedCandidate &k) const {
    k.load();
    return candidateResources(k.compiled, k.fn);
  }

  void launchAsync(const LoadedCandidate &k) {
    if (!k.compiled.tensorMaps.empty()) // only Kernel::launch encodes them
      throw Error("kernel '" + k.compiled.name +
                  "' takes tensor maps: launch it through Kernel::launch");
    std::vector<void *> args =
        launchArgs(k.compiled.name == kBwd, ScalarArgs, Ptrs);
    cuda::launch(k.fn, {static_cast<unsigned>(In.BT * k.compiled.clusterSize)},
                 {static_cast<unsigned>(k.compiled.threads)},
                 static_cast<size_t>(k.compiled.dynamicSharedBytes), nullptr,
                 args);
  }

  /// NaN-fills `outputs`; with `clearFlag`, zeroes the forward's bad_target
  /// (an in/out: the forward writes it only for a bad row).
  void reset(const std::vector<Buf> &outputs, bool clearFlag = true) {
    if (clearFlag)
      Buffers[BadTarget].memset(0);
    for (Buf b : outputs)
      Buffers[b].memset(0xFF); // all-ones: NaN in bf16, f16 and f32
  }

  /// Copies every output back; empty when all match the reference.
  std::string check() {
    cuda::synchronize();
    int32_t bad = 0;
    Buffers[BadTarget].copyToHost(&bad, sizeof(bad));
    if (bad != 0)
      return "bad_target set for row " + std::to_string(bad - 1);
    CeTvdOutputs &o = Out;
    std::vector<float> host[NumBufs];
    for (Buf b : kRowOutputs) {
      host[b].resize(In.BT);
      Buffers[b].copyToHost(host[b].data(), Bytes[b]);
      if (int64_t i =
              firstNonFinite(reinterpret_cast<const uint8_t *>(host[b].data()),
                             DType::F32, In.BT);
          i >= 0)
        return std::string("non-finite ") + kNames[b] + " at row " +
               std::to_string(i) + " (unwritten?)";
    }
    o.grad.resize(Bytes[Grad]);
    Buffers[Grad].copyToHost(o.grad.data(), Bytes[Grad]);
    if (int64_t i = firstNonFinite(o.grad.data(), In.dtype, In.BT * In.V);
        i >= 0)
      return "non-finite grad at row " + std::to_string(i / In.V) + ", v " +
             std::to_string(i % In.V) + " (unwritten?)";
    o.ce = host[Ce];
    o.tvd = host[Tvd];
    o.sigma = host[Sigma];
    lseFromParts(host[MaxS], host[LogSumS], o.lseS);
    lseFromParts(host[MaxT], host[LogSumT], o.lseT);
    CeTvdCheck c = checkCeTvd(In, GCeHost, GTvdHost, o, Rows);
    if (c.passed)
      return {};
    char why[200];
    std::snprintf(why, sizeof(why),
                  "max errors ce %.3g lse %.3g tvd %.3g sigma %.3g, grad "
                  "%.3g x tol",
                  c.ceErr, c.lseErr, c.tvdErr, c.sigmaErr, c.gradErr);
    return why;
  }

private:
  const ref::CeTvdInputs &In;
  const std::vector<float> &GCeHost, &GTvdHost;
  cuda::Device Dev;
  L2FlushTimer Timer;
  std::vector<int64_t> Rows;
  Scalars ScalarArgs;
  CompileOptions Copts;
  std::vector<cuda::DeviceBuffer> Buffers;
  size_t Bytes[NumBufs] = {};
  CUdeviceptr Ptrs[NumBufs] = {};
  CeTvdOutputs Out;
};

/// One of the two kernels as a TuningTarget. `partner` is the other kernel:
/// for the forward, a backward run after each candidate to produce the
/// gradient the check needs; for the backward, nothing (the forward has run).
class CeTvdTarget : public TuningTarget {
public:
  CeTvdTarget(Session &s, const char *kernel, const LoadedCandidate *partner)
      : S(s), Name(kernel), Partner(partner),
        Outputs(Name != kBwd ? kRowOutputs : std::vector<Buf>{Grad}) {}

  std::unique_ptr<TuneCandidate> compile(const TuneParams &params) override {
    return S.compileKernel(Name.c_str(), params);
  }
  KernelResources load(TuneCandidate &c) override {
    return S.load(static_cast<LoadedCandidate &>(c));
  }
  void resetBuffers() override { S.reset(Outputs); }
  void launch(TuneCandidate &c) override {
    S.launchAsync(static_cast<LoadedCandidate &>(c));
    cuda::synchronize();
  }
  double timeLaunch(TuneCandidate &c) override {
    return S.timer().timeMs([&] { S.launchAsync(static_cast<LoadedCandidate &>(c)); });
  }
  std::string checkOutputs() override {
    if (Partner) {
      S.reset({Grad}, /*clearFlag=*/false);
      S.launchAsync(*Partner);
    }
    return S.check();
  }

private:
  Session &S;
  std::string Name;
  const LoadedCandidate *Partner;
  std::vector<Buf> Outputs;
};

std::unique_ptr<LoadedCandidate> loadedKernel(Session &s, const char *name,
                                     const TuneParams &params) {
  std::unique_ptr<LoadedCandidate> k = s.compileKernel(name, params);
  s.load(*k);
  return k;
}

TuneParams defaultParams(const char *name, DType dtype) {
  return findKernel(name).config(dtype).params;
}

} // namespace

TuningKey ceTvdTuningKey(const std::string &kernel, const ref::CeTvdInputs &in,
                         const DeviceIdentity &device, bool inPlace) {
  return kernelTuningKey(findKernel(kernel), in.dtype,
                         {{"BT", in.BT}, {"V", in.V}, {"IN_PLACE", inPlace}},
                         device);
}

std::vector<std::string> tunedCeTvdOverrides(const std::string &kernel,
                                             const ref::CeTvdInputs &in,
                                             const DeviceIdentity &device,
                                             std::string *source,
                                             bool inPlace) {
  return tunedOverrides(ceTvdTuningKey(kernel, in, device, inPlace), source);
}

CeTvdTuneReport tuneCeTvdGpu(const ref::CeTvdInputs &in,
                             const std::vector<float> &gCe,
                             const std::vector<float> &gTvd,
                             const CeTvdTuneOptions &options) {
  Session s(in, gCe, gTvd, options);
  DeviceIdentity id = deviceIdentity(s.device());
  DeviceLimits limits = deviceLimits(s.device());
  TuningDatabase db = TuningDatabase::fromEnvironment();
  CeTvdTuneReport report;
  report.device = id.name;
  double bytes = double(in.BT) * in.V * dtypeSize(in.dtype);

  auto tuneOne = [&](const char *name, const LoadedCandidate *partner,
                     CeTvdTunedKernel &out) {
    out.key = ceTvdTuningKey(name, in, id);
    out.path = db.enabled() ? db.pathFor(out.key).string() : "";
    TuneOptions topts;
    topts.repetitions = options.repetitions;
    if (options.progress)
      topts.progress = [&](const std::string &line) {
        options.progress(std::string(name) + ": " + line);
      };
    CeTvdTarget target(s, name, partner);
    out.entry = lookupOrTune(
        db, out.key,
        [&] {
          return autotune(target, findKernel(name).candidateConfigs(), limits,
                          topts);
        },
        options.retune, &out.fromDatabase);
  };

  // Forward, checked through the default backward.
  std::unique_ptr<LoadedCandidate> bwdDefault =
      loadedKernel(s, kBwd, defaultParams(kBwd, in.dtype));
  std::string fwdKernel = resolveForwardKernel(options.forwardKernel, s.arch());
  const char *fwdName = fwdKernel.c_str();
  tuneOne(fwdName, bwdDefault.get(), report.forward);
  report.forward.bytes = 2 * bytes;

  // Backward, reading the saved state of one run of the chosen forward.
  std::unique_ptr<LoadedCandidate> fwd =
      loadedKernel(s, fwdName, report.forward.entry.best);
  s.reset(kRowOutputs);
  s.launchAsync(*fwd);
  cuda::synchronize();
  tuneOne(kBwd, nullptr, report.backward);
  report.backward.bytes = 3 * bytes;
  return report;
}

} // namespace tilejit
