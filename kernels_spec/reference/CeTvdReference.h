//===- CeTvdReference.h - fp64 reference for fused CE + TVD -----*- C++ -*-===//
//
// Double-precision CPU reference for the fused cross-entropy + total
// variation distance loss. The formulas are those of docs/semantics.md §1
// (the project's kernel-semantics contract); GPU kernels and the CPU
// interpreter are checked against this file.
//
// Shapes and conventions shared by every function below:
//  - `student`, `teacher`: logits (BT, V), row-major, row r starting at
//    element r * rowStride (rowStride >= V, in elements, not bytes). The
//    DType overloads read bf16, f16 or f32 buffers; the `const double *`
//    overloads read fp64 buffers (used for the fp64 test vectors).
//  - `target`: (BT,) int64 class indices; a row whose target equals
//    `ignoreIndex` is ignored (ce = tvd = 0, lse/sigma reported as 0, zero
//    gradient row).
//  - Per-row outputs are in nats (natural log); all math is fp64.
//  - Rows are processed in parallel on large inputs; results do not depend
//    on the thread count.
//
// Errors (tilejit::Error, thrown before any output is written): BT <= 0,
// V <= 0, rowStride < V, a null pointer, a non-float dtype, or a target
// outside [0, V) that is not ignoreIndex (the message names row and value).
//
// Non-finite logits: -inf entries get probability 0 (exp(-inf - max) = 0, the
// max is taken over the row so no -inf - -inf occurs). A row whose entries
// are ALL -inf has no distribution: we define lse = -inf and p = 0
// everywhere, so ce = +inf (if not ignored), its tvd term is
// 0.5 * sum |0 - q| and its gradient is -g_ce at the target and 0 elsewhere;
// nothing is NaN. +inf or NaN logits are outside the contract (NaN results).
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_KERNELS_SPEC_REFERENCE_CETVDREFERENCE_H
#define TILEJIT_KERNELS_SPEC_REFERENCE_CETVDREFERENCE_H

#include "tilejit/DType.h"

#include <cstdint>
#include <vector>

namespace tilejit {
namespace ref {

/// Per-row forward results, each of length BT (docs/semantics.md §1):
/// ce = (lse_s - m_s) - (s_y - m_s), tvd = 0.5 * sum |p - q|,
/// lseS/lseT = log-sum-exp of the student/teacher row,
/// sigma = sum_v p_v * sign(p_v - q_v) with sign(0) = 0.
struct CeTvdForward {
  std::vector<double> ce, tvd, lseS, lseT, sigma;
};

/// Unreduced forward pass.
CeTvdForward ceTvdForward(const void *student, const void *teacher, DType dtype,
                          const int64_t *target, int64_t BT, int64_t V,
                          int64_t rowStride, int64_t ignoreIndex = -100);
CeTvdForward ceTvdForward(const double *student, const double *teacher,
                          const int64_t *target, int64_t BT, int64_t V,
                          int64_t rowStride, int64_t ignoreIndex = -100);

/// Unreduced backward pass. `gCe`, `gTvd`: per-row upstream gradients (BT,).
/// Writes dL/ds (BT * V, contiguous, row stride V) to `gradOut`:
/// g_ce * (p_v - 1[v == y]) + g_tvd * 0.5 * p_v * (sign(p_v - q_v) - sigma).
void ceTvdBackward(const void *student, const void *teacher, DType dtype,
                   const int64_t *target, int64_t BT, int64_t V,
                   int64_t rowStride, const double *gCe, const double *gTvd,
                   double *gradOut, int64_t ignoreIndex = -100);
void ceTvdBackward(const double *student, const double *teacher,
                   const int64_t *target, int64_t BT, int64_t V,
                   int64_t rowStride, const double *gCe, const double *gTvd,
                   double *gradOut, int64_t ignoreIndex = -100);

/// Reduced loss: alpha * sum(ce) + beta * sum(tvd), divided by the number of
/// non-ignored rows when `mean` (an all-ignored batch gives 0).
double ceTvdReducedLoss(const void *student, const void *teacher, DType dtype,
                        const int64_t *target, int64_t BT, int64_t V,
                        int64_t rowStride, double alpha, double beta, bool mean,
                        int64_t ignoreIndex = -100);
double ceTvdReducedLoss(const double *student, const double *teacher,
                        const int64_t *target, int64_t BT, int64_t V,
                        int64_t rowStride, double alpha, double beta, bool mean,
                        int64_t ignoreIndex = -100);

/// Gradient of ceTvdReducedLoss with respect to the student logits, written
/// to `gradOut` (BT * V, contiguous): the unreduced backward with
/// g_ce = alpha / n and g_tvd = beta / n per row (n = 1 for sum, n_valid for
/// mean; all rows ignored gives an all-zero gradient).
void ceTvdReducedBackward(const void *student, const void *teacher, DType dtype,
                          const int64_t *target, int64_t BT, int64_t V,
                          int64_t rowStride, double alpha, double beta,
                          bool mean, double *gradOut,
                          int64_t ignoreIndex = -100);
void ceTvdReducedBackward(const double *student, const double *teacher,
                          const int64_t *target, int64_t BT, int64_t V,
                          int64_t rowStride, double alpha, double beta,
                          bool mean, double *gradOut,
                          int64_t ignoreIndex = -100);

} // namespace ref
} // namespace tilejit

#endif // TILEJIT_KERNELS_SPEC_REFERENCE_CETVDREFERENCE_H
