//===- LinearCe.h - the chunked fused linear cross-entropy ------*- C++ -*-===//
//
// The linear cross-entropy of docs/semantics.md §2 on the caller's memory:
//
//   z = softcap(x W^T + b)                       (N, V), one chunk at a time
//   loss_i = (1 - eps) w_y (lse_i - z_iy) + (eps / V) sum_v w_v (lse_i - z_iv)
//            + lambda_z lse_i^2                  (PyTorch's cross_entropy with
//                                                 weight, label_smoothing;
//                                                 Liger's lse_square_scale)
//   mean: sum_i ce_i / sum_i w_{y_i} + sum_i zl_i / n_valid;  sum: sum_i
//
// with the gradients d loss / d x, d W and d b formed in the same pass: for
// each chunk of rows the logits GEMM, one program per row that turns them
// into the loss terms and d loss / d z in place, then the dx and dW (db)
// GEMMs. Only one chunk of logits exists at a time. Rows whose target is
// ignore_index contribute nothing.
//
// Everything is enqueued on the caller's stream with no host
// synchronization and no allocation (the workspace is the caller's): it can
// be captured in a CUDA graph once prepareLinearCe has run for the shape.
// On the CPU the same chunk loop runs with plain loops for the GEMMs and
// the programs in the interpreter (host pointers; for tests and CI).
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_OPS_LINEARCE_H
#define TILEJIT_OPS_LINEARCE_H

#include "tilejit/DType.h"
#include "tilejit/ops/FusedCeTvd.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tilejit {
namespace ops {

enum class Reduction { None, Mean, Sum };

/// Who runs the chunk's GEMMs on the GPU: cuBLASLt; tilejit's own lce_gemm
/// (tile `dot` on tensor cores: bf16/f16, sm_80+); or per GEMM problem the
/// faster of the two, timed by prepareLinearCe and kept in the tuning
/// database. The CPU runs plain loops, or lce_gemm in the interpreter (Dsl).
enum class GemmBackend { CublasLt, Dsl, Auto };

/// One call. Strides are in elements; pointers are device memory on the
/// GPU and host memory on the CPU. Optional pointers may be null.
struct LinearCeArgs {
  DType dtype = DType::BF16;  ///< of input, weight, gradInput: bf16, f16, f32
  int64_t N = 0;              ///< rows (tokens), in [0, 2^31)
  int64_t d = 0;              ///< hidden size, >= 1
  int64_t V = 0;              ///< vocab, in [1, 2^31)
  const void *input = nullptr;  ///< (N, d) hidden states x
  int64_t inputStride = 0;      ///< between rows, >= d; 0 means d
  const void *weight = nullptr; ///< (V, d) the LM head W
  int64_t weightStride = 0;     ///< >= d; 0 means d
  const float *bias = nullptr;  ///< (V) f32, optional
  const int64_t *target = nullptr;    ///< (N) class indices
  const float *classWeight = nullptr; ///< (V) f32, optional (weight=)
  /// (N) f32: d L / d loss_i, with Reduction::None only (required there).
  const float *gradOutput = nullptr;
  int64_t ignoreIndex = -100;
  double labelSmoothing = 0; ///< eps in [0, 1]
  double zLoss = 0;          ///< lambda_z >= 0 (lse_square_scale)
  double softcap = 0;        ///< c > 0: z = c tanh(r / c); 0: off
  Reduction reduction = Reduction::Mean;

  /// (2) f32: the reduced loss and its z-loss part (mean and sum; unused by
  /// None, may then be null).
  float *loss = nullptr;
  /// (N) f32 each, optional (rowLoss required by None): loss_i (z-loss
  /// included), its z-loss part and lse_i; 0 for ignored rows.
  float *rowLoss = nullptr, *rowZLoss = nullptr, *lse = nullptr;
  /// (N, d) dtype: d loss / d x; may be `input` itself (same stride).
  void *gradInput = nullptr;
  int64_t gradInputStride = 0; ///< >= d; 0 means d
  /// (V, d) contiguous, f32 (bf16 with bf16GradAccumulation): d loss / d W,
  /// overwritten.
  void *gradWeight = nullptr;
  void *gradBias = nullptr; ///< (V), with a bias: d loss / d b, as gradWeight
  /// (1) i32, optional: 0, or 1 + a row whose target is outside [0, V) and
  /// not ignore_index (such rows count as ignored). Never checked on the
  /// host: read it when convenient.
  int32_t *badTarget = nullptr;

  /// Rows of logits alive at once; 0: from memoryBudgetBytes.
  int64_t chunkRows = 0;
  /// With chunkRows = 0: the workspace allowed (the GEMM workspace, then
  /// the chunk's logits and dz); the chunk is the most rows that fit.
  /// 0: all N rows in one chunk. The GEMM workspace counts on the CPU too,
  /// so that both devices run the same chunks.
  int64_t memoryBudgetBytes = 0;
  /// GPU: workspace of cuBLASLt, inside the op's workspace.
  int64_t gemmWorkspaceBytes = 8 << 20;
  /// The logits GEMM writes the input dtype (as PyTorch's x @ W.T does) and
  /// dz overwrites it: half the chunk's bytes, each logit rounded once.
  bool narrowLogits = false;
  /// Accumulate dW and db over chunks in bf16 (bf16 inputs): half the
  /// memory, one rounding per chunk.
  bool bf16GradAccumulation = false;
  GemmBackend gemmBackend = GemmBackend::CublasLt;
  /// NAME=VALUE for lce_logits_grad (BLOCK_SIZE, num_warps, UNROLL) and
  /// lce_gemm (BLOCK_M, BLOCK_N, BLOCK_K, num_warps).
  std::vector<std::string> set;
};

/// Throws tilejit::Error for bad shapes, strides, dtypes, missing
/// pointers, options or scalars (what linearCe checks before enqueuing).
void validateLinearCe(const LinearCeArgs &args);

/// Rows per chunk of `args` (the workspace is sized for them): chunkRows
/// (at most N), else N split into the fewest equal chunks the memory budget
/// allows (rounded up to 128 rows when that still fits). prepareLinearCe
/// may choose fewer by timing.
int64_t linearCeChunkRows(const LinearCeArgs &args);

/// Bytes of workspace linearCe needs for `args` (on the GPU: device memory
/// starting 256-byte aligned, as every CUDA allocation does; any contents):
/// the chunk's logits and dz, the GEMM workspace, and small parts.
size_t linearCeWorkspaceBytes(const LinearCeArgs &args, Device device);

/// Enqueues the loss and gradients on `stream`. Throws tilejit::Error before
/// enqueuing anything for what validateLinearCe rejects, a workspace smaller
/// than linearCeWorkspaceBytes, or (GPU) no usable GPU or cuBLASLt. An empty
/// batch (N = 0) writes loss 0 and zero dW (db) and launches no kernel.
void linearCe(const LinearCeArgs &args, void *workspace, size_t workspaceBytes,
              Device device, CUstream stream = nullptr);

/// What prepareLinearCe may decide by timing on the GPU (each choice kept
/// in the tuning database, where later processes find it).
struct LinearCeTuning {
  /// Time cuBLASLt's first n heuristic algorithms per GEMM problem and keep
  /// the fastest; 1: the heuristic's first.
  int gemmCandidates = 8;
  /// Time chunk sizes (N split in 1, 1.5, 2, 4, 8 times the fewest chunks)
  /// and keep the fastest; the workspace stays that of the largest.
  bool tuneChunkRows = false;
};

/// What prepareLinearCe chose.
struct LinearCePlanInfo {
  int64_t chunkRows = 0;
  /// "tuned now", a tuning file, or "memory budget" (chunkRows or the
  /// budget's chunk).
  std::string chunkSource;
  GemmBackend gemmBackend = GemmBackend::CublasLt; ///< what runs
  std::string note; ///< why the backend differs from the one asked for
  /// (rows per chunk, ms) of each trial when the chunk was tuned now.
  std::vector<std::pair<int64_t, double>> chunkTrials;
  /// With gemmCandidates > 1: the call's GEMM problems timed now, those
  /// whose choice was made before (in the tuning database, or by an earlier
  /// call in this process), and how many of all the process has timed use
  /// another algorithm than the heuristic's first.
  int gemmProblemsTimed = 0, gemmProblemsFromStore = 0, gemmChoicesChanged = 0;
  /// With GemmBackend::Auto, for the chunk that runs: each problem timed
  /// now (median ms of both paths), and the number of problems: all, those
  /// chosen before (tuning database or this process), those on lce_gemm.
  struct GemmPathTiming {
    std::string problem;
    double cublasLtMs, lceGemmMs;
    double flop; ///< 2 M N K of the product; 0 for a pair of steps
    /// What each side ran: "cuBLASLt" and "lce_gemm", or the logits step
    /// with its row program.
    std::string cublasLtPath, dslPath;
  };
  std::vector<GemmPathTiming> gemmPathTimings;
  int gemmPathProblems = 0, gemmPathsFromStore = 0, gemmPathsOnDsl = 0;
};

/// GPU: compiles and loads the kernels for `args`' shape and features,
/// and makes the timed choices of `tuning` by running the step on the
/// call's own buffers (so its outputs are overwritten, its inputs only
/// read) and synchronizing. Call it before capturing linearCe in a CUDA
/// graph; a linearCe that was not prepared prepares itself without timing.
LinearCePlanInfo prepareLinearCe(const LinearCeArgs &args, void *workspace,
                                 size_t workspaceBytes,
                                 const LinearCeTuning &tuning = {},
                                 CUstream stream = nullptr);

} // namespace ops
} // namespace tilejit

#endif // TILEJIT_OPS_LINEARCE_H
