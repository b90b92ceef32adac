//===- Inputs.h - realistic CE+TVD inputs for tests and benchmarks -*- C++ -*-//
//
// Deterministic synthetic distillation batches for benchmarks and
// `tilejit run`: LLM-like student logits, a teacher that is a noisy copy of
// the student (so the TVD of docs/semantics.md §1 lands well inside
// (0, 1)), and targets with some padding rows.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_KERNELS_SPEC_REFERENCE_INPUTS_H
#define TILEJIT_KERNELS_SPEC_REFERENCE_INPUTS_H

#include "tilejit/DType.h"

#include <cstdint>
#include <vector>

namespace tilejit {
namespace ref {

/// Target value used for ignored (padding) rows by makeCeTvdInputs.
constexpr int64_t kCeTvdIgnoreIndex = -100;

/// One CE+TVD batch. `student` and `teacher` hold BT * V elements of `dtype`
/// (bf16/f16 as raw 16-bit patterns, f32 as float), contiguous, row stride V;
/// `target` holds BT int64 class indices.
struct CeTvdInputs {
  std::vector<uint8_t> student, teacher;
  std::vector<int64_t> target;
  DType dtype;
  int64_t BT, V;
};

/// Generates a batch: student logits ~ N(0, sd 2) plus a few peaked tokens
/// per row (+4 to +10), teacher = student + N(0, sd 0.5) noise (both rounded
/// to `dtype` from float, RNE), targets uniform in [0, V) except rows with
/// row % 7 == 6, which are kCeTvdIgnoreIndex. The result depends only on
/// (BT, V, dtype, seed), not on the number of threads used to generate it.
/// Throws tilejit::Error if BT < 0, V <= 0 or dtype is not bf16/f16/f32.
CeTvdInputs makeCeTvdInputs(int64_t BT, int64_t V, DType dtype, uint64_t seed);

} // namespace ref
} // namespace tilejit

#endif // TILEJIT_KERNELS_SPEC_REFERENCE_INPUTS_H
