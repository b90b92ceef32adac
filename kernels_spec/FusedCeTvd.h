//===- FusedCeTvd.h - fused cross-entropy + TVD kernels ---------*- C++ -*-===//
//
// The unreduced two-pass CE+TVD loss of shared/semantics.md §1, one program
// per row (grid = BT):
//
// fused_ce_tvd_fwd(student, teacher: ptr<dtype> (BT, V) with row_stride,
//                  target: ptr<i64> (BT), ce, tvd, sigma, max_s, logsum_s,
//                  max_t, logsum_t: ptr<f32> (BT), bad_target: ptr<i32> (1),
//                  V: i32, row_stride: i64, ignore_index: i64)
//   pass 1: online max / sum-exp of student and teacher rows;
//   pass 2: tvd = 0.5 sum |p - q|, sigma = sum p sign(p - q);
//   ce = (lse_s - m_s) - (s_y - m_s). The saved state keeps each row's lse
//   as (max, log sum-exp) so p = exp((s - max) - logsum) never differences
//   two large numbers. Ignored rows write zeros. A target outside [0, V)
//   that is not ignore_index writes row + 1 into bad_target (the host turns
//   it into an error) and zeros for the row.
//
// fused_ce_tvd_bwd(student, teacher, target, sigma, max_s, logsum_s, max_t,
//                  logsum_t, g_ce, g_tvd: ptr<f32> (BT), grad: ptr<dtype>
//                  (BT, V) with grad_stride, V: i32, row_stride: i64,
//                  grad_stride: i64, ignore_index: i64)
//   grad_v = g_ce (p_v - [v == y]) + g_tvd 0.5 p_v (sign(p_v - q_v) - sigma),
//   in fp32, stored in dtype; ignored rows get zeros.
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

} // namespace tilejit

#endif // TILEJIT_KERNELS_SPEC_FUSEDCETVD_H
