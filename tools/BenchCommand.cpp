//===- BenchCommand.cpp - `tilejit bench` ---------------------------------===//
//
//   tilejit bench fused_ce_tvd --bt N --vocab V [--dtype bf16|fp16|fp32]
//                 [--set NAME=VALUE ...] [--iters 50] [--check]
//   tilejit bench KERNEL --size NAME=N ... (a spec kernel: SpecCommand.cpp)
//
// Times the CE+TVD forward and backward on this GPU (tuned configs when
// present, as `tilejit run`), measures the device-to-device copy bandwidth in
// the same process, and prints time, achieved bandwidth and the fraction of
// the roofline: the forward must read student and teacher once (2 units of
// BT * V * element bytes), the backward read both and write the gradient
// (3 units); forward + backward is compared with 3 units, the minimum for
// the loss and its gradient. --reduction=mean|sum times the reduced loss +
// gradient instead: the op of tilejit/ops/FusedCeTvd.h on a stream of its
// own, as a training step calls it (3 units). --check compares the timed
// run's outputs with the fp64 reference on sampled rows (exit 1 on a
// mismatch), so one process both times and tests a shape.
//
//===----------------------------------------------------------------------===//
#include "Commands.h"

#include "ops/harness/FusedCeTvdOp.h"
#include "ops/harness/FusedCeTvdReducedOp.h"
#include "ops/harness/LinearCeOp.h"
#include "runtime/CublasLt.h"
#include "runtime/CudaDriver.h"
#include "tilejit/Error.h"
#include "tilejit/Timing.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"

#include <cstdio>

namespace cl = llvm::cl;
using namespace tilejit;

static cl::SubCommand benchCmd("bench",
                               "Time fused_ce_tvd (against the memory "
                               "roofline) or fused_linear_ce (against the "
                               "matmul rate) on this GPU");
static cl::opt<std::string> benchKernel(cl::Positional, cl::desc("KERNEL"),
                                        cl::Required, cl::sub(benchCmd));
static cl::opt<int64_t> benchBt("bt", cl::init(4096), cl::desc("Tokens (rows)"),
                                cl::sub(benchCmd));
static cl::opt<int64_t> benchVocab("vocab", cl::init(151936),
                                   cl::desc("Vocabulary size V"),
                                   cl::sub(benchCmd));
static cl::opt<std::string> benchDtype("dtype", cl::init("bf16"),
                                       cl::desc("Logits dtype"),
                                       cl::sub(benchCmd));
static cl::list<std::string> benchSet("set", cl::desc("NAME=VALUE"),
                                      cl::sub(benchCmd));
static cl::opt<std::string>
    benchForward("forward", cl::init("auto"),
                 cl::desc("Forward kernel: auto (cluster on sm_90 and newer, "
                          "else loop), loop (two passes per row) or cluster "
                          "(each row split over a thread-block cluster)"),
                 cl::sub(benchCmd));
static cl::opt<std::string>
    benchReduction("reduction", cl::init("none"),
                   cl::desc("none: forward and backward kernels; mean or sum: "
                            "the reduced loss + gradient (cluster kernel)"),
                   cl::sub(benchCmd));
static cl::opt<std::string> benchLossGrad(
    "loss-grad-kernel",
    cl::desc("Reduced: fused_ce_tvd_loss_grad (default) or ce_tvd_loss_grad"),
    cl::sub(benchCmd));
static cl::opt<bool> benchInPlace("in-place",
                                  cl::desc("Reduced: gradient over the "
                                           "student logits"),
                                  cl::sub(benchCmd));
static cl::opt<std::string>
    benchDevice("device", cl::init("gpu"),
                cl::desc("gpu: bench times kernels on the GPU only (`tilejit "
                         "run --device=cpu` runs the interpreter)"),
                cl::sub(benchCmd));
static cl::opt<int> benchIters("iters", cl::init(50),
                               cl::desc("Timed launches per kernel (median)"),
                               cl::sub(benchCmd));

static cl::list<std::string>
    benchSize("size", cl::desc("Spec kernels: a size, NAME=N (e.g. BT=4096)"),
              cl::sub(benchCmd));

static cl::opt<bool>
    benchCheck("check",
               cl::desc("fused_ce_tvd: compare the outputs with the fp64 "
                        "reference on sampled rows; exit 1 on a mismatch"),
               cl::sub(benchCmd));
static cl::opt<int64_t>
    benchCheckRows("check-rows", cl::init(16),
                   cl::desc("fused_ce_tvd --check: rows spread over the "
                            "batch, besides the first and last 7 (0: every "
                            "row)"),
                   cl::sub(benchCmd));

static cl::opt<int64_t> benchHidden("hidden", cl::init(4096),
                                    cl::desc("fused_linear_ce: hidden size d"),
                                    cl::sub(benchCmd));
static cl::opt<int64_t>
    benchChunkRows("chunk-rows", cl::init(0),
                   cl::desc("fused_linear_ce: rows of logits alive at once "
                            "(0: from --memory-budget-mib)"),
                   cl::sub(benchCmd));

static cl::opt<int64_t> benchBudget(
    "memory-budget-mib", cl::init(512),
    cl::desc("fused_linear_ce: working memory beside the gradients, in MiB "
             "(default 512: GEMM workspace and the logits chunk; with "
             "--chunk-rows 0 the chunk is what fits; 0: all rows at once)"),
    cl::sub(benchCmd));
static cl::opt<bool>
    benchTuneChunk("tune-chunk",
                   cl::desc("fused_linear_ce: time the chunk sizes that fit "
                            "and keep the fastest (stored per GPU and shape)"),
                   cl::sub(benchCmd));

static cl::opt<bool> benchNarrowLogits(
    "narrow-logits", cl::init(true),
    cl::desc("fused_linear_ce: logits in the input dtype, dz in place "
             "(default on; --narrow-logits=false keeps f32 logits)"),
    cl::sub(benchCmd));
static cl::opt<bool>
    benchBf16Acc("bf16-grad-accumulation",
                 cl::desc("fused_linear_ce: accumulate dW and db in bf16 "
                          "(bf16 inputs only)"),
                 cl::sub(benchCmd));

static cl::opt<int64_t> benchWorkspace(
    "gemm-workspace-mib", cl::init(8),
    cl::desc("fused_linear_ce: device memory for cuBLASLt (MiB)"),
    cl::sub(benchCmd));

static cl::opt<int> benchGemmCandidates(
    "gemm-candidates", cl::init(8),
    cl::desc("fused_linear_ce: time cuBLASLt's first N heuristic algorithms "
             "per GEMM problem and keep the fastest in the tuning database "
             "(1: take the first)"),
    cl::sub(benchCmd));

static cl::opt<bool> benchCudaGraph(
    "cuda-graph",
    cl::desc("fused_linear_ce: capture the whole step into one CUDA graph "
             "and time its launches"),
    cl::sub(benchCmd));

static cl::opt<std::string> benchGemmBackend(
    "gemm", cl::init("auto"),
    cl::desc("fused_linear_ce: who runs the chunk's GEMMs: auto (per "
             "problem the faster of cuBLASLt and lce_gemm, timed once and "
             "kept), cublaslt, or tilejit (lce_gemm, tile dot; bf16/f16)"),
    cl::sub(benchCmd));

bool benchCommandSelected() { return bool(benchCmd); }

/// `bench fused_linear_ce`: time of one forward + backward against the
/// measured matmul rate (6 N d V FLOP), and the memory beyond the gradients.
static int benchLinearCe() {
  DType dtype = parseDType(benchDtype);
  requireGpu("tilejit bench");
  ref::LinearCeInputs in = makeLinearCeInputs(benchBt, benchHidden, benchVocab,
                                              dtype, false, false, 1234);
  LinearCeOptions o;
  o.chunkRows = benchChunkRows;
  o.memoryBudgetBytes = benchBudget * (int64_t(1) << 20);
  o.tuneChunkRows = benchTuneChunk;
  o.narrowLogits = benchNarrowLogits;
  o.gemmWorkspaceBytes = benchWorkspace * (int64_t(1) << 20);
  o.gemmCandidates = benchGemmCandidates;
  o.cudaGraph = benchCudaGraph;
  o.gemmBackend = parseGemmBackend(benchGemmBackend);
  o.bf16GradAccumulation = benchBf16Acc;
  o.overrides = benchSet;
  o.iterations = benchIters;
  LinearCeOutputs out = runLinearCeGpu(in, o); // checks `in` and `o` first
  double tflops = cublaslt::Gemm().measureTflops(8192, dtype);
  double work = 6.0 * in.N * in.d * in.V;
  // As returned: dh in the input dtype, dW in its accumulation dtype.
  double gradBytes = double(dtypeSize(dtype)) * in.N * in.d +
                     (o.bf16GradAccumulation ? 2.0 : 4.0) * double(in.V) * in.d;
  std::printf("fused_linear_ce bench on %s: N=%lld d=%lld V=%lld dtype=%s, "
              "%lld rows per chunk (%lld chunks%s%s)\n",
              out.device.c_str(), (long long)in.N, (long long)in.d,
              (long long)in.V, dtypeName(dtype), (long long)out.chunkRows,
              (long long)out.chunks, out.chunkSource.empty() ? "" : ", ",
              out.chunkSource.c_str());
  std::printf("  options: GEMMs by %s, budget %lld MiB, GEMM workspace %lld "
              "MiB, %s logits, %s dW accumulation%s%s%s\n",
              benchGemmBackend.c_str(), (long long)benchBudget,
              (long long)benchWorkspace,
              o.narrowLogits ? dtypeName(dtype) : "f32",
              o.bf16GradAccumulation ? "bf16" : "fp32",
              out.ranAsGraph ? ", one CUDA graph per step" : "",
              o.overrides.empty() ? "" : ", --set ",
              llvm::join(o.overrides, " --set ").c_str());
  std::printf("  matmul ceiling (cuBLASLt 8192^3, %s): %.0f TFLOP/s\n",
              dtypeName(dtype), tflops);
  std::printf("  fwd+bwd %9.3f ms  %6.0f TFLOP/s (6NdV)  fraction of the "
              "matmul rate %.2f\n",
              out.ms, work / (out.ms * 1e-3) / 1e12,
              work / (out.ms * 1e-3) / 1e12 / tflops);
  if (o.gemmCandidates > 1)
    std::printf("    GEMM algorithms (of cuBLASLt's first %d): %d problems "
                "timed now, %d from the tuning database; %d use another than "
                "the first\n",
                o.gemmCandidates, out.gemmProblemsTimed,
                out.gemmProblemsFromStore, out.gemmChoicesChanged);
  std::printf("%s", describeGemmPaths(out).c_str());
  for (auto &[rows, ms] : out.chunkTrials)
    std::printf("    tuning: %5lld rows per chunk %9.3f ms\n", (long long)rows,
                ms);
  for (auto &[name, ms] : out.chunkStepMs)
    std::printf("    first chunk: %-16s %8.3f ms\n", name.c_str(), ms);
  std::printf("  memory beyond inputs: gradients (%s dh, %s dW) %.0f MiB + "
              "working memory %.0f MiB\n",
              dtypeName(dtype), o.bf16GradAccumulation ? "bf16" : "fp32",
              gradBytes / (1 << 20), out.workspaceBytes / double(1 << 20));
  return 0;
}

int runBenchCommand() {
  if (benchDevice != "gpu")
    throw Error("tilejit bench needs a GPU: it times kernels there (--device=" +
                benchDevice +
                "; `tilejit run --device=cpu` runs the interpreter)");
  if (benchKernel == "fused_linear_ce")
    return benchLinearCe();
  if (benchKernel != "fused_ce_tvd") {
    SpecCommandArgs a;
    a.kernel = benchKernel;
    a.sizes = benchSize;
    a.set = benchSet;
    a.dtype = benchDtype;
    a.dtypeGiven = benchDtype.getNumOccurrences() > 0;
    a.iters = benchIters;
    return benchSpecKernel(a);
  }
  DType dtype = parseDType(benchDtype);
  requireGpu("tilejit bench");
  ref::CeTvdInputs in = ref::makeCeTvdInputs(benchBt, benchVocab, dtype, 1234);
  // Held for the whole command: the copy-bandwidth measurement after the
  // kernels needs the (primary) context to stay alive.
  cuda::Device device = cuda::Device::open();
  double unit = double(in.BT) * in.V * dtypeSize(dtype);
  // GB/s counts the roofline's bytes (what the operation must move).
  double copyBytesPerS = 0;
  auto row = [&](const char *what, double ms, double units) {
    double rooflineMs = units * unit / copyBytesPerS * 1e3;
    std::printf("  %-12s %9.3f ms %8.1f GB/s  roofline %d x BT*V*%zu B = "
                "%.3f ms  fraction %.2f\n",
                what, ms, units * unit / ms / 1e6, int(units), dtypeSize(dtype),
                rooflineMs, rooflineMs / ms);
  };
  rejectForwardWithReduction(benchForward.getNumOccurrences(), benchReduction);
  if (benchReduction == "none" && benchLossGrad.getNumOccurrences())
    throw Error("--loss-grad-kernel applies to --reduction=mean or sum");
  if (benchReduction != "none") {
    CeTvdReducedOptions ro;
    ro.mean = parseReduction(benchReduction);
    ro.inPlace = benchInPlace;
    ro.overrides = benchSet;
    ro.lossGradKernel = benchLossGrad;
    ro.useTuned = true;
    ro.iterations = benchIters;
    CeTvdReducedOutputs out = runCeTvdReducedGpu(in, ro);
    copyBytesPerS = cuda::measureCopyBandwidth(size_t(2) << 30);
    std::printf("fused_ce_tvd bench (reduction=%s%s) on %s: BT=%lld V=%lld "
                "dtype=%s\n  copy ceiling (device-to-device, 2 GiB): %.2f "
                "TB/s\n  config: %s\n  JIT: %.1f ms\n",
                benchReduction.c_str(), ro.inPlace ? ", in place" : "",
                out.device.c_str(), (long long)in.BT, (long long)in.V,
                dtypeName(dtype), copyBytesPerS / 1e12, out.config.c_str(),
                out.jitMs);
    row("loss + grad", out.ms, 3);
    if (!benchCheck)
      return 0;
    return reportCheck(
        checkCeTvdReduced(in, ro, out, sampleCheckRows(in.BT, benchCheckRows)));
  }
  std::vector<float> gCe, gTvd;
  defaultUpstream(in.BT, gCe, gTvd);
  CeTvdRunOptions options;
  options.overrides = benchSet;
  options.forwardKernel = forwardKernelFor(benchForward);
  options.iterations = benchIters;
  options.useTuned = true; // tuned configs when present and no --set
  CeTvdOutputs out = runCeTvdGpu(in, gCe, gTvd, options);
  copyBytesPerS = cuda::measureCopyBandwidth(size_t(2) << 30);

  std::printf("fused_ce_tvd bench on %s: BT=%lld V=%lld dtype=%s\n",
              out.device.c_str(), (long long)in.BT, (long long)in.V,
              dtypeName(dtype));
  std::printf("  copy ceiling (device-to-device, 2 GiB): %.2f TB/s\n",
              copyBytesPerS / 1e12);
  std::printf("  forward config : %s: %s\n  backward config: %s\n",
              out.forwardKernel.c_str(), out.forwardConfig.c_str(),
              out.backwardConfig.c_str());
  std::printf("  JIT (DSL build -> loaded CUBIN, through the kernel cache): "
              "forward %.1f ms, backward %.1f ms\n",
              out.forwardJitMs, out.backwardJitMs);
  std::printf("  host time per launch of a loaded kernel: %.2f us\n",
              out.launchHostUs);
  row("forward", out.forwardMs, 2);
  row("backward", out.backwardMs, 3);
  row("fwd+bwd", out.forwardMs + out.backwardMs, 3);
  if (!benchCheck)
    return 0;
  return reportCheck(
      checkCeTvd(in, gCe, gTvd, out, sampleCheckRows(in.BT, benchCheckRows)));
}
