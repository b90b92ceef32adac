//===- JsdReference.h - fp64 reference for the generalized JSD --*- C++ -*-===//
//
// The generalized Jensen-Shannon divergence of one row of log-probabilities
// (kernels_spec/Jsd.cpp has the math): X = log Q (student), Y = log P
// (teacher), beta in [0, 1], beta = 0 the forward KL(P || Q) and beta = 1
// the reverse KL(Q || P). Everything in double.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_KERNELS_SPEC_REFERENCE_JSDREFERENCE_H
#define TILEJIT_KERNELS_SPEC_REFERENCE_JSDREFERENCE_H

#include <cstdint>

namespace tilejit {
namespace ref {

/// The row's loss (nats); writes dloss/dX_v into grad[0, V) when grad is
/// not null. Entries of -inf (probability 0) contribute 0 where the term's
/// limit is 0. Throws tilejit::Error for V < 0 or beta outside [0, 1].
double jsdRow(const double *x, const double *y, int64_t V, double beta,
              double *grad);

/// The same of raw logits at temperature T > 0: X = log softmax(s / T), Y =
/// log softmax(t / T); writes dloss/ds_v = (G_v - q_v sum_u G_u) / T, G =
/// dloss/dX, into grad[0, V) when grad is not null. Throws tilejit::Error
/// for V < 1 or a temperature that is not > 0.
double jsdLogitsRow(const double *s, const double *t, int64_t V, double beta,
                    double temperature, double *grad);

} // namespace ref
} // namespace tilejit

#endif // TILEJIT_KERNELS_SPEC_REFERENCE_JSDREFERENCE_H
