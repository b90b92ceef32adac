//===- TuneCommand.cpp - `tilejit tune` -----------------------------------===//
//
//   tilejit tune KERNEL --size NAME=N ... (a spec kernel: SpecCommand.cpp)
//   tilejit tune fused_ce_tvd --bt N --vocab V [--dtype bf16|fp16|fp32]
//                [--reps 20] [--check-rows 16] [--retune] [--arch sm_90]
//                [--forward auto|loop|cluster | --reduction mean|sum
//                 [--in-place]]
//
// Tunes the CE+TVD forward and backward kernels on this GPU for the shape
// (ops/harness/FusedCeTvdTune.h) and prints one table per kernel: every
// candidate with its time, bandwidth and status, then the winner. Progress
// goes to stderr. An existing entry is printed as stored, without tuning,
// unless --retune. `tilejit run` then uses the stored configs.
//
// In its own file with its own cl::SubCommand: llvm::cl options are global
// statics, so they register from here like tilejit.cpp's own.
//
//===----------------------------------------------------------------------===//
#include "Commands.h"

#include "ops/harness/FusedCeTvdOp.h"
#include "ops/harness/FusedCeTvdReducedOp.h"
#include "ops/harness/FusedCeTvdTune.h"
#include "runtime/CudaDriver.h"
#include "tilejit/Error.h"
#include "tilejit/KernelSpec.h"

#include "llvm/Support/CommandLine.h"

#include <cstdio>
#include <iostream>

namespace cl = llvm::cl;
using namespace tilejit;

static cl::SubCommand
    tuneCmd("tune", "Autotune a kernel on this GPU for a shape: fused_ce_tvd "
                    "or any kernel whose spec declares its arguments");
static cl::opt<std::string> tuneKernel(cl::Positional, cl::desc("KERNEL"),
                                       cl::Required, cl::sub(tuneCmd));
static cl::opt<int64_t> tuneBt("bt", cl::desc("fused_ce_tvd: tokens (rows)"),
                               cl::sub(tuneCmd));
static cl::opt<int64_t> tuneVocab("vocab",
                                  cl::desc("fused_ce_tvd: vocabulary size V"),
                                  cl::sub(tuneCmd));
static cl::list<std::string>
    tuneSize("size", cl::desc("Spec kernels: a size, NAME=N (e.g. BT=4096)"),
             cl::sub(tuneCmd));
static cl::opt<std::string>
    tuneDtype("dtype", cl::init("bf16"),
              cl::desc("Logits dtype: bf16, fp16, fp32"), cl::sub(tuneCmd));
static cl::opt<std::string>
    tuneArch("arch", cl::desc("GPU architecture (default: the device's)"),
             cl::sub(tuneCmd));
static cl::opt<int> tuneReps("reps", cl::init(20),
                             cl::desc("Timed launches per candidate (median)"),
                             cl::sub(tuneCmd));
static cl::opt<int64_t>
    tuneCheckRows("check-rows", cl::init(16),
                  cl::desc("Rows spread over the batch compared with the fp64 "
                           "reference, besides the first and last 7 (0: "
                           "every row)"),
                  cl::sub(tuneCmd));
static cl::opt<uint64_t> tuneSeed("seed", cl::init(1234),
                                  cl::desc("Seed of the generated logits"),
                                  cl::sub(tuneCmd));
static cl::opt<std::string>
    tuneForward("forward", cl::init("auto"),
                cl::desc("Forward kernel: auto, loop or cluster (see run)"),
                cl::sub(tuneCmd));
static cl::opt<std::string> tuneReduction(
    "reduction", cl::init("none"),
    cl::desc("none: tune the unreduced forward and backward; mean or sum: "
             "tune the reduced loss + gradient kernel"),
    cl::sub(tuneCmd));
static cl::opt<bool>
    tuneInPlace("in-place",
                cl::desc("With --reduction=mean|sum: tune the kernel that "
                         "writes the gradient over the student logits (the "
                         "inputs are restored before every candidate)"),
                cl::sub(tuneCmd));
static cl::opt<std::string>
    tuneDevice("device", cl::init("gpu"),
               cl::desc("gpu: tune times kernels on the GPU only"),
               cl::sub(tuneCmd));
static cl::opt<bool> tuneRetune("retune",
                                cl::desc("Tune even if an entry is stored"),
                                cl::sub(tuneCmd));

bool tuneCommandSelected() { return static_cast<bool>(tuneCmd); }

static void printKernel(const CeTvdTunedKernel &k, DType dtype) {
  const TuningEntry &e = k.entry;
  std::printf("\n%s  key %s %s: %s%s\n", k.key.kernel.c_str(),
              k.key.shape.c_str(), k.key.dtype.c_str(),
              k.fromDatabase ? "from the tuning database, not re-tuned"
                             : "tuned now",
              k.path.empty() ? " (database off: TILEJIT_CACHE=0)"
                             : ("; " + k.path).c_str());
  // The trials vary the tuned parameters; the others take their defaults
  // for this dtype and shape, as does the default config compared with.
  const KernelSpec &spec = findKernel(k.key.kernel);
  dsl::Config defaultConfig =
      spec.config(dtype, {}, {{"BT", tuneBt}, {"V", tuneVocab}});
  TuneParams defaults;
  for (const ParamSpec &p : spec.params)
    if (p.tuned) {
      defaults[p.name] = defaultConfig.get(p.name);
      std::printf("%12s", p.name.c_str());
    }
  std::printf("  %5s %10s %9s %8s  %s\n", "regs", "compile ms", "time ms",
              "GB/s", "status");
  const Trial *best = nullptr, *dflt = nullptr;
  for (const Trial &t : e.trials) {
    for (const ParamSpec &p : spec.params) {
      if (!p.tuned)
        continue;
      auto it = t.params.find(p.name);
      std::printf("%12lld",
                  it == t.params.end() ? -1LL : (long long)it->second);
    }
    bool ok = t.status == TrialStatus::Ok;
    std::printf("  %5d %10.0f ", t.resources.registers, t.compileMs);
    if (ok)
      std::printf("%9.3f %8.1f", t.ms, k.bytes / t.ms / 1e6);
    else
      std::printf("%9s %8s", "-", "-");
    std::printf("  %s\n", t.statusText().c_str());
    if (t.params == e.best)
      best = &t;
    if (t.params == defaults && ok)
      dflt = &t;
  }
  std::printf("  winner: %s", formatParams(e.best).c_str());
  if (best && best->status == TrialStatus::Ok)
    std::printf(": %.3f ms, %.1f GB/s", best->ms, k.bytes / best->ms / 1e6);
  if (dflt && best && best->status == TrialStatus::Ok)
    std::printf(" (default %s: %.3f ms, %.2fx)", formatParams(defaults).c_str(),
                dflt->ms, dflt->ms / best->ms);
  std::printf("\n");
}

int runTuneCommand() {
  if (tuneDevice != "gpu")
    throw Error("tilejit tune needs a GPU: it times kernels there (--device=" +
                tuneDevice + ")");
  if (tuneKernel == "fused_linear_ce")
    throw Error("tilejit tune tunes fused_ce_tvd and the kernels `tilejit "
                "list` shows with sizes; fused_linear_ce times its GEMM "
                "choices as it runs (kept per GPU and shape), and `tilejit "
                "bench fused_linear_ce --tune-chunk` tunes its chunk rows");
  if (tuneKernel != "fused_ce_tvd") {
    SpecCommandArgs a;
    a.kernel = tuneKernel;
    a.sizes = tuneSize;
    a.dtype = tuneDtype;
    a.dtypeGiven = tuneDtype.getNumOccurrences() > 0;
    a.iters = tuneReps;
    a.retune = tuneRetune;
    a.arch = tuneArch;
    a.seed = tuneSeed;
    return tuneSpecKernel(a);
  }
  if (!tuneBt.getNumOccurrences() || !tuneVocab.getNumOccurrences())
    throw Error("tilejit tune fused_ce_tvd needs --bt and --vocab");
  if (tuneBt <= 0 || tuneVocab <= 0)
    throw Error("--bt and --vocab must be positive");
  DType dtype = parseDType(tuneDtype);
  rejectForwardWithReduction(tuneForward.getNumOccurrences(), tuneReduction);
  if (tuneInPlace && tuneReduction == "none")
    throw Error("--in-place applies to --reduction=mean or sum");
  requireGpu("tilejit tune"); // before ~GBs of inputs
  std::cerr << "generating inputs (BT=" << tuneBt << ", V=" << tuneVocab << ", "
            << dtypeName(dtype) << ")\n";
  ref::CeTvdInputs in =
      ref::makeCeTvdInputs(tuneBt, tuneVocab, dtype, tuneSeed);
  if (tuneReduction != "none") {
    CeTvdReducedOptions ro;
    ro.mean = parseReduction(tuneReduction);
    ro.inPlace = tuneInPlace;
    ro.arch = tuneArch;
    ro.iterations = tuneReps;
    std::string table;
    auto best = tuneCeTvdReducedGpu(
        in, ro, tuneRetune, &table, [](const std::string &line) {
          std::cerr << "tune: fused_ce_tvd_loss_grad: " << line << "\n";
        });
    std::printf("%s  winner:", table.c_str());
    for (const std::string &b : best)
      std::printf(" %s", b.c_str());
    std::printf("\n");
    return 0;
  }
  std::vector<float> gCe, gTvd;
  defaultUpstream(in.BT, gCe, gTvd);

  CeTvdTuneOptions options;
  options.arch = tuneArch;
  options.repetitions = tuneReps;
  options.checkRows = tuneCheckRows;
  options.retune = tuneRetune;
  options.forwardKernel = forwardKernelFor(tuneForward);
  options.progress = [](const std::string &line) {
    std::cerr << "tune: " << line << "\n";
  };
  CeTvdTuneReport r = tuneCeTvdGpu(in, gCe, gTvd, options);

  const DeviceIdentity &d = r.forward.key.device;
  std::printf("fused_ce_tvd on %s (%d SMs, cc %d.%d, driver %d, tilejit %s): "
              "BT=%lld V=%lld dtype=%s\n",
              d.name.c_str(), d.smCount, d.ccMajor, d.ccMinor, d.driverVersion,
              r.forward.key.tilejitVersion.c_str(), (long long)in.BT,
              (long long)in.V, dtypeName(dtype));
  std::printf("times: median of %d launches, CUDA events, L2 flushed before "
              "each; GB/s: fwd reads 2*BT*V, bwd 3*BT*V elements\n",
              tuneReps.getValue());
  printKernel(r.forward, dtype);
  printKernel(r.backward, dtype);
  return 0;
}
