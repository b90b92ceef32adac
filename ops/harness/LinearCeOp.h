//===- LinearCeOp.h - the chunked fused linear cross-entropy ----*- C++ -*-===//
//
// Host vectors in, host vectors out, over the op of tilejit/ops/LinearCe.h
// (docs/semantics.md §2): `tilejit run|bench` and the tests. The GPU runner
// uploads the inputs, prepares the op (its timed choices), runs it (also as
// a CUDA graph, on request), times it and copies the results back.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_OPS_HARNESS_LINEARCEOP_H
#define TILEJIT_OPS_HARNESS_LINEARCEOP_H

#include "kernels_spec/reference/LinearCeReference.h"
#include "tilejit/DSL.h"
#include "tilejit/TileModule.h"
#include "tilejit/ops/LinearCe.h"

#include <string>
#include <vector>

namespace tilejit {

struct LinearCeOptions {
  ref::LinearCeParams params;
  /// Rows of logits alive at once; 0 = from memoryBudgetBytes.
  int64_t chunkRows = 0;
  /// GPU: device memory for cuBLASLt (comes out of memoryBudgetBytes).
  /// 8 MiB: 1024-row chunks' GEMMs ran as fast as with 32 MiB on an H200
  /// (logits, dh, dW: 1.517, 1.442, 2.208 ms against 1.541, 1.459, 2.221).
  int64_t gemmWorkspaceBytes = 8 << 20;
  /// With chunkRows = 0: the working memory allowed beside the inputs and
  /// gradients: the GPU's GEMM workspace, then the chunk's logits
  /// (f32, or the input dtype with narrowLogits) and, for f32 logits of
  /// bf16 or f16 inputs, its dz. The chunk is the most rows that fit (at
  /// least one). 0 = all N rows at once.
  int64_t memoryBudgetBytes = 0;
  /// Accumulate dW (and db) across chunks in bf16 instead of fp32: half the
  /// memory, one bf16 rounding per chunk (the error grows with the number of
  /// chunks). The returned values are the bf16 ones, widened.
  bool bf16GradAccumulation = false;
  /// GPU: time every chunk size from linearCeChunkCandidates and keep the
  /// fastest (stored in the tuning database per GPU, shape, dtype and
  /// budget; a stored choice is used without timing).
  bool tuneChunkRows = false;
  /// GPU: the logits GEMM writes the input dtype (bf16/f16, as PyTorch's
  /// h @ W.T does) and dz overwrites it in place: half the chunk's bytes
  /// or less, and each logit rounded once to the input dtype.
  bool narrowLogits = false;
  /// GPU: who runs the chunk's GEMMs: cuBLASLt, tilejit's own lce_gemm
  /// (tile `dot` on tensor cores: bf16/f16 inputs, sm_80+), or Auto: per
  /// GEMM problem the faster of the two on this GPU, timed once in a
  /// warm-up run and kept in the tuning database (cuBLASLt alone where
  /// lce_gemm cannot run; lce_gemm alone when cuBLASLt cannot be opened).
  /// The CPU runs plain loops for CublasLt and Auto. The library's default
  /// is CublasLt; the CLI's is auto.
  using GemmBackend = ops::GemmBackend;
  GemmBackend gemmBackend = GemmBackend::CublasLt;
  /// GPU: with n > 1, each GEMM problem times cuBLASLt's first n heuristic
  /// algorithms once, in a warm-up run, and keeps the fastest
  /// (cublaslt::Gemm::setTimedCandidates) in the tuning database, where
  /// later runs find it; 1 takes the heuristic's first.
  int gemmCandidates = 8;
  /// GPU: after the first run, capture the whole step (every chunk's GEMMs
  /// and programs) into one CUDA graph and run it from there: proof that the
  /// step has no host synchronization, and one launch instead of dozens.
  bool cudaGraph = false;
  /// GPU: timed runs after the first (median in LinearCeOutputs::ms).
  int iterations = 0;
  /// NAME=VALUE for lce_logits_grad (BLOCK_SIZE, num_warps, UNROLL) and
  /// lce_gemm (BLOCK_M, BLOCK_N, BLOCK_K, num_warps).
  std::vector<std::string> overrides;
};

/// The results of one run. The base holds what the op chose on the GPU
/// (ops::LinearCePlanInfo: rows per chunk, the GEMM backend that ran and
/// why, the GEMM choices timed or reused, the chunk trials); chunkSource is
/// set only with tuneChunkRows.
struct LinearCeOutputs : ops::LinearCePlanInfo {
  float loss = 0;  ///< mean / sum reductions (z-loss term included)
  float zLoss = 0; ///< the z-loss part of `loss`, reduced the same way
  std::vector<float> rowLoss, rowZLoss, lse; ///< (N), 0 for ignored rows
  std::vector<float> dh, dW, db; ///< (N, d), (V, d), (V) (db empty: no bias)
  int64_t chunks = 0;
  std::string device; ///< "cpu" or the GPU's name
  /// GPU: host time of the first run after the warm-up (if any) that
  /// picks GEMM algorithms and paths.
  double firstRunMs = 0;
  /// GPU: median of the timed runs (CUDA events, runs queued back to back
  /// as triton.testing.do_bench queues them).
  double ms = 0;
  /// GPU: device memory beyond inputs and gradients: the logits chunk, dz,
  /// cuBLASLt's workspace.
  int64_t workspaceBytes = 0;
  /// GPU with iterations > 0: the first chunk's steps timed one by one
  /// (name, ms): the logits GEMM, lce_logits_grad, the dh and dW GEMMs.
  std::vector<std::pair<std::string, double>> chunkStepMs;
  bool ranAsGraph = false; ///< GPU: the results came from a CUDA graph
};

/// Deterministic inputs: h ~ N(0, 1), W ~ N(0, 1/d) (logits ~ N(0, 1)),
/// bias ~ N(0, 0.1) when `bias`, class weights in [0.5, 1.5] when `weights`,
/// targets uniform with every 5th row ignore_index; rounded to `dtype`.
ref::LinearCeInputs makeLinearCeInputs(int64_t N, int64_t d, int64_t V,
                                       DType dtype, bool bias, bool weights,
                                       uint64_t seed);

/// Rows per chunk for `options`: chunkRows (at most N), or N split into
/// the fewest equal chunks that memoryBudgetBytes allows (rounded up to a
/// multiple of 128 rows when that still fits).
int64_t linearCeChunkRows(const ref::LinearCeInputs &in,
                          const LinearCeOptions &options);


/// Chunk sizes worth timing: N split into k equal chunks (rounded as in
/// linearCeChunkRows) for the fewest chunks that fit and for 1.5x, 2x, 4x
/// and 8x as many, none under 128 rows but the first; ascending.
std::vector<int64_t> linearCeChunkCandidates(const ref::LinearCeInputs &in,
                                             const LinearCeOptions &options);



/// "cublaslt", "tilejit" or "auto"; throws tilejit::Error for anything
/// else.
LinearCeOptions::GemmBackend parseGemmBackend(const std::string &name);
/// The name parseGemmBackend takes for `backend`.
const char *gemmBackendName(LinearCeOptions::GemmBackend backend);
/// Lines (each ending in a newline) saying which GEMM path ran: with Auto,
/// each problem timed now (both paths' ms) and the counts per path.
std::string describeGemmPaths(const LinearCeOutputs &out);

/// The op's arguments for `in` and `options`, without the pointers.
ops::LinearCeArgs linearCeArgs(const ref::LinearCeInputs &in,
                               const LinearCeOptions &options);
/// Throws tilejit::Error for bad shapes or options (ops::validateLinearCe
/// and the host vectors' sizes).
void validateLinearCe(const ref::LinearCeInputs &in,
                      const LinearCeOptions &options);

/// The outputs of an empty batch (N = 0), computed without launching
/// anything: loss and z-loss 0 (the mean of nothing is 0), empty per-row
/// vectors and dh, dW (and db with a bias) all zeros.
LinearCeOutputs emptyLinearCe(const ref::LinearCeInputs &in,
                              const LinearCeOptions &options,
                              const std::string &device);

/// Runs the chunked loss and gradients on the CPU. Throws tilejit::Error for
/// bad shapes or targets (as the reference does) and kernel errors.
LinearCeOutputs runLinearCeCpu(const ref::LinearCeInputs &in,
                               const LinearCeOptions &options);

/// The same on the GPU: cuBLASLt GEMMs (runtime/CublasLt.h) around the DSL
/// programs; dh in the input dtype, dW and db accumulated in fp32 (or bf16
/// on request). Also throws when there is no GPU, driver or libcublasLt.
/// Checked on an H200 by the LinearCeGpu tests.
LinearCeOutputs runLinearCeGpu(const ref::LinearCeInputs &in,
                               const LinearCeOptions &options);

struct LinearCeCheck {
  double lossErr = 0; ///< relative error of the loss (or max over rows)
  double dhErr = 0, dWErr = 0, dbErr = 0; ///< relative Frobenius errors
  bool passed = false;
  std::string summary;
};
/// Compares with the fp64 reference: loss within `lossTol` relative, each
/// gradient within `gradTol` relative (Frobenius).
LinearCeCheck checkLinearCe(const ref::LinearCeInputs &in,
                            const LinearCeOptions &options,
                            const LinearCeOutputs &out, double lossTol = 1e-5,
                            double gradTol = 1e-5);
/// The same on `rows` only, for batches whose full fp64 reference is out of
/// reach: each sampled row's loss, lse and dh against the fp64 reference of
/// that row, and the loss against the fp64 sum of the op's own per-row
/// losses (dW and db need every row and are not checked). Takes reduction
/// sum, or mean where both upstream factors agree (no class weights, or no
/// z-loss); throws tilejit::Error otherwise.
LinearCeCheck checkLinearCeRows(const ref::LinearCeInputs &in,
                                const LinearCeOptions &options,
                                const LinearCeOutputs &out,
                                const std::vector<int64_t> &rows,
                                double lossTol, double gradTol);

} // namespace tilejit

#endif // TILEJIT_OPS_HARNESS_LINEARCEOP_H
