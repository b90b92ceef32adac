//===- tilejit.cpp - the tilejit command line -----------------------------===//
//
//   tilejit list
//   tilejit compile KERNEL [--set NAME=VALUE ...] [--dtype bf16] [--arch sm_90]
//                          --emit=tile|simt|cuda|ptx|cubin|sass [-o FILE]
//   tilejit run fused_ce_tvd --device=gpu|cpu --bt N --vocab V
//                            [--dtype bf16|fp16|fp32] [--check] [--set ...]
//   tilejit tune fused_ce_tvd --bt N --vocab V [--dtype ...] (TuneCommand.cpp)
//   tilejit [--load lib.so] run|bench|tune KERNEL --size NAME=N ... (any
//           kernel whose spec declares its arguments: SpecCommand.cpp;
//           run takes --cpu or --device=cpu|gpu, --simt and --check)
//
// Exit status: 0 success, 1 a --check failed, 2 an error (message on stderr).
//
//===----------------------------------------------------------------------===//
#include "Commands.h"
#include "codegen/Nvrtc.h"
#include "ops/SpecRun.h"
#include "ops/harness/FusedCeTvdOp.h"
#include "ops/harness/FusedCeTvdReducedOp.h"
#include "ops/harness/LinearCeOp.h"
#include "runtime/CudaDriver.h"
#include "tilejit/CachedCompile.h"
#include "tilejit/Error.h"
#include "tilejit/HostFloat.h"
#include "tilejit/KernelSpec.h"

#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>

namespace cl = llvm::cl;
using namespace tilejit;

static cl::OptionCategory category("tilejit options");
static cl::SubCommand listCmd("list", "List kernels and their parameters");
static cl::SubCommand compileCmd("compile",
                                 "Compile a kernel and print one stage");
static cl::SubCommand
    runCmd("run", "Run a kernel (fused_ce_tvd, fused_linear_ce, or any whose "
                  "spec declares its arguments) on the GPU or the CPU and "
                  "check it");

static cl::opt<std::string> kernelArg(cl::Positional, cl::desc("KERNEL"),
                                      cl::Required, cl::sub(compileCmd),
                                      cl::sub(runCmd), cl::cat(category));
static cl::list<std::string>
    setArgs("set", cl::desc("Pin a compile-time parameter: NAME=VALUE"),
            cl::sub(compileCmd), cl::sub(runCmd), cl::cat(category));
static cl::opt<std::string> dtypeArg("dtype", cl::init("bf16"),
                                     cl::desc("Logits dtype: bf16, fp16, fp32 "
                                              "(a kernel that takes no bf16: "
                                              "its first dtype)"),
                                     cl::sub(compileCmd), cl::sub(runCmd),
                                     cl::cat(category));
static cl::opt<std::string>
    archArg("arch",
            cl::desc("GPU architecture, e.g. sm_90 (compile default: "
                     "sm_90; run default: the device's)"),
            cl::sub(compileCmd), cl::sub(runCmd), cl::cat(category));
static cl::opt<std::string>
    emitArg("emit", cl::init("ptx"),
            cl::desc("Stage to print: tile, simt, cuda, ptx, cubin, sass"),
            cl::sub(compileCmd), cl::cat(category));
static cl::opt<std::string> outputArg("o", cl::desc("Output file"),
                                      cl::value_desc("FILE"),
                                      cl::sub(compileCmd), cl::cat(category));
static cl::opt<std::string>
    deviceArg("device", cl::init("gpu"),
              cl::desc("gpu or cpu (spec kernels: the GPU when there is one; "
                       "gpu: an error without one)"),
              cl::sub(runCmd), cl::cat(category));
static cl::opt<int64_t> btArg("bt", cl::init(64), cl::desc("Tokens (rows)"),
                              cl::sub(compileCmd), cl::sub(runCmd),
                              cl::cat(category));
static cl::opt<int64_t> vocabArg("vocab", cl::init(32000),
                                 cl::desc("Vocabulary size V (also sets the "
                                          "slices of the cluster kernels)"),
                                 cl::sub(compileCmd), cl::sub(runCmd),
                                 cl::cat(category));
static cl::opt<bool>
    checkArg("check",
             cl::desc("Compare with the fp64 reference (spec kernels: always "
                      "when the spec has one; an error when it has none)"),
             cl::sub(runCmd), cl::cat(category));
static cl::opt<int64_t>
    checkRowsArg("check-rows", cl::init(64),
                 cl::desc("GPU: rows compared with the reference (0 = all)"),
                 cl::sub(runCmd), cl::cat(category));
static cl::opt<uint64_t> seedArg("seed", cl::init(1234),
                                 cl::desc("Seed of the generated logits"),
                                 cl::sub(runCmd), cl::cat(category));
static cl::opt<int> itersArg("iters", cl::init(20),
                             cl::desc("GPU: timed launches per kernel"),
                             cl::sub(runCmd), cl::cat(category));

// Kernels whose spec declares their arguments (SpecCommand.cpp).
static cl::list<std::string>
    sizeArgs("size", cl::desc("Spec kernels: a size, NAME=N (e.g. BT=4096)"),
             cl::sub(runCmd), cl::cat(category));
static cl::opt<bool> cpuArg("cpu",
                            cl::desc("Spec kernels: run in the interpreter "
                                     "even with a GPU (as --device=cpu)"),
                            cl::sub(runCmd), cl::cat(category));
static cl::opt<bool> simtArg(
    "simt", cl::desc("Interpret the thread-level (SIMT) code, each "
                     "program's threads in lockstep, instead of the "
                     "tile-level program (implies --cpu)"),
    cl::sub(runCmd), cl::cat(category));
static cl::list<std::string>
    inputArgs("input", cl::desc("Spec kernels: read an input, NAME=file.npy"),
              cl::sub(runCmd), cl::cat(category));
static cl::list<std::string>
    outputArgs("output",
               cl::desc("Spec kernels: write an argument after the run, "
                        "NAME=file.npy"),
               cl::sub(runCmd), cl::cat(category));

static cl::opt<std::string>
    forwardArg("forward", cl::init("auto"),
               cl::desc("Forward kernel: auto (cluster on sm_90 and newer, "
                        "else loop), loop (two passes over each row) or "
                        "cluster (each row split over a thread-block "
                        "cluster, re-read from L2)"),
               cl::sub(runCmd), cl::cat(category));

static cl::opt<std::string> reductionArg(
    "reduction", cl::init("none"),
    cl::desc("fused_ce_tvd (default none): none: per-row ce/tvd and a "
             "backward with per-row upstream gradients; mean or sum: the "
             "reduced loss with its gradient in the same pass (cluster "
             "kernel, sm_90). fused_linear_ce (default mean): mean, sum, or "
             "none (per-row losses, upstream gradient 1 each)"),
    cl::sub(runCmd), cl::cat(category));
static cl::opt<std::string> lossGradArg(
    "loss-grad-kernel",
    cl::desc("fused_ce_tvd --reduction=mean|sum: fused_ce_tvd_loss_grad "
             "(default: rows split over a cluster by the spec) or "
             "ce_tvd_loss_grad (written per row, scheduled by the compiler)"),
    cl::sub(runCmd), cl::cat(category));
static cl::opt<bool> inPlaceArg("in-place",
                                cl::desc("Reduced: write the gradient over "
                                         "the student logits"),
                                cl::sub(runCmd), cl::cat(category));
static cl::opt<double> alphaArg("alpha", cl::init(1.0),
                                cl::desc("Reduced: weight of the CE term"),
                                cl::sub(runCmd), cl::cat(category));
static cl::opt<double> betaArg("beta", cl::init(1.0),
                               cl::desc("Reduced: weight of the TVD term"),
                               cl::sub(runCmd), cl::cat(category));

static cl::opt<int64_t> hiddenArg("hidden", cl::init(64),
                                  cl::desc("fused_linear_ce: hidden size d"),
                                  cl::sub(runCmd), cl::cat(category));
static cl::opt<double> smoothingArg("label-smoothing", cl::init(0.0),
                                    cl::desc("fused_linear_ce: epsilon"),
                                    cl::sub(runCmd), cl::cat(category));
static cl::opt<double> zLossArg("z-loss", cl::init(0.0),
                                cl::desc("fused_linear_ce: lambda_z"),
                                cl::sub(runCmd), cl::cat(category));
static cl::opt<double> softcapArg("softcap", cl::init(0.0),
                                  cl::desc("fused_linear_ce: c (0 = off)"),
                                  cl::sub(runCmd), cl::cat(category));
static cl::opt<bool> biasArg("bias", cl::desc("fused_linear_ce: with a bias"),
                             cl::sub(runCmd), cl::cat(category));
static cl::opt<bool> weightsArg("class-weights",
                                cl::desc("fused_linear_ce: with class weights"),
                                cl::sub(runCmd), cl::cat(category));
static cl::opt<int64_t>
    chunkRowsArg("chunk-rows", cl::init(0),
                 cl::desc("fused_linear_ce: rows of logits alive at once "
                          "(0 = from --memory-budget-mib, or all; a nonzero "
                          "value wins over the budget)"),
                 cl::sub(runCmd), cl::cat(category));

static cl::opt<int64_t> budgetArg(
    "memory-budget-mib", cl::init(0),
    cl::desc("fused_linear_ce: working memory beside the gradients, in MiB "
             "(the GPU's GEMM workspace and the logits chunk; sets the chunk "
             "rows when --chunk-rows is 0)"),
    cl::sub(runCmd), cl::cat(category));

static cl::opt<bool>
    bf16AccArg("bf16-grad-accumulation",
               cl::desc("fused_linear_ce: accumulate dW and db in bf16 "
                        "(default fp32; bf16 inputs only)"),
               cl::sub(runCmd), cl::cat(category));

static cl::opt<bool> narrowLogitsArg(
    "narrow-logits", cl::init(true),
    cl::desc("fused_linear_ce: logits in the input dtype (as PyTorch's "
             "h @ W.T), dz in place over them (default on the GPU; "
             "--narrow-logits=false keeps f32 logits; on the CPU only when "
             "given)"),
    cl::sub(runCmd), cl::cat(category));

static cl::opt<std::string> gemmBackendArg(
    "gemm", cl::init("auto"),
    cl::desc("fused_linear_ce: who runs the chunk's GEMMs: auto (per "
             "problem the faster of cuBLASLt and lce_gemm on this GPU, "
             "timed once and kept), cublaslt (plain loops on the CPU for "
             "both), or tilejit (lce_gemm, tile dot; bf16/f16; in the "
             "interpreter on the CPU)"),
    cl::sub(runCmd), cl::cat(category));

static int listKernels() {
  for (const KernelSpec &k : kernelRegistry()) {
    std::cout << k.name << "  " << k.summary << "\n  dtypes:";
    for (DType t : k.dtypes)
      std::cout << " " << dtypeName(t);
    std::cout << "\n";
    if (k.run.declared()) {
      std::cout << "  sizes:";
      for (const SizeSpec &s : k.run.sizes)
        std::cout << " --size " << s.name << "=N (" << s.help << ")";
      std::cout << "\n";
      for (const ArgSpec &a : k.run.args)
        if (a.role == ArgSpec::Role::Scalar)
          std::cout << "  --set " << a.name << "=" << formatNumber(a.value)
                    << "  (scalar argument in [" << formatNumber(a.minValue)
                    << ", " << formatNumber(a.maxValue) << "])\n";
    }
    for (const ParamSpec &p : k.params) {
      std::cout << "  --set " << p.name << "=" << p.defaultValue << "  ("
                << p.help << "; candidates:";
      for (int64_t c : p.candidates)
        std::cout << " " << c;
      std::cout << (p.tuned ? "" : "; not tuned: the default applies")
                << ")\n";
    }
  }
  std::cout << "for `tilejit run|bench|tune`: the operations fused_ce_tvd "
               "(fwd + bwd) and fused_linear_ce, and the kernels listed with "
               "sizes\n";
  return 0;
}

static void writeOutput(const std::string &text, bool binary) {
  if (outputArg.empty()) {
    if (binary)
      throw Error("--emit=cubin writes binary data: give -o FILE");
    std::cout << text;
    return;
  }
  std::error_code ec;
  llvm::raw_fd_ostream os(
      outputArg, ec, binary ? llvm::sys::fs::OF_None : llvm::sys::fs::OF_Text);
  if (ec)
    throw Error("cannot write " + outputArg + ": " + ec.message());
  os << text;
  std::cerr << "wrote " << outputArg << "\n";
}

static int compileKernel() {
  const KernelSpec &spec = findKernel(kernelArg);
  if (btArg <= 0 || vocabArg <= 0 || vocabArg > INT32_MAX)
    throw Error("--bt must be positive and --vocab in [1, 2^31)");
  DType dtype = specDType(spec, dtypeArg, dtypeArg.getNumOccurrences() > 0);
  dsl::Config config =
      spec.config(dtype, setArgs, {{"BT", btArg}, {"V", vocabArg}});
  CompileOptions options;
  if (!archArg.empty())
    options.arch = archArg;
  options.upTo = parseStage(emitArg);
  TileModule module = spec.build(config);
  CompiledKernel k = compileCached(module, options);
  switch (options.upTo) {
  case Stage::Tile:
    writeOutput(k.tileIR, false);
    break;
  case Stage::Simt:
    writeOutput(k.simtIR, false);
    break;
  case Stage::Cuda:
    writeOutput(k.cuda, false);
    break;
  case Stage::Ptx:
    writeOutput(k.ptx, false);
    break;
  case Stage::Cubin:
    if (emitArg == "sass")
      writeOutput(nvrtc::disassembleCubin(k.cubin), false);
    else
      writeOutput(std::string(k.cubin.begin(), k.cubin.end()), true);
    break;
  }
  // What a launch of this binary must pass besides the arguments.
  if (options.upTo != Stage::Tile) {
    std::cerr << "launch: " << k.threads << " threads per program";
    if (k.clusterSize > 1)
      std::cerr << ", clusters of " << k.clusterSize << " programs";
    if (k.splitRows > 1)
      std::cerr << ", " << k.splitRows
                << " programs per row (grid.x = rows x " << k.splitRows << ")";
    if (k.dynamicSharedBytes > 0)
      std::cerr << ", " << k.dynamicSharedBytes
                << " bytes of dynamic shared memory";
    if (k.resident)
      std::cerr << ", resident (at most one block per SM runs the grid's "
                   "programs in turn; the grid as 3 x i32 after the mask)";
    if (!k.tensorMaps.empty())
      std::cerr << ", " << k.tensorMaps.size()
                << " tensor maps and their 32-bit mask after the arguments";
    std::cerr << "\n";
  }
  return 0;
}

/// `run fused_ce_tvd --reduction=mean|sum`.
static int runReduced(const ref::CeTvdInputs &in) {
  CeTvdReducedOptions o;
  o.mean = parseReduction(reductionArg);
  o.inPlace = inPlaceArg;
  o.alpha = alphaArg;
  o.beta = betaArg;
  o.overrides = setArgs;
  o.lossGradKernel = lossGradArg;
  o.useTuned = setArgs.empty();
  o.arch = archArg;
  o.iterations = itersArg;
  CeTvdReducedOutputs out = deviceArg == "gpu" ? runCeTvdReducedGpu(in, o)
                                               : runCeTvdReducedCpu(in, o);
  std::printf("fused_ce_tvd (reduction=%s%s) on %s: BT=%lld V=%lld dtype=%s\n"
              "  loss = %.7g (alpha %g, beta %g, n_valid %g)\n  config: %s\n",
              reductionArg.c_str(), o.inPlace ? ", in place" : "",
              out.device.c_str(), (long long)in.BT, (long long)in.V,
              dtypeName(in.dtype), out.loss, o.alpha, o.beta, out.nValid,
              out.config.c_str());
  if (deviceArg == "gpu" && in.BT > 0) {
    double bytes = 3.0 * in.BT * in.V * dtypeSize(in.dtype);
    std::printf("  loss + grad: %8.3f ms  %7.1f GB/s (reads student + "
                "teacher, writes grad); JIT %.1f ms\n",
                out.ms, bytes / out.ms / 1e6, out.jitMs);
  }
  if (!checkArg)
    return 0;
  auto rows = deviceArg == "gpu" ? sampleCheckRows(in.BT, checkRowsArg)
                                 : std::vector<int64_t>{};
  CeTvdCheck c = checkCeTvdReduced(in, o, out, rows);
  return reportCheck(c);
}

/// `run fused_linear_ce`: the CPU interpreter, or cuBLASLt GEMMs around the
/// DSL programs on the GPU.
static int runLinearCe() {
  if (deviceArg != "gpu" && deviceArg != "cpu")
    throw Error("--device must be gpu or cpu (got '" + deviceArg + "')");
  using Reduction = ref::LinearCeParams::Reduction;
  std::string red =
      reductionArg.getNumOccurrences() ? reductionArg.getValue() : "mean";
  LinearCeOptions o;
  o.params.reduction = red == "none"         ? Reduction::None
                       : parseReduction(red) ? Reduction::Mean
                                             : Reduction::Sum;
  o.params.labelSmoothing = smoothingArg;
  o.params.zLoss = zLossArg;
  o.params.softcap = softcapArg;
  o.chunkRows = chunkRowsArg;
  o.memoryBudgetBytes = budgetArg * (int64_t(1) << 20);
  o.bf16GradAccumulation = bf16AccArg;
  o.gemmBackend = parseGemmBackend(gemmBackendArg);
  o.narrowLogits = narrowLogitsArg &&
                   (deviceArg == "gpu" || narrowLogitsArg.getNumOccurrences());
  o.overrides = setArgs;
  if (deviceArg == "gpu" && itersArg.getNumOccurrences())
    o.iterations = itersArg;
  // Before generating inputs: the library checks them again.
  checkF32Scalar("--label-smoothing", smoothingArg);
  checkF32Scalar("--z-loss", zLossArg);
  checkF32Scalar("--softcap", softcapArg);
  ref::LinearCeInputs in =
      makeLinearCeInputs(btArg, hiddenArg, vocabArg, parseDType(dtypeArg),
                         biasArg, weightsArg, seedArg);
  if (o.params.reduction == Reduction::None)
    in.gradOutput.assign(in.N, 1.f);
  LinearCeOutputs out =
      deviceArg == "gpu" ? runLinearCeGpu(in, o) : runLinearCeCpu(in, o);
  std::printf("fused_linear_ce on %s: N=%lld d=%lld V=%lld dtype=%s, "
              "reduction=%s, chunks of %lld rows: %lld\n",
              out.device.c_str(), (long long)in.N, (long long)in.d,
              (long long)in.V, dtypeName(in.dtype), red.c_str(),
              (long long)linearCeChunkRows(in, o), (long long)out.chunks);
  if (o.params.reduction == Reduction::None) {
    double sum = 0;
    for (float l : out.rowLoss)
      sum += l;
    std::printf("  per-row losses (upstream gradient 1 each): sum %.7g\n", sum);
  } else {
    std::printf("  loss = %.7g (z-loss part %.7g)\n", out.loss, out.zLoss);
  }
  if (deviceArg == "gpu" && in.N > 0) {
    std::printf("  first run after the GEMM choices (host time): %.2f ms\n%s",
                out.firstRunMs, describeGemmPaths(out).c_str());
    if (o.iterations > 0)
      std::printf("  fwd+bwd: median of %d runs %.3f ms, %.0f TFLOP/s "
                  "(6NdV)\n",
                  o.iterations, out.ms, 6.0 * in.N * in.d * in.V / out.ms / 1e9);
  }
  else if (deviceArg != "gpu")
    std::printf("    GEMMs: %s\n",
                o.gemmBackend == LinearCeOptions::GemmBackend::Dsl
                    ? "lce_gemm in the interpreter"
                    : "plain loops (auto and cublaslt choose on the GPU)");
  if (!checkArg)
    return 0;
  // fp32 math on the CPU: 1e-5. GEMMs in bf16/f16 with a narrow dz (the
  // GPU, lce_gemm), logits in the input dtype or a bf16 dW accumulator:
  // 1e-3 (loss) and 1e-2 (gradients).
  bool narrow = deviceArg == "gpu" || o.bf16GradAccumulation ||
                o.narrowLogits ||
                o.gemmBackend == LinearCeOptions::GemmBackend::Dsl;
  double lossTol = narrow ? 1e-3 : 1e-5, gradTol = narrow ? 1e-2 : 1e-5;
  // --check-rows N on the GPU: N rows spread over the batch (plus the first
  // and last 7) against their fp64 reference, for batches whose full
  // reference is out of reach.
  std::vector<int64_t> rows;
  if (deviceArg == "gpu" && checkRowsArg.getNumOccurrences())
    rows = sampleCheckRows(in.N, checkRowsArg);
  LinearCeCheck c =
      rows.empty() ? checkLinearCe(in, o, out, lossTol, gradTol)
                   : checkLinearCeRows(in, o, out, rows, lossTol, gradTol);
  return reportCheck(c);
}

/// Throws when one of `options` was given: it belongs to the other
/// operation, and ignoring it would run something the user did not ask for.
static void rejectOptions(std::initializer_list<const cl::Option *> options,
                          const std::string &kernel) {
  for (const cl::Option *o : options)
    if (o->getNumOccurrences())
      throw Error("--" + o->ArgStr.str() + " does not apply to " + kernel);
}

/// `run KERNEL --size ...` for a kernel of its own (not an operation).
static int runSpec() {
  rejectOptions({&btArg, &vocabArg, &checkRowsArg, &itersArg, &forwardArg,
                 &reductionArg, &lossGradArg, &inPlaceArg, &alphaArg, &betaArg,
                 &hiddenArg, &smoothingArg, &zLossArg, &softcapArg, &biasArg, &weightsArg,
                 &chunkRowsArg, &budgetArg, &bf16AccArg, &narrowLogitsArg,
                 &gemmBackendArg},
                kernelArg);
  SpecCommandArgs a;
  a.kernel = kernelArg;
  a.sizes = sizeArgs;
  a.set = setArgs;
  a.inputs = inputArgs;
  a.outputs = outputArgs;
  a.dtype = dtypeArg;
  a.dtypeGiven = dtypeArg.getNumOccurrences() > 0;
  if (deviceArg.getNumOccurrences()) {
    if (deviceArg != "gpu" && deviceArg != "cpu")
      throw Error("--device must be gpu or cpu (got '" + deviceArg + "')");
    if (cpuArg && deviceArg == "gpu")
      throw Error("--cpu and --device=gpu ask for different devices");
  }
  a.cpu = cpuArg || simtArg ||
          (deviceArg.getNumOccurrences() && deviceArg == "cpu");
  a.gpu = deviceArg.getNumOccurrences() && deviceArg == "gpu";
  a.check = checkArg;
  a.seed = seedArg;
  a.arch = archArg;
  return runSpecKernel(a);
}

static int runKernel() {
  if (simtArg) { // every CPU run of the command, as TILEJIT_INTERPRET=simt
    if (deviceArg.getNumOccurrences() && deviceArg == "gpu")
      throw Error("--simt and --device=gpu ask for different devices");
    setDefaultInterpretLevel(InterpretLevel::Simt);
  }
  if (kernelArg != "fused_linear_ce" && kernelArg != "fused_ce_tvd")
    return runSpec();
  rejectOptions({std::addressof(sizeArgs), &cpuArg, std::addressof(inputArgs),
                 std::addressof(outputArgs)},
                kernelArg);
  if (kernelArg == "fused_linear_ce") {
    rejectOptions({&forwardArg, &lossGradArg, &inPlaceArg, &alphaArg,
                   &betaArg, &archArg},
                  "fused_linear_ce");
    return runLinearCe();
  }
  if (kernelArg == "fused_ce_tvd")
    rejectOptions({&hiddenArg, &smoothingArg, &zLossArg, &softcapArg, &biasArg,
                   &weightsArg, &chunkRowsArg, &budgetArg, &bf16AccArg,
                   &narrowLogitsArg, &gemmBackendArg},
                  "fused_ce_tvd");
  if (deviceArg != "gpu" && deviceArg != "cpu")
    throw Error("--device must be gpu or cpu (got '" + deviceArg + "')");
  if (simtArg) // the operation's kernels in the interpreter
    deviceArg = "cpu";
  DType dtype = parseDType(dtypeArg);
  if (btArg < 0 || vocabArg <= 0)
    throw Error("--bt must be >= 0 and --vocab positive");
  // Before generating inputs: the library checks them again.
  checkF32Scalar("--alpha", alphaArg);
  checkF32Scalar("--beta", betaArg);
  auto t0 = std::chrono::steady_clock::now();
  if (reductionArg == "none" &&
      (inPlaceArg || alphaArg.getNumOccurrences() ||
       betaArg.getNumOccurrences() || lossGradArg.getNumOccurrences()))
    throw Error("--in-place, --alpha, --beta and --loss-grad-kernel apply to "
                "--reduction=mean or sum");
  rejectForwardWithReduction(forwardArg.getNumOccurrences(), reductionArg);
  ref::CeTvdInputs in = ref::makeCeTvdInputs(btArg, vocabArg, dtype, seedArg);
  if (reductionArg != "none")
    return runReduced(in);
  std::vector<float> gCe, gTvd;
  defaultUpstream(in.BT, gCe, gTvd);
  CeTvdRunOptions options;
  options.overrides = setArgs;
  options.useTuned = setArgs.empty();
  options.arch = archArg;
  options.iterations = itersArg;
  options.forwardKernel = forwardKernelFor(forwardArg);
  auto t1 = std::chrono::steady_clock::now();
  CeTvdOutputs out = deviceArg == "gpu" ? runCeTvdGpu(in, gCe, gTvd, options)
                                        : runCeTvdCpu(in, gCe, gTvd, options);
  auto t2 = std::chrono::steady_clock::now();
  auto secs = [](auto a, auto b) {
    return std::chrono::duration<double>(b - a).count();
  };

  double ceSum = 0, tvdSum = 0;
  int64_t valid = 0;
  for (int64_t r = 0; r < in.BT; ++r)
    if (in.target[r] != ref::kCeTvdIgnoreIndex) {
      ceSum += out.ce[r];
      tvdSum += out.tvd[r];
      ++valid;
    }
  std::printf("fused_ce_tvd on %s: BT=%lld V=%lld dtype=%s (%lld rows "
              "ignored), forward kernel %s\n",
              out.device.c_str(), (long long)in.BT, (long long)in.V,
              dtypeName(dtype), (long long)(in.BT - valid),
              out.forwardKernel.c_str());
  std::printf("  inputs generated in %.2f s; run (compile + launch) %.2f s\n",
              secs(t0, t1), secs(t1, t2));
  std::printf("  mean ce = %.6f, mean tvd = %.6f over %lld rows\n",
              valid ? ceSum / valid : 0.0, valid ? tvdSum / valid : 0.0,
              (long long)valid);
  if (deviceArg == "gpu" && in.BT > 0) {
    std::printf("  forward config : %s: %s\n  backward config: %s\n",
                out.forwardKernel.c_str(), out.forwardConfig.c_str(),
                out.backwardConfig.c_str());
    double bytes = double(in.BT) * in.V * dtypeSize(dtype);
    std::printf("  forward : %8.3f ms  %7.1f GB/s (reads student + teacher)\n",
                out.forwardMs, 2 * bytes / out.forwardMs / 1e6);
    std::printf("  backward: %8.3f ms  %7.1f GB/s (reads both, writes grad)\n",
                out.backwardMs, 3 * bytes / out.backwardMs / 1e6);
    std::printf("  fwd+bwd : %8.3f ms\n", out.forwardMs + out.backwardMs);
  }
  if (!checkArg)
    return 0;
  auto rows = deviceArg == "gpu" ? sampleCheckRows(in.BT, checkRowsArg)
                                 : std::vector<int64_t>{};
  CeTvdCheck c = checkCeTvd(in, gCe, gTvd, out, rows);
  return reportCheck(c);
}

int main(int argc, char **argv) {
  cl::HideUnrelatedOptions(category);
  cl::SetVersionPrinter([](llvm::raw_ostream &os) {
    os << "tilejit " << TILEJIT_VERSION << " (LLVM " << LLVM_VERSION_STRING
       << ")\n";
  });
  // `tilejit --load lib.so ...` before the subcommand: registered kernels
  // must exist before anything looks them up.
  std::vector<char *> args = {argv[0]};
  std::vector<std::string> libraries;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--load" && i + 1 < argc)
      libraries.push_back(argv[++i]);
    else if (a.rfind("--load=", 0) == 0)
      libraries.push_back(a.substr(7));
    else
      args.push_back(argv[i]);
  }
  try {
    for (const std::string &l : libraries)
      loadKernelLibrary(l);
  } catch (const std::exception &e) {
    // Without destructors: a library with a tilejit of its own constructed
    // static objects over the CLI's, which would be freed twice.
    std::cerr << "tilejit: error: " << e.what() << std::endl;
    std::_Exit(2);
  }
  argc = int(args.size());
  argv = args.data();
  // With an error stream, LLVM reports a bad option and returns false
  // instead of exiting 1: bad input exits 2, as everywhere in tilejit.
  if (!cl::ParseCommandLineOptions(
          argc, argv,
          "tilejit: a JIT for tile-level GPU kernels\n\n"
          "  tilejit [--load LIB.so ...] COMMAND ...: --load dlopens a kernel "
          "library first\n  (a MODULE on tilejit::headers, see README; a "
          "name without a slash is loaded\n  from the current directory "
          "when that file is there, else found as dlopen does)\n",
          &llvm::errs()))
    return 2;
  try {
    if (listCmd)
      return listKernels();
    if (compileCmd)
      return compileKernel();
    if (runCmd)
      return runKernel();
    if (benchCommandSelected())
      return runBenchCommand();
    if (tuneCommandSelected())
      return runTuneCommand();
    if (cacheCommandSelected())
      return runCacheCommand();
    std::cerr << "usage: tilejit list | compile | run | tune | bench | cache "
                 "... (--help for details)\n";
    return 2;
  } catch (const std::bad_alloc &) {
    std::cerr << "tilejit: error: out of host memory (are --bt, --vocab or "
                 "--hidden too large for this machine?)\n";
    return 2;
  } catch (const std::exception &e) {
    std::cerr << "tilejit: error: " << e.what() << "\n";
    return 2;
  }
}
