//===- CublasLt.cpp - GEMMs through a dlopen'ed cuBLASLt ------------------===//
#include "runtime/CublasLt.h"

#include "runtime/CudaDriver.h"
#include "tilejit/Error.h"
#include "tilejit/HostFloat.h"
#include "tilejit/Timing.h"

#include "llvm/ADT/ScopeExit.h"

#include <cublasLt.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <map>
#include <mutex>
#include <random>
#include <vector>

namespace tilejit {
namespace cublaslt {
namespace {

#define TILEJIT_CUBLASLT_FUNCTIONS(X)                                          \
  X(cublasLtCreate)                                                            \
  X(cublasLtDestroy)                                                           \
  X(cublasLtMatmul)                                                            \
  X(cublasLtMatmulDescCreate)                                                  \
  X(cublasLtMatmulDescDestroy)                                                 \
  X(cublasLtMatmulDescSetAttribute)                                            \
  X(cublasLtMatrixLayoutCreate)                                                \
  X(cublasLtMatrixLayoutDestroy)                                               \
  X(cublasLtMatmulPreferenceCreate)                                            \
  X(cublasLtMatmulPreferenceDestroy)                                           \
  X(cublasLtMatmulPreferenceSetAttribute)                                      \
  X(cublasLtMatmulAlgoGetHeuristic)                                            \
  X(cublasLtGetVersion)

struct Api {
#define TILEJIT_DECLARE(Name) decltype(&::Name) Name = nullptr;
  TILEJIT_CUBLASLT_FUNCTIONS(TILEJIT_DECLARE)
#undef TILEJIT_DECLARE
  bool usable = false;
  std::string whyNot;
};

const Api &api() {
  static Api a;
  static std::once_flag once;
  std::call_once(once, [] {
    std::vector<std::string> names;
    if (const char *env = std::getenv("TILEJIT_CUBLASLT"))
      names.push_back(env);
    names.push_back("libcublasLt.so.13");
    names.push_back("libcublasLt.so.12");
    void *lib = nullptr;
    for (const std::string &n : names)
      if ((lib = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL)))
        break;
    if (!lib) {
      const char *why = dlerror(); // a second call would return null
      a.whyNot = "libcublasLt not found (tried $TILEJIT_CUBLASLT, "
                 "libcublasLt.so.13, .so.12): " +
                 std::string(why ? why : "");
      return;
    }
#define TILEJIT_RESOLVE(Name)                                                  \
  a.Name = reinterpret_cast<decltype(a.Name)>(dlsym(lib, #Name));              \
  if (!a.Name) {                                                               \
    a.whyNot = "libcublasLt has no " #Name;                                    \
    return;                                                                    \
  }
    TILEJIT_CUBLASLT_FUNCTIONS(TILEJIT_RESOLVE)
#undef TILEJIT_RESOLVE
    a.usable = true;
  });
  return a;
}

void check(cublasStatus_t s, const std::string &what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw Error("cuBLASLt: " + what + " failed with status " +
                std::to_string(int(s)));
}

cudaDataType_t cudaType(DType t) {
  switch (t) {
  case DType::BF16:
    return CUDA_R_16BF;
  case DType::F16:
    return CUDA_R_16F;
  case DType::F32:
    return CUDA_R_32F;
  default:
    throw Error(std::string("cuBLASLt GEMM: unsupported dtype ") +
                dtypeName(t));
  }
}

} // namespace

bool available(std::string *why) {
  const Api &a = api();
  if (!a.usable && why)
    *why = a.whyNot;
  return a.usable;
}

std::string version() {
  std::string why;
  if (!available(&why))
    throw Error(why);
  return std::to_string(api().cublasLtGetVersion());
}

struct Gemm::Impl {
  cublasLtHandle_t handle = nullptr;
  cuda::DeviceBuffer owned; ///< the workspace, unless the caller gives it
  uint64_t workspace = 0;
  size_t workspaceBytes = 0;
  std::map<std::string, cublasLtMatmulAlgo_t> algos;
  int timedCandidates = 1;
  ChoiceStore store;
  int timed = 0, stored = 0, changed = 0;
};

Gemm::Gemm(size_t workspaceBytes, bool allocateWorkspace) {
  std::string why;
  if (!available(&why))
    throw Error(why);
  impl_ = std::make_unique<Impl>();
  impl_->workspaceBytes = workspaceBytes;
  if (allocateWorkspace) {
    impl_->owned = cuda::DeviceBuffer(workspaceBytes);
    impl_->workspace = impl_->owned.ptr();
  }
  check(api().cublasLtCreate(&impl_->handle), "cublasLtCreate");
}

void Gemm::setWorkspace(uint64_t ptr) { impl_->workspace = ptr; }

Gemm::~Gemm() {
  if (impl_ && impl_->handle)
    api().cublasLtDestroy(impl_->handle);
}

namespace {

/// "op(A) m x k, op(B) k x n, C m x n" as the call gives them.
std::string shapesOf(const Matrix &A, bool transA, const Matrix &B, bool transB,
                     const Matrix &C) {
  return "op(A) " + std::to_string(transA ? A.cols : A.rows) + "x" +
         std::to_string(transA ? A.rows : A.cols) + ", op(B) " +
         std::to_string(transB ? B.cols : B.rows) + "x" +
         std::to_string(transB ? B.rows : B.cols) + ", C " +
         std::to_string(C.rows) + "x" + std::to_string(C.cols);
}

/// The heuristic assumes 256-byte aligned pointers unless told otherwise;
/// chunks of rows start anywhere.
uint32_t alignmentOf(uint64_t ptr) {
  return uint32_t(std::min<uint64_t>(256, ptr & (~ptr + 1)));
}

} // namespace

std::string Gemm::problemKey(const Matrix &A, bool transA, const Matrix &B,
                             bool transB, const Matrix &C, float beta) const {
  // The library's A is our B (row-major through the transposed problem).
  return shapesOf(A, transA, B, transB, C) + ":" + dtypeName(A.dtype) + "," +
         dtypeName(B.dtype) + "," + dtypeName(C.dtype) + ":" +
         std::to_string(transA) + std::to_string(transB) + ":" +
         std::to_string(A.ld) + "," + std::to_string(B.ld) + "," +
         std::to_string(C.ld) + ":" + std::to_string(alignmentOf(B.ptr)) + "," +
         std::to_string(alignmentOf(A.ptr)) + "," +
         std::to_string(alignmentOf(C.ptr)) +
         (beta == 0.f ? ":C written" : ":C read") + ":workspace " +
         std::to_string(impl_->workspaceBytes);
}

void Gemm::run(const Matrix &A, bool transA, const Matrix &B, bool transB,
               const Matrix &C, float alpha, float beta, CUstream stream) {
  int64_t m = transA ? A.cols : A.rows, k = transA ? A.rows : A.cols;
  int64_t kb = transB ? B.cols : B.rows, n = transB ? B.rows : B.cols;
  std::string shapes = shapesOf(A, transA, B, transB, C);
  if (k != kb || C.rows != m || C.cols != n)
    throw Error("cuBLASLt GEMM: shapes do not agree: " + shapes);
  const Api &a = api();
  // Everything created here is destroyed on every path out.
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  llvm::scope_exit cleanup([&] {
    if (pref)
      a.cublasLtMatmulPreferenceDestroy(pref);
    if (desc)
      a.cublasLtMatmulDescDestroy(desc);
    for (auto l : {la, lb, lc})
      if (l)
        a.cublasLtMatrixLayoutDestroy(l);
  });
  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: the
  // library sees B's and A's buffers as the column-major transposes.
  auto layout = [&](const Matrix &x, cublasLtMatrixLayout_t &l) {
    check(a.cublasLtMatrixLayoutCreate(&l, cudaType(x.dtype), x.cols, x.rows,
                                       x.ld),
          "cublasLtMatrixLayoutCreate");
  };
  layout(B, la);
  layout(A, lb);
  layout(C, lc);
  check(a.cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
        "cublasLtMatmulDescCreate");
  cublasOperation_t opa = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opb = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  check(a.cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                         &opa, sizeof(opa)),
        "setting TRANSA");
  check(a.cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                         &opb, sizeof(opb)),
        "setting TRANSB");

  uint32_t alignA = alignmentOf(B.ptr), alignB = alignmentOf(A.ptr),
           alignC = alignmentOf(C.ptr);
  // Algorithms are cached, and stored, per problem.
  std::string key = problemKey(A, transA, B, transB, C, beta);
  auto matmul = [&](const cublasLtMatmulAlgo_t &algo) {
    check(a.cublasLtMatmul(impl_->handle, desc, &alpha,
                           reinterpret_cast<const void *>(B.ptr), la,
                           reinterpret_cast<const void *>(A.ptr), lb, &beta,
                           reinterpret_cast<const void *>(C.ptr), lc,
                           reinterpret_cast<void *>(C.ptr), lc, &algo,
                           reinterpret_cast<void *>(impl_->workspace),
                           impl_->workspaceBytes, stream),
          "cublasLtMatmul (" + shapes + ")");
  };
  auto cached = impl_->algos.find(key);
  if (cached == impl_->algos.end()) {
    check(a.cublasLtMatmulPreferenceCreate(&pref),
          "cublasLtMatmulPreferenceCreate");
    size_t ws = impl_->workspaceBytes;
    auto prefer = [&](cublasLtMatmulPreferenceAttributes_t attr, const void *v,
                      size_t n, const char *what) {
      check(a.cublasLtMatmulPreferenceSetAttribute(pref, attr, v, n), what);
    };
    prefer(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws),
           "setting the workspace size");
    prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &alignA, sizeof(alignA),
           "setting A's alignment");
    prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &alignB, sizeof(alignB),
           "setting B's alignment");
    prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &alignC, sizeof(alignC),
           "setting C's alignment");
    prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &alignC, sizeof(alignC),
           "setting D's alignment");
    std::vector<cublasLtMatmulHeuristicResult_t> results(
        std::max(1, impl_->timedCandidates));
    int found = 0;
    check(a.cublasLtMatmulAlgoGetHeuristic(impl_->handle, desc, la, lb, lc, lc,
                                           pref, int(results.size()),
                                           results.data(), &found),
          "cublasLtMatmulAlgoGetHeuristic (" + shapes + ")");
    if (found == 0)
      throw Error("cuBLASLt has no algorithm for " + shapes);
    int best = 0;
    int stored = found > 1 && impl_->store.lookup
                     ? impl_->store.lookup(key, impl_->timedCandidates)
                     : -1;
    if (stored >= 0 && stored < found &&
        results[stored].state == CUBLAS_STATUS_SUCCESS) {
      best = stored;
      ++impl_->stored;
      impl_->changed += best != 0;
    } else if (found > 1 && !cuda::isCapturing(stream)) {
      // (No timing inside a graph capture: it would be recorded, not run.)
      std::vector<double> median(found,
                                 std::numeric_limits<double>::infinity());
      for (int i = 0; i < found; ++i) {
        if (results[i].state != CUBLAS_STATUS_SUCCESS)
          continue;
        matmul(results[i].algo); // warm-up
        std::vector<double> ms;
        for (int r = 0; r < 3; ++r)
          ms.push_back(cuda::timeMs([&] { matmul(results[i].algo); }, stream));
        median[i] = medianOf(ms);
        if (median[i] < median[best])
          best = i;
      }
      ++impl_->timed;
      impl_->changed += best != 0;
      if (impl_->store.store)
        impl_->store.store(key, impl_->timedCandidates, best, median);
    }
    cached = impl_->algos.emplace(key, results[best].algo).first;
  }
  matmul(cached->second);
}

void Gemm::setTimedCandidates(int n) { impl_->timedCandidates = n; }
void Gemm::setChoiceStore(ChoiceStore store) {
  impl_->store = std::move(store);
}
int Gemm::problemsSeen() const { return int(impl_->algos.size()); }
int Gemm::problemsTimed() const { return impl_->timed; }
int Gemm::problemsFromStore() const { return impl_->stored; }
int Gemm::problemsWhereTimingChangedTheAlgorithm() const {
  return impl_->changed;
}

double Gemm::measureTflops(int64_t n, DType dtype, int iterations) {
  size_t bytes = size_t(n) * n * dtypeSize(dtype);
  cuda::DeviceBuffer a(bytes), b(bytes), c(size_t(n) * n * 4);
  // Random operands: constant or zero data toggles fewer bits, draws less
  // power and lets the clocks (and the rate) rise above what real data
  // gets.
  std::vector<uint8_t> host(bytes);
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  for (int64_t i = 0; i < n * n; ++i)
    storeFromDouble(host.data(), dtype, i, uniform(rng));
  a.copyFromHost(host.data(), bytes);
  b.copyFromHost(host.data(), bytes);
  Matrix ma{a.ptr(), dtype, n, n, n}, mb{b.ptr(), dtype, n, n, n},
      mc{c.ptr(), DType::F32, n, n, n};
  run(ma, false, mb, false, mc, 1.f, 0.f); // warm-up (heuristics)
  std::vector<double> ms;
  for (int i = 0; i < std::max(1, iterations); ++i)
    ms.push_back(
        cuda::timeMs([&] { run(ma, false, mb, false, mc, 1.f, 0.f); }));
  return 2.0 * n * n * n / (medianOf(ms) * 1e-3) / 1e12;
}

} // namespace cublaslt
} // namespace tilejit
