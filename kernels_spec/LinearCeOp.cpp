//===- LinearCeOp.cpp - chunked fused linear CE on the CPU ----------------===//
#include "kernels_spec/LinearCeOp.h"

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

/// Bytes one row of a chunk takes: f32 logits plus a dz of the input dtype,
/// or one buffer for both.
int64_t chunkRowBytes(const ref::LinearCeInputs &in, const LinearCeOptions &o) {
  int64_t es = dtypeSize(in.dtype);
  return in.V * (in.dtype == DType::F32 ? 4 : o.narrowLogits ? es : 4 + es);
}

/// The most rows whose chunk buffers fit in the budget (at least one); the
/// GPU's GEMM workspace comes out of the budget first.
int64_t mostChunkRows(const ref::LinearCeInputs &in, const LinearCeOptions &o) {
  if (o.chunkRows > 0)
    return std::min(in.N, o.chunkRows);
  if (o.memoryBudgetBytes == 0)
    return in.N;
  int64_t chunkBytes = o.memoryBudgetBytes - o.gemmWorkspaceBytes;
  return std::clamp<int64_t>(chunkBytes / chunkRowBytes(in, o), 1, in.N);
}

/// N split into `chunks` equal chunks, rounded up to a multiple of 128 rows
/// (which GEMM tiles divide) when that still fits in `most`.
int64_t equalChunkRows(int64_t N, int64_t chunks, int64_t most) {
  int64_t rows = (N + chunks - 1) / chunks;
  int64_t rounded = (rows + 127) / 128 * 128;
  return rounded <= most ? rounded : rows;
}

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
       << (out.gemmNote.empty() ? "" : " (" + out.gemmNote + ")") << "\n";
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
  for (const auto &t : out.gemmPathTimings)
    os << llvm::format("      timed now: %s: cuBLASLt %.3f ms, lce_gemm "
                       "%.3f ms\n",
                       t.problem.c_str(), t.cublasLtMs, t.lceGemmMs);
  return s;
}

void validateLinearCe(const ref::LinearCeInputs &in, const LinearCeOptions &o) {
  auto fail = [](const std::string &why) {
    throw Error("fused_linear_ce: " + why);
  };
  if (in.N < 0 || in.d <= 0 || in.V <= 0)
    fail("N must be >= 0, d and V positive (got N = " + std::to_string(in.N) +
         ", d = " + std::to_string(in.d) + ", V = " + std::to_string(in.V) +
         ")");
  if (in.N > std::numeric_limits<int32_t>::max() ||
      in.V > std::numeric_limits<int32_t>::max())
    fail("N and V must be below 2^31");
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
  for (int64_t r = 0; r < in.N; ++r)
    if (in.target[r] != o.params.ignoreIndex &&
        (in.target[r] < 0 || in.target[r] >= in.V))
      fail("target " + std::to_string(in.target[r]) + " at row " +
           std::to_string(r) + " is outside [0, " + std::to_string(in.V) +
           ") and is not ignore_index (" +
           std::to_string(o.params.ignoreIndex) + ")");
  if (!(o.params.labelSmoothing >= 0 && o.params.labelSmoothing <= 1))
    fail("label smoothing must be in [0, 1]");
  if (!(o.params.zLoss >= 0))
    fail("z-loss must be >= 0");
  checkF32Scalar("fused_linear_ce: label smoothing", o.params.labelSmoothing);
  checkF32Scalar("fused_linear_ce: z-loss", o.params.zLoss);
  checkF32Scalar("fused_linear_ce: softcap", o.params.softcap);
  for (const std::string &s : o.overrides)
    if (s.find('=') == std::string::npos)
      fail("--set takes NAME=VALUE (got '" + s + "')");
    else if (llvm::is_contained({"TRANS_A", "TRANS_B", "C_F32"},
                                s.substr(0, s.find('='))))
      fail("'" + s +
           "': lce_gemm's TRANS_A, TRANS_B and C_F32 follow from each "
           "product and cannot be pinned");
    else if (findKernel("lce_logits_grad").ownOverrides({s}).empty() &&
             findKernel("lce_gemm").ownOverrides({s}).empty())
      fail("'" + s +
           "' names no parameter of lce_logits_grad or lce_gemm (see "
           "tilejit list)");
  // Values are checked even for a kernel this run does not use.
  for (const char *name : {"lce_logits_grad", "lce_gemm"}) {
    const KernelSpec &spec = findKernel(name);
    spec.config(spec.dtypes.front(), spec.ownOverrides(o.overrides));
  }
  if (o.params.softcap < 0)
    fail("softcap must be >= 0 (0 turns it off)");
  if (o.bf16GradAccumulation && in.dtype != DType::BF16)
    fail("bf16 gradient accumulation needs bf16 inputs (got " +
         std::string(dtypeName(in.dtype)) + ")");
  if (o.chunkRows < 0 || o.memoryBudgetBytes < 0)
    fail("chunk rows and the memory budget must be >= 0 (0 = all rows)");
  if (o.gemmWorkspaceBytes < 0)
    fail("the GEMM workspace must be >= 0 bytes");
  if (o.gemmBackend == LinearCeOptions::GemmBackend::Dsl &&
      in.dtype == DType::F32)
    fail("the DSL GEMMs (lce_gemm) need bf16 or f16 inputs (got f32)");
  if (o.gemmCandidates < 1)
    fail("gemm candidates must be >= 1 (got " +
         std::to_string(o.gemmCandidates) + ")");
  if (o.chunkRows == 0 && o.memoryBudgetBytes > 0 &&
      o.memoryBudgetBytes < o.gemmWorkspaceBytes + chunkRowBytes(in, o))
    fail("a memory budget of " + std::to_string(o.memoryBudgetBytes) +
         " bytes does not hold the GEMM workspace (" +
         std::to_string(o.gemmWorkspaceBytes) + " bytes) and one row (" +
         std::to_string(chunkRowBytes(in, o)) + " bytes)");
}

std::vector<int64_t> linearCeChunkCandidates(const ref::LinearCeInputs &in,
                                             const LinearCeOptions &options) {
  // Few, nearly equal chunks: rounding up to 128 rows keeps the GEMM tiles
  // full and leaves the last chunk at most 127 rows per chunk short.
  int64_t most = mostChunkRows(in, options);
  int64_t fewest = (in.N + most - 1) / most;
  std::vector<int64_t> out;
  for (double factor : {1.0, 1.5, 2.0, 4.0, 8.0}) {
    int64_t rows =
        equalChunkRows(in.N, int64_t(std::ceil(fewest * factor)), most);
    if (rows >= 128 || factor == 1.0) // smaller ones starve the GEMMs
      out.push_back(rows);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

float linearCeDzScale(const ref::LinearCeInputs &in, const LinearCeOptions &o) {
  return in.dtype == DType::F16 && o.params.reduction == Reduction::Mean
             ? float(in.N)
             : 1.f;
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
  if (in.N == 0)
    return 0;
  if (o.chunkRows > 0)
    return std::min(in.N, o.chunkRows);
  int64_t most = mostChunkRows(in, o);
  return equalChunkRows(in.N, (in.N + most - 1) / most, most);
}

namespace {

/// A linear-CE program, optimized for the interpreter.
TileModule buildForCpu(const char *name, const ref::LinearCeInputs &in,
                       const LinearCeOptions &o, DType dtype = DType::F32) {
  TileModule m = buildLinearCeKernel(name, dtype, in, o);
  optimizeTile(m);
  return m;
}

} // namespace

TileModule buildLinearCeKernel(const char *name, DType dtype,
                               const ref::LinearCeInputs &in,
                               const LinearCeOptions &options) {
  const KernelSpec &spec = findKernel(name);
  const ref::LinearCeParams &p = options.params;
  // The problem's shape and the features lce_logits_grad compiles in.
  std::map<std::string, int64_t> problem = {
      {"N", in.N},
      {"V", in.V},
      {"SOFTCAP", p.softcap > 0},
      {"SMOOTHING", p.labelSmoothing > 0},
      {"Z_LOSS", p.zLoss > 0},
      {"BIAS", !in.bias.empty()},
      {"CLASS_WEIGHT", !in.classWeight.empty()},
      {"NARROW_LOGITS", options.narrowLogits && dtype != DType::F32}};
  // --set reaches lce_logits_grad only (lce_gemm takes it through
  // lceGemmConfig); the one-program helpers have a single config.
  std::vector<std::string> overrides;
  if (std::string(name) == "lce_logits_grad")
    overrides = spec.ownOverrides(options.overrides);
  return spec.build(spec.config(dtype, overrides, problem));
}

dsl::Config lceGemmConfig(DType dtype, const LinearCeOptions &options,
                          bool transA, bool transB, bool cF32) {
  const KernelSpec &spec = findKernel("lce_gemm");
  std::vector<std::string> params = spec.ownOverrides(options.overrides);
  params.insert(params.end(), {"TRANS_A=" + std::to_string(transA),
                               "TRANS_B=" + std::to_string(transB),
                               "C_F32=" + std::to_string(cF32)});
  return spec.config(dtype, params);
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

LinearCeOutputs runLinearCeCpu(const ref::LinearCeInputs &in,
                               const LinearCeOptions &options) {
  validateLinearCe(in, options);
  if (in.N == 0)
    return emptyLinearCe(in, options, "cpu");
  const ref::LinearCeParams &p = options.params;
  const int64_t N = in.N, d = in.d, V = in.V;
  const int64_t chunk = linearCeChunkRows(in, options);
  std::vector<float> h = loadAsFloats(in.h.data(), in.dtype, N * d);
  std::vector<float> W = loadAsFloats(in.W.data(), in.dtype, V * d);
  std::vector<float> b = in.bias.empty()
                             ? std::vector<float>{0.f}
                             : loadAsFloats(in.bias.data(), in.dtype, V);
  bool hasWeight = !in.classWeight.empty();
  std::vector<float> weight =
      hasWeight ? in.classWeight : std::vector<float>{1.f};
  std::vector<float> upstream =
      in.gradOutput.empty() ? std::vector<float>{0.f} : in.gradOutput;
  std::vector<int64_t> target = in.target;

  LinearCeOutputs out;
  out.device = "cpu";
  out.chunkRows = chunk;
  out.rowLoss.assign(N, 0.f);
  out.rowZLoss.assign(N, 0.f);
  out.lse.assign(N, 0.f);
  out.dh.assign(N * d, 0.f);
  out.dW.assign(V * d, 0.f);
  out.db.assign(in.bias.empty() ? 0 : V, 0.f);
  std::vector<float> stats(5, 0.f), logits(chunk * V);

  auto buf = [](auto &v, DType t) {
    return InterpBuffer{v.data(), t, static_cast<int64_t>(v.size())};
  };
  int32_t hasW = hasWeight ? 1 : 0, hasB = in.bias.empty() ? 0 : 1;
  float dzScale = linearCeDzScale(in, options);
  bool none = p.reduction == Reduction::None;
  TileModule weights = buildForCpu("lce_row_weights", in, options);
  interpret(weights.operation(), weights.kernelName(), {1, 1, 1},
            {buf(target, DType::I64), buf(weight, DType::F32),
             buf(stats, DType::F32), int32_t(N), int32_t(V),
             int64_t(p.ignoreIndex), hasW,
             int32_t(p.reduction == Reduction::Mean ? 1 : 0)});
  // With narrowLogits (bf16/f16 inputs), as on the GPU: the logits are
  // rounded to the input dtype and dz is written over them in that dtype.
  bool narrow = options.narrowLogits && in.dtype != DType::F32;
  DType rowsType = narrow ? in.dtype : DType::F32;
  TileModule rows = buildForCpu("lce_logits_grad", in, options, rowsType);
  std::vector<uint8_t> narrowLogits(narrow ? chunk * V * dtypeSize(in.dtype)
                                           : 0);

  // With the DSL GEMM backend the chunk's products run lce_gemm in the
  // interpreter, on the input-dtype operands the GPU gives it (dz rounded
  // to the input dtype as the GPU's dz buffer holds it).
  bool dslGemms = options.gemmBackend == LinearCeOptions::GemmBackend::Dsl;
  size_t es = dtypeSize(in.dtype);
  std::vector<uint8_t> dzNarrow(dslGemms ? chunk * V * es : 0);
  std::vector<uint8_t> ones(dslGemms ? chunk * es : 0);
  for (int64_t i = 0; dslGemms && i < chunk; ++i)
    storeFromDouble(ones.data(), in.dtype, i, 1.0);
  std::map<std::string, TileModule> gemms;
  auto raw = [&](const std::vector<uint8_t> &bytes, int64_t offset, DType t) {
    return InterpBuffer{const_cast<uint8_t *>(bytes.data()) + offset * es, t,
                        int64_t(bytes.size() / es) - offset};
  };
  auto f32At = [](std::vector<float> &v, int64_t offset) {
    return InterpBuffer{v.data() + offset, DType::F32,
                        int64_t(v.size()) - offset};
  };
  // C (M x N, f32) = alpha op(A) op(B) + beta C.
  auto dslGemm = [&](InterpBuffer A, bool ta, int64_t lda, InterpBuffer B,
                     bool tb, int64_t ldb, InterpBuffer C, int64_t ldc,
                     int64_t M, int64_t Nc, int64_t K, float alpha,
                     float beta) {
    dsl::Config config = lceGemmConfig(in.dtype, options, ta, tb, true);
    auto it = gemms.find(config.str());
    if (it == gemms.end()) {
      TileModule m = findKernel("lce_gemm").build(config);
      optimizeTile(m);
      it = gemms.emplace(config.str(), std::move(m)).first;
    }
    int64_t bm = config.get("BLOCK_M"), bn = config.get("BLOCK_N");
    interpret(it->second.operation(), "lce_gemm",
              {(M + bm - 1) / bm, (Nc + bn - 1) / bn, 1},
              {A, B, C, int32_t(M), int32_t(Nc), int32_t(K), lda, ldb, ldc,
               alpha, beta});
  };

  for (int64_t r0 = 0; r0 < N; r0 += chunk, ++out.chunks) {
    int64_t rowsHere = std::min(chunk, N - r0);
    // z = h_c W^T with fp32 accumulation (the kernel adds the bias).
    if (dslGemms)
      dslGemm(raw(in.h, r0 * d, in.dtype), false, d, raw(in.W, 0, in.dtype),
              true, d, f32At(logits, 0), V, rowsHere, V, d, 1.f, 0.f);
    else
      for (int64_t i = 0; i < rowsHere; ++i)
        for (int64_t v = 0; v < V; ++v) {
          float acc = 0;
          for (int64_t k = 0; k < d; ++k)
            acc += h[(r0 + i) * d + k] * W[v * d + k];
          logits[i * V + v] = acc;
        }
    if (narrow)
      for (int64_t i = 0; i < rowsHere * V; ++i)
        storeFromDouble(narrowLogits.data(), in.dtype, i, logits[i]);
    InterpBuffer z =
        narrow ? InterpBuffer{narrowLogits.data(), in.dtype, chunk * V}
               : buf(logits, DType::F32);
    // dz overwrites the logits.
    interpret(rows.operation(), rows.kernelName(), {rowsHere, 1, 1},
              {z,
               z,
               buf(b, DType::F32),
               buf(target, DType::I64),
               buf(weight, DType::F32),
               buf(stats, DType::F32),
               buf(upstream, DType::F32),
               buf(out.rowLoss, DType::F32),
               buf(out.rowZLoss, DType::F32),
               buf(out.lse, DType::F32),
               int32_t(V),
               int64_t(V),
               int64_t(V),
               int32_t(r0),
               int64_t(p.ignoreIndex),
               float(p.labelSmoothing),
               float(p.zLoss),
               float(p.softcap),
               hasB,
               hasW,
               int32_t(none ? 1 : 0),
               dzScale});
    if (narrow)
      logits = loadAsFloats(narrowLogits.data(), in.dtype, chunk * V);
    // dh_c = dz W; dW += dz^T h_c; db += sum_i dz.
    if (dslGemms) {
      const std::vector<uint8_t> *dz = &narrowLogits;
      if (!narrow) {
        for (int64_t i = 0; i < rowsHere * V; ++i)
          storeFromDouble(dzNarrow.data(), in.dtype, i, logits[i]);
        dz = &dzNarrow;
      }
      float unscale = 1.f / dzScale;
      InterpBuffer dzc = raw(*dz, 0, in.dtype);
      dslGemm(dzc, false, V, raw(in.W, 0, in.dtype), false, d,
              f32At(out.dh, r0 * d), d, rowsHere, d, V, unscale, 0.f);
      dslGemm(dzc, true, V, raw(in.h, r0 * d, in.dtype), false, d,
              f32At(out.dW, 0), d, V, d, rowsHere, unscale, 1.f);
      if (!out.db.empty())
        dslGemm(raw(ones, 0, in.dtype), false, rowsHere, dzc, false, V,
                f32At(out.db, 0), V, 1, V, rowsHere, unscale, 1.f);
    }
    for (int64_t i = 0; i < rowsHere && !dslGemms; ++i)
      for (int64_t v = 0; v < V; ++v) {
        float g = logits[i * V + v] / dzScale;
        if (g == 0)
          continue;
        for (int64_t k = 0; k < d; ++k) {
          out.dh[(r0 + i) * d + k] += g * W[v * d + k];
          out.dW[v * d + k] += g * h[(r0 + i) * d + k];
        }
        if (!out.db.empty())
          out.db[v] += g;
      }
    // A bf16 accumulator keeps only bf16 between chunks.
    if (options.bf16GradAccumulation)
      for (auto *acc : {&out.dW, &out.db})
        for (float &x : *acc)
          x = bf16ToFloat(floatToBf16(x));
  }
  if (!none) {
    std::vector<float> loss(2, 0.f);
    TileModule sum = buildForCpu("lce_loss_sum", in, options);
    interpret(sum.operation(), sum.kernelName(), {1, 1, 1},
              {buf(out.rowLoss, DType::F32), buf(out.rowZLoss, DType::F32),
               buf(stats, DType::F32), buf(loss, DType::F32), int32_t(N)});
    out.loss = loss[0];
    out.zLoss = loss[1];
  }
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
  c.passed = c.lossErr <= lossTol && c.dhErr <= gradTol && c.dWErr <= gradTol &&
             c.dbErr <= gradTol;
  std::ostringstream os;
  os << "fused_linear_ce against the fp64 reference (N " << in.N << ", d "
     << in.d << ", V " << in.V << ", " << out.chunks << " chunks)\n"
     << "  loss relative error " << c.lossErr << " (tol " << lossTol << ")\n"
     << "  dh, dW, db relative Frobenius errors " << c.dhErr << ", " << c.dWErr
     << ", " << c.dbErr << " (tol " << gradTol << ")\n  "
     << (c.passed ? "PASS" : "FAIL");
  c.summary = os.str();
  return c;
}

} // namespace tilejit
