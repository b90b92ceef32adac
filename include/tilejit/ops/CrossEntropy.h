//===- CrossEntropy.h - cross-entropy on the caller's logits ----*- C++ -*-===//
//
// PyTorch's F.cross_entropy over (BT, V) logits with class-index targets,
// with label smoothing, class weights, ignore_index, Liger's z-loss
// (lse_square_scale) and a softcap: docs/semantics.md §2 with the logits
// given (no matmul, no bias). Per row, ce_i + zl_i and zl_i; for mean/sum
// the reduced loss; and the gradient with respect to the logits, written
// over them when grad == logits:
//
//   mean: d (sum_i ce_i / sum_i w_{y_i} + sum_i zl_i / n_valid) / d z
//   sum:  d (sum_i ce_i + zl_i) / d z
//   none: d (sum_i g_i (ce_i + zl_i)) / d z, g = gradOutput (1 without)
//
// over rows whose target is in [0, V) and not ignore_index (others give 0;
// a target outside [0, V) sets badTarget, docs/semantics.md §5). Three
// launches on the caller's stream (the kernels lce_row_weights,
// cross_entropy and lce_loss_sum), no host synchronization and no
// allocation: it can be captured in a CUDA graph once compiled (a first
// call, or prepareCrossEntropy()).
//
// Errors (tilejit::Error, before anything runs): a non-float dtype; BT
// outside [0, 2^31 - 1024] or V outside [1, 2^31 - 8192]; a null logits,
// grad, target,
// rowLoss or rowZLoss (or loss for mean/sum); gradOutput with mean/sum;
// label smoothing outside [0, 1], a negative z-loss or softcap, or one
// that is not finite; a workspace smaller than crossEntropyWorkspaceBytes
// or not 16-byte aligned.
//
// f16: the gradient is stored at the loss's own scale (1 / sum w_y for
// mean) times gradScale: with gradScale 1, entries below f16's smallest
// subnormal (6e-8) are 0 before a later factor (a GradScaler's) could lift
// them; bf16 has f32's range.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_OPS_CROSSENTROPY_H
#define TILEJIT_OPS_CROSSENTROPY_H

#include "tilejit/ops/FusedCeTvd.h"
#include "tilejit/ops/LinearCe.h"

namespace tilejit {
namespace ops {

/// Pointers are device memory on the GPU, host memory on the CPU.
struct CrossEntropyArgs {
  DType dtype = DType::BF16;       ///< of logits and grad: bf16, f16, f32
  int64_t BT = 0, V = 0;           ///< rows (tokens) and vocab
  const void *logits = nullptr;    ///< (BT, V), contiguous
  void *grad = nullptr;            ///< (BT, V), contiguous; may be logits
  const int64_t *target = nullptr; ///< (BT) class indices
  const float *classWeight = nullptr; ///< (V), or null: 1 everywhere
  /// (BT) f32 upstream gradients of the rows, Reduction::None only; null
  /// there: 1 per row.
  const float *gradOutput = nullptr;
  int64_t ignoreIndex = -100;
  double labelSmoothing = 0; ///< eps in [0, 1]
  double zLoss = 0;          ///< lse_square_scale, >= 0 (0 = off)
  double softcap = 0;        ///< c >= 0 (0 = off): z = c tanh(r / c)
  Reduction reduction = Reduction::Mean;
  float *loss = nullptr;      ///< (2): the loss and its z-loss part (mean, sum)
  float *rowLoss = nullptr;   ///< (BT): ce_i + zl_i, 0 for ignored rows
  float *rowZLoss = nullptr;  ///< (BT): zl_i
  int32_t *badTarget = nullptr; ///< (1), or null: 0, or 1 + a bad row
  /// The gradient is stored times this (finite, > 0): an f16 caller that
  /// multiplies it by a large factor later (a GradScaler's) stores it at a
  /// larger scale, e.g. BT, so that small entries keep their digits.
  double gradScale = 1;
};

/// Bytes of workspace (16-byte aligned) crossEntropy needs.
size_t crossEntropyWorkspaceBytes(const CrossEntropyArgs &args);

/// Compiles and, on the GPU, loads the three kernels for args' dtype and
/// features; a later call (or its capture in a CUDA graph) compiles nothing.
void prepareCrossEntropy(const CrossEntropyArgs &args, Device device);

/// Enqueues the call on `stream` (GPU) or runs it (CPU); see above.
void crossEntropy(const CrossEntropyArgs &args, void *workspace,
                  size_t workspaceBytes, Device device, CUstream stream);

} // namespace ops
} // namespace tilejit

#endif // TILEJIT_OPS_CROSSENTROPY_H
