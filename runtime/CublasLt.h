//===- CublasLt.h - GEMMs through cuBLASLt, loaded at run time --*- C++ -*-===//
//
// The chunk loop of the linear cross-entropy hands its three GEMMs to
// cuBLASLt by default (tilejit's own `dot`, lce_gemm, is the alternative).
// libcublasLt is opened with dlopen, as libcuda is: TILEJIT_CUBLASLT names
// the library file; otherwise libcublasLt.so.13 and .12 are tried through
// the loader's search path. Row-major matrices throughout; the column-major
// library is driven through the transposed problem.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_RUNTIME_CUBLASLT_H
#define TILEJIT_RUNTIME_CUBLASLT_H

#include "tilejit/DType.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

struct CUstream_st;

namespace tilejit {
namespace cublaslt {

/// Device workspace a Gemm holds for cuBLASLt unless told otherwise
/// (NVIDIA's advice for Hopper, where split-K kernels may use it).
constexpr size_t kWorkspaceBytes = 32 << 20;

/// True when libcublasLt can be opened; otherwise `why` says why.
bool available(std::string *why = nullptr);
/// The loaded library's version (cublasLtGetVersion), e.g. "130100".
std::string version();

/// Where timed algorithm choices persist between processes. `problem` names
/// one product (shapes, dtypes, transposes, leading dimensions, alignments,
/// whether C is read, the workspace size); a choice is an index into the
/// heuristic's first `candidates` results, which are the same for the same
/// library, GPU and problem.
struct ChoiceStore {
  /// The stored index, or -1.
  std::function<int(const std::string &problem, int candidates)> lookup;
  /// Keeps `best` and the median ms of each candidate (infinity: skipped).
  std::function<void(const std::string &problem, int candidates, int best,
                     const std::vector<double> &ms)>
      store;
};

/// A row-major matrix in device memory: rows x cols, `ld` elements between
/// rows (ld >= cols), of type `dtype` (bf16, f16 or f32).
struct Matrix {
  uint64_t ptr = 0; ///< CUdeviceptr
  DType dtype = DType::F32;
  int64_t rows = 0, cols = 0, ld = 0;
};

/// One cuBLASLt handle and workspace (current context; not thread-safe).
class Gemm {
public:
  /// Gives cuBLASLt `workspaceBytes` of device memory (algorithms that need
  /// more are not chosen): its own, or with !allocateWorkspace the memory
  /// setWorkspace names before each run. Throws tilejit::Error when cuBLASLt
  /// is unavailable.
  explicit Gemm(size_t workspaceBytes = kWorkspaceBytes,
                bool allocateWorkspace = true);
  /// The workspace of the next runs: `ptr` (CUdeviceptr, 256-byte aligned)
  /// holds the constructor's workspaceBytes.
  void setWorkspace(uint64_t ptr);
  ~Gemm();
  Gemm(const Gemm &) = delete;

  /// C = alpha op(A) op(B) + beta C with fp32 accumulation, op(X) = X or X^T
  /// (transA / transB). Shapes must agree: op(A) is m x k, op(B) k x n, C
  /// m x n. Runs on `stream` (default: the legacy default stream),
  /// asynchronously; can be captured into a CUDA graph once the problem
  /// has run before (its algorithm is then cached). Throws tilejit::Error
  /// with cuBLASLt's status and the shapes.
  void run(const Matrix &A, bool transA, const Matrix &B, bool transB,
           const Matrix &C, float alpha, float beta,
           CUstream_st *stream = nullptr);

  /// The product's name in the algorithm cache and the ChoiceStore:
  /// everything cuBLASLt's answer depends on (shapes, dtypes, transposes,
  /// leading dimensions, pointer alignments, whether C is read, the
  /// workspace size).
  std::string problemKey(const Matrix &A, bool transA, const Matrix &B,
                         bool transB, const Matrix &C, float beta) const;

  /// With n > 1, a problem seen for the first time asks the heuristic for up
  /// to n algorithms and times each on the call's own operands (a warm-up
  /// and the median of 3), keeping the fastest; with 1 (the default) it
  /// takes the heuristic's first. The timing runs the product several
  /// times, so with beta != 0 the output is accumulated more than once:
  /// time only in runs whose results are thrown away.
  void setTimedCandidates(int n);
  /// With a store, a problem to be timed first looks for a stored choice
  /// (then it is not timed), and a timed choice is stored.
  void setChoiceStore(ChoiceStore store);
  /// Problems whose algorithm was chosen by timing or taken from the store,
  /// and how many of those chose another than the heuristic's first.
  int problemsTimed() const;
  /// Problems whose algorithm this Gemm holds (every problem it has run).
  int problemsSeen() const;
  int problemsFromStore() const;
  int problemsWhereTimingChangedTheAlgorithm() const;

  /// TFLOP/s of an n x n x n product in `dtype` (fp32 accumulation), the
  /// median of `iterations` timed runs: the ceiling GEMM-bound kernels are
  /// measured against.
  double measureTflops(int64_t n, DType dtype, int iterations = 10);

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace cublaslt
} // namespace tilejit

#endif // TILEJIT_RUNTIME_CUBLASLT_H
