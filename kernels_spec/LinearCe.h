//===- LinearCe.h - per-chunk programs of the fused linear CE ---*- C++ -*-===//
//
// shared/semantics.md §2. Between the chunk's GEMMs (z = h_c W^T + b before,
// dh_c = dz W and dW += dz^T h_c after), one program per logits row:
//
// lce_logits_grad(logits: ptr<f32> (rows, V) with row_stride, in/out,
//                 target: ptr<i64> (N), class_weight: ptr<f32> (V),
//                 stats: ptr<f32> (3) from lce_row_weights,
//                 grad_output: ptr<f32> (N), row_loss, row_z_loss,
//                 lse: ptr<f32> (N), V: i32, row_stride: i64,
//                 first_row: i32 (the chunk's first row in the batch),
//                 ignore_index: i64, label_smoothing, z_loss, softcap: f32,
//                 has_class_weight, per_row_upstream: i32)
//   z <- c tanh(z / c) when softcap c > 0; lse over the row;
//   row_loss = (1 - eps) w_y (lse - z_y) + eps / V (sum_v w_v) lse
//              - eps / V sum_v w_v z_v + z_loss lse^2   (0 for ignored rows;
//   PyTorch's cross_entropy convention for weights and label smoothing),
//   row_z_loss = z_loss lse^2; then, in place of the logits,
//   dz_v = g ((1 - eps) w_y (p_v - [v == y]) + eps / V (W p_v - w_v)
//             + 2 z_loss lse p_v) (1 - tanh^2 under a softcap),
//   W = sum_v w_v, g = stats[0] (1 / sum of w_y for mean, 1 for sum) or
//   grad_output[row] (reduction none). w = 1 without class weights (the
//   buffer is then not read).
//
// lce_row_weights(target, class_weight, stats: ptr<f32> (3), N, V: i32,
//                 ignore_index: i64, has_class_weight, mean: i32), one
//   program: stats = (scale, sum of w_y over non-ignored rows, sum_v w_v);
//   scale = 1 / that sum for mean (0 when every row is ignored), else 1.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_KERNELS_SPEC_LINEARCE_H
#define TILEJIT_KERNELS_SPEC_LINEARCE_H

#include "tilejit/KernelSpec.h"

namespace tilejit {

KernelSpec linearCeLogitsGradSpec();
KernelSpec linearCeRowWeightsSpec();

} // namespace tilejit

#endif // TILEJIT_KERNELS_SPEC_LINEARCE_H
