//===- FusedCeTvdReducedOp.cpp - the reduced CE+TVD on host vectors -------===//
#include "ops/harness/FusedCeTvdReducedOp.h"

#include "ops/FusedCeTvdParts.h"
#include "ops/TunedConfig.h"
#include "ops/harness/FusedCeTvdTune.h"
#include "runtime/Autotuner.h"
#include "runtime/CudaDriver.h"
#include "tilejit/Error.h"
#include "tilejit/HostFloat.h"
#include "tilejit/KernelSpec.h"
#include "tilejit/Timing.h"
#include "tilejit/ops/FusedCeTvd.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

namespace tilejit {
namespace {

const char *const kLossGrad = "fused_ce_tvd_loss_grad";

void validate(const ref::CeTvdInputs &in, const CeTvdReducedOptions &o) {
  const std::string kernel =
      o.lossGradKernel.empty() ? kLossGrad : o.lossGradKernel;
  for (const std::string &s : o.overrides)
    if (findKernel(kernel).ownOverrides({s}).empty())
      throw Error("fused_ce_tvd (reduced): '" + s + "' names no parameter of " +
                  kernel + " (see tilejit list)");
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

/// The op's arguments for `in` (contiguous rows) and `o`; the pointers are
/// the caller's to set.
ops::CeTvdReducedArgs opArgs(const ref::CeTvdInputs &in,
                             const CeTvdReducedOptions &o) {
  ops::CeTvdReducedArgs a;
  a.dtype = in.dtype;
  a.BT = in.BT;
  a.V = in.V;
  a.ignoreIndex = ref::kCeTvdIgnoreIndex;
  a.alpha = o.alpha;
  a.beta = o.beta;
  a.mean = o.mean;
  a.set = o.overrides;
  a.useTuned = o.useTuned;
  a.lossGradKernel = o.lossGradKernel;
  return a;
}

CeTvdReducedOutputs emptyBatch(const char *device) {
  CeTvdReducedOutputs out;
  out.device = device;
  out.config = "none (empty batch: nothing launched)";
  return out;
}

} // namespace

bool parseReduction(const std::string &name) {
  if (name == "mean" || name == "sum")
    return name == "mean";
  throw Error("--reduction must be none, mean or sum (got '" + name + "')");
}

CeTvdReducedOutputs runCeTvdReducedCpu(const ref::CeTvdInputs &in,
                                       const CeTvdReducedOptions &options) {
  validate(in, options);
  if (in.BT == 0) // the loss of nothing is 0, for mean as for sum
    return emptyBatch("cpu");
  CeTvdReducedOutputs out;
  out.device = "cpu";
  out.ce.assign(in.BT, 0.f);
  out.tvd.assign(in.BT, 0.f);
  // In place, the op writes the gradient over this copy of the student.
  out.grad =
      options.inPlace ? in.student : std::vector<uint8_t>(in.student.size(), 0);
  int32_t bad = 0;
  ops::CeTvdReducedArgs a = opArgs(in, options);
  a.student = options.inPlace ? out.grad.data() : in.student.data();
  a.teacher = in.teacher.data();
  a.target = in.target.data();
  a.grad = out.grad.data();
  a.loss = &out.loss;
  a.ce = out.ce.data();
  a.tvd = out.tvd.data();
  a.badTarget = &bad;
  out.config = ops::ceTvdReducedConfig(a, ops::Device::Cpu);
  std::vector<uint8_t> workspace(ops::ceTvdReducedWorkspaceBytes(a));
  ops::ceTvdReduced(a, workspace.data(), workspace.size(), ops::Device::Cpu);
  throwIfBadTarget(in, bad);
  std::memcpy(&out.nValid,
              workspace.data() + ops::ceTvdReducedValidCountOffset(),
              sizeof(float));
  return out;
}

namespace {

/// One call's device memory: the inputs, uploaded once; the outputs; the
/// workspace; and for an in-place gradient, a copy of the student that
/// restores it before each run. Copies and memsets run on the legacy default
/// stream, which orders them with the blocking streams the op runs on.
class DeviceCall {
public:
  DeviceCall(const ref::CeTvdInputs &in, const CeTvdReducedOptions &o)
      : Dev(cuda::Device::open()), InPlace(o.inPlace), Args(opArgs(in, o)) {
    if (!o.arch.empty() && o.arch != Dev.archString())
      throw Error("fused_ce_tvd (reduced): the op compiles for this GPU (" +
                  Dev.archString() + "), not --arch " + o.arch);
    size_t logits = in.student.size(), rows = in.BT * sizeof(float);
    auto upload = [](const void *p, size_t bytes) {
      cuda::DeviceBuffer b(bytes);
      b.copyFromHost(p, bytes);
      return b;
    };
    Student = upload(in.student.data(), logits);
    Teacher = upload(in.teacher.data(), logits);
    Target = upload(in.target.data(), in.BT * sizeof(int64_t));
    if (InPlace)
      Pristine = upload(in.student.data(), logits);
    else
      Grad = cuda::DeviceBuffer(logits);
    Ce = cuda::DeviceBuffer(rows);
    Tvd = cuda::DeviceBuffer(rows);
    Loss = cuda::DeviceBuffer(sizeof(float));
    Bad = cuda::DeviceBuffer(sizeof(int32_t));
    Args.student = ptr(Student);
    Args.teacher = ptr(Teacher);
    Args.target = static_cast<const int64_t *>(ptr(Target));
    Args.grad = ptr(InPlace ? Student : Grad);
    Args.loss = static_cast<float *>(ptr(Loss));
    Args.ce = static_cast<float *>(ptr(Ce));
    Args.tvd = static_cast<float *>(ptr(Tvd));
    Args.badTarget = static_cast<int32_t *>(ptr(Bad));
    Workspace = cuda::DeviceBuffer(ops::ceTvdReducedWorkspaceBytes(Args));
  }

  const cuda::Device &device() const { return Dev; }
  /// The op's arguments on this memory.
  const ops::CeTvdReducedArgs &args() const { return Args; }

  /// Enqueues the op with `args` (this call's, with another config maybe).
  void run(const ops::CeTvdReducedArgs &args, CUstream stream) const {
    ops::ceTvdReduced(args, ptr(Workspace), Workspace.size(), ops::Device::Gpu,
                      stream);
  }

  /// Restores an in-place student.
  void restore() {
    if (InPlace)
      Student.copyFrom(Pristine);
  }

  /// NaN-fills every output, so a config that skips some cannot pass.
  void poison() {
    for (cuda::DeviceBuffer *b : {&Ce, &Tvd, &Loss})
      b->memset(0xFF);
    if (!InPlace)
      Grad.memset(0xFF);
  }

  /// Copies every output of the last run into `out` (the copies wait for
  /// it); throws for a bad target.
  void copyBack(const ref::CeTvdInputs &in, CeTvdReducedOutputs &out) const {
    out.ce.resize(in.BT);
    out.tvd.resize(in.BT);
    out.grad.resize(in.student.size());
    Ce.copyToHost(out.ce.data(), Ce.size());
    Tvd.copyToHost(out.tvd.data(), Tvd.size());
    (InPlace ? Student : Grad).copyToHost(out.grad.data(), out.grad.size());
    Loss.copyToHost(&out.loss, sizeof(float));
    Workspace.copyToHost(&out.nValid, sizeof(float),
                         ops::ceTvdReducedValidCountOffset());
    int32_t bad = 0;
    Bad.copyToHost(&bad, sizeof(bad));
    throwIfBadTarget(in, bad);
  }

private:
  static void *ptr(const cuda::DeviceBuffer &b) {
    return reinterpret_cast<void *>(b.ptr());
  }
  cuda::Device Dev; // outlives the buffers
  bool InPlace;
  ops::CeTvdReducedArgs Args;
  cuda::DeviceBuffer Student, Teacher, Target, Pristine, Grad, Ce, Tvd, Loss,
      Bad, Workspace;
};

} // namespace

CeTvdReducedOutputs runCeTvdReducedGpu(const ref::CeTvdInputs &in,
                                       const CeTvdReducedOptions &options) {
  validate(in, options); // bad inputs before a missing GPU
  if (in.BT == 0)        // the loss of nothing is 0, for mean as for sum
    return emptyBatch("gpu");
  DeviceCall call(in, options);
  CeTvdReducedOutputs out;
  out.device = call.device().name();
  auto t0 = std::chrono::steady_clock::now();
  out.config = ops::prepareCeTvdReduced(call.args());
  out.jitMs = msSince(t0);
  cuda::Stream stream;
  CUstream st = stream.get();
  call.run(call.args(), st);
  stream.synchronize();
  call.copyBack(in, out);
  std::vector<double> ms;
  for (int i = 0; i < std::max(1, options.iterations); ++i) {
    call.restore(); // untimed: ordered before the run's start event
    ms.push_back(cuda::timeMs([&] { call.run(call.args(), st); }, st));
  }
  out.ms = medianOf(ms);
  return out;
}

namespace {

/// fused_ce_tvd_loss_grad as a tuning target: a candidate is the op with
/// the candidate's parameters as its `set` (compiled once per set by
/// prepareCeTvdReduced), launched with the two helper kernels on the legacy
/// default stream (the timer's) and checked like a `run --check`.
class ReducedTarget : public TuningTarget {
  struct Candidate : TuneCandidate {
    ops::CeTvdReducedArgs args;
  };

public:
  ReducedTarget(DeviceCall &call, const ref::CeTvdInputs &in,
                const CeTvdReducedOptions &o, std::vector<int64_t> rows)
      : Call(call), In(in), Opts(o), Rows(std::move(rows)),
        Timer(call.device()) {}

  std::unique_ptr<TuneCandidate> compile(const TuneParams &params) override {
    auto c = std::make_unique<Candidate>();
    c->args = Call.args();
    c->args.set = paramOverrides(params);
    ops::prepareCeTvdReduced(c->args);
    return c;
  }
  KernelResources load(TuneCandidate &tc) override {
    return tuningResources(ops::ceTvdReducedLossGrad(args(tc)));
  }
  void resetBuffers() override {
    Call.restore();
    Call.poison();
  }
  void launch(TuneCandidate &tc) override {
    Call.run(args(tc), nullptr);
    cuda::synchronize();
  }
  double timeLaunch(TuneCandidate &tc) override {
    return Timer.timeMs([&] { Call.run(args(tc), nullptr); });
  }
  std::string checkOutputs() override {
    Call.copyBack(In, Out);
    CeTvdCheck c = checkCeTvdReduced(In, Opts, Out, Rows);
    return c.passed ? "" : c.summary;
  }

private:
  static const ops::CeTvdReducedArgs &args(TuneCandidate &tc) {
    return static_cast<Candidate &>(tc).args;
  }
  DeviceCall &Call;
  const ref::CeTvdInputs &In;
  const CeTvdReducedOptions &Opts;
  std::vector<int64_t> Rows;
  L2FlushTimer Timer;
  CeTvdReducedOutputs Out;
};

} // namespace

std::vector<std::string>
tuneCeTvdReducedGpu(const ref::CeTvdInputs &in,
                    const CeTvdReducedOptions &options, bool retune,
                    std::string *table,
                    const std::function<void(const std::string &)> &progress) {
  validate(in, options);
  DeviceCall call(in, options);
  ReducedTarget target(call, in, options, sampleCheckRows(in.BT, 16));
  DeviceIdentity id = deviceIdentity(call.device());
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
                        deviceLimits(call.device()), topts);
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
