//===- KlDivReference.h - fp64 reference for KL distillation ----*- C++ -*-===//
//
// The KL divergence of one row of student and teacher logits at temperature
// T (kernels_spec/KlDiv.cpp has the math): q = softmax(s / T), p =
// softmax(t / T); forward KL(p || q), reverse KL(q || p). Everything in
// double.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_KERNELS_SPEC_REFERENCE_KLDIVREFERENCE_H
#define TILEJIT_KERNELS_SPEC_REFERENCE_KLDIVREFERENCE_H

#include <cstdint>
#include <vector>

namespace tilejit {
namespace ref {

/// log softmax(x / T) of a row of V >= 1 logits.
std::vector<double> logSoftmax(const double *x, int64_t V, double T);

/// The row's divergence (nats); writes its gradient with respect to the
/// student's logits into grad[0, V) when grad is not null. Throws
/// tilejit::Error for V < 1 or a temperature that is not > 0.
double klDivRow(const double *s, const double *t, int64_t V,
                double temperature, bool reverse, double *grad);

} // namespace ref
} // namespace tilejit

#endif // TILEJIT_KERNELS_SPEC_REFERENCE_KLDIVREFERENCE_H
