//===- Distillation.h - KL and JS divergence of two rows --------*- C++ -*-===//
//
// Distillation losses between a student's and a teacher's (BT, V) rows,
// with the gradient with respect to the student computed with the loss
// (the teacher gets none):
//
//   KlForward: F.kl_div(log_softmax(s / T), log_softmax(t / T),
//              log_target=True) per row, KL(p || q) = sum_v p (log p - log q)
//              of the student's logits s and the teacher's t, q = softmax(s
//              / T), p = softmax(t / T); d/ds_v = (q_v - p_v) / T.
//   KlReverse: KL(q || p); d/ds_v = q_v (log q_v - log p_v - KL) / T.
//   Jsd:       LigerJSD's generalized Jensen-Shannon divergence of the
//              log-probabilities X = log q (student) and Y = log p
//              (teacher): beta KL(p || m) + (1 - beta) KL(q || m), m = beta
//              p + (1 - beta) q; beta 0 gives KL(p || q), beta 1 KL(q || p)
//              (kernels_spec/Jsd.cpp, docs/semantics.md §4).
//   JsdLogits: the same of logits at a temperature, X = log softmax(s / T),
//              Y = log softmax(t / T); d/ds_v = (G_v - q_v sum_u G_u) / T
//              with G = dJSD/dX (LigerFusedLinearJSD's loss past its
//              matmul).
//
// Hinton's T^2 factor is the caller's. A row whose label is ignore_index has
// loss 0 and a zero gradient; other labels are not read as classes (a row
// counts whatever its label). Reductions: Mean is Liger's and F.kl_div's
// "batchmean", the rows' sum over the rows that count (all BT without
// labels; an all-ignored batch gives 0); Sum; None, per row, the gradient
// that of sum_i g_i loss_i with g = gradOutput (1 without).
//
// Three launches on the caller's stream (row_scale; kl_div, jsd or
// jsd_logits; row_loss_total, for Mean and Sum only), no host
// synchronization and no allocation: a call can be captured in a CUDA graph
// once compiled (a first call, or prepareDistillation()).
//
// Errors (tilejit::Error, before anything runs): a non-float dtype; BT
// outside [0, 2^31 - 1024] or V outside [1, 2^31 - 8192]; a null student,
// teacher, grad or rowLoss, or loss for Mean and Sum; gradOutput with Mean
// or Sum; grad overlapping the teacher, or the student without being it; a
// temperature that is not > 0 with T and 1 / T finite in f32 (KL,
// JsdLogits); beta outside [0, 1], or one that rounds to 0 or 1 in f32
// without being it (Jsd, JsdLogits); a workspace smaller than
// distillationWorkspaceBytes or not 16-byte aligned.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_OPS_DISTILLATION_H
#define TILEJIT_OPS_DISTILLATION_H

#include "tilejit/ops/FusedCeTvd.h"
#include "tilejit/ops/LinearCe.h"

namespace tilejit {
namespace ops {

enum class Divergence { KlForward, KlReverse, Jsd, JsdLogits };

/// Pointers are device memory on the GPU, host memory on the CPU.
struct DistillationArgs {
  Divergence divergence = Divergence::KlForward;
  DType dtype = DType::BF16; ///< of student, teacher, grad: bf16, f16, f32
  int64_t BT = 0, V = 0;     ///< rows (tokens) and vocab
  /// (BT, V) contiguous: log-probabilities for Jsd, else logits.
  const void *student = nullptr;
  const void *teacher = nullptr;  ///< (BT, V) contiguous, as the student
  void *grad = nullptr;           ///< (BT, V) contiguous; may be student
  const int64_t *label = nullptr; ///< (BT), or null: every row counts
  int64_t ignoreIndex = -100;
  double temperature = 1; ///< T > 0: KL and JsdLogits
  double beta = 0.5;      ///< in [0, 1]: Jsd and JsdLogits
  Reduction reduction = Reduction::Mean; ///< Mean is "batchmean"
  /// (BT) f32 upstream gradients of the rows, Reduction::None only; null
  /// there: 1 per row.
  const float *gradOutput = nullptr;
  float *loss = nullptr;    ///< (1): the reduced loss (Mean, Sum)
  float *rowLoss = nullptr; ///< (BT): each row's divergence, 0 if ignored
};

/// Bytes of workspace (16-byte aligned) distillation needs.
size_t distillationWorkspaceBytes(const DistillationArgs &args);

/// Compiles and, on the GPU, loads the kernels for args' divergence, dtype,
/// labels and V; a later call (or its capture in a CUDA graph) compiles
/// nothing.
void prepareDistillation(const DistillationArgs &args, Device device);

/// Enqueues the call on `stream` (GPU) or runs it (CPU); see above.
void distillation(const DistillationArgs &args, void *workspace,
                  size_t workspaceBytes, Device device, CUstream stream);

} // namespace ops
} // namespace tilejit

#endif // TILEJIT_OPS_DISTILLATION_H
