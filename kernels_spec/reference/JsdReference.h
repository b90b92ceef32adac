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

} // namespace ref
} // namespace tilejit

#endif // TILEJIT_KERNELS_SPEC_REFERENCE_JSDREFERENCE_H
