//===- LinearCe.h - per-chunk programs of the fused linear CE ---*- C++ -*-===//
//
// docs/semantics.md §2. Between the chunk's GEMMs (z = h_c W^T + b before,
// dh_c = dz W and dW += dz^T h_c after), one program per logits row:
//
// lce_logits_grad(logits: ptr<f32> (rows, V) with row_stride, the GEMM
//                 output h_c W^T (ptr<dtype> with NARROW_LOGITS=1);
//                 dz: ptr<dtype> (rows, V) with dz_stride (may be the
//                 logits buffer itself when both have one dtype: each
//                 element is read before the same thread writes it, and the
//                 target logit is read before the first barrier);
//                 bias: ptr<f32> (V); target: ptr<i64> (N);
//                 class_weight: ptr<f32> (V); stats: ptr<f32> (5) from
//                 lce_row_weights; grad_output: ptr<f32> (N); row_loss,
//                 row_z_loss, lse: ptr<f32> (N); V: i32; row_stride,
//                 dz_stride: i64; first_row: i32 (the chunk's first row in
//                 the batch); ignore_index: i64; label_smoothing, z_loss,
//                 softcap: f32; has_bias, has_class_weight,
//                 per_row_upstream: i32; dz_scale: f32; row_max,
//                 row_sum: ptr<f32> (rows, blocks) with stats_ld: i64;
//                 blocks: i32)
//   z = logits + bias;
//   z <- c tanh(z / c) when softcap c > 0; lse over the row (with
//   PARTIALS=1, combined from lce_logits' per-block max and sum-exp of the
//   row, without reading the logits for it);
//   row_loss = (1 - eps) w_y (lse - z_y) + eps / V (sum_v w_v) lse
//              - eps / V sum_v w_v z_v + z_loss lse^2   (0 for ignored rows;
//   PyTorch's cross_entropy convention for weights and label smoothing),
//   row_z_loss = z_loss lse^2; then, in place of the logits,
//   dz_v = (g_ce ((1 - eps) w_y (p_v - [v == y]) + eps / V (W p_v - w_v))
//           + g_z 2 z_loss lse p_v) (1 - tanh^2 under a softcap),
//   W = sum_v w_v; (g_ce, g_z) = stats[0..1] (mean: 1 / sum of w_y and
//   1 / n_valid, as the z-loss is not class-weighted; sum: 1) or
//   grad_output[row] twice (reduction none). w = 1 without class weights
//   (the buffer is then not read). dz is stored times dz_scale (the
//   caller's GEMMs divide it out): a mean's 1/N-sized gradients would
//   underflow in f16. The formulas and their sources are in
//   reference/LinearCeReference.h.
//
// Compile-time flags SOFTCAP, SMOOTHING, Z_LOSS, BIAS and CLASS_WEIGHT
// leave out what the problem does not use (derived from the problem by
// buildLinearCeKernel; absent, a feature is compiled in). UNROLL tiles are
// loaded per loop step before any is used.
//
// lce_row_weights(target, class_weight, stats: ptr<f32> (3), N, V: i32,
//                 ignore_index: i64, has_class_weight, mean: i32), one
//   program: stats = (g_ce, g_z, sum_v w_v, sum of w_y over non-ignored
//   rows, n_valid); for mean g_ce = 1 / sum w_y and g_z = 1 / n_valid (0
//   when every row is ignored), for sum and none both 1.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_KERNELS_SPEC_LINEARCE_H
#define TILEJIT_KERNELS_SPEC_LINEARCE_H

#include "tilejit/KernelSpec.h"

namespace tilejit {

KernelSpec linearCeLogitsGradSpec();
KernelSpec linearCeRowWeightsSpec();
/// lce_loss_sum(row_loss, row_z_loss, stats, loss: ptr<f32> (2), N: i32),
///   one program: loss[0] = g_ce sum (row_loss - row_z_loss) + g_z sum
///   row_z_loss, loss[1] = g_z sum row_z_loss (the z-loss on its own).
KernelSpec linearCeLossSumSpec();
/// lce_gemm(A, B: ptr<dtype>, C: ptr<f32> (C_F32 = 1) or ptr<dtype>; M, N,
///   K: i32; lda, ldb, ldc: i64; alpha, beta: f32), grid = (ceil(M /
///   BLOCK_M), ceil(N / BLOCK_N)): row-major C (M x N) = alpha op(A) op(B)
///   + beta C, op(A) M x K (A^T with TRANS_A), op(B) K x N (B^T with
///   TRANS_B), f32 accumulation on tensor cores (LinearCeGemm.cpp); bf16
///   and f16 operands. beta = 0 does not read C.
KernelSpec linearCeGemmSpec();
/// lce_gemm's tuned parameters (tiles, stages, warps, program order), which
/// lce_logits shares.
std::vector<ParamSpec> gemmScheduleParams();
/// lce_logits(h, W: ptr<dtype>; logits: ptr<f32>, or ptr<dtype> with
///   NARROW_LOGITS; bias: ptr<f32> (V); row_max, row_sum: ptr<f32> (rows,
///   blocks) with stats_ld; rows, V, d: i32; ldh, ldw, ld_logits, stats_ld:
///   i64; softcap: f32; has_bias: i32), grid = (ceil(rows / BLOCK_M),
///   blocks = ceil(V / BLOCK_N)): the chunk's logits h W^T (row-major,
///   without the bias) as lce_gemm computes them, and, for each row r and
///   column block j, over the block's columns v of the stored logit
///   x_v = softcap(z_v + b_v): row_max[r, j] = max_v x_v and row_sum[r, j] =
///   sum_v exp(x_v - row_max[r, j]) (shift 0 for an all -inf block).
///   lce_logits_grad with PARTIALS=1 combines them into the row's LSE
///   instead of walking the row for it.
KernelSpec linearCeLogitsSpec();

} // namespace tilejit

#endif // TILEJIT_KERNELS_SPEC_LINEARCE_H
