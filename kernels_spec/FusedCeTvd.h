//===- FusedCeTvd.h - fused cross-entropy + TVD kernels ---------*- C++ -*-===//
//
// The unreduced two-pass CE+TVD loss of docs/semantics.md §1, one program
// per row (grid = BT):
//
// fused_ce_tvd_fwd(student, teacher: ptr<dtype> (BT, V) with row_stride,
//                  target: ptr<i64> (BT), ce, tvd, sigma, max_s, logsum_s,
//                  max_t, logsum_t, fast_signs: ptr<f32> (BT),
//                  bad_target: ptr<i32> (1), V: i32, row_stride: i64,
//                  ignore_index: i64)
//   pass 1: online max / sum-exp of student and teacher rows;
//   pass 2: tvd = 0.5 sum |p - q|, sigma = sum p sign(p - q);
//   ce = (lse_s - m_s) - (s_y - m_s). The saved state keeps each row's lse
//   as (max, log sum-exp) so that p = exp((s - max) - logsum) never
//   differences two large numbers (log2SoftmaxAt); where |lse| log2(e) <
//   128 the kernels may form log2 p in one fma, x log2(e) - K, and scale p
//   back by K's rounding (log2SoftmaxFast, log2OffsetScale). fast_signs
//   says in which form pass 2 signed p - q (RowLogs in SoftmaxParts.h): 1
//   from log2SoftmaxFast's logs, a rounding tie +, 0 from log2SoftmaxAt's,
//   a tie 0. Ignored rows write zeros. A target outside [0, V) that is not
//   ignore_index writes row + 1 into bad_target (the host turns it into an
//   error) and zeros for the row.
//
// fused_ce_tvd_bwd(student, teacher, target, sigma, max_s, logsum_s, max_t,
//                  logsum_t, fast_signs, g_ce, g_tvd: ptr<f32> (BT),
//                  grad: ptr<dtype> (BT, V) with grad_stride, V: i32,
//                  row_stride: i64, grad_stride: i64, ignore_index: i64)
//   grad_v = g_ce (p_v - [v == y]) + g_tvd 0.5 p_v (sign(p_v - q_v) - sigma),
//   in fp32, stored in dtype, each sign in the form fast_signs names (so
//   that a row's gradient sums to 0 as sigma's signs agree with its own);
//   ignored rows get zeros.
//
// All offsets are 64-bit (BT * V may exceed 2^31).
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_KERNELS_SPEC_FUSEDCETVD_H
#define TILEJIT_KERNELS_SPEC_FUSEDCETVD_H

#include "tilejit/KernelSpec.h"

namespace tilejit {

KernelSpec fusedCeTvdForwardSpec();
KernelSpec fusedCeTvdBackwardSpec();
/// fused_ce_tvd_fwd_cluster: as fused_ce_tvd_fwd (same arguments), with
/// grid = BT * CLUSTER_SIZE: the CLUSTER_SIZE programs of a thread-block
/// cluster split a row into SLICE-wide slices (SLICE derived from V), walk
/// them in BLOCK_SIZE tiles and combine their partial max / sum-exp / TVD /
/// sigma through distributed shared memory; the second pass reads the slice
/// again (from L2 where it is still there). Needs sm_90 (thread-block
/// clusters).
KernelSpec fusedCeTvdForwardClusterSpec();
/// fused_ce_tvd_loss_grad(student, teacher, target, weights: ptr<f32> (3),
///                        ce, tvd: ptr<f32> (BT), grad: ptr<dtype> (BT, V),
///                        bad_target, V, row_stride, grad_stride,
///                        ignore_index)
///   the reduced API's one pass: per-row ce and tvd (for ce_tvd_loss_sum)
///   and grad_v = weights[0] (p_v - [v == y]) + weights[1] 0.5 p_v
///   (sign(p_v - q_v) - sigma). grad may be the student buffer (in place):
///   each program reads its slice before writing it. Grid as above.
KernelSpec fusedCeTvdLossGradSpec();
/// ce_tvd_row_weights(target, weights: ptr<f32> (3), BT: i32,
///                    ignore_index: i64, alpha, beta: f32, mean: i32), one
///   program: weights = (alpha s, beta s, n_valid) with s = 1 / n_valid for
///   mean (0 when every row is ignored) and 1 for sum.
KernelSpec ceTvdRowWeightsSpec();
/// ce_tvd_loss_sum(ce, tvd, weights, loss: ptr<f32> (1), BT: i32), one
///   program: loss = weights[0] sum ce + weights[1] sum tvd.
KernelSpec ceTvdLossSumSpec();

} // namespace tilejit

#endif // TILEJIT_KERNELS_SPEC_FUSEDCETVD_H
