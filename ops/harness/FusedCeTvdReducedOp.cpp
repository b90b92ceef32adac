//===- FusedCeTvdReducedOp.cpp - host side of the reduced CE+TVD ----------===//
#include "ops/harness/FusedCeTvdReducedOp.h"

#include "ops/harness/FusedCeTvdTune.h"
#include "runtime/Autotuner.h"
#include "runtime/Cache.h"
#include "runtime/CudaDriver.h"
#include "tilejit/CachedCompile.h"
#include "tilejit/Error.h"
#include "tilejit/HostFloat.h"
#include "tilejit/Interpreter.h"
#include "tilejit/KernelSpec.h"
#include "tilejit/Timing.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

namespace tilejit {
namespace {

const char *const kLossGrad = "fused_ce_tvd_loss_grad";
const char *const kWeights = "ce_tvd_row_weights";
const char *const kLossSum = "ce_tvd_loss_sum";

/// Every buffer of one reduced run.
enum Buf { Student, Teacher, Target, Weights, Ce, Tvd, Grad, Bad, Loss, NBufs };

/// Scalar arguments, in one place so the GPU can point at them.
struct Scalars {
  Scalars(const ref::CeTvdInputs &in, const CeTvdReducedOptions &o)
      : V(static_cast<int32_t>(in.V)), BT(static_cast<int32_t>(in.BT)),
        rowStride(in.V), gradStride(in.V), alpha(static_cast<float>(o.alpha)),
        beta(static_cast<float>(o.beta)), mean(o.mean ? 1 : 0) {}
  int32_t V, BT;
  int64_t rowStride, gradStride;
  int64_t ignoreIndex = ref::kCeTvdIgnoreIndex;
  float alpha, beta;
  int32_t mean;
};

/// The three kernels' arguments: buffer(b) for pointers, scalar(x) else.
template <typename Arg, typename BufFn, typename ScalarFn>
std::vector<std::vector<Arg>> kernelArgs(const Scalars &s, BufFn buffer,
                                         ScalarFn scalar) {
  std::vector<Arg> weights = {
      buffer(Target),  buffer(Weights), scalar(s.BT),  scalar(s.ignoreIndex),
      scalar(s.alpha), scalar(s.beta),  scalar(s.mean)};
  std::vector<Arg> lossGrad = {
      buffer(Student),     buffer(Teacher),      buffer(Target),
      buffer(Weights),     buffer(Ce),           buffer(Tvd),
      buffer(Grad),        buffer(Bad),          scalar(s.V),
      scalar(s.rowStride), scalar(s.gradStride), scalar(s.ignoreIndex)};
  std::vector<Arg> lossSum = {buffer(Ce), buffer(Tvd), buffer(Weights),
                              buffer(Loss), scalar(s.BT)};
  return {weights, lossGrad, lossSum};
}

void validate(const ref::CeTvdInputs &in, const CeTvdReducedOptions &o) {
  for (const std::string &s : o.overrides)
    if (findKernel(kLossGrad).ownOverrides({s}).empty())
      throw Error("fused_ce_tvd (reduced): '" + s + "' names no parameter of " +
                  kLossGrad + " (see tilejit list)");
  if (in.BT < 0 || in.BT > std::numeric_limits<int32_t>::max())
    throw Error("fused_ce_tvd (reduced): BT = " + std::to_string(in.BT) +
                " must be in [0, 2^31)");
  if (in.V <= 0 || in.V > std::numeric_limits<int32_t>::max())
    throw Error("fused_ce_tvd (reduced): vocab V = " + std::to_string(in.V) +
                " must be in [1, 2^31)");
  size_t bytes = static_cast<size_t>(in.BT) * in.V * dtypeSize(in.dtype);
  if (in.student.size() != bytes || in.teacher.size() != bytes ||
      static_cast<int64_t>(in.target.size()) != in.BT)
    throw Error("fused_ce_tvd (reduced): student/teacher must hold BT * V " +
                std::string(dtypeName(in.dtype)) +
                " elements and target BT entries");
  checkF32Scalar("fused_ce_tvd (reduced): alpha", o.alpha);
  checkF32Scalar("fused_ce_tvd (reduced): beta", o.beta);
}

/// The three kernels, built for in's shape; clusterSize of the main one.
struct Built {
  TileModule weights, lossGrad, lossSum;
  std::string config;
  int64_t clusterSize; ///< of lossGrad: its grid is BT times this
};

Built build(const ref::CeTvdInputs &in, const std::vector<std::string> &set,
            bool inPlace) {
  const KernelSpec &lg = findKernel(kLossGrad);
  dsl::Config c = lg.config(
      in.dtype, set, {{"BT", in.BT}, {"V", in.V}, {"IN_PLACE", inPlace}});
  return {findKernel(kWeights).build(findKernel(kWeights).config(DType::F32)),
          lg.build(c),
          findKernel(kLossSum).build(findKernel(kLossSum).config(DType::F32)),
          formatParams(c.params), c.get("CLUSTER_SIZE")};
}

/// Host storage of every buffer of one run (inputs point into `in`, or into
/// `work` for an in-place gradient).
struct Host {
  std::vector<uint8_t> work; // the student copy an in-place run overwrites
  std::vector<float> weights = std::vector<float>(3, 0.f), loss = {0.f};
  int32_t bad = 0;
  void *data[NBufs] = {};
  DType dtype[NBufs] = {};
  int64_t count[NBufs] = {};

  Host(const ref::CeTvdInputs &in, const CeTvdReducedOptions &o,
       CeTvdReducedOutputs &out) {
    out.ce.assign(in.BT, 0.f);
    out.tvd.assign(in.BT, 0.f);
    int64_t n = in.BT * in.V;
    if (o.inPlace)
      work = in.student;
    else
      out.grad.assign(n * dtypeSize(in.dtype), 0);
    auto set = [&](Buf b, const void *p, DType t, int64_t c) {
      data[b] = const_cast<void *>(p);
      dtype[b] = t;
      count[b] = c;
    };
    set(Student, o.inPlace ? work.data() : in.student.data(), in.dtype, n);
    set(Teacher, in.teacher.data(), in.dtype, n);
    set(Target, in.target.data(), DType::I64, in.BT);
    set(Weights, weights.data(), DType::F32, 3);
    set(Ce, out.ce.data(), DType::F32, in.BT);
    set(Tvd, out.tvd.data(), DType::F32, in.BT);
    set(Grad, o.inPlace ? work.data() : out.grad.data(), in.dtype, n);
    set(Bad, &bad, DType::I32, 1);
    set(Loss, loss.data(), DType::F32, 1);
  }
  size_t bytes(Buf b) const { return count[b] * dtypeSize(dtype[b]); }

  void finish(const ref::CeTvdInputs &in, const CeTvdReducedOptions &o,
              CeTvdReducedOutputs &out) {
    throwIfBadTarget(in, bad);
    out.loss = loss[0];
    out.nValid = weights[2];
    if (o.inPlace)
      out.grad = work; // a copy: H.data still points at `work`
  }
};

} // namespace

bool parseReduction(const std::string &name) {
  if (name == "mean" || name == "sum")
    return name == "mean";
  throw Error("--reduction must be none, mean or sum (got '" + name + "')");
}

CeTvdReducedOutputs runCeTvdReducedCpu(const ref::CeTvdInputs &in,
                                       const CeTvdReducedOptions &options) {
  validate(in, options);
  CeTvdReducedOutputs out;
  out.device = "cpu";
  if (in.BT == 0) { // the loss of nothing is 0, for mean as for sum
    out.config = "none (empty batch: nothing launched)";
    return out;
  }
  Host h(in, options, out);
  Scalars s(in, options);
  auto args = kernelArgs<InterpArg>(
      s,
      [&](Buf b) {
        return InterpBuffer{h.data[b], h.dtype[b], h.count[b]};
      },
      [](auto x) { return x; });
  Built k = build(in, options.overrides, options.inPlace);
  out.config = k.config;
  TileModule *mods[3] = {&k.weights, &k.lossGrad, &k.lossSum};
  Grid grids[3] = {{1, 1, 1}, {in.BT * k.clusterSize, 1, 1}, {1, 1, 1}};
  for (int i = 0; i < 3; ++i) {
    optimizeTile(*mods[i]);
    interpret(mods[i]->operation(), mods[i]->kernelName(), grids[i], args[i]);
  }
  h.finish(in, options, out);
  return out;
}

namespace {

/// The GPU side: device buffers, loaded kernels, launches.
class GpuRun {
public:
  GpuRun(const ref::CeTvdInputs &in, const CeTvdReducedOptions &o,
         CeTvdReducedOutputs &out)
      : In(in), Opts(o), Dev(cuda::Device::open()), H(in, o, out), S(in, o) {
    Copts.arch = o.arch.empty() ? Dev.archString() : o.arch;
    for (int b = 0; b < NBufs; ++b) {
      Buf buf = static_cast<Buf>(b);
      bool alias = buf == Grad && o.inPlace; // the student buffer itself
      Buffers.emplace_back(alias ? 0 : H.bytes(buf));
      Ptrs[b] = alias ? Buffers[Student].ptr() : Buffers.back().ptr();
    }
    for (Buf b : {Student, Teacher, Target})
      Buffers[b].copyFromHost(H.data[b], H.bytes(b));
    if (o.inPlace) { // a pristine copy restores the student before each run
      Pristine.emplace(H.bytes(Student));
      Pristine->copyFromHost(H.data[Student], H.bytes(Student));
    }
    Args = kernelArgs<void *>(
        S, [&](Buf b) -> void * { return &Ptrs[b]; },
        [](const auto &x) {
          return const_cast<void *>(static_cast<const void *>(&x));
        });
  }

  const cuda::Device &device() const { return Dev; }
  const CompileOptions &compileOptions() const { return Copts; }

  /// Compiles (through the cache) and loads the three kernels.
  void load(const std::vector<std::string> &set, LoadedKernels &loaded) {
    Built k = build(In, set, Opts.inPlace);
    Config = k.config;
    TileModule *mods[3] = {&k.weights, &k.lossGrad, &k.lossSum};
    for (int i = 0; i < 3; ++i) {
      CompiledKernel c = compileCached(*mods[i], Copts);
      Fns[i] = loaded.function(c);
      Threads[i] = c.threads;
      SharedBytes[i] = c.dynamicSharedBytes;
      Grids[i] = i == 1 ? In.BT * c.clusterSize : 1;
    }
  }

  /// Restores an in-place student and clears the bad-target flag.
  void reset() {
    if (Pristine)
      Buffers[Student].copyFrom(*Pristine);
    Buffers[Bad].memset(0);
  }

  /// NaN-fills every output, so a config that skips some cannot pass.
  void poison() {
    for (Buf b : {Ce, Tvd, Loss})
      Buffers[b].memset(0xFF);
    if (!Opts.inPlace)
      Buffers[Grad].memset(0xFF);
  }

  void launchAll() {
    for (int i = 0; i < 3; ++i)
      cuda::launch(Fns[i], {static_cast<unsigned>(Grids[i])},
                   {static_cast<unsigned>(Threads[i])},
                   static_cast<size_t>(SharedBytes[i]), nullptr, Args[i]);
  }

  void copyBack(CeTvdReducedOutputs &out) {
    cuda::synchronize();
    for (Buf b : {Weights, Ce, Tvd, Bad, Loss})
      Buffers[b].copyToHost(H.data[b], H.bytes(b));
    Buffers[Opts.inPlace ? Student : Grad].copyToHost(H.data[Grad],
                                                      H.bytes(Grad));
    H.finish(In, Opts, out);
  }

  /// Makes `fn` (a build of fused_ce_tvd_loss_grad) the one launched.
  void useLossGrad(const CompiledKernel &k, const cuda::Function &fn) {
    Fns[1] = fn;
    Threads[1] = k.threads;
    SharedBytes[1] = k.dynamicSharedBytes;
    Grids[1] = In.BT * k.clusterSize;
  }

  const std::string &config() const { return Config; }

private:
  const ref::CeTvdInputs &In;
  const CeTvdReducedOptions &Opts;
  cuda::Device Dev;
  Host H;
  Scalars S;
  CompileOptions Copts;
  std::vector<cuda::DeviceBuffer> Buffers;
  std::optional<cuda::DeviceBuffer> Pristine;
  CUdeviceptr Ptrs[NBufs] = {};
  std::vector<std::vector<void *>> Args;
  cuda::Function Fns[3];
  int64_t Threads[3] = {}, Grids[3] = {}, SharedBytes[3] = {};
  std::string Config;
};

} // namespace

CeTvdReducedOutputs runCeTvdReducedGpu(const ref::CeTvdInputs &in,
                                       const CeTvdReducedOptions &options) {
  validate(in, options);
  CeTvdReducedOutputs out;
  if (in.BT == 0) { // the loss of nothing is 0, for mean as for sum
    out.device = "gpu";
    out.config = "none (empty batch: nothing launched)";
    return out;
  }
  GpuRun run(in, options, out);
  out.device = run.device().name();
  std::vector<std::string> set = options.overrides;
  std::string source = set.empty() ? "default" : "--set";
  if (options.useTuned && set.empty())
    set = tunedCeTvdOverrides(kLossGrad, in, deviceIdentity(run.device()),
                              &source, options.inPlace);
  LoadedKernels loaded;
  auto t0 = std::chrono::steady_clock::now();
  run.load(set, loaded);
  out.jitMs = msSince(t0);
  out.config = run.config() + " (" + source + ")";
  run.reset();
  run.launchAll();
  run.copyBack(out);
  std::vector<double> ms;
  for (int i = 0; i < std::max(1, options.iterations); ++i) {
    run.reset();
    ms.push_back(cuda::timeMs([&] { run.launchAll(); }));
  }
  out.ms = medianOf(ms);
  return out;
}

namespace {

/// fused_ce_tvd_loss_grad as a tuning target: each candidate runs with the
/// two helper kernels and is checked like a `run --check`.
class ReducedTarget : public TuningTarget {
  struct Candidate : TuneCandidate, OwnModuleKernel {};

public:
  /// `out` is what `run` was made with (its host buffers live there).
  ReducedTarget(GpuRun &run, CeTvdReducedOutputs &out,
                const ref::CeTvdInputs &in, const CeTvdReducedOptions &o,
                std::vector<int64_t> rows)
      : Run(run), Out(out), In(in), Opts(o), Rows(std::move(rows)),
        Timer(run.device()) {}

  std::unique_ptr<TuneCandidate> compile(const TuneParams &params) override {
    const KernelSpec &spec = findKernel(kLossGrad);
    dsl::Config config =
        spec.config(In.dtype, paramOverrides(params),
                    {{"BT", In.BT}, {"V", In.V}, {"IN_PLACE", Opts.inPlace}});
    auto c = std::make_unique<Candidate>();
    c->compiled = compileCached(spec.build(config), Run.compileOptions());
    return c;
  }
  KernelResources load(TuneCandidate &tc) override {
    auto &c = static_cast<Candidate &>(tc);
    c.load();
    return candidateResources(c.compiled, c.fn);
  }
  void resetBuffers() override {
    Run.reset();
    Run.poison();
  }
  void launch(TuneCandidate &tc) override {
    select(tc);
    Run.launchAll();
    cuda::synchronize();
  }
  double timeLaunch(TuneCandidate &tc) override {
    select(tc);
    return Timer.timeMs([&] { Run.launchAll(); });
  }
  std::string checkOutputs() override {
    Run.copyBack(Out);
    CeTvdCheck c = checkCeTvdReduced(In, Opts, Out, Rows);
    return c.passed ? "" : c.summary;
  }

private:
  void select(TuneCandidate &tc) {
    auto &c = static_cast<Candidate &>(tc);
    Run.useLossGrad(c.compiled, c.fn);
  }
  GpuRun &Run;
  CeTvdReducedOutputs &Out;
  const ref::CeTvdInputs &In;
  const CeTvdReducedOptions &Opts;
  std::vector<int64_t> Rows;
  L2FlushTimer Timer;
};

} // namespace

std::vector<std::string>
tuneCeTvdReducedGpu(const ref::CeTvdInputs &in,
                    const CeTvdReducedOptions &options, bool retune,
                    std::string *table,
                    const std::function<void(const std::string &)> &progress) {
  validate(in, options);
  CeTvdReducedOutputs scratch;
  GpuRun run(in, options, scratch);
  LoadedKernels loaded;
  run.load({}, loaded); // the helper kernels (and a default main kernel)
  ReducedTarget target(run, scratch, in, options, sampleCheckRows(in.BT, 16));
  DeviceIdentity id = deviceIdentity(run.device());
  TuningDatabase db = TuningDatabase::fromEnvironment();
  TuningKey key = ceTvdTuningKey(kLossGrad, in, id, options.inPlace);
  TuneOptions topts;
  topts.repetitions = std::max(1, options.iterations);
  topts.progress = progress;
  bool fromDb = false;
  TuningEntry e = lookupOrTune(
      db, key,
      [&] {
        return autotune(target, findKernel(kLossGrad).candidateConfigs(),
                        deviceLimits(run.device()), topts);
      },
      retune, &fromDb);
  if (table) {
    std::ostringstream os;
    os << kLossGrad << " " << key.shape << " " << key.dtype
       << (fromDb ? " (stored entry)" : " (tuned now)") << "\n";
    double bytes = 3.0 * in.BT * in.V * dtypeSize(in.dtype);
    for (const Trial &t : e.trials) {
      os << "  " << formatParams(t.params) << "  " << t.statusText();
      if (t.status == TrialStatus::Ok)
        os << "  " << t.ms << " ms  " << bytes / t.ms / 1e6 << " GB/s";
      os << "\n";
    }
    *table = os.str();
  }
  return paramOverrides(e.best);
}

CeTvdCheck checkCeTvdReduced(const ref::CeTvdInputs &in,
                             const CeTvdReducedOptions &options,
                             const CeTvdReducedOutputs &out,
                             std::vector<int64_t> rows) {
  int64_t nValid =
      std::count_if(in.target.begin(), in.target.end(),
                    [](int64_t y) { return y != ref::kCeTvdIgnoreIndex; });
  double scale = !options.mean ? 1.0 : nValid > 0 ? 1.0 / nValid : 0.0;
  std::vector<float> gCe(in.BT, static_cast<float>(options.alpha * scale));
  std::vector<float> gTvd(in.BT, static_cast<float>(options.beta * scale));
  CeTvdOutputs asRows;
  asRows.ce = out.ce;
  asRows.tvd = out.tvd;
  asRows.grad = out.grad;
  CeTvdCheck c = checkCeTvd(in, gCe, gTvd, asRows, rows);
  // The loss against the fp64 sum of the per-row terms checked above.
  double sumCe = 0, sumTvd = 0;
  for (int64_t r = 0; r < in.BT; ++r) {
    sumCe += out.ce[r];
    sumTvd += out.tvd[r];
  }
  double want = (options.alpha * sumCe + options.beta * sumTvd) * scale;
  double lossErr = std::fabs(out.loss - want) / (1e-6 + std::fabs(want));
  bool countOk = out.nValid == static_cast<float>(nValid);
  const double kLossRelTol = 1e-5; // fp32 sums of BT terms
  c.passed = c.passed && countOk && lossErr <= kLossRelTol;
  std::ostringstream os;
  // checkCeTvd's last line is its verdict; the verdict here replaces it.
  os << c.summary.substr(0, c.summary.rfind('\n')) << "\n  loss = " << out.loss
     << " vs " << want << " from the per-row terms: relative error " << lossErr
     << " (tol " << kLossRelTol << ")\n  n_valid = " << out.nValid
     << " (targets say " << nValid << ")\n  " << (c.passed ? "PASS" : "FAIL");
  c.summary = os.str();
  return c;
}

} // namespace tilejit
