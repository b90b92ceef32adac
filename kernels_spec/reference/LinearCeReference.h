//===- LinearCeReference.h - fp64 reference for fused linear CE -*- C++ -*-===//
//
// Double-precision CPU reference for the chunked fused linear cross-entropy
// (LCE) of docs/semantics.md §2: logits z = h W^T (+ b), an optional
// softcap, label smoothing, z-loss, class weights, ignore_index and the
// mean/sum/none reductions, with the gradients dh, dW and db. GPU kernels and
// the CPU interpreter are checked against this file. All math is fp64 on the
// exact values of the bf16/f16/f32 inputs; the logits are formed one chunk of
// rows at a time (never all N x V at once), like the kernels.
//
// Formulas. Per non-ignored row i with target y (w_v = classWeight[v], or 1
// everywhere without weights; W_sum = sum_v w_v):
//   r      = h_i W^T (+ b)                                   raw logits
//   z_v    = c * tanh(r_v / c) if c > 0, else r_v            softcap
//   lse    = m + log sum_v exp(z_v - m),  m = max_v z_v;  p = softmax(z)
//   ce_i   = (1 - eps) * w_y * (lse - z_y)
//            + (eps / V) * sum_v w_v * (lse - z_v)            NLL + smoothing
//   zl_i   = lambda_z * lse^2                                z-loss
//   (unweighted) loss_i = ce_i + zl_i
// lse - z_v is formed as log sum exp(z - m) - (z_v - m), so a large common
// offset (all logits 1e8) cancels exactly.
// The NLL + smoothing part is PyTorch's convention for class-index targets
// with weight and label_smoothing (torch.nn.functional.cross_entropy /
// nn.CrossEntropyLoss docs; aten/src/ATen/native/LossNLL.cpp,
// cross_entropy_loss_label_smoothing): the loss is
//   (1 - eps) * nll_loss(log_softmax(z), y, weight)
//   + (eps / V) * smooth, smooth_i = -sum_v w_v log p_v,
// and `mean` divides both sums by sum_{non-ignored i} w_{y_i}.
// The z-loss (PaLM's auxiliary loss, as in Liger-Kernel's lse_square_scale)
// is not class-weighted: `mean` divides its sum by the number of non-ignored
// rows n_valid (Liger-Kernel's convention). Without class weights both
// denominators are n_valid.
//
// Reductions (ignored rows contribute 0 everywhere):
//   Mean: loss = sum_i ce_i / sum_i w_{y_i} + sum_i zl_i / n_valid
//   Sum:  loss = sum_i loss_i
//   None: per-row loss_i in rowLoss; `loss` is left 0.
// An all-ignored batch gives loss 0 and zero gradients (no NaN); likewise a
// mean whose summed target weight is 0 takes 0 for the CE part.
//
// Gradient of the (softcapped) logits of row i, with upstream factors
//   Mean: g_ce = 1 / sum w_y, g_z = 1 / n_valid;  Sum: g_ce = g_z = 1;
//   None: g_ce = g_z = gradOutput[i]
// (the per-row upstream is folded into dz before the dW reduction):
//   dz_v = g_ce * [ (1 - eps) * w_y * (p_v - 1[v == y])
//                   + (eps / V) * (W_sum * p_v - w_v) ]
//          + g_z * 2 * lambda_z * lse * p_v
//   dr_v = dz_v * (1 - tanh^2(r_v / c))   (dr = dz without softcap)
//   dh_i = sum_v dr_v W_v,  dW = dr^T h,  db = sum_i dr_i.
// Without weights and with one upstream factor g this is the usual
//   g * [ (1 - eps) (p - onehot) + eps (p - 1/V) + 2 lambda_z lse p ].
//
// Errors (tilejit::Error, thrown before any work): N, d or V <= 0; a
// non-float dtype; h, W, bias, target, classWeight or gradOutput of the wrong
// size (gradOutput must be empty unless reduction is None); a target outside
// [0, V) that is not ignoreIndex (the message names the row and value);
// labelSmoothing outside [0, 1]; a negative softcap; a non-finite
// labelSmoothing, zLoss or softcap.
//
// Non-finite inputs are outside the contract, except -inf logits (e.g. from a
// -inf bias entry masking a class): they get p = 0 and, where their
// coefficient is non-zero, an infinite smoothing term; terms with a zero
// coefficient (eps = 0, w_v = 0) are skipped rather than giving 0 * inf.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_KERNELS_SPEC_REFERENCE_LINEARCEREFERENCE_H
#define TILEJIT_KERNELS_SPEC_REFERENCE_LINEARCEREFERENCE_H

#include "tilejit/DType.h"

#include <cstdint>
#include <vector>

namespace tilejit {
namespace ref {

struct LinearCeParams {
  int64_t ignoreIndex = -100;
  double labelSmoothing = 0; ///< eps, in [0, 1]
  double zLoss = 0;          ///< lambda_z (0 = off)
  double softcap = 0;        ///< c; 0 = off
  enum class Reduction { Mean, Sum, None } reduction = Reduction::Mean;
};

/// Inputs, all row-major and contiguous.
struct LinearCeInputs {
  int64_t N = 0, d = 0, V = 0;
  /// Element type of h, W and bias: BF16, F16 or F32 (raw bytes).
  DType dtype = DType::F32;
  std::vector<uint8_t> h;         ///< (N, d)
  std::vector<uint8_t> W;         ///< (V, d)
  std::vector<uint8_t> bias;      ///< (V), or empty for no bias
  std::vector<int64_t> target;    ///< (N)
  std::vector<float> classWeight; ///< (V), or empty for no weights
  std::vector<float> gradOutput;  ///< None: per-row upstream (N); else empty
};

struct LinearCeResult {
  /// Mean/Sum: the reduced loss (z-loss included); None: 0 (unused).
  double loss = 0;
  /// (N) per-row loss_i = ce_i + zl_i, unreduced (0 for ignored rows).
  std::vector<double> rowLoss;
  /// (N) per-row z-loss lambda_z * lse^2 (0 for ignored rows).
  std::vector<double> zLossRow;
  /// The z-loss on its own, reduced like its share of `loss` (sum / n_valid
  /// for Mean, sum for Sum, 0 for None).
  double zLossTotal = 0;
  /// (N) log-sum-exp of the (softcapped) logits (0 for ignored rows).
  std::vector<double> lse;
  /// Gradients: dh (N, d), dW (V, d), db (V) (empty without bias).
  std::vector<double> dh, dW, db;
};

/// Forward and backward of the fused linear cross-entropy in fp64.
LinearCeResult linearCeReference(const LinearCeInputs &in,
                                 const LinearCeParams &p);

/// One row's terms of the formulas above.
struct RowTerms {
  double ce = 0, zl = 0, lse = 0;
};

/// The cross-entropy of one row of raw logits r (V entries) whose target y
/// is a class in [0, V): its terms, and in dr (V entries) the gradient of
/// gCe * ce + gZ * zl with respect to r. w: the class weights (V), or null
/// for none; weightSum: sum_v w_v (V without weights). p.reduction is not
/// read: the caller's gCe, gZ carry it.
RowTerms crossEntropyRow(const double *r, int64_t V, int64_t y,
                         const float *w, double weightSum,
                         const LinearCeParams &p, double gCe, double gZ,
                         double *dr);

} // namespace ref
} // namespace tilejit

#endif // TILEJIT_KERNELS_SPEC_REFERENCE_LINEARCEREFERENCE_H
