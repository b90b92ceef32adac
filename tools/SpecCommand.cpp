//===- SpecCommand.cpp - run, bench and tune any spec-declared kernel -----===//
//
//   tilejit run KERNEL --size BT=4096 --size V=151936 [--dtype bf16]
//               [--set NAME=VALUE ...] [--cpu | --device=cpu|gpu] [--simt]
//               [--check]
//               [--input NAME=in.npy ...] [--output NAME=out.npy ...]
//   tilejit bench KERNEL --size ... [--iters 50]
//   tilejit tune KERNEL --size ... [--reps 20] [--retune]
//   tilejit --load libmykernels.so run|bench|tune|list ...
//
// For kernels whose spec declares its arguments (KernelSpec::run; the
// driver is ops/SpecRun.h). `run` checks the outputs against the spec's
// fp64 reference when it has one (exit 1 on a mismatch; --check makes a
// spec without one an error); `bench` times the
// kernel against the memory roofline (its bytes over the copy bandwidth
// measured in the same process) and, for a kernel that declares its matrix
// product (RunSpec::gemm), reports TFLOP/s and its fraction of cuBLASLt's
// time on the same operands, in the same process; `tune` stores the winner
// that `run` and `bench` then use on this GPU.
//
//===----------------------------------------------------------------------===//
#include "Commands.h"

#include "ops/SpecRun.h"
#include "runtime/CublasLt.h"
#include "runtime/CudaDriver.h"
#include "tilejit/Error.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"

#include <dlfcn.h>

#include <cstdio>
#include <iostream>

using namespace tilejit;

static std::pair<std::string, std::string> splitPair(const std::string &opt,
                                                     const std::string &s) {
  auto eq = s.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == s.size())
    throw Error("--" + opt + " '" + s + "' is not NAME=VALUE");
  return {s.substr(0, eq), s.substr(eq + 1)};
}

DType specDType(const KernelSpec &spec, const std::string &dtype, bool given) {
  bool bf16 = llvm::is_contained(spec.dtypes, DType::BF16);
  return given || bf16 || spec.dtypes.empty() ? parseDType(dtype)
                                              : spec.dtypes.front();
}

/// findKernel for run, bench and tune: an unknown name also lists the
/// operations the command takes besides the kernels.
static const KernelSpec &findSpecKernel(const std::string &name,
                                        const std::string &operations) {
  try {
    return findKernel(name);
  } catch (const Error &e) {
    throw Error(std::string(e.what()) + "; operations: " + operations);
  }
}

static SpecRunOptions runOptions(const SpecCommandArgs &a, const KernelSpec &spec,
                                 bool gpu) {
  SpecRunOptions o;
  o.dtype = specDType(spec, a.dtype, a.dtypeGiven);
  for (const std::string &s : a.sizes) {
    auto [name, value] = splitPair("size", s);
    int64_t v = 0;
    if (!llvm::to_integer(value, v, 10))
      throw Error("--size " + s + ": " + value + " is not an integer");
    o.sizes[name] = v;
  }
  o.set = a.set;
  for (const std::string &s : a.inputs)
    o.inputFiles.insert(splitPair("input", s));
  o.seed = a.seed;
  o.gpu = gpu;
  o.arch = a.arch;
  return o;
}

static void printHeader(const char *verb, const SpecRun &r, const char *where) {
  const SpecRunOptions &o = r.options();
  std::string sizes, scalars;
  for (auto &[n, v] : o.sizes)
    sizes += " " + n + "=" + std::to_string(v);
  for (auto &[name, v] : r.scalarArgs())
    scalars += " " + name + "=" + formatNumber(v);
  std::printf("%s %s on %s:%s dtype=%s, grid %lld x %lld x %lld\n  config: "
              "%s (%s)\n  scalars:%s\n",
              verb, r.spec().name.c_str(), where, sizes.c_str(),
              dtypeName(o.dtype), (long long)r.grid().x, (long long)r.grid().y,
              (long long)r.grid().z, r.kernel().config().c_str(),
              r.configSource().c_str(),
              scalars.empty() ? " none" : scalars.c_str());
}

/// bench and tune time launches: a grid of 0 programs has none.
static void requireLaunch(const std::string &what, const SpecRun &r) {
  Grid g = r.grid();
  if (g.x == 0 || g.y == 0 || g.z == 0)
    throw Error(what + " " + r.spec().name + ": the grid " +
                std::to_string(g.x) + " x " + std::to_string(g.y) + " x " +
                std::to_string(g.z) + " has no program to time");
}

int runSpecKernel(const SpecCommandArgs &a) {
  const KernelSpec &spec =
      findSpecKernel(a.kernel, "fused_ce_tvd fused_linear_ce");
  if (a.check && spec.run.declared() && !spec.run.reference)
    throw Error("--check: kernel '" + a.kernel +
                "' has no reference in its spec to check against");
  if (a.gpu)
    requireGpu("tilejit run --device=gpu");
  bool gpu = a.gpu || (!a.cpu && cuda::driverAvailable());
  std::vector<std::pair<std::string, std::string>> outputs;
  for (const std::string &s : a.outputs)
    outputs.push_back(splitPair("output", s));
  SpecRun r(spec, runOptions(a, spec, gpu));
  for (auto &[name, file] : outputs)
    r.buffer(name); // an unknown name fails before the run
  bool simt = defaultInterpretLevel() == InterpretLevel::Simt;
  printHeader("run", r,
              gpu    ? "the GPU"
              : simt ? "the CPU (interpreter, thread-level code)"
                     : "the CPU (interpreter)");
  if (gpu)
    r.runOnGpu();
  else
    r.runOnCpu();
  for (auto &[name, file] : outputs) {
    r.writeNpy(name, file);
    std::printf("  wrote %s to %s\n", name.c_str(), file.c_str());
  }
  if (!r.hasReference()) {
    std::printf("  no reference in the spec: not checked\n");
    return 0;
  }
  bool passed = false;
  std::printf("%s", describeChecks(r.check(), &passed).c_str());
  return passed ? 0 : 1;
}

int benchSpecKernel(const SpecCommandArgs &a) {
  const KernelSpec &spec =
      findSpecKernel(a.kernel, "fused_ce_tvd fused_linear_ce");
  requireGpu("tilejit bench");
  SpecRun r(spec, runOptions(a, spec, true));
  requireLaunch("tilejit bench", r);
  printHeader("bench", r, "the GPU");
  double ms = r.runOnGpu(std::max(1, a.iters));
  double copyBytesPerS = cuda::measureCopyBandwidth(size_t(2) << 30);
  double bytes = r.bytesMoved();
  double rooflineMs = bytes / copyBytesPerS * 1e3;
  std::printf("  copy ceiling (device-to-device, 2 GiB): %.2f TB/s\n"
              "  median of %d: %9.3f ms  %8.1f GB/s  bytes moved %.4g  "
              "roofline %.3f ms  fraction %.2f\n",
              copyBytesPerS / 1e12, std::max(1, a.iters), ms,
              bytes / ms / 1e6, bytes, rooflineMs, rooflineMs / ms);
  double flop = r.flops();
  if (flop <= 0 || ms <= 0)
    return 0;
  std::printf("  %.0f TFLOP/s (2 M N K = %.4g FLOP)\n", flop / ms / 1e9, flop);
  // The vendor's product of the same operands, timed the same way.
  std::string why;
  if (!cublaslt::available(&why)) {
    std::printf("  cuBLASLt not timed: %s\n", why.c_str());
    return 0;
  }
  double vendorMs = r.vendorGemmMs(std::max(1, a.iters));
  std::printf("  cuBLASLt %s, same operands: %9.3f ms  %.0f TFLOP/s  "
              "%s at %.3f of it\n",
              cublaslt::version().c_str(), vendorMs, flop / vendorMs / 1e9,
              spec.name.c_str(), vendorMs / ms);
  return 0;
}

int tuneSpecKernel(const SpecCommandArgs &a) {
  const KernelSpec &spec = findSpecKernel(a.kernel, "fused_ce_tvd");
  requireGpu("tilejit tune");
  SpecRunOptions o = runOptions(a, spec, true);
  o.useTuned = false;
  SpecRun r(spec, o);
  requireLaunch("tilejit tune", r);
  SpecTuneReport t =
      tuneSpecGpu(r, a.iters, a.retune, [](const std::string &line) {
        std::cerr << "tune: " << line << "\n";
      });
  double bytes = r.bytesMoved();
  std::printf("%s key %s %s: %s%s\n", t.key.kernel.c_str(), t.key.shape.c_str(),
              t.key.dtype.c_str(),
              t.fromDatabase ? "from the tuning database, not re-tuned"
                             : "tuned now",
              t.path.empty() ? " (database off: TILEJIT_CACHE=0)"
                             : ("; " + t.path).c_str());
  for (const Trial &trial : t.entry.trials) {
    std::printf("  %-40s ", formatParams(trial.params).c_str());
    if (trial.status == TrialStatus::Ok && r.flops() > 0)
      std::printf("%9.3f ms %8.1f TFLOP/s\n", trial.ms,
                  r.flops() / trial.ms / 1e9);
    else if (trial.status == TrialStatus::Ok)
      std::printf("%9.3f ms %8.1f GB/s\n", trial.ms, bytes / trial.ms / 1e6);
    else
      std::printf("%s\n", trial.statusText().c_str());
  }
  std::printf("  winner: %s\n", formatParams(t.entry.best).c_str());
  return 0;
}

void loadKernelLibrary(const std::string &path) {
  // dlopen searches the library path for a name without a slash; a file of
  // that name in the current directory is the one meant.
  std::string file = path;
  if (path.find('/') == std::string::npos && llvm::sys::fs::exists(path))
    file = "./" + path;
  size_t before = kernelRegistry().size();
  void *handle = dlopen(file.c_str(), RTLD_NOW | RTLD_GLOBAL);
  if (!handle)
    throw Error("--load " + path + ": " + dlerror());
  // A library that brought a tilejit of its own (libtilejit.so or .a) has
  // its own definition of the registry: both copies' static objects were
  // constructed over the CLI's by now, so the caller must not use the
  // registry, unload the library or run destructors.
  Dl_info self;
  auto registry = reinterpret_cast<void *>(&kernelRegistry);
  if (dladdr(registry, &self) && self.dli_sname) {
    void *theirs = dlsym(handle, self.dli_sname);
    Dl_info info;
    if (theirs && theirs != registry)
      throw Error(
          "--load " + path + ": it links its own libtilejit (" +
          (dladdr(theirs, &info) && info.dli_fname ? info.dli_fname : "?") +
          "); build it as a MODULE that takes tilejit from the CLI "
          "(tilejit::headers): see README");
  }
  using RegisterFn = void (*)();
  if (auto fn = reinterpret_cast<RegisterFn>(
          dlsym(handle, "tilejit_register_kernels")))
    fn();
  if (kernelRegistry().size() == before)
    std::cerr << "tilejit: warning: --load " << path
              << " registered no kernel (no static initializer called "
                 "tilejit::registerKernel, and it exports no "
                 "tilejit_register_kernels)\n";
}
