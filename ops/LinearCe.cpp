//===- LinearCe.cpp - the chunked fused linear CE on the caller's memory --===//
//
// Checks, sizes, the workspace layout and the kernels' arguments, shared by
// both paths, and the CPU path: the chunk loop with plain-loop GEMMs (fp32
// accumulation, dz kept in f32) and the programs in the interpreter.
//
//===----------------------------------------------------------------------===//
#include "ops/LinearCeParts.h"

#include "runtime/CudaDriver.h"
#include "tilejit/Error.h"
#include "tilejit/HostFloat.h"
#include "tilejit/KernelSpec.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <cstring>
#include <limits>

namespace tilejit {
namespace ops {
namespace lce {
namespace {

size_t align256(size_t n) { return (n + 255) / 256 * 256; }

/// Bytes one row of a chunk takes: f32 logits plus a dz of the input dtype,
/// or one buffer for both.
int64_t chunkRowBytes(const LinearCeArgs &a) {
  int64_t es = dtypeSize(a.dtype);
  int64_t partials =
      mayFoldLogits(a) ? 2 * 4 * partialsStride(logitsBlocks(a)) : 0;
  return a.V * (dzInPlace(a) ? int64_t(dtypeSize(logitsType(a))) : 4 + es) +
         partials;
}

/// The most rows whose chunk buffers fit in the budget (at least one); the
/// GEMM workspace comes out of the budget first.
int64_t mostChunkRows(const LinearCeArgs &a) {
  if (a.chunkRows > 0)
    return std::min(a.N, a.chunkRows);
  if (a.memoryBudgetBytes == 0)
    return a.N;
  int64_t chunkBytes = a.memoryBudgetBytes - a.gemmWorkspaceBytes;
  return std::clamp<int64_t>(chunkBytes / chunkRowBytes(a), 1, a.N);
}

/// N split into `chunks` equal chunks, rounded up to a multiple of 128 rows
/// (which GEMM tiles divide) when that still fits in `most`.
int64_t equalChunkRows(int64_t N, int64_t chunks, int64_t most) {
  int64_t rows = (N + chunks - 1) / chunks;
  int64_t rounded = (rows + 127) / 128 * 128;
  return rounded <= most ? rounded : rows;
}

} // namespace

std::vector<int64_t> chunkCandidates(const LinearCeArgs &a) {
  // Few, nearly equal chunks: rounding up to 128 rows keeps the GEMM tiles
  // full and leaves the last chunk at most 127 rows short.
  int64_t most = mostChunkRows(a);
  int64_t fewest = (a.N + most - 1) / most;
  std::vector<int64_t> out;
  for (double factor : {1.0, 1.5, 2.0, 4.0, 8.0}) {
    int64_t rows = equalChunkRows(a.N, int64_t(fewest * factor + 0.999), most);
    if (rows >= 128 || factor == 1.0) // smaller ones starve the GEMMs
      out.push_back(rows);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

Layout layout(const LinearCeArgs &a, Device device, int64_t chunk) {
  Layout l;
  size_t at = 0;
  auto take = [&](bool needed, size_t bytes) {
    size_t here = at;
    if (needed)
      at += align256(bytes);
    return here;
  };
  bool gpu = device == Device::Gpu;
  size_t es = dtypeSize(a.dtype), n = size_t(a.N) * 4;
  l.stats = take(true, 5 * sizeof(float));
  l.bad = take(!a.badTarget, sizeof(int32_t));
  l.loss = take(!a.loss, 2 * sizeof(float));
  l.rowLoss = take(!a.rowLoss, n);
  l.rowZLoss = take(!a.rowZLoss, n);
  l.lse = take(!a.lse, n);
  // The CPU keeps the chunk's logits (and dz over them) in f32.
  size_t cells = size_t(chunk) * a.V;
  l.logits = take(true, cells * (gpu ? dtypeSize(logitsType(a)) : 4));
  l.dz = take(gpu && !dzInPlace(a), cells * es);
  // The CPU folds the logits only on the DSL path (auto runs plain loops).
  bool fold = mayFoldLogits(a) && (gpu || a.gemmBackend == GemmBackend::Dsl);
  if (fold) {
    l.blocks = logitsBlocks(a);
    l.partialsStride = partialsStride(l.blocks);
    l.partialCount = chunk * l.partialsStride;
  }
  l.partials = take(fold, 2 * sizeof(float) * l.partialCount);
  l.ones = take(gpu && a.bias, size_t(chunk) * es);
  l.gemm = take(gpu && usesCublasLt(a), size_t(a.gemmWorkspaceBytes));
  l.bytes = at;
  return l;
}

Buffers buffers(const LinearCeArgs &a, const Layout &l, void *workspace) {
  Buffers b;
  b.ws = static_cast<char *>(workspace);
  auto at = [&](size_t offset) { return static_cast<void *>(b.ws + offset); };
  auto f32 = [&](float *given, size_t offset) {
    return given ? given : static_cast<float *>(at(offset));
  };
  b.stats = static_cast<float *>(at(l.stats));
  b.bad = a.badTarget ? a.badTarget : static_cast<int32_t *>(at(l.bad));
  b.loss = f32(a.loss, l.loss);
  b.rowLoss = f32(a.rowLoss, l.rowLoss);
  b.rowZLoss = f32(a.rowZLoss, l.rowZLoss);
  b.lse = f32(a.lse, l.lse);
  b.logits = at(l.logits);
  b.dz = at(l.dz);
  b.ones = at(l.ones);
  b.gemm = at(l.gemm);
  b.blocks = l.blocks;
  b.stride = l.partialsStride;
  b.rowMax = b.rowSum = b.stats;
  if (l.partialCount > 0) {
    b.partialCount = l.partialCount;
    b.rowMax = static_cast<float *>(at(l.partials));
    b.rowSum = b.rowMax + l.partialCount;
  }
  b.bias = a.bias ? a.bias : b.stats;
  b.classWeight = a.classWeight ? a.classWeight : b.stats;
  b.gradOutput = a.gradOutput ? a.gradOutput : b.stats;
  return b;
}

std::map<std::string, int64_t> problem(const LinearCeArgs &a) {
  // The chunk's logits and dz rows are contiguous in 256-byte aligned
  // workspace; the bias and class weights are the caller's.
  auto aligned = [](const void *p) {
    return reinterpret_cast<uintptr_t>(p) % 16 == 0;
  };
  bool rowsAligned = a.V * int64_t(dtypeSize(logitsType(a))) % 16 == 0 &&
                     a.V * int64_t(dtypeSize(a.dtype)) % 16 == 0 &&
                     aligned(a.bias) && aligned(a.classWeight);
  return {{"N", a.N},
          {"ALIGNED", rowsAligned},
          {"V", a.V},
          {"SOFTCAP", a.softcap > 0},
          {"SMOOTHING", a.labelSmoothing > 0},
          {"Z_LOSS", a.zLoss > 0},
          {"BIAS", a.bias != nullptr},
          {"CLASS_WEIGHT", a.classWeight != nullptr},
          {"NARROW_LOGITS", a.narrowLogits && a.dtype != DType::F32}};
}

Programs buildPrograms(const LinearCeArgs &a, DType rowsType) {
  const KernelSpec &rows = findKernel("lce_logits_grad");
  auto helper = [](const char *name) {
    return Kernel::compile(name, {DType::F32, {}, {}});
  };
  // --set reaches lce_logits_grad (and lce_gemm through gemmConfig); the
  // one-program helpers have a single config.
  Programs p{helper("lce_row_weights"),
             Kernel::compile(rows,
                             {rowsType, rows.ownOverrides(a.set), problem(a)}),
             helper("lce_loss_sum"),
             std::nullopt};
  if (mayFoldLogits(a)) {
    std::map<std::string, int64_t> folded = problem(a);
    folded["PARTIALS"] = 1;
    p.rowsFolded =
        Kernel::compile(rows, {rowsType, rows.ownOverrides(a.set), folded});
  }
  return p;
}

std::vector<std::string> logitsOverrides(const LinearCeArgs &a) {
  std::vector<std::string> own;
  for (llvm::StringRef s : a.set)
    if (s.consume_front(kLogitsPrefix))
      own.push_back(s.str());
  return own;
}

dsl::Config logitsConfig(const LinearCeArgs &a) {
  return findKernel("lce_logits")
      .config(a.dtype, logitsOverrides(a), problem(a));
}

int64_t logitsBlocks(const LinearCeArgs &a) {
  int64_t bn = logitsConfig(a).get("BLOCK_N");
  return (a.V + bn - 1) / bn;
}

dsl::Config gemmConfig(const LinearCeArgs &a, bool transA, bool transB,
                       bool cF32) {
  const KernelSpec &spec = findKernel("lce_gemm");
  std::vector<std::string> params = spec.ownOverrides(a.set);
  params.insert(params.end(), {"TRANS_A=" + std::to_string(transA),
                               "TRANS_B=" + std::to_string(transB),
                               "C_F32=" + std::to_string(cF32)});
  return spec.config(a.dtype, params);
}

namespace {
using A = KernelArg;
int32_t flag(bool b) { return b ? 1 : 0; }
} // namespace

std::vector<KernelArg> weightsArgs(const LinearCeArgs &a, const Buffers &b) {
  return {A::pointer(a.target, DType::I64, a.N),
          A::pointer(b.classWeight, DType::F32, a.classWeight ? a.V : 1),
          A::pointer(b.stats, DType::F32, 5),
          A::pointer(b.bad, DType::I32, 1),
          A::i32(int32_t(a.N)),
          A::i32(int32_t(a.V)),
          A::i64(a.ignoreIndex),
          A::i32(flag(a.classWeight)),
          A::i32(flag(a.reduction == Reduction::Mean))};
}

std::vector<KernelArg> rowsArgs(const LinearCeArgs &a, const Buffers &b,
                                KernelArg logits, KernelArg dz,
                                int64_t firstRow) {
  return {logits,
          dz,
          A::pointer(b.bias, DType::F32, a.bias ? a.V : 5),
          A::pointer(a.target, DType::I64, a.N),
          A::pointer(b.classWeight, DType::F32, a.classWeight ? a.V : 5),
          A::pointer(b.stats, DType::F32, 5),
          A::pointer(b.gradOutput, DType::F32, a.gradOutput ? a.N : 5),
          A::pointer(b.rowLoss, DType::F32, a.N),
          A::pointer(b.rowZLoss, DType::F32, a.N),
          A::pointer(b.lse, DType::F32, a.N),
          A::i32(int32_t(a.V)),
          A::i64(a.V), // the chunk's logits and dz rows are contiguous
          A::i64(a.V),
          A::i32(int32_t(firstRow)),
          A::i64(a.ignoreIndex),
          A::f32(float(a.labelSmoothing)),
          A::f32(float(a.zLoss)),
          A::f32(float(a.softcap)),
          A::i32(flag(a.bias)),
          A::i32(flag(a.classWeight)),
          A::i32(flag(a.reduction == Reduction::None)),
          A::f32(dzScale(a)),
          A::pointer(b.rowMax, DType::F32, b.partialCount),
          A::pointer(b.rowSum, DType::F32, b.partialCount),
          A::i64(b.stride),
          A::i32(int32_t(b.blocks))};
}

std::vector<KernelArg> logitsArgs(const LinearCeArgs &a, const Buffers &b,
                                  KernelArg logits, int64_t firstRow,
                                  int64_t rows) {
  int64_t ldh = inputStride(a), ldw = weightStride(a);
  const char *h = static_cast<const char *>(a.input) +
                  firstRow * ldh * int64_t(dtypeSize(a.dtype));
  return {A::pointer(h, a.dtype, (rows - 1) * ldh + a.d),
          A::pointer(a.weight, a.dtype, (a.V - 1) * ldw + a.d),
          logits,
          A::pointer(b.bias, DType::F32, a.bias ? a.V : 5),
          A::pointer(b.rowMax, DType::F32, b.partialCount),
          A::pointer(b.rowSum, DType::F32, b.partialCount),
          A::i32(int32_t(rows)),
          A::i32(int32_t(a.V)),
          A::i32(int32_t(a.d)),
          A::i64(ldh),
          A::i64(ldw),
          A::i64(a.V), // the chunk's logits rows are contiguous
          A::i64(b.stride),
          A::f32(float(a.softcap)),
          A::i32(flag(a.bias))};
}

std::vector<KernelArg> sumArgs(const LinearCeArgs &a, const Buffers &b) {
  return {A::pointer(b.rowLoss, DType::F32, a.N),
          A::pointer(b.rowZLoss, DType::F32, a.N),
          A::pointer(b.stats, DType::F32, 5), A::pointer(b.loss, DType::F32, 2),
          A::i32(int32_t(a.N))};
}

void emptyBatch(const LinearCeArgs &a, Device device, CUstream stream) {
  size_t acc = dtypeSize(accType(a));
  auto zero = [&](void *p, size_t bytes) {
    if (!p)
      return;
    if (device == Device::Gpu)
      cuda::memsetAsync(reinterpret_cast<CUdeviceptr>(p), 0, bytes, stream);
    else
      std::memset(p, 0, bytes);
  };
  zero(a.loss, 2 * sizeof(float));
  zero(a.badTarget, sizeof(int32_t));
  zero(a.gradWeight, size_t(a.V) * a.d * acc);
  zero(a.gradBias, size_t(a.V) * acc);
}

namespace {

/// Rows of a (rows, cols) matrix `ld` elements apart, widened to f32.
std::vector<float> widen(const void *p, DType t, int64_t rows, int64_t cols,
                         int64_t ld) {
  std::vector<float> out(size_t(rows) * cols);
  const char *base = static_cast<const char *>(p);
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<float> row =
        loadAsFloats(base + size_t(r) * ld * dtypeSize(t), t, cols);
    std::copy(row.begin(), row.end(), out.begin() + r * cols);
  }
  return out;
}

} // namespace

void runOnCpu(const LinearCeArgs &a, const Buffers &b, int64_t chunk) {
  const int64_t N = a.N, d = a.d, V = a.V;
  const size_t es = dtypeSize(a.dtype);
  const int64_t ldx = inputStride(a), ldw = weightStride(a),
                ldg = gradInputStride(a);
  std::vector<float> h = widen(a.input, a.dtype, N, d, ldx);
  std::vector<float> W = widen(a.weight, a.dtype, V, d, ldw);
  // dW and db accumulate in f32 here; bf16 accumulation rounds after each
  // chunk, as the GPU's bf16 accumulator holds them.
  std::vector<float> dh(size_t(N) * d, 0.f), dW(size_t(V) * d, 0.f),
      db(a.bias ? V : 0, 0.f);

  // With narrowLogits (bf16/f16 inputs), as on the GPU: the logits are
  // rounded to the input dtype and dz is written over them in that dtype.
  bool narrow = a.narrowLogits && a.dtype != DType::F32;
  DType rowsType = narrow ? a.dtype : DType::F32;
  Programs p = buildPrograms(a, rowsType);
  p.weights.runOnCpu({1}, weightsArgs(a, b));
  float *logits = static_cast<float *>(b.logits);
  std::vector<uint8_t> narrowLogits(narrow ? chunk * V * es : 0);

  // With the DSL GEMM backend the products run lce_gemm in the interpreter,
  // on the input-dtype operands the GPU gives it (dz rounded to the input
  // dtype, as the GPU's dz buffer holds it).
  bool dslGemms = a.gemmBackend == GemmBackend::Dsl;
  std::vector<uint8_t> ones(dslGemms ? chunk * es : 0);
  for (int64_t i = 0; dslGemms && i < chunk; ++i)
    storeFromDouble(ones.data(), a.dtype, i, 1.0);
  std::map<std::string, Kernel> gemms;
  auto ptr = [](const void *p, int64_t offset, size_t size) {
    return const_cast<char *>(static_cast<const char *>(p)) + offset * size;
  };
  // C (M x Nc, f32) = alpha op(A) op(B) + beta C.
  auto dslGemm = [&](const void *A, bool ta, int64_t lda, const void *B,
                     bool tb, int64_t ldb, float *C, int64_t ldc, int64_t M,
                     int64_t Nc, int64_t K, float alpha, float beta) {
    dsl::Config config = gemmConfig(a, ta, tb, true);
    auto it = gemms.find(config.str());
    if (it == gemms.end())
      it = gemms
               .emplace(config.str(),
                        Kernel(findKernel("lce_gemm").build(config)))
               .first;
    int64_t bm = config.get("BLOCK_M"), bn = config.get("BLOCK_N");
    // Bounds for the interpreter: the rows each operand spans.
    int64_t aRows = ta ? K : M, bRows = tb ? Nc : K;
    int64_t aCols = ta ? M : K, bCols = tb ? K : Nc;
    it->second.runOnCpu(
        {(M + bm - 1) / bm, (Nc + bn - 1) / bn},
        {KernelArg::pointer(A, a.dtype, (aRows - 1) * lda + aCols),
         KernelArg::pointer(B, a.dtype, (bRows - 1) * ldb + bCols),
         KernelArg::pointer(C, DType::F32, (M - 1) * ldc + Nc),
         KernelArg::i32(int32_t(M)), KernelArg::i32(int32_t(Nc)),
         KernelArg::i32(int32_t(K)), KernelArg::i64(lda), KernelArg::i64(ldb),
         KernelArg::i64(ldc), KernelArg::f32(alpha), KernelArg::f32(beta)});
  };

  dsl::Config logitsCfg;
  std::optional<Kernel> logitsKernel;
  if (dslGemms) {
    logitsCfg = logitsConfig(a);
    logitsKernel.emplace(findKernel("lce_logits").build(logitsCfg));
  }
  std::vector<uint8_t> dzNarrow(dslGemms ? chunk * V * es : 0);
  const float unscale = 1.f / dzScale(a);
  for (int64_t r0 = 0; r0 < N; r0 += chunk) {
    int64_t rows = std::min(chunk, N - r0);
    KernelArg z = narrow
                      ? KernelArg::pointer(narrowLogits.data(), a.dtype,
                                           chunk * V)
                      : KernelArg::pointer(logits, DType::F32, chunk * V);
    // z = h_c W^T with fp32 accumulation (the kernel adds the bias): by
    // lce_logits, with the rows' partials, or by plain loops.
    if (dslGemms) {
      int64_t bm = logitsCfg.get("BLOCK_M");
      logitsKernel->runOnCpu({(rows + bm - 1) / bm, b.blocks},
                             logitsArgs(a, b, z, r0, rows));
    } else {
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t v = 0; v < V; ++v) {
          float acc = 0;
          for (int64_t k = 0; k < d; ++k)
            acc += h[(r0 + i) * d + k] * W[v * d + k];
          logits[i * V + v] = acc;
        }
      if (narrow)
        for (int64_t i = 0; i < rows * V; ++i)
          storeFromDouble(narrowLogits.data(), a.dtype, i, logits[i]);
    }
    // dz overwrites the logits.
    (dslGemms ? *p.rowsFolded : p.rows).runOnCpu({rows},
                                                 rowsArgs(a, b, z, z, r0));
    if (narrow) {
      std::vector<float> wide = loadAsFloats(narrowLogits.data(), a.dtype,
                                             rows * V);
      std::copy(wide.begin(), wide.end(), logits);
    }
    // dh_c = dz W; dW += dz^T h_c; db += sum_i dz.
    if (dslGemms) {
      const void *dz = narrowLogits.data();
      if (!narrow) {
        for (int64_t i = 0; i < rows * V; ++i)
          storeFromDouble(dzNarrow.data(), a.dtype, i, logits[i]);
        dz = dzNarrow.data();
      }
      dslGemm(dz, false, V, a.weight, false, ldw, dh.data() + r0 * d, d, rows,
              d, V, unscale, 0.f);
      dslGemm(dz, true, V, ptr(a.input, r0 * ldx, es), false, ldx, dW.data(),
              d, V, d, rows, unscale, 1.f);
      if (a.bias)
        dslGemm(ones.data(), false, rows, dz, false, V, db.data(), V, 1, V,
                rows, unscale, 1.f);
    }
    for (int64_t i = 0; i < rows && !dslGemms; ++i)
      for (int64_t v = 0; v < V; ++v) {
        float g = logits[i * V + v] * unscale;
        if (g == 0)
          continue;
        for (int64_t k = 0; k < d; ++k) {
          dh[(r0 + i) * d + k] += g * W[v * d + k];
          dW[v * d + k] += g * h[(r0 + i) * d + k];
        }
        if (a.bias)
          db[v] += g;
      }
    if (a.bf16GradAccumulation)
      for (auto *acc : {&dW, &db})
        for (float &x : *acc)
          x = bf16ToFloat(floatToBf16(x));
  }
  if (a.reduction != Reduction::None)
    p.sum.runOnCpu({1}, sumArgs(a, b));
  for (int64_t r = 0; r < N; ++r)
    for (int64_t k = 0; k < d; ++k)
      storeFromDouble(a.gradInput, a.dtype, r * ldg + k, dh[r * d + k]);
  DType acc = accType(a);
  for (size_t i = 0; i < dW.size(); ++i)
    storeFromDouble(a.gradWeight, acc, i, dW[i]);
  for (size_t i = 0; i < db.size(); ++i)
    storeFromDouble(a.gradBias, acc, i, db[i]);
}

void checkWorkspace(const LinearCeArgs &a, const void *workspace,
                    size_t bytes, Device device) {
  size_t need = linearCeWorkspaceBytes(a, device);
  if (!workspace || bytes < need)
    throw Error("fused_linear_ce: the workspace has " +
                std::to_string(workspace ? bytes : 0) +
                " bytes; this call needs " + std::to_string(need) +
                " (linearCeWorkspaceBytes)");
  // Its parts are 256-byte aligned from its start: cuBLASLt's workspace
  // and the kernels' vector accesses rely on it.
  if (device == Device::Gpu && reinterpret_cast<uintptr_t>(workspace) % 256)
    throw Error("fused_linear_ce: the workspace must be 256-byte aligned "
                "(it starts at an address 256 divides, as CUDA allocations "
                "do)");
}

} // namespace lce

void validateLinearCe(const LinearCeArgs &a) {
  auto fail = [](const std::string &why) {
    throw Error("fused_linear_ce: " + why);
  };
  if (!isFloat(a.dtype))
    fail(std::string("the inputs must be bf16, f16 or f32 (got ") +
         dtypeName(a.dtype) + ")");
  const int64_t most = std::numeric_limits<int32_t>::max();
  if (a.N < 0 || a.N > most || a.d <= 0 || a.V <= 0 || a.V > most)
    fail("N must be in [0, 2^31), d >= 1 and V in [1, 2^31) (got N = " +
         std::to_string(a.N) + ", d = " + std::to_string(a.d) +
         ", V = " + std::to_string(a.V) + ")");
  if (lce::inputStride(a) < a.d || lce::weightStride(a) < a.d ||
      lce::gradInputStride(a) < a.d)
    fail("row strides (input " + std::to_string(lce::inputStride(a)) +
         ", weight " + std::to_string(lce::weightStride(a)) +
         ", grad input " + std::to_string(lce::gradInputStride(a)) +
         ") must be >= d = " + std::to_string(a.d));
  bool none = a.reduction == Reduction::None;
  if (!a.weight || !a.gradWeight || (a.bias && !a.gradBias))
    fail("weight and gradWeight (and gradBias, with a bias) must not be null");
  if (!a.bias && a.gradBias)
    fail("gradBias without a bias");
  if (a.N > 0 && (!a.input || !a.target || !a.gradInput))
    fail("input, target and gradInput must not be null");
  if (!none && !a.loss)
    fail("no loss output (mean and sum write loss[0..1])");
  if (none && a.N > 0 && (!a.gradOutput || !a.rowLoss))
    fail("reduction none needs gradOutput (N) and rowLoss (N)");
  if (!none && a.gradOutput)
    fail("gradOutput is for reduction none only");
  if (!(a.labelSmoothing >= 0 && a.labelSmoothing <= 1))
    fail("label smoothing must be in [0, 1]");
  if (!(a.zLoss >= 0))
    fail("z-loss must be >= 0");
  if (!(a.softcap >= 0))
    fail("softcap must be >= 0 (0 turns it off)");
  checkF32Scalar("fused_linear_ce: label smoothing", a.labelSmoothing);
  checkF32Scalar("fused_linear_ce: z-loss", a.zLoss);
  checkF32Scalar("fused_linear_ce: softcap", a.softcap);
  const KernelSpec &logits = findKernel("lce_logits");
  for (const std::string &s : a.set) {
    llvm::StringRef name = llvm::StringRef(s).split('=').first;
    if (s.find('=') == std::string::npos)
      fail("--set takes NAME=VALUE (got '" + s + "')");
    if (name.consume_front(lce::kLogitsPrefix)) {
      if (!logits.param(name.str()))
        fail("'" + s + "' names no parameter of lce_logits (see tilejit "
                       "list)");
    } else if (llvm::is_contained({"TRANS_A", "TRANS_B", "C_F32"}, name)) {
      fail("'" + s +
           "': lce_gemm's TRANS_A, TRANS_B and C_F32 follow from each "
           "product and cannot be pinned");
    } else if (findKernel("lce_logits_grad").ownOverrides({s}).empty() &&
               findKernel("lce_gemm").ownOverrides({s}).empty()) {
      fail("'" + s +
           "' names no parameter of lce_logits_grad or lce_gemm (see "
           "tilejit list)");
    }
  }
  // Values are checked even for a kernel this call does not use.
  for (const char *name : {"lce_logits_grad", "lce_gemm"}) {
    const KernelSpec &spec = findKernel(name);
    spec.config(spec.dtypes.front(), spec.ownOverrides(a.set));
  }
  logits.config(logits.dtypes.front(), lce::logitsOverrides(a));
  if (a.bf16GradAccumulation && a.dtype != DType::BF16)
    fail("bf16 gradient accumulation needs bf16 inputs (got " +
         std::string(dtypeName(a.dtype)) + ")");
  if (a.chunkRows < 0 || a.memoryBudgetBytes < 0)
    fail("chunk rows and the memory budget must be >= 0 (0 = all rows)");
  if (a.gemmWorkspaceBytes < 0)
    fail("the GEMM workspace must be >= 0 bytes");
  if (a.gemmBackend == GemmBackend::Dsl && a.dtype == DType::F32)
    fail("the DSL GEMMs (lce_gemm) need bf16 or f16 inputs (got f32)");
  if (a.chunkRows == 0 && a.memoryBudgetBytes > 0 &&
      a.memoryBudgetBytes < a.gemmWorkspaceBytes + lce::chunkRowBytes(a))
    fail("a memory budget of " + std::to_string(a.memoryBudgetBytes) +
         " bytes does not hold the GEMM workspace (" +
         std::to_string(a.gemmWorkspaceBytes) + " bytes) and one row (" +
         std::to_string(lce::chunkRowBytes(a)) + " bytes)");
}

int64_t linearCeChunkRows(const LinearCeArgs &a) {
  if (a.N == 0)
    return 0;
  if (a.chunkRows > 0)
    return std::min(a.N, a.chunkRows);
  int64_t most = lce::mostChunkRows(a);
  return lce::equalChunkRows(a.N, (a.N + most - 1) / most, most);
}

size_t linearCeWorkspaceBytes(const LinearCeArgs &args, Device device) {
  validateLinearCe(args);
  if (args.N == 0)
    return 0;
  return lce::layout(args, device, linearCeChunkRows(args)).bytes;
}

void linearCe(const LinearCeArgs &a, void *workspace, size_t workspaceBytes,
              Device device, CUstream stream) {
  validateLinearCe(a);
  if (a.N == 0)
    return lce::emptyBatch(a, device, stream);
  lce::checkWorkspace(a, workspace, workspaceBytes, device);
  if (device == Device::Gpu)
    return lce::runOnGpu(a, workspace, workspaceBytes, stream);
  int64_t chunk = linearCeChunkRows(a);
  lce::Layout l = lce::layout(a, device, chunk);
  lce::runOnCpu(a, lce::buffers(a, l, workspace), chunk);
}

} // namespace ops
} // namespace tilejit
