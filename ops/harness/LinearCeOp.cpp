//===- LinearCeOp.cpp - chunked fused linear CE on the CPU ----------------===//
#include "ops/harness/LinearCeOp.h"
#include "ops/harness/LinearCeRun.h"

#include "ops/LinearCeParts.h"
#include "tilejit/Compiler.h"
#include "tilejit/Error.h"
#include "tilejit/HostFloat.h"
#include "tilejit/Interpreter.h"
#include "tilejit/KernelSpec.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Parallel.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <sstream>

namespace tilejit {
namespace {

using Reduction = ref::LinearCeParams::Reduction;

} // namespace

LinearCeOptions::GemmBackend parseGemmBackend(const std::string &name) {
  using Backend = LinearCeOptions::GemmBackend;
  for (Backend b : {Backend::CublasLt, Backend::Dsl, Backend::Auto})
    if (name == gemmBackendName(b))
      return b;
  throw Error("--gemm must be cublaslt, tilejit or auto (got '" + name + "')");
}

const char *gemmBackendName(LinearCeOptions::GemmBackend backend) {
  switch (backend) {
  case LinearCeOptions::GemmBackend::CublasLt:
    return "cublaslt";
  case LinearCeOptions::GemmBackend::Dsl:
    return "tilejit";
  case LinearCeOptions::GemmBackend::Auto:
    return "auto";
  }
  return "?";
}

std::string describeGemmPaths(const LinearCeOutputs &out) {
  std::string s;
  llvm::raw_string_ostream os(s);
  if (out.gemmBackend != LinearCeOptions::GemmBackend::Auto) {
    os << "    GEMMs: all by " << gemmBackendName(out.gemmBackend)
       << (out.note.empty() ? "" : " (" + out.note + ")") << "\n";
    return s;
  }
  int problems = out.gemmPathProblems;
  if (problems == 0) {
    os << "    GEMMs: all by cuBLASLt (lce_gemm takes bf16/f16 on sm_80+)\n";
    return s;
  }
  os << "    GEMM paths (auto): " << problems << " problems, "
     << out.gemmPathsOnDsl << " on lce_gemm, " << problems - out.gemmPathsOnDsl
     << " on cuBLASLt; " << out.gemmPathsFromStore
     << " from the tuning database\n";
  auto tflops = [](double flop, double ms) { return flop / ms / 1e9; };
  for (const auto &t : out.gemmPathTimings)
    if (t.flop > 0)
      os << llvm::format("      timed now: %s: %s %.3f ms (%.0f TFLOP/s), "
                         "%s %.3f ms (%.0f TFLOP/s, %.2f of %s)\n",
                         t.problem.c_str(), t.cublasLtPath.c_str(),
                         t.cublasLtMs, tflops(t.flop, t.cublasLtMs),
                         t.dslPath.c_str(), t.lceGemmMs,
                         tflops(t.flop, t.lceGemmMs),
                         t.cublasLtMs / t.lceGemmMs, t.cublasLtPath.c_str());
    else
      os << llvm::format("      timed now: %s: %s %.3f ms, %s %.3f ms (%.2f "
                         "of the first)\n",
                         t.problem.c_str(), t.cublasLtPath.c_str(),
                         t.cublasLtMs, t.dslPath.c_str(), t.lceGemmMs,
                         t.cublasLtMs / t.lceGemmMs);
  return s;
}

ops::LinearCeArgs linearCeArgs(const ref::LinearCeInputs &in,
                               const LinearCeOptions &o) {
  ops::LinearCeArgs a;
  a.dtype = in.dtype;
  a.N = in.N;
  a.d = in.d;
  a.V = in.V;
  const ref::LinearCeParams &p = o.params;
  a.ignoreIndex = p.ignoreIndex;
  a.labelSmoothing = p.labelSmoothing;
  a.zLoss = p.zLoss;
  a.softcap = p.softcap;
  a.reduction = p.reduction == Reduction::None   ? ops::Reduction::None
                : p.reduction == Reduction::Mean ? ops::Reduction::Mean
                                                 : ops::Reduction::Sum;
  a.chunkRows = o.chunkRows;
  a.memoryBudgetBytes = o.memoryBudgetBytes;
  a.gemmWorkspaceBytes = o.gemmWorkspaceBytes;
  a.narrowLogits = o.narrowLogits;
  a.bf16GradAccumulation = o.bf16GradAccumulation;
  a.gemmBackend = o.gemmBackend;
  a.set = o.overrides;
  // Without the data only whether they are there matters (the features
  // compiled in); the runners point them at the data.
  static const float present = 0;
  a.bias = in.bias.empty() ? nullptr : &present;
  a.classWeight = in.classWeight.empty() ? nullptr : &present;
  return a;
}

void validateLinearCe(const ref::LinearCeInputs &in, const LinearCeOptions &o) {
  auto fail = [](const std::string &why) {
    throw Error("fused_linear_ce: " + why);
  };
  if (in.N < 0 || in.d <= 0 || in.V <= 0)
    fail("N must be >= 0, d and V positive (got N = " + std::to_string(in.N) +
         ", d = " + std::to_string(in.d) + ", V = " + std::to_string(in.V) +
         ")");
  size_t es = dtypeSize(in.dtype);
  if (in.h.size() != size_t(in.N * in.d) * es ||
      in.W.size() != size_t(in.V * in.d) * es ||
      (!in.bias.empty() && in.bias.size() != size_t(in.V) * es) ||
      int64_t(in.target.size()) != in.N)
    fail("h must be (N, d), W (V, d), bias (V) or empty, target (N)");
  if (!in.classWeight.empty() && int64_t(in.classWeight.size()) != in.V)
    fail("class weights must have V = " + std::to_string(in.V) + " entries");
  bool none = o.params.reduction == Reduction::None;
  if ((!none && !in.gradOutput.empty()) ||
      (none && int64_t(in.gradOutput.size()) != in.N))
    fail("reduction none takes a per-row upstream gradient (N entries); mean "
         "and sum take none");
  if (o.gemmCandidates < 1)
    fail("gemm candidates must be >= 1 (got " +
         std::to_string(o.gemmCandidates) + ")");
  // The op's own checks, with stand-ins for the pointers.
  ops::LinearCeArgs a = linearCeArgs(in, o);
  static float stand;
  a.input = a.weight = a.gradInput = a.gradWeight = &stand;
  a.gradBias = a.bias ? &stand : nullptr;
  a.target = reinterpret_cast<const int64_t *>(&stand);
  a.loss = a.rowLoss = &stand;
  a.gradOutput = none ? &stand : nullptr;
  ops::validateLinearCe(a);
}

void throwIfBadLinearCeTarget(const ref::LinearCeInputs &in,
                              const LinearCeOptions &o, int32_t bad) {
  if (bad == 0)
    return;
  int64_t r = bad - 1;
  throw Error("fused_linear_ce: target " + std::to_string(in.target[r]) +
              " at row " + std::to_string(r) + " is outside [0, " +
              std::to_string(in.V) + ") and is not ignore_index (" +
              std::to_string(o.params.ignoreIndex) + ")");
}

std::vector<int64_t> linearCeChunkCandidates(const ref::LinearCeInputs &in,
                                             const LinearCeOptions &options) {
  return ops::lce::chunkCandidates(linearCeArgs(in, options));
}

LinearCeOutputs emptyLinearCe(const ref::LinearCeInputs &in,
                              const LinearCeOptions &options,
                              const std::string &device) {
  LinearCeOutputs out;
  out.device = device;
  out.dW.assign(in.V * in.d, 0.f);
  if (!in.bias.empty())
    out.db.assign(in.V, 0.f);
  out.gemmBackend = options.gemmBackend;
  return out;
}

int64_t linearCeChunkRows(const ref::LinearCeInputs &in,
                          const LinearCeOptions &o) {
  return ops::linearCeChunkRows(linearCeArgs(in, o));
}

ref::LinearCeInputs makeLinearCeInputs(int64_t N, int64_t d, int64_t V,
                                       DType dtype, bool bias, bool weights,
                                       uint64_t seed) {
  if (N < 0 || d <= 0 || V <= 0)
    throw Error("fused_linear_ce: N must be >= 0, d and V positive (got N = " +
                std::to_string(N) + ", d = " + std::to_string(d) +
                ", V = " + std::to_string(V) + ")");
  // Guard the element counts below against wrapping around.
  int64_t elements;
  if (__builtin_mul_overflow(std::max(N, V), d, &elements) ||
      __builtin_mul_overflow(elements, int64_t(8), &elements))
    throw Error("fused_linear_ce: N = " + std::to_string(N) +
                ", d = " + std::to_string(d) + ", V = " + std::to_string(V) +
                " make too many elements");
  ref::LinearCeInputs in;
  in.N = N;
  in.d = d;
  in.V = V;
  in.dtype = dtype;
  std::mt19937_64 rng(seed);
  // Blocks of 2^20 values, each from its own generator, filled on all
  // cores (a 262144 x 4096 W is a billion values); same values every run.
  constexpr int64_t kBlock = int64_t(1) << 20;
  auto fill = [&](std::vector<uint8_t> &raw, int64_t n, float sd) {
    raw.resize(n * dtypeSize(dtype));
    uint64_t salt = rng();
    llvm::parallelFor(0, (n + kBlock - 1) / kBlock, [&](size_t b) {
      int64_t block = int64_t(b);
      std::mt19937_64 blockRng(salt + block);
      std::normal_distribution<float> dist(0.f, sd);
      for (int64_t i = block * kBlock; i < std::min(n, (block + 1) * kBlock);
           ++i)
        storeFromDouble(raw.data(), dtype, i, dist(blockRng));
    });
  };
  fill(in.h, N * d, 1.f);
  fill(in.W, V * d, 1.f / std::sqrt(float(d)));
  if (bias)
    fill(in.bias, V, 0.1f);
  if (weights) {
    std::uniform_real_distribution<float> w(0.5f, 1.5f);
    for (int64_t v = 0; v < V; ++v)
      in.classWeight.push_back(w(rng));
  }
  std::uniform_int_distribution<int64_t> token(0, V - 1);
  for (int64_t r = 0; r < N; ++r)
    in.target.push_back(r % 5 == 4 ? ref::LinearCeParams().ignoreIndex
                                   : token(rng));
  return in;
}

LinearCeHostRun::LinearCeHostRun(const ref::LinearCeInputs &in,
                                 const LinearCeOptions &o,
                                 LinearCeOutputs &out)
    : acc(o.bf16GradAccumulation ? DType::BF16 : DType::F32),
      args(linearCeArgs(in, o)) {
  const int64_t N = in.N, d = in.d, V = in.V;
  if (!in.bias.empty())
    bias = loadAsFloats(in.bias.data(), in.dtype, V);
  dh.resize(N * d * dtypeSize(in.dtype));
  dW.resize(V * d * dtypeSize(acc));
  db.resize(bias.size() * dtypeSize(acc));
  out.chunkRows = linearCeChunkRows(in, o);
  out.chunks = N ? (N + out.chunkRows - 1) / out.chunkRows : 0;
  for (auto *v : {&out.rowLoss, &out.rowZLoss, &out.lse})
    v->assign(N, 0.f);
  ops::LinearCeArgs &a = args;
  a.input = in.h.data();
  a.weight = in.W.data();
  a.bias = bias.empty() ? nullptr : bias.data();
  a.target = in.target.data();
  a.classWeight = in.classWeight.empty() ? nullptr : in.classWeight.data();
  a.gradOutput = in.gradOutput.empty() ? nullptr : in.gradOutput.data();
  a.loss = loss;
  a.rowLoss = out.rowLoss.data();
  a.rowZLoss = out.rowZLoss.data();
  a.lse = out.lse.data();
  a.gradInput = dh.data();
  a.gradWeight = dW.data();
  a.gradBias = bias.empty() ? nullptr : db.data();
  a.badTarget = &bad;
}

void LinearCeHostRun::forEachBuffer(
    const std::function<const void *(const void *, size_t, bool)> &fn) {
  ops::LinearCeArgs &a = args;
  size_t es = dtypeSize(a.dtype), n = size_t(a.N), v = size_t(a.V);
  auto visit = [&](auto &p, size_t bytes, bool isInput) {
    using Ptr = std::remove_reference_t<decltype(p)>;
    if (p)
      p = static_cast<Ptr>(const_cast<void *>(fn(p, bytes, isInput)));
  };
  visit(a.input, n * a.d * es, true);
  visit(a.weight, v * a.d * es, true);
  visit(a.bias, v * 4, true);
  visit(a.target, n * 8, true);
  visit(a.classWeight, v * 4, true);
  visit(a.gradOutput, n * 4, true);
  visit(a.loss, 8, false);
  visit(a.rowLoss, n * 4, false);
  visit(a.rowZLoss, n * 4, false);
  visit(a.lse, n * 4, false);
  visit(a.gradInput, dh.size(), false);
  visit(a.gradWeight, dW.size(), false);
  visit(a.gradBias, db.size(), false);
  visit(a.badTarget, 4, false);
}

void LinearCeHostRun::finish(const ref::LinearCeInputs &in,
                             const LinearCeOptions &o, LinearCeOutputs &out) {
  throwIfBadLinearCeTarget(in, o, bad);
  out.loss = loss[0];
  out.zLoss = loss[1];
  out.dh = loadAsFloats(dh.data(), in.dtype, in.N * in.d);
  out.dW = loadAsFloats(dW.data(), acc, in.V * in.d);
  out.db = loadAsFloats(db.data(), acc, bias.size());
}

LinearCeOutputs runLinearCeCpu(const ref::LinearCeInputs &in,
                               const LinearCeOptions &options) {
  validateLinearCe(in, options);
  if (in.N == 0)
    return emptyLinearCe(in, options, "cpu");
  LinearCeOutputs out;
  out.device = "cpu";
  LinearCeHostRun run(in, options, out);
  std::vector<uint8_t> ws(
      ops::linearCeWorkspaceBytes(run.args, ops::Device::Cpu));
  ops::linearCe(run.args, ws.data(), ws.size(), ops::Device::Cpu);
  run.finish(in, options, out);
  return out;
}

LinearCeCheck checkLinearCe(const ref::LinearCeInputs &in,
                            const LinearCeOptions &options,
                            const LinearCeOutputs &out, double lossTol,
                            double gradTol) {
  ref::LinearCeResult want = ref::linearCeReference(in, options.params);
  LinearCeCheck c;
  auto rel = [](const std::vector<float> &got, const std::vector<double> &ref) {
    double num = 0, den = 0;
    for (size_t i = 0; i < ref.size(); ++i) {
      double e = got[i] - ref[i];
      num += e * e;
      den += ref[i] * ref[i];
    }
    double r = std::sqrt(num) / std::max(std::sqrt(den), 1e-30);
    return std::isnan(r) ? INFINITY : (den == 0 && num == 0 ? 0.0 : r);
  };
  if (options.params.reduction == Reduction::None) {
    for (int64_t r = 0; r < in.N; ++r) {
      double e = std::fabs(out.rowLoss[r] - want.rowLoss[r]) /
                 std::max(1e-6, std::fabs(want.rowLoss[r]));
      c.lossErr = std::isnan(e) ? INFINITY : std::max(c.lossErr, e);
    }
  } else {
    double e =
        std::fabs(out.loss - want.loss) / std::max(1e-6, std::fabs(want.loss));
    c.lossErr = std::isnan(e) ? INFINITY : e;
  }
  c.dhErr = rel(out.dh, want.dh);
  c.dWErr = rel(out.dW, want.dW);
  c.dbErr = out.db.empty() ? 0 : rel(out.db, want.db);
  // dh is stored in the input dtype (as PyTorch returns it): its rounding,
  // at most 2^-8 (bf16) or 2^-11 (f16) relative, comes on top.
  double dhTol = gradTol + (in.dtype == DType::BF16  ? 0x1p-8
                            : in.dtype == DType::F16 ? 0x1p-11
                                                     : 0.0);
  c.passed = c.lossErr <= lossTol && c.dhErr <= dhTol && c.dWErr <= gradTol &&
             c.dbErr <= gradTol;
  std::ostringstream os;
  os << "fused_linear_ce against the fp64 reference (N " << in.N << ", d "
     << in.d << ", V " << in.V << ", " << out.chunks << " chunks)\n"
     << "  loss relative error " << c.lossErr << " (tol " << lossTol << ")\n"
     << "  dh, dW, db relative Frobenius errors " << c.dhErr << ", " << c.dWErr
     << ", " << c.dbErr << " (tol " << dhTol << " for dh, " << gradTol
     << ")\n  "
     << (c.passed ? "PASS" : "FAIL");
  c.summary = os.str();
  return c;
}

LinearCeCheck checkLinearCeRows(const ref::LinearCeInputs &in,
                                const LinearCeOptions &options,
                                const LinearCeOutputs &out,
                                const std::vector<int64_t> &rows,
                                double lossTol, double gradTol) {
  const ref::LinearCeParams &p = options.params;
  int64_t nValid = 0;
  double weightSum = 0;
  for (int64_t y : in.target)
    if (y != p.ignoreIndex && y >= 0 && y < in.V) {
      ++nValid;
      weightSum += in.classWeight.empty() ? 1.0 : in.classWeight[y];
    }
  // The upstream factor of a row's CE and z-loss terms; the per-row
  // reference takes one for both.
  double g = 1;
  if (p.reduction == Reduction::Mean) {
    if (!in.classWeight.empty() && p.zLoss > 0)
      throw Error("fused_linear_ce: a sampled check takes reduction sum, or "
                  "mean without class weights or without z-loss");
    g = !in.classWeight.empty() ? (weightSum > 0 ? 1 / weightSum : 0)
                                : (nValid > 0 ? 1.0 / nValid : 0);
  } else if (p.reduction == Reduction::None) {
    throw Error("fused_linear_ce: a sampled check takes reduction sum or mean");
  }
  // The sampled rows as a batch of their own, each with upstream g.
  ref::LinearCeInputs sub = in;
  size_t rowBytes = in.d * dtypeSize(in.dtype);
  sub.N = int64_t(rows.size());
  sub.h.assign(sub.N * rowBytes, 0);
  sub.target.clear();
  for (int64_t i = 0; i < sub.N; ++i) {
    std::copy_n(in.h.begin() + rows[i] * rowBytes, rowBytes,
                sub.h.begin() + i * rowBytes);
    sub.target.push_back(in.target[rows[i]]);
  }
  sub.gradOutput.assign(sub.N, float(g));
  ref::LinearCeParams none = p;
  none.reduction = Reduction::None;
  ref::LinearCeResult want = ref::linearCeReference(sub, none);
  LinearCeCheck c;
  double dhNum = 0, dhDen = 0;
  for (int64_t i = 0; i < sub.N; ++i) {
    int64_t r = rows[i];
    double e = std::fabs(out.rowLoss[r] - want.rowLoss[i]) /
               std::max(1e-6, std::fabs(want.rowLoss[i]));
    c.lossErr = std::isnan(e) ? INFINITY : std::max(c.lossErr, e);
    for (int64_t k = 0; k < in.d; ++k) {
      double d = out.dh[r * in.d + k] - want.dh[i * in.d + k];
      dhNum += d * d;
      dhDen += want.dh[i * in.d + k] * want.dh[i * in.d + k];
    }
  }
  c.dhErr = dhDen > 0 ? std::sqrt(dhNum / dhDen) : std::sqrt(dhNum);
  if (std::isnan(c.dhErr))
    c.dhErr = INFINITY;
  // The reduced loss against the fp64 sum of the op's per-row losses (the
  // rows above are checked against the reference).
  double ceSum = 0, zSum = 0;
  for (int64_t r = 0; r < in.N; ++r) {
    ceSum += out.rowLoss[r] - out.rowZLoss[r];
    zSum += out.rowZLoss[r];
  }
  double gz = p.reduction == Reduction::Mean ? (nValid ? 1.0 / nValid : 0) : 1;
  double gce = p.reduction == Reduction::Mean ? g : 1;
  double total = gce * ceSum + gz * zSum;
  double sumErr = std::fabs(out.loss - total) / std::max(1e-6, std::fabs(total));
  double dhTol = gradTol + (in.dtype == DType::BF16  ? 0x1p-8
                            : in.dtype == DType::F16 ? 0x1p-11
                                                     : 0.0);
  c.passed = c.lossErr <= lossTol && c.dhErr <= dhTol && sumErr <= 1e-5;
  std::ostringstream os;
  os << "fused_linear_ce on " << sub.N << " sampled rows of " << in.N
     << " against the fp64 reference (dW and db need every row: not "
        "checked)\n"
     << "  max per-row loss relative error " << c.lossErr << " (tol "
     << lossTol << ")\n"
     << "  dh relative Frobenius error " << c.dhErr << " (tol " << dhTol
     << ")\n"
     << "  loss " << out.loss << " vs " << total
     << " from the per-row losses: relative error " << sumErr
     << " (tol 1e-05)\n  " << (c.passed ? "PASS" : "FAIL");
  c.summary = os.str();
  return c;
}

} // namespace tilejit
