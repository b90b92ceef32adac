//===- LinearCeGpu.cpp - the chunked fused linear CE on the GPU -----------===//
//
// The chunk loop with cuBLASLt GEMMs (runtime/CublasLt.h) or tilejit's own
// (lce_gemm), and the DSL programs compiled for the GPU in front of us. A
// plan per problem (shape, dtype, features, options) holds the compiled
// programs, the cuBLASLt handle with its chosen algorithms and the chunk
// size; a call only enqueues on the caller's stream.
//
//===----------------------------------------------------------------------===//
#include "ops/LinearCeParts.h"
#include "ops/LinearCeTuning.h"
#include "ops/TunedConfig.h"

#include "runtime/Autotuner.h"
#include "runtime/CublasLt.h"
#include "runtime/CudaDriver.h"
#include "runtime/TuningDatabase.h"
#include "tilejit/Compiler.h"
#include "tilejit/Error.h"
#include "tilejit/KernelSpec.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/StringExtras.h"

#include <functional>
#include <map>
#include <mutex>
#include <optional>

namespace tilejit {
namespace ops {
namespace lce {
namespace {

const char *backendName(GemmBackend b) {
  return b == GemmBackend::CublasLt ? "cublaslt"
         : b == GemmBackend::Dsl    ? "tilejit"
                                    : "auto";
}

/// Everything a call's kernels, GEMM choices and chunk follow from.
/// Everything a call's kernels and GEMM choices follow from but the rows
/// (the programs take N at run time): one plan serves every batch size.
std::string planKey(const LinearCeArgs &a) {
  std::map<std::string, int64_t> p = problem(a);
  p.erase("N");
  std::string key = std::string(dtypeName(a.dtype)) + ",d=" +
                    std::to_string(a.d);
  for (const auto &[name, value] : p)
    key += "," + name + "=" + std::to_string(value);
  return key + ",reduction=" + std::to_string(int(a.reduction)) +
         ",chunk=" + std::to_string(a.chunkRows) +
         ",budget=" + std::to_string(a.memoryBudgetBytes) +
         ",workspace=" + std::to_string(a.gemmWorkspaceBytes) +
         ",bf16acc=" + std::to_string(a.bf16GradAccumulation) +
         ",gemm=" + backendName(a.gemmBackend) + ",set=" + llvm::join(a.set, ";");
}

struct Plan {
  std::mutex mutex; // one call at a time: the cuBLASLt handle is not shared
  cuda::Device device = cuda::Device::open();
  GemmBackend backend;
  std::string note;
  std::optional<Programs> programs;
  std::map<std::string, std::pair<Kernel, dsl::Config>> dslGemms;
  std::optional<Kernel> logitsKernel; ///< lce_logits, where mayFoldLogits
  int64_t logitsBlockM = 0;
  std::string logitsConfigKey;
  std::optional<cublaslt::Gemm> gemm;
  std::optional<GemmPaths> paths;
  /// Rows per chunk of the call being enqueued (chunkFor).
  int64_t chunk = 0;
  /// Chunks prepareLinearCe chose by timing, by N.
  std::map<int64_t, int64_t> tunedChunk;
  bool mayTimePaths = false; ///< only in prepareLinearCe's warm-up step

  explicit Plan(const LinearCeArgs &a) {
    // Auto picks per problem where lce_gemm can run (bf16/f16, tensor
    // cores from sm_80) and fits: the default tiles of lce_gemm and
    // lce_logits take 197,696 bytes of shared memory, which sm_90 has (227
    // KiB) and sm_80 (163 KiB) and sm_86/89 (99 KiB) do not. It falls back
    // to lce_gemm alone when cuBLASLt cannot be opened.
    bool tensorCores = device.computeCapability().first >= 8;
    bool dslEligible = a.dtype != DType::F32 && tensorCores &&
                       device.maxSharedMemoryPerBlockOptin() >= 197696;
    backend = a.gemmBackend;
    if (backend == GemmBackend::Dsl && !tensorCores)
      throw Error("fused_linear_ce: the DSL GEMMs (lce_gemm) need sm_80 or "
                  "newer (this GPU is " +
                  device.archString() + ")");
    std::string why;
    if (backend == GemmBackend::Auto && dslEligible &&
        !cublaslt::available(&why)) {
      backend = GemmBackend::Dsl;
      note = "cuBLASLt unavailable: " + why;
    }
    if (backend != GemmBackend::Dsl)
      gemm.emplace(size_t(a.gemmWorkspaceBytes), /*allocateWorkspace=*/false);
    if (backend == GemmBackend::Auto && dslEligible)
      paths.emplace(device, a.dtype);
    programs = buildPrograms(a, a.dtype);
    for (const Kernel *k : {&programs->weights, &programs->rows, &programs->sum})
      k->compileForGpu();
    // (mayFoldLogits: the call asks for the DSL or the auto path.)
    if (mayFoldLogits(a) && (backend == GemmBackend::Dsl || dslEligible)) {
      dsl::Config c = logitsConfig(a);
      logitsBlockM = c.get("BLOCK_M");
      logitsConfigKey = c.str();
      logitsKernel.emplace(findKernel("lce_logits").build(c));
      logitsKernel->compileForGpu();
      programs->rowsFolded->compileForGpu();
    }
  }

  /// The rows per chunk for `a`: a timed choice for its N, else the budget's.
  int64_t chunkFor(const LinearCeArgs &a) const {
    auto it = tunedChunk.find(a.N);
    return it != tunedChunk.end() ? it->second : linearCeChunkRows(a);
  }

  /// C = alpha op(A) op(B) + beta C by lce_gemm: one program per BLOCK_M x
  /// BLOCK_N block of C, compiled per transpose, C dtype and --set.
  void dslGemm(const LinearCeArgs &a, const cublaslt::Matrix &A, bool ta,
               const cublaslt::Matrix &B, bool tb, const cublaslt::Matrix &C,
               float alpha, float beta, CUstream stream) {
    dsl::Config config = gemmConfig(a, ta, tb, C.dtype == DType::F32);
    auto it = dslGemms.find(config.str());
    if (it == dslGemms.end()) {
      Kernel k(findKernel("lce_gemm").build(config));
      k.compileForGpu();
      it = dslGemms.emplace(config.str(), std::make_pair(k, config)).first;
    }
    int64_t bm = config.get("BLOCK_M"), bn = config.get("BLOCK_N");
    int64_t m = C.rows, n = C.cols, kk = ta ? A.rows : A.cols;
    auto ptr = [](const cublaslt::Matrix &x) {
      return KernelArg::pointer(reinterpret_cast<void *>(x.ptr), x.dtype);
    };
    it->second.first.launch(
        {(m + bm - 1) / bm, (n + bn - 1) / bn},
        {ptr(A), ptr(B), ptr(C), KernelArg::i32(int32_t(m)),
         KernelArg::i32(int32_t(n)), KernelArg::i32(int32_t(kk)),
         KernelArg::i64(A.ld), KernelArg::i64(B.ld), KernelArg::i64(C.ld),
         KernelArg::f32(alpha), KernelArg::f32(beta)},
        stream);
  }

  void runGemm(const LinearCeArgs &a, const cublaslt::Matrix &A, bool ta,
               const cublaslt::Matrix &B, bool tb, const cublaslt::Matrix &C,
               float alpha, float beta, CUstream stream) {
    auto viaCublas = [&] { gemm->run(A, ta, B, tb, C, alpha, beta, stream); };
    auto viaDsl = [&] { dslGemm(a, A, ta, B, tb, C, alpha, beta, stream); };
    if (!gemm)
      return viaDsl();
    if (!paths)
      return viaCublas();
    // Everything the choice depends on: cuBLASLt's problem and the
    // lce_gemm config.
    std::string problem =
        gemm->problemKey(A, ta, B, tb, C, beta) + ", lce_gemm " +
        gemmConfig(a, ta, tb, C.dtype == DType::F32).str();
    double flop = 2.0 * C.rows * C.cols * (ta ? A.rows : A.cols);
    if (paths->useDsl(problem, flop, viaCublas, viaDsl, stream, mayTimePaths))
      return viaDsl();
    viaCublas();
  }

  /// Whether the chunk's logits come from lce_logits (the DSL path, or
  /// auto where the pair lce_logits + the row program on its partials ran
  /// faster than cuBLASLt + the row program's own walk, timed together as
  /// one problem).
  bool foldsLogits(const cublaslt::Matrix &hc, const cublaslt::Matrix &W,
                   const cublaslt::Matrix &z,
                   const std::function<void()> &walk,
                   const std::function<void()> &fold, CUstream stream) {
    if (!logitsKernel)
      return false;
    if (!gemm || !paths)
      return true;
    std::string problem = gemm->problemKey(hc, false, W, true, z, 0.f) +
                          ", lce_logits " + logitsConfigKey +
                          " and lce_logits_grad " + programs->rows.config();
    return paths->useDsl(problem, 0, walk, fold, stream, mayTimePaths,
                         "logits GEMM + lce_logits_grad",
                         "lce_logits + lce_logits_grad on its partials");
  }

  /// The GEMMs and the row program of the chunk at row r0 (all of them, or
  /// the one `only` names).
  void chunkSteps(const LinearCeArgs &a, const Buffers &b, int64_t r0,
                  std::optional<Step> only, CUstream stream) {
    int64_t rows = std::min(chunk, a.N - r0);
    size_t es = dtypeSize(a.dtype);
    auto at = [](const void *p, int64_t elements, size_t size) {
      return reinterpret_cast<uint64_t>(p) + uint64_t(elements) * size;
    };
    int64_t ldx = inputStride(a), ldg = gradInputStride(a);
    DType acc = accType(a);
    void *dzPtr = dzInPlace(a) ? b.logits : b.dz;
    cublaslt::Matrix hc{at(a.input, r0 * ldx, es), a.dtype, rows, a.d, ldx};
    cublaslt::Matrix W{at(a.weight, 0, es), a.dtype, a.V, a.d,
                       weightStride(a)};
    cublaslt::Matrix z{at(b.logits, 0, 1), logitsType(a), rows, a.V, a.V};
    cublaslt::Matrix dz{at(dzPtr, 0, 1), a.dtype, rows, a.V, a.V};
    auto runs = [&](Step s) { return !only || *only == s; };
    float unscale = 1.f / dzScale(a); // the GEMMs' alpha
    // z = h_c W^T, then the row program: the logits' LSE from a walk over
    // them, or from lce_logits' partials.
    KernelArg zArg = KernelArg::pointer(b.logits, logitsType(a));
    std::vector<KernelArg> rowArgs =
        rowsArgs(a, b, zArg, KernelArg::pointer(dzPtr, a.dtype), r0);
    auto walked = [&](bool gemm, bool program) {
      if (gemm)
        runGemm(a, hc, false, W, true, z, 1.f, 0.f, stream);
      if (program)
        programs->rows.launch({rows}, rowArgs, stream);
    };
    auto folded = [&](bool gemm, bool program) {
      if (gemm)
        logitsKernel->launch(
            {(rows + logitsBlockM - 1) / logitsBlockM, b.blocks},
            logitsArgs(a, b, zArg, r0, rows), stream);
      if (program)
        programs->rowsFolded->launch({rows}, rowArgs, stream);
    };
    bool gemmStep = runs(Step::LogitsGemm), rowStep = runs(Step::RowsProgram);
    if (foldsLogits(
            hc, W, z, [&] { walked(true, true); },
            [&] { folded(true, true); }, stream))
      folded(gemmStep, rowStep);
    else
      walked(gemmStep, rowStep);
    // The first chunk overwrites dW and db (beta 0): no memset, no read.
    float beta = r0 == 0 ? 0.f : 1.f;
    if (runs(Step::DwGemm)) {
      runGemm(a, dz, true, hc, false, {at(a.gradWeight, 0, 1), acc, a.V, a.d, a.d},
              unscale, beta, stream);
      if (a.bias)
        runGemm(a, {at(b.ones, 0, 1), a.dtype, 1, rows, rows}, false, dz, false,
                {at(a.gradBias, 0, 1), acc, 1, a.V, a.V}, unscale, beta,
                stream);
    }
    // After dW: the chunk's input rows are read before dx may overwrite
    // them (gradInput == input).
    if (runs(Step::DhGemm))
      runGemm(a, dz, false, W, false,
              {at(a.gradInput, r0 * ldg, es), a.dtype, rows, a.d, ldg},
              unscale, 0.f, stream);
  }

  /// One forward + backward, enqueued on `stream`.
  void step(const LinearCeArgs &a, const Buffers &b, CUstream stream) {
    chunk = chunkFor(a);
    if (gemm)
      gemm->setWorkspace(reinterpret_cast<uint64_t>(b.gemm));
    if (a.bias) { // the db GEMM's row of ones, in the input dtype
      uint32_t one = a.dtype == DType::BF16  ? 0x3f80
                     : a.dtype == DType::F16 ? 0x3c00
                                             : 0x3f800000;
      cuda::fillAsync(reinterpret_cast<CUdeviceptr>(b.ones), one,
                      dtypeSize(a.dtype), size_t(chunk), stream);
    }
    programs->weights.launch({1}, weightsArgs(a, b), stream);
    for (int64_t r0 = 0; r0 < a.N; r0 += chunk)
      chunkSteps(a, b, r0, std::nullopt, stream);
    if (a.reduction != Reduction::None)
      programs->sum.launch({1}, sumArgs(a, b), stream);
  }
};

Plan &planFor(const LinearCeArgs &a) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<Plan>> plans;
  std::lock_guard<std::mutex> lock(mutex);
  std::unique_ptr<Plan> &slot =
      plans[std::to_string(cuda::Device::currentOrdinal()) + "|" + planKey(a)];
  if (!slot)
    slot = std::make_unique<Plan>(a);
  return *slot;
}

Buffers buffersFor(const LinearCeArgs &a, void *workspace) {
  return buffers(a, layout(a, Device::Gpu, linearCeChunkRows(a)), workspace);
}

} // namespace

void runOnGpu(const LinearCeArgs &a, void *workspace, size_t, CUstream stream) {
  Plan &plan = planFor(a);
  std::lock_guard<std::mutex> lock(plan.mutex);
  plan.step(a, buffersFor(a, workspace), stream);
}

void enqueueFirstChunkStep(const LinearCeArgs &a, void *workspace, size_t,
                           Step step, CUstream stream) {
  Plan &plan = planFor(a);
  std::lock_guard<std::mutex> lock(plan.mutex);
  Buffers b = buffersFor(a, workspace);
  if (plan.gemm)
    plan.gemm->setWorkspace(reinterpret_cast<uint64_t>(b.gemm));
  plan.chunk = plan.chunkFor(a);
  plan.chunkSteps(a, b, 0, step, stream);
}

} // namespace lce

LinearCePlanInfo prepareLinearCe(const LinearCeArgs &a, void *workspace,
                                 size_t workspaceBytes,
                                 const LinearCeTuning &tuning,
                                 CUstream stream) {
  validateLinearCe(a);
  LinearCePlanInfo info;
  if (a.N == 0)
    return info;
  lce::checkWorkspace(a, workspace, workspaceBytes, Device::Gpu);
  if (tuning.gemmCandidates < 1)
    throw Error("fused_linear_ce: gemm candidates must be >= 1 (got " +
                std::to_string(tuning.gemmCandidates) + ")");
  lce::Plan &plan = lce::planFor(a);
  std::lock_guard<std::mutex> lock(plan.mutex);
  lce::Buffers b = lce::buffersFor(a, workspace);
  auto step = [&] { plan.step(a, b, stream); };
  // Timing cuBLASLt's candidates runs each product several times: only in
  // these warm-up steps, whatever throws.
  if (plan.gemm) {
    plan.gemm->setTimedCandidates(tuning.gemmCandidates);
    plan.gemm->setChoiceStore(gemmChoiceStore(plan.device, a.dtype));
  }
  llvm::scope_exit untimed([&] {
    plan.mayTimePaths = false;
    if (plan.gemm)
      plan.gemm->setTimedCandidates(1);
  });
  // The call's GEMM choices: those timed now (the chunk tuner's steps
  // included), and those made before, by an earlier call in this process or
  // in the tuning database.
  int timedBefore = plan.gemm ? plan.gemm->problemsTimed() : 0;
  int storedBefore = plan.gemm ? plan.gemm->problemsFromStore() : 0;
  int seenBefore = plan.gemm ? plan.gemm->problemsSeen() : 0;
  info.chunkSource = "memory budget";
  if (tuning.tuneChunkRows) {
    TuningDatabase db = TuningDatabase::fromEnvironment();
    TuningKey key;
    key.kernel = "fused_linear_ce";
    key.shape = "N=" + std::to_string(a.N) + "," + lce::planKey(a);
    key.dtype = dtypeName(a.dtype);
    key.device = deviceIdentity(plan.device);
    key.kernelVersion =
        std::string(compilerSourceHash()) + ";spec " +
        specHash(findKernel("lce_logits_grad"), a.dtype, lce::problem(a));
    bool fromDb = false;
    int64_t most = linearCeChunkRows(a);
    TuningEntry e = lookupOrTune(
        db, key,
        [&] {
          TuneResult r = timeChunkCandidates(
              lce::chunkCandidates(a),
              [&](int64_t rows) { plan.tunedChunk[a.N] = rows; }, step,
              stream);
          for (const Trial &t : r.trials)
            info.chunkTrials.push_back({t.params.at("CHUNK_ROWS"), t.ms});
          return r;
        },
        false, &fromDb);
    int64_t asked = e.best.at("CHUNK_ROWS");
    info.chunkSource = fromDb ? db.pathFor(key).string() : "tuned now";
    // The workspace holds `most` rows: a stored entry must not ask for more.
    plan.tunedChunk.erase(a.N);
    if (asked < 1 || asked > most)
      throw Error("fused_linear_ce: the tuning entry " + info.chunkSource +
                  " asks for " + std::to_string(asked) +
                  " rows per chunk, outside 1.." + std::to_string(most) +
                  " (remove the file, or run `tilejit cache clear`)");
    plan.tunedChunk[a.N] = asked;
  }
  // One step always: it times what is to be timed, and compiles (lce_gemm)
  // and picks (cuBLASLt) everything a later call, or its capture, runs.
  if (plan.paths)
    plan.paths->startReport();
  plan.mayTimePaths = true;
  step();
  plan.mayTimePaths = false;
  if (plan.gemm) {
    info.gemmProblemsTimed = plan.gemm->problemsTimed() - timedBefore;
    info.gemmProblemsFromStore =
        seenBefore + plan.gemm->problemsFromStore() - storedBefore;
    info.gemmChoicesChanged =
        plan.gemm->problemsWhereTimingChangedTheAlgorithm();
  }
  if (plan.paths)
    plan.paths->report(info);
  cuda::synchronize(stream);
  info.chunkRows = plan.chunkFor(a);
  info.gemmBackend = plan.backend;
  info.note = plan.note;
  return info;
}

} // namespace ops
} // namespace tilejit
