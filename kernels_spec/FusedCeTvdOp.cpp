//===- FusedCeTvdOp.cpp - host side of the CE+TVD kernels -----------------===//
#include "kernels_spec/FusedCeTvdOp.h"

#include "kernels_spec/FusedCeTvdArgs.h"
#include "kernels_spec/FusedCeTvdTune.h"
#include "kernels_spec/reference/CeTvdReference.h"
#include "runtime/Cache.h"
#include "runtime/CudaDriver.h"
#include "tilejit/CachedCompile.h"
#include "tilejit/Error.h"
#include "tilejit/HostFloat.h"
#include "tilejit/Interpreter.h"
#include "tilejit/KernelSpec.h"
#include "tilejit/Timing.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <limits>
#include <sstream>

namespace tilejit {
namespace {

using namespace cetvd;

/// Host memory for every buffer (inputs point into the caller's vectors).
struct HostBuffers {
  std::array<void *, NumBufs> data{};
  std::array<DType, NumBufs> dtype{};
  std::array<int64_t, NumBufs> count{};
  int32_t badTarget = 0;
  std::vector<float> gCe, gTvd, maxS, logSumS, maxT, logSumT, fastSigns;

  /// lse = max + log sum-exp, for the caller.
  void fillLse(CeTvdOutputs &out) const {
    lseFromParts(maxS, logSumS, out.lseS);
    lseFromParts(maxT, logSumT, out.lseT);
  }

  size_t bytes(Buf b) const { return count[b] * dtypeSize(dtype[b]); }
};

/// The forward kernel (chosen: `options.forwardKernel` is resolved) and
/// that every --set names a parameter of it or of the backward.
void validateKernels(const CeTvdRunOptions &options) {
  const std::string &fwd = options.forwardKernel;
  if (fwd != "fused_ce_tvd_fwd" && fwd != "fused_ce_tvd_fwd_cluster")
    throw Error("fused_ce_tvd: unknown forward kernel '" + fwd +
                "' (fused_ce_tvd_fwd or fused_ce_tvd_fwd_cluster)");
  std::string other = fwd == "fused_ce_tvd_fwd" ? "fused_ce_tvd_fwd_cluster"
                                                : "fused_ce_tvd_fwd";
  for (const std::string &o : options.overrides)
    if (findKernel(fwd).ownOverrides({o}).empty() &&
        findKernel("fused_ce_tvd_bwd").ownOverrides({o}).empty())
      throw Error(
          "fused_ce_tvd: '" + o + "' names no parameter of " + fwd +
          " or fused_ce_tvd_bwd (see tilejit list)" +
          (findKernel(other).ownOverrides({o}).empty()
               ? ""
               : "; it is one of " + other + "'s: --forward=" +
                     (other == "fused_ce_tvd_fwd" ? "loop" : "cluster") +
                     " picks that kernel (auto picks the cluster "
                     "kernel on sm_90 and newer, the loop kernel on "
                     "the CPU and older GPUs)"));
}

/// Shapes, dtypes, targets and upstream gradients.
void validateInputs(const ref::CeTvdInputs &in, const std::vector<float> &gCe,
                    const std::vector<float> &gTvd) {
  if (in.BT < 0 || in.BT > std::numeric_limits<int32_t>::max())
    throw Error("fused_ce_tvd: BT = " + std::to_string(in.BT) +
                " must be in [0, 2^31)");
  if (in.V <= 0 || in.V > std::numeric_limits<int32_t>::max())
    throw Error("fused_ce_tvd: vocab V = " + std::to_string(in.V) +
                " must be in [1, 2^31)");
  size_t elems = static_cast<size_t>(in.BT) * in.V * dtypeSize(in.dtype);
  if (in.student.size() != elems || in.teacher.size() != elems)
    throw Error("fused_ce_tvd: student/teacher must hold BT * V = " +
                std::to_string(in.BT * in.V) + " " + dtypeName(in.dtype) +
                " elements");
  if (static_cast<int64_t>(in.target.size()) != in.BT ||
      static_cast<int64_t>(gCe.size()) != in.BT ||
      static_cast<int64_t>(gTvd.size()) != in.BT)
    throw Error("fused_ce_tvd: target, g_ce and g_tvd must have BT = " +
                std::to_string(in.BT) + " entries");
}

/// The outputs of an empty batch (BT = 0): empty per-row vectors and
/// gradient, nothing launched. The options are checked as for any batch.
CeTvdOutputs emptyBatch(const CeTvdRunOptions &opts, const std::string &arch,
                        const std::string &device) {
  CeTvdRunOptions options = opts;
  options.forwardKernel = resolveForwardKernel(opts.forwardKernel, arch);
  validateKernels(options);
  CeTvdOutputs out;
  out.device = device;
  out.forwardKernel = options.forwardKernel;
  return out;
}

/// Points every buffer at `in` / `out` storage.
void hostBuffers(HostBuffers &h, const ref::CeTvdInputs &in,
                 const std::vector<float> &gCe, const std::vector<float> &gTvd,
                 CeTvdOutputs &out) {
  int64_t n = in.BT * in.V;
  for (auto *v : {&out.ce, &out.tvd, &out.lseS, &out.lseT, &out.sigma})
    v->assign(in.BT, 0.f);
  out.grad.assign(n * dtypeSize(in.dtype), 0);
  h.gCe = gCe;
  h.gTvd = gTvd;
  for (auto *v : {&h.maxS, &h.logSumS, &h.maxT, &h.logSumT, &h.fastSigns})
    v->assign(in.BT, 0.f);
  auto set = [&](Buf b, const void *p) {
    h.data[b] = const_cast<void *>(p);
    h.dtype[b] = bufDType(b, in.dtype);
    h.count[b] = bufCount(b, in.BT, in.V);
  };
  set(Student, in.student.data());
  set(Teacher, in.teacher.data());
  set(Target, in.target.data());
  set(Ce, out.ce.data());
  set(Tvd, out.tvd.data());
  set(Sigma, out.sigma.data());
  set(MaxS, h.maxS.data());
  set(LogSumS, h.logSumS.data());
  set(MaxT, h.maxT.data());
  set(LogSumT, h.logSumT.data());
  set(FastSigns, h.fastSigns.data());
  set(BadTarget, &h.badTarget);
  set(GCe, h.gCe.data());
  set(GTvd, h.gTvd.data());
  set(Grad, out.grad.data());
}

/// Builds kernel `name` for in's shape; *cluster receives its programs per
/// cluster (the grid is BT times that).
TileModule buildKernel(const std::string &name, const ref::CeTvdInputs &in,
                       const std::vector<std::string> &overrides,
                       std::string *used = nullptr,
                       int64_t *cluster = nullptr) {
  const KernelSpec &spec = findKernel(name);
  dsl::Config config = spec.config(in.dtype, spec.ownOverrides(overrides),
                                   {{"BT", in.BT}, {"V", in.V}});
  if (used)
    *used = formatParams(config.params) + " (" + *used + ")";
  if (cluster)
    *cluster = config.params.count("CLUSTER_SIZE")
                   ? config.params.at("CLUSTER_SIZE")
                   : 1;
  return spec.build(config);
}

} // namespace

void throwIfBadTarget(const ref::CeTvdInputs &in, int32_t badTarget) {
  if (badTarget == 0)
    return;
  int64_t row = badTarget - 1;
  throw Error("fused_ce_tvd: target " + std::to_string(in.target[row]) +
              " at row " + std::to_string(row) + " is outside [0, " +
              std::to_string(in.V) + ") and is not ignore_index (" +
              std::to_string(ref::kCeTvdIgnoreIndex) + ")");
}

std::string forwardKernelFor(const std::string &choice) {
  if (choice == "loop")
    return "fused_ce_tvd_fwd";
  if (choice == "cluster")
    return "fused_ce_tvd_fwd_cluster";
  if (choice == "auto")
    return "";
  throw Error("--forward must be auto, loop or cluster (got '" + choice + "')");
}

std::string resolveForwardKernel(const std::string &kernel,
                                 const std::string &arch) {
  if (!kernel.empty())
    return kernel;
  // "sm_90a": the leading digits are the compute capability.
  llvm::StringRef digits = llvm::StringRef(arch);
  unsigned sm = 0;
  bool clusters = digits.consume_front("sm_") &&
                  !digits.take_while(llvm::isDigit).getAsInteger(10, sm) &&
                  sm >= 90;
  return clusters ? "fused_ce_tvd_fwd_cluster" : "fused_ce_tvd_fwd";
}

void defaultUpstream(int64_t BT, std::vector<float> &gCe,
                     std::vector<float> &gTvd) {
  gCe.resize(BT);
  gTvd.resize(BT);
  for (int64_t r = 0; r < BT; ++r) {
    gCe[r] = 1.0f + 0.25f * (r % 3);
    gTvd[r] = 0.5f + 0.125f * (r % 5);
  }
}

CeTvdOutputs runCeTvdCpu(const ref::CeTvdInputs &in,
                         const std::vector<float> &gCe,
                         const std::vector<float> &gTvd,
                         const CeTvdRunOptions &opts) {
  validateInputs(in, gCe, gTvd);
  if (in.BT == 0)
    return emptyBatch(opts, opts.arch, "cpu");
  CeTvdRunOptions options = opts;
  options.forwardKernel = resolveForwardKernel(opts.forwardKernel, opts.arch);
  validateKernels(options);
  CeTvdOutputs out;
  out.device = "cpu";
  out.forwardKernel = options.forwardKernel;
  HostBuffers h;
  hostBuffers(h, in, gCe, gTvd, out);
  Scalars scalars(in);
  auto args = [&](bool backward) {
    return kernelArgs<InterpArg>(
        backward, scalars,
        [&](Buf b) {
          return InterpBuffer{h.data[b], h.dtype[b], h.count[b]};
        },
        [](auto x) { return x; });
  };
  int64_t cluster = 1;
  TileModule fwd = buildKernel(options.forwardKernel, in, options.overrides,
                               nullptr, &cluster);
  optimizeTile(fwd);
  interpret(fwd.operation(), fwd.kernelName(), Grid{in.BT * cluster, 1, 1},
            args(false));
  Grid grid{in.BT, 1, 1};
  throwIfBadTarget(in, h.badTarget);
  TileModule bwd = buildKernel("fused_ce_tvd_bwd", in, options.overrides);
  optimizeTile(bwd);
  interpret(bwd.operation(), bwd.kernelName(), grid, args(true));
  h.fillLse(out);
  return out;
}

namespace {

/// Median time of `iterations` launches of `launch`, in ms (CUDA events).
double timeLaunches(int iterations, const std::function<void()> &launch) {
  std::vector<double> ms;
  for (int i = 0; i < std::max(1, iterations); ++i)
    ms.push_back(cuda::timeMs(launch));
  return medianOf(ms);
}

} // namespace

CeTvdOutputs runCeTvdGpu(const ref::CeTvdInputs &in,
                         const std::vector<float> &gCe,
                         const std::vector<float> &gTvd,
                         const CeTvdRunOptions &opts) {
  validateInputs(in, gCe, gTvd); // bad inputs before a missing GPU
  if (in.BT == 0)
    return emptyBatch(opts, opts.arch, "gpu (empty batch: nothing launched)");
  cuda::Device device = cuda::Device::open();
  CompileOptions copts;
  copts.arch = opts.arch.empty() ? device.archString() : opts.arch;
  CeTvdRunOptions options = opts;
  options.forwardKernel = resolveForwardKernel(opts.forwardKernel, copts.arch);
  validateKernels(options);
  CeTvdOutputs out;
  out.forwardKernel = options.forwardKernel;
  std::vector<std::string> fwdSet = options.overrides, bwdSet = fwdSet;
  out.forwardConfig = out.backwardConfig = fwdSet.empty() ? "default" : "--set";
  if (options.useTuned && options.overrides.empty()) {
    DeviceIdentity id = deviceIdentity(device);
    fwdSet =
        tunedCeTvdOverrides(options.forwardKernel, in, id, &out.forwardConfig);
    bwdSet =
        tunedCeTvdOverrides("fused_ce_tvd_bwd", in, id, &out.backwardConfig);
  }
  // DSL build -> cached compile -> loaded function, timed per kernel: cold
  // with an empty cache, warm from the disk cache in a fresh process.
  LoadedKernels loaded;
  auto jit = [&](const std::string &name, const std::vector<std::string> &set,
                 std::string *config, double *ms) {
    auto t0 = std::chrono::steady_clock::now();
    CompiledKernel k = compileCached(buildKernel(name, in, set, config), copts);
    const cuda::Function &f = loaded.function(k);
    *ms = msSince(t0);
    return std::make_tuple(k.threads, k.clusterSize,
                           static_cast<size_t>(k.dynamicSharedBytes), f);
  };
  auto [fwdThreads, fwdCluster, fwdShared, fwdF] =
      jit(options.forwardKernel, fwdSet, &out.forwardConfig, &out.forwardJitMs);
  auto [bwdThreads, bwdCluster, bwdShared, bwdF] =
      jit("fused_ce_tvd_bwd", bwdSet, &out.backwardConfig, &out.backwardJitMs);

  out.device = device.name();
  HostBuffers h;
  hostBuffers(h, in, gCe, gTvd, out);
  std::vector<cuda::DeviceBuffer> dev;
  for (int b = 0; b < NumBufs; ++b)
    dev.emplace_back(h.bytes(static_cast<Buf>(b)));
  for (Buf b : {Student, Teacher, Target, GCe, GTvd})
    dev[b].copyFromHost(h.data[b], h.bytes(b));
  dev[BadTarget].memset(0);

  Scalars scalars(in);
  std::array<CUdeviceptr, NumBufs> ptrs;
  for (int b = 0; b < NumBufs; ++b)
    ptrs[b] = dev[b].ptr();
  auto fwdArgs = launchArgs(false, scalars, ptrs.data());
  auto bwdArgs = launchArgs(true, scalars, ptrs.data());
  auto launchFwd = [&] {
    cuda::launch(fwdF, {static_cast<unsigned>(in.BT * fwdCluster)},
                 {static_cast<unsigned>(fwdThreads)}, fwdShared, nullptr,
                 fwdArgs);
  };
  auto launchBwd = [&] {
    cuda::launch(bwdF, {static_cast<unsigned>(in.BT * bwdCluster)},
                 {static_cast<unsigned>(bwdThreads)}, bwdShared, nullptr,
                 bwdArgs);
  };
  launchFwd();
  cuda::synchronize();
  dev[BadTarget].copyToHost(&h.badTarget, sizeof(int32_t));
  throwIfBadTarget(in, h.badTarget);
  launchBwd();
  cuda::synchronize();
  out.forwardMs = timeLaunches(options.iterations, launchFwd);
  out.backwardMs = timeLaunches(options.iterations, launchBwd);
  // Host time of launching a loaded kernel (arguments prepared), averaged
  // over back-to-back asynchronous launches.
  const int kLaunches = 100;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kLaunches; ++i)
    launchBwd();
  out.launchHostUs = std::chrono::duration<double, std::micro>(
                         std::chrono::steady_clock::now() - t0)
                         .count() /
                     kLaunches;
  cuda::synchronize();
  for (Buf b : {Ce, Tvd, Sigma, MaxS, LogSumS, MaxT, LogSumT, Grad})
    dev[b].copyToHost(h.data[b], h.bytes(b));
  h.fillLse(out);
  return out;
}

std::vector<int64_t> sampleCheckRows(int64_t BT, int64_t count) {
  if (count <= 0 || count >= BT)
    return {};
  std::vector<int64_t> rows;
  for (int64_t r = 0; r < BT; ++r)
    if (r < 7 || r >= BT - 7 || r % std::max<int64_t>(1, BT / count) == 0)
      rows.push_back(r);
  return rows;
}

CeTvdCheck checkCeTvd(const ref::CeTvdInputs &in, const std::vector<float> &gCe,
                      const std::vector<float> &gTvd, const CeTvdOutputs &out,
                      std::vector<int64_t> rows) {
  if (rows.empty())
    for (int64_t r = 0; r < in.BT; ++r)
      rows.push_back(r);
  // Gather the sampled rows so the (slow) fp64 reference only sees those.
  size_t rowBytes = in.V * dtypeSize(in.dtype);
  int64_t n = rows.size();
  std::vector<uint8_t> s(n * rowBytes), t(n * rowBytes);
  std::vector<int64_t> y(n);
  std::vector<double> gc(n), gt(n);
  for (int64_t i = 0; i < n; ++i) {
    std::copy_n(in.student.begin() + rows[i] * rowBytes, rowBytes,
                s.begin() + i * rowBytes);
    std::copy_n(in.teacher.begin() + rows[i] * rowBytes, rowBytes,
                t.begin() + i * rowBytes);
    y[i] = in.target[rows[i]];
    gc[i] = gCe[rows[i]];
    gt[i] = gTvd[rows[i]];
  }
  ref::CeTvdForward f =
      ref::ceTvdForward(s.data(), t.data(), in.dtype, y.data(), n, in.V, in.V);
  std::vector<double> g(n * in.V);
  ref::ceTvdBackward(s.data(), t.data(), in.dtype, y.data(), n, in.V, in.V,
                     gc.data(), gt.data(), g.data());

  // Tolerances: fp32 accumulation over V terms for the per-row values; the
  // gradient is rounded to the input dtype on store.
  double rtol = in.dtype == DType::BF16  ? 1.0 / 128
                : in.dtype == DType::F16 ? 1.0 / 1024
                                         : 1e-5;
  const double atol = 1e-6;
  // p and q are within a few fp32 ulps of exact: closer than this is a tie.
  const double kTieRelTol = 1e-5;
  CeTvdCheck c;
  c.rowsChecked = n;
  struct {
    int64_t row = -1, v = -1;
    double got = 0, want = 0;
  } worst;
  for (int64_t i = 0; i < n; ++i) {
    int64_t r = rows[i];
    auto upd = [](double &m, double got, double want) {
      double err = std::fabs(got - want);
      m = std::isnan(err) ? INFINITY : std::max(m, err); // NaN fails
    };
    upd(c.ceErr, out.ce[r], f.ce[i]);
    upd(c.tvdErr, out.tvd[r], f.tvd[i]);
    bool hasState = !out.lseS.empty(); // the reduced API keeps none
    if (hasState) {
      upd(c.lseErr, out.lseS[r], f.lseS[i]);
      upd(c.lseErr, out.lseT[r], f.lseT[i]);
    }
    // Near ties of p and q: sign(p - q) is discontinuous there, and fp32 may
    // pick another sign than fp64 where they agree to ~1e-7. Either sign is
    // a valid subgradient; such a flip moves sigma by 2 p_v and, through
    // sigma, every gradient entry of the row by g_tvd p_v' |d sigma| / 2.
    bool ignored = y[i] == ref::kCeTvdIgnoreIndex;
    auto prob = [&](const std::vector<uint8_t> &x, double lse, int64_t v) {
      double z = loadAsDouble(x.data(), in.dtype, i * in.V + v);
      return std::isinf(lse) ? 0.0 : std::exp(z - lse);
    };
    std::vector<bool> tie(in.V, false);
    double sigmaSlack = 0;
    for (int64_t v = 0; v < in.V && !ignored; ++v) {
      double pv = prob(s, f.lseS[i], v), qv = prob(t, f.lseT[i], v);
      if (std::fabs(pv - qv) <= kTieRelTol * std::max(pv, qv)) {
        tie[v] = true;
        sigmaSlack += 2 * pv;
      }
    }
    double sigmaExcess =
        hasState ? std::fabs(out.sigma[r] - f.sigma[i]) - sigmaSlack : 0.0;
    c.sigmaErr = std::isnan(sigmaExcess)
                     ? INFINITY
                     : std::max(c.sigmaErr, std::max(0.0, sigmaExcess));
    for (int64_t v = 0; v < in.V; ++v) {
      double got = loadAsDouble(out.grad.data(), in.dtype, r * in.V + v);
      double want = g[i * in.V + v];
      double pv = ignored ? 0.0 : prob(s, f.lseS[i], v);
      double tieSlack =
          0.5 * std::fabs(gt[i]) * pv * (sigmaSlack + (tie[v] ? 2.0 : 0.0));
      double err =
          std::fabs(got - want) / (atol + rtol * std::fabs(want) + tieSlack);
      if (!(err <= c.gradErr)) { // also catches NaN
        c.gradErr = std::isnan(err) ? INFINITY : err;
        worst = {r, v, got, want};
      }
    }
  }
  // fp32 sums over up to ~2e5 terms in a different order than the
  // reference: ce and lse are O(10), tvd and sigma O(1).
  const double lseTol = 1e-4, probTol = 2e-5;
  c.passed = c.ceErr <= lseTol && c.lseErr <= lseTol && c.tvdErr <= probTol &&
             c.sigmaErr <= probTol && c.gradErr <= 1.0;
  std::ostringstream os;
  os << "checked " << n << " rows against the fp64 reference\n"
     << "  max |ce - ref|    = " << c.ceErr << " (tol " << lseTol << ")\n";
  if (!out.lseS.empty()) // the reduced API keeps no lse or sigma
    os << "  max |lse - ref|   = " << c.lseErr << " (tol " << lseTol << ")\n";
  os << "  max |tvd - ref|   = " << c.tvdErr << " (tol " << probTol << ")\n";
  if (!out.lseS.empty())
    os << "  max |sigma - ref| = " << c.sigmaErr << " (tol " << probTol
       << ", beyond the mass of near ties |p - q| <= " << kTieRelTol
       << " max(p, q))\n";
  os << "  max grad error    = " << c.gradErr << " x (atol " << atol
     << " + rtol " << rtol << " |ref|) at row " << worst.row << ", v "
     << worst.v << ": " << worst.got << " vs " << worst.want << "\n"
     << "  " << (c.passed ? "PASS" : "FAIL");
  c.summary = os.str();
  return c;
}

} // namespace tilejit
