//===- FusedCeTvdOp.cpp - host side of the CE+TVD kernels -----------------===//
#include "ops/harness/FusedCeTvdOp.h"

#include "kernels_spec/FusedCeTvdArgs.h"
#include "kernels_spec/reference/CeTvdReference.h"
#include "runtime/CudaDriver.h"
#include "tilejit/Error.h"
#include "tilejit/HostFloat.h"
#include "tilejit/KernelSpec.h"
#include "tilejit/Timing.h"
#include "tilejit/ops/FusedCeTvd.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <sstream>

namespace tilejit {
namespace {

using namespace cetvd;

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

namespace {

/// The op's arguments for `in` (contiguous rows) and the run's options.
ops::CeTvdArgs opArgs(const ref::CeTvdInputs &in,
                      const CeTvdRunOptions &options) {
  ops::CeTvdArgs a;
  a.dtype = in.dtype;
  a.BT = in.BT;
  a.V = in.V;
  a.student = in.student.data();
  a.teacher = in.teacher.data();
  a.target = in.target.data();
  a.ignoreIndex = ref::kCeTvdIgnoreIndex;
  a.forwardKernel = options.forwardKernel;
  a.set = options.overrides;
  a.useTuned = options.useTuned;
  return a;
}

/// Reads the forward's state (ops::ceTvdStateBytes): sigma, lse of both,
/// and the bad-target flag.
int32_t readState(const std::vector<uint8_t> &state, int64_t BT,
                  CeTvdOutputs &out) {
  size_t part = (size_t(BT) * sizeof(float) + 15) / 16 * 16;
  auto row = [&](int i) {
    const float *p = reinterpret_cast<const float *>(state.data() + i * part);
    return std::vector<float>(p, p + BT);
  };
  out.sigma = row(0);
  lseFromParts(row(1), row(2), out.lseS);
  lseFromParts(row(3), row(4), out.lseT);
  int32_t bad;
  std::memcpy(&bad, state.data() + 6 * part, sizeof(bad));
  return bad;
}

} // namespace

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
  out.ce.assign(in.BT, 0.f);
  out.tvd.assign(in.BT, 0.f);
  out.grad.assign(in.BT * in.V * dtypeSize(in.dtype), 0);
  std::vector<uint8_t> state(ops::ceTvdStateBytes(in.BT));
  ops::CeTvdArgs a = opArgs(in, options);
  ops::ceTvdForward(a, out.ce.data(), out.tvd.data(), state.data(),
                    ops::Device::Cpu);
  throwIfBadTarget(in, readState(state, in.BT, out));
  ops::ceTvdBackward(a, state.data(), gCe.data(), gTvd.data(), out.grad.data(),
                     0, ops::Device::Cpu);
  return out;
}

namespace {

/// Median time of `iterations` runs of `launch` on `stream`, in ms.
double timeLaunches(int iterations, const std::function<void()> &launch,
                    CUstream stream) {
  std::vector<double> ms;
  for (int i = 0; i < std::max(1, iterations); ++i)
    ms.push_back(cuda::timeMs(launch, stream));
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
  CeTvdRunOptions options = opts;
  std::string arch = opts.arch.empty() ? device.archString() : opts.arch;
  options.forwardKernel = resolveForwardKernel(opts.forwardKernel, arch);
  validateKernels(options);
  CeTvdOutputs out;
  out.device = device.name();
  out.forwardKernel = options.forwardKernel;

  auto upload = [](const void *p, size_t bytes) {
    cuda::DeviceBuffer b(bytes);
    b.copyFromHost(p, bytes);
    return b;
  };
  size_t logits = in.student.size(), rows = in.BT * sizeof(float);
  cuda::DeviceBuffer s = upload(in.student.data(), logits),
                     t = upload(in.teacher.data(), logits),
                     y = upload(in.target.data(), in.BT * sizeof(int64_t)),
                     gc = upload(gCe.data(), rows),
                     gt = upload(gTvd.data(), rows);
  cuda::DeviceBuffer ce(rows), tvd(rows), grad(logits),
      state(ops::ceTvdStateBytes(in.BT));
  ops::CeTvdArgs a = opArgs(in, options);
  a.student = reinterpret_cast<void *>(s.ptr());
  a.teacher = reinterpret_cast<void *>(t.ptr());
  a.target = reinterpret_cast<const int64_t *>(y.ptr());
  ops::CeTvdPrepared p = ops::prepareCeTvd(a);
  out.forwardConfig = p.forwardConfig;
  out.backwardConfig = p.backwardConfig;
  out.forwardJitMs = p.forwardJitMs;
  out.backwardJitMs = p.backwardJitMs;

  cuda::Stream stream;
  CUstream st = stream.get();
  auto f32 = [](const cuda::DeviceBuffer &b) {
    return reinterpret_cast<float *>(b.ptr());
  };
  void *statePtr = reinterpret_cast<void *>(state.ptr());
  auto forward = [&] {
    ops::ceTvdForward(a, f32(ce), f32(tvd), statePtr, ops::Device::Gpu, st);
  };
  auto backward = [&] {
    ops::ceTvdBackward(a, statePtr, f32(gc), f32(gt),
                       reinterpret_cast<void *>(grad.ptr()), 0,
                       ops::Device::Gpu, st);
  };
  forward();
  stream.synchronize();
  std::vector<uint8_t> hostState(state.size());
  state.copyToHost(hostState.data(), hostState.size());
  throwIfBadTarget(in, readState(hostState, in.BT, out));
  backward();
  stream.synchronize();
  out.forwardMs = timeLaunches(options.iterations, forward, st);
  out.backwardMs = timeLaunches(options.iterations, backward, st);
  // Host time of one call of the loaded op (checks and launch), averaged
  // over back-to-back asynchronous calls.
  const int kCalls = 100;
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kCalls; ++i)
    backward();
  out.launchHostUs = std::chrono::duration<double, std::micro>(
                         std::chrono::steady_clock::now() - t0)
                         .count() /
                     kCalls;
  stream.synchronize();
  out.ce.resize(in.BT);
  out.tvd.resize(in.BT);
  out.grad.resize(logits);
  ce.copyToHost(out.ce.data(), rows);
  tvd.copyToHost(out.tvd.data(), rows);
  grad.copyToHost(out.grad.data(), logits);
  state.copyToHost(hostState.data(), hostState.size());
  readState(hostState, in.BT, out);
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
