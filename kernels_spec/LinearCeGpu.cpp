//===- LinearCeGpu.cpp - chunked fused linear CE on the GPU ---------------===//
//
// The chunk loop of LinearCeOp.h with cuBLASLt GEMMs (runtime/CublasLt.h)
// or tilejit's own (lce_gemm), and the DSL programs compiled for the GPU in
// front of us. A step is queued on one stream (the legacy default one, or
// the stream of its CUDA graph) with no host synchronization until the
// results are copied back.
//
//===----------------------------------------------------------------------===//
#include "kernels_spec/LinearCeOp.h"
#include "kernels_spec/LinearCeTuning.h"
#include "runtime/Autotuner.h"
#include "runtime/Cache.h"
#include "runtime/CublasLt.h"
#include "runtime/CudaDriver.h"
#include "runtime/TuningDatabase.h"
#include "tilejit/CachedCompile.h"
#include "tilejit/Error.h"
#include "tilejit/HostFloat.h"
#include "tilejit/KernelSpec.h"
#include "tilejit/Timing.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <optional>

namespace tilejit {
namespace {

using Reduction = ref::LinearCeParams::Reduction;

/// A device buffer filled from a host vector (or one zero element, so that
/// an absent optional input still has a valid address).
template <typename T> cuda::DeviceBuffer upload(const std::vector<T> &host) {
  size_t bytes = std::max<size_t>(host.size(), 1) * sizeof(T);
  cuda::DeviceBuffer b(bytes);
  b.memset(0);
  if (!host.empty())
    b.copyFromHost(host.data(), host.size() * sizeof(T));
  return b;
}

} // namespace

LinearCeOutputs runLinearCeGpu(const ref::LinearCeInputs &in,
                               const LinearCeOptions &options) {
  validateLinearCe(in, options);
  if (in.N == 0)
    return emptyLinearCe(in, options, "gpu (empty batch: nothing launched)");
  const ref::LinearCeParams &p = options.params;
  const int64_t N = in.N, d = in.d, V = in.V;
  // Buffers hold the largest chunk; `chunk` is the one the loop runs with.
  const int64_t maxChunk = linearCeChunkRows(in, options);
  int64_t chunk = maxChunk;
  cuda::Device device = cuda::Device::open();
  using Backend = LinearCeOptions::GemmBackend;
  // Auto picks per problem where lce_gemm can run (bf16/f16, mma.sync on
  // sm_80+), and falls back to lce_gemm alone when cuBLASLt cannot be
  // opened.
  bool tensorCores = device.computeCapability().first >= 8;
  bool dslEligible = in.dtype != DType::F32 && tensorCores;
  Backend backend = options.gemmBackend;
  if (backend == Backend::Dsl && !tensorCores)
    throw Error("fused_linear_ce: the DSL GEMMs (lce_gemm) need sm_80 or "
                "newer (this GPU is " +
                device.archString() + ")");
  std::string whyNoCublasLt;
  if (backend == Backend::Auto && dslEligible &&
      !cublaslt::available(&whyNoCublasLt))
    backend = Backend::Dsl;
  bool useCublasLt = backend != Backend::Dsl;
  std::optional<cublaslt::Gemm> gemm;
  if (useCublasLt)
    gemm.emplace(options.gemmWorkspaceBytes);
  std::optional<GemmPaths> paths;
  if (backend == Backend::Auto && dslEligible)
    paths.emplace(device, in.dtype);
  bool mayTimePaths = true; // only in the warm-up runs
  CompileOptions copts;
  copts.arch = device.archString();
  LoadedKernels loaded;
  auto load = [&](const char *name, DType dtype) {
    CompiledKernel k =
        compileCached(buildLinearCeKernel(name, dtype, in, options), copts);
    return std::make_pair(loaded.function(k), k.threads);
  };
  auto [weightsFn, weightsThreads] = load("lce_row_weights", DType::F32);
  auto [rowsFn, rowsThreads] = load("lce_logits_grad", in.dtype);
  auto [sumFn, sumThreads] = load("lce_loss_sum", DType::F32);

  // Inputs, outputs and the one chunk of logits. dz overwrites the logits in
  // place when both have one dtype (each element is read and written by the
  // same thread); f32 logits of bf16/f16 inputs get a dz buffer of their
  // own, since a narrower view of a row would be written by threads other
  // than those still reading it.
  size_t es = dtypeSize(in.dtype);
  cuda::DeviceBuffer h = upload(in.h), W = upload(in.W);
  cuda::DeviceBuffer bias =
      upload(in.bias.empty() ? std::vector<float>{}
                             : loadAsFloats(in.bias.data(), in.dtype, V));
  cuda::DeviceBuffer target = upload(in.target);
  cuda::DeviceBuffer weight = upload(in.classWeight);
  cuda::DeviceBuffer upstream = upload(in.gradOutput);
  cuda::DeviceBuffer stats(5 * sizeof(float)), loss(2 * sizeof(float));
  cuda::DeviceBuffer rowLoss(N * 4), rowZLoss(N * 4), lse(N * 4);
  DType logitsType = options.narrowLogits ? in.dtype : DType::F32;
  bool inPlace = logitsType == in.dtype;
  cuda::DeviceBuffer logits(maxChunk * V * dtypeSize(logitsType));
  cuda::DeviceBuffer dzBuffer(inPlace ? 0 : maxChunk * V * es);
  // dW and db accumulate in fp32, or in bf16 on request.
  DType accType = options.bf16GradAccumulation ? DType::BF16 : DType::F32;
  size_t accBytes = dtypeSize(accType);
  // dh is complete after its chunk's one GEMM (fp32 accumulation inside),
  // so it is stored in the input dtype, as PyTorch returns it.
  cuda::DeviceBuffer dh(N * d * es), dW(V * d * accBytes), db(V * accBytes);
  std::vector<uint8_t> onesHost(maxChunk * es);
  for (int64_t i = 0; i < maxChunk; ++i)
    storeFromDouble(onesHost.data(), in.dtype, i, 1.0);
  cuda::DeviceBuffer ones = upload(onesHost);
  loss.memset(0);

  int32_t n32 = int32_t(N), v32 = int32_t(V);
  int64_t ignore = p.ignoreIndex, rowStride = V;
  int64_t dzStride = V;
  int32_t hasB = in.bias.empty() ? 0 : 1, hasW = in.classWeight.empty() ? 0 : 1;
  int32_t none = p.reduction == Reduction::None ? 1 : 0;
  int32_t mean = p.reduction == Reduction::Mean ? 1 : 0;
  float eps = float(p.labelSmoothing), zl = float(p.zLoss),
        cap = float(p.softcap), dzScale = linearCeDzScale(in, options);
  float unscale = 1.f / dzScale; // the GEMMs' alpha
  CUdeviceptr ptr[] = {logits.ptr(),   inPlace ? logits.ptr() : dzBuffer.ptr(),
                       bias.ptr(),     target.ptr(),
                       weight.ptr(),   stats.ptr(),
                       upstream.ptr(), rowLoss.ptr(),
                       rowZLoss.ptr(), lse.ptr(),
                       loss.ptr()};
  enum {
    Logits,
    Dz,
    Bias,
    Target,
    Weight,
    Stats,
    Up,
    RowLoss,
    RowZ,
    Lse,
    Loss
  };

  LinearCeOutputs out;
  if (!whyNoCublasLt.empty())
    out.gemmNote = "cuBLASLt unavailable: " + whyNoCublasLt;
  // Where the work goes: the legacy default stream, or the stream a CUDA
  // graph of the step was captured on.
  CUstream stream = nullptr;
  // C = alpha op(A) op(B) + beta C through cuBLASLt or lce_gemm (one
  // program per BLOCK_M x BLOCK_N block of C, compiled per transpose, C
  // dtype and --set).
  std::map<std::string, std::pair<cuda::Function, int>> dslGemms;
  auto runDslGemm = [&](const cublaslt::Matrix &A, bool ta,
                        const cublaslt::Matrix &B, bool tb,
                        const cublaslt::Matrix &C, float alpha, float beta) {
    dsl::Config config =
        lceGemmConfig(in.dtype, options, ta, tb, C.dtype == DType::F32);
    auto it = dslGemms.find(config.str());
    if (it == dslGemms.end()) {
      CompiledKernel k =
          compileCached(findKernel("lce_gemm").build(config), copts);
      it = dslGemms
               .emplace(config.str(),
                        std::make_pair(loaded.function(k), k.threads))
               .first;
    }
    unsigned bm = unsigned(config.get("BLOCK_M")),
             bn = unsigned(config.get("BLOCK_N"));
    int32_t m = int32_t(C.rows), n = int32_t(C.cols),
            kk = int32_t(ta ? A.rows : A.cols);
    CUdeviceptr pa = A.ptr, pb = B.ptr, pc = C.ptr;
    int64_t lda = A.ld, ldb = B.ld, ldc = C.ld;
    std::vector<void *> args = {&pa,  &pb,  &pc,  &m,     &n,   &kk,
                                &lda, &ldb, &ldc, &alpha, &beta};
    cuda::launch(it->second.first,
                 {(unsigned(m) + bm - 1) / bm, (unsigned(n) + bn - 1) / bn},
                 {unsigned(it->second.second)}, 0, stream, args);
  };
  auto runGemm = [&](const cublaslt::Matrix &A, bool ta,
                     const cublaslt::Matrix &B, bool tb,
                     const cublaslt::Matrix &C, float alpha, float beta) {
    auto viaCublas = [&] { gemm->run(A, ta, B, tb, C, alpha, beta, stream); };
    auto viaDsl = [&] { runDslGemm(A, ta, B, tb, C, alpha, beta); };
    if (!useCublasLt)
      return viaDsl();
    if (!paths)
      return viaCublas();
    // Everything the choice depends on: cuBLASLt's problem, what it may
    // choose from, and the lce_gemm config.
    std::string problem =
        gemm->problemKey(A, ta, B, tb, C, beta) + ", cuBLASLt's first " +
        std::to_string(options.gemmCandidates) + ", lce_gemm " +
        lceGemmConfig(in.dtype, options, ta, tb, C.dtype == DType::F32).str();
    if (paths->useDsl(problem, viaCublas, viaDsl, stream, mayTimePaths))
      return viaDsl();
    viaCublas();
  };
  // The GEMMs and the row program of the chunk at row r0; runs `only` the
  // step of that index when it is not AllSteps (timing one step at a time).
  enum { LogitsGemm, RowsProgram, DhGemm, DwGemm, AllSteps };
  auto chunkSteps = [&](int64_t r0, int only) {
    int64_t rows = std::min(chunk, N - r0);
    int32_t first = int32_t(r0);
    cublaslt::Matrix hc{h.ptr() + r0 * d * es, in.dtype, rows, d, d};
    cublaslt::Matrix Wm{W.ptr(), in.dtype, V, d, d};
    cublaslt::Matrix z{logits.ptr(), logitsType, rows, V, V};
    cublaslt::Matrix dz{ptr[Dz], in.dtype, rows, V, dzStride};
    auto runs = [&](int which) { return only == AllSteps || only == which; };
    if (runs(LogitsGemm))
      runGemm(hc, false, Wm, true, z, 1.f, 0.f); // z = h_c W^T
    std::vector<void *> args = {
        &ptr[Logits], &ptr[Dz],   &ptr[Bias],    &ptr[Target], &ptr[Weight],
        &ptr[Stats],  &ptr[Up],   &ptr[RowLoss], &ptr[RowZ],   &ptr[Lse],
        &v32,         &rowStride, &dzStride,     &first,       &ignore,
        &eps,         &zl,        &cap,          &hasB,        &hasW,
        &none,        &dzScale};
    if (runs(RowsProgram))
      cuda::launch(rowsFn, {unsigned(rows)}, {unsigned(rowsThreads)}, 0, stream,
                   args);
    if (runs(DhGemm))
      runGemm(dz, false, Wm, false,
              {dh.ptr() + r0 * d * es, in.dtype, rows, d, d}, unscale, 0.f);
    // The first chunk overwrites dW and db (beta 0): no memset, no read.
    float beta = r0 == 0 ? 0.f : 1.f;
    if (runs(DwGemm))
      runGemm(dz, true, hc, false, {dW.ptr(), accType, V, d, d}, unscale, beta);
    if (hasB && runs(DwGemm))
      runGemm({ones.ptr(), in.dtype, 1, rows, rows}, false, dz, false,
              {db.ptr(), accType, 1, V, V}, unscale, beta);
  };
  // One forward + backward, queued on `stream`.
  auto step = [&] {
    std::vector<void *> wArgs = {&ptr[Target], &ptr[Weight], &ptr[Stats],
                                 &n32,         &v32,         &ignore,
                                 &hasW,        &mean};
    cuda::launch(weightsFn, {1}, {unsigned(weightsThreads)}, 0, stream, wArgs);
    out.chunks = 0;
    for (int64_t r0 = 0; r0 < N; r0 += chunk, ++out.chunks)
      chunkSteps(r0, AllSteps);
    if (!none) {
      std::vector<void *> sArgs = {&ptr[RowLoss], &ptr[RowZ], &ptr[Stats],
                                   &ptr[Loss], &n32};
      cuda::launch(sumFn, {1}, {unsigned(sumThreads)}, 0, stream, sArgs);
    }
  };
  std::function<void()> runStep = step;
  // Timing cuBLASLt's candidates runs each product several times: only in
  // warm-up steps (the chunk tuner's, and one more below).
  if (useCublasLt) {
    gemm->setTimedCandidates(options.gemmCandidates);
    gemm->setChoiceStore(gemmChoiceStore(device, in.dtype));
  }
  if (options.tuneChunkRows) {
    TuningDatabase db = TuningDatabase::fromEnvironment();
    TuningKey key;
    key.kernel = "fused_linear_ce";
    key.shape = "N=" + std::to_string(N) + ",d=" + std::to_string(d) +
                ",V=" + std::to_string(V) +
                ",workspace=" + std::to_string(options.gemmWorkspaceBytes) +
                ",narrow=" + std::to_string(options.narrowLogits) +
                ",bf16acc=" + std::to_string(options.bf16GradAccumulation) +
                ",gemm=" + gemmBackendName(backend) +
                ",budget=" + std::to_string(options.memoryBudgetBytes) +
                ",chunk=" + std::to_string(options.chunkRows);
    key.dtype = dtypeName(in.dtype);
    key.device = deviceIdentity(device);
    key.kernelVersion = compilerSourceHash();
    bool fromDb = false;
    TuningEntry e = lookupOrTune(
        db, key,
        [&] {
          TuneResult r = timeChunkCandidates(
              linearCeChunkCandidates(in, options),
              [&](int64_t rows) { chunk = rows; }, step);
          for (const Trial &t : r.trials)
            out.chunkTrials.push_back({t.params.at("CHUNK_ROWS"), t.ms});
          return r;
        },
        false, &fromDb);
    chunk = e.best.at("CHUNK_ROWS");
    out.chunkSource = fromDb ? db.pathFor(key).string() : "tuned now";
    // The buffers hold maxChunk rows: a stored entry must not ask for more.
    if (chunk < 1 || chunk > maxChunk)
      throw Error("fused_linear_ce: the tuning entry " + out.chunkSource +
                  " asks for " + std::to_string(chunk) +
                  " rows per chunk, outside 1.." + std::to_string(maxChunk) +
                  " (remove the file, or run `tilejit cache clear`)");
  }
  out.chunkRows = chunk;
  if ((useCublasLt && options.gemmCandidates > 1) || paths) {
    if (paths)
      paths->startReport();
    step();
    if (useCublasLt) {
      gemm->setTimedCandidates(1);
      out.gemmProblemsTimed = gemm->problemsTimed();
      out.gemmProblemsFromStore = gemm->problemsFromStore();
      out.gemmChoicesChanged = gemm->problemsWhereTimingChangedTheAlgorithm();
    }
  }
  mayTimePaths = false;
  out.gemmBackend = backend;
  if (paths)
    paths->report(out);
  auto t0 = std::chrono::steady_clock::now();
  step();
  cuda::synchronize();
  out.firstRunMs = msSince(t0);
  // The whole step as one CUDA graph (every GEMM's algorithm is cached by
  // now). A host synchronization or a copy inside the step would fail the
  // capture.
  std::optional<cuda::Stream> graphStream;
  std::optional<cuda::Graph> graph;
  if (options.cudaGraph) {
    graphStream.emplace();
    stream = graphStream->get();
    graph.emplace(
        cuda::Graph::capture(*graphStream, [&](CUstream) { step(); }));
    runStep = [&] { graph->launch(stream); };
    runStep(); // the results below come from the graph
    graphStream->synchronize();
    out.ranAsGraph = true;
  }
  if (options.iterations > 0) {
    out.ms = medianOf(cuda::timeEachMs(runStep, options.iterations, stream));
    const char *names[] = {"logits GEMM", "lce_logits_grad", "dh GEMM",
                           hasB ? "dW + db GEMMs" : "dW GEMM"};
    for (int i = LogitsGemm; i < AllSteps; ++i) {
      std::vector<double> ms;
      for (int r = 0; r < 5; ++r) {
        // The row program may write dz over the logits: fresh ones first.
        if (i == RowsProgram)
          chunkSteps(0, LogitsGemm);
        ms.push_back(cuda::timeMs([&] { chunkSteps(0, i); }, stream));
      }
      out.chunkStepMs.push_back({names[i], medianOf(ms)});
    }
    runStep(); // the single steps left dW and the logits changed
    cuda::synchronize();
  }
  out.workspaceBytes = logits.size() + dzBuffer.size() + ones.size() +
                       (useCublasLt ? options.gemmWorkspaceBytes : 0);

  auto fetch = [](const cuda::DeviceBuffer &b, std::vector<float> &v, int64_t n,
                  DType t = DType::F32) {
    std::vector<uint8_t> raw(n * dtypeSize(t));
    b.copyToHost(raw.data(), raw.size());
    v = loadAsFloats(raw.data(), t, n);
  };
  fetch(rowLoss, out.rowLoss, N);
  fetch(rowZLoss, out.rowZLoss, N);
  fetch(lse, out.lse, N);
  fetch(dh, out.dh, N * d, in.dtype);
  fetch(dW, out.dW, V * d, accType);
  if (hasB)
    fetch(db, out.db, V, accType);
  std::vector<float> l;
  fetch(loss, l, 2);
  out.loss = l[0];
  out.zLoss = l[1];
  out.device = device.name();
  return out;
}

} // namespace tilejit
