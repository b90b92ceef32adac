//===- FusedCeTvdForward.h - what the two CE+TVD forwards share -*- C++ -*-===//
//
// fused_ce_tvd_fwd and fused_ce_tvd_fwd_cluster take the same arguments and
// write the same eight per-row results (FusedCeTvd.h); they differ in how a
// row is walked.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_KERNELS_SPEC_FUSEDCETVDFORWARD_H
#define TILEJIT_KERNELS_SPEC_FUSEDCETVDFORWARD_H

#include "tilejit/DSL.h"

#include <array>

namespace tilejit {

struct CeTvdForwardArgs {
  dsl::Value student, teacher, target;
  /// ce, tvd, sigma, max_s, logsum_s, max_t, logsum_t, fast_signs: f32 (BT)
  std::array<dsl::Value, 8> rowOutputs;
  dsl::Value badTarget, V, rowStride, ignoreIndex;
};

/// Declares the forward kernels' arguments, in their order.
inline CeTvdForwardArgs declareForwardArgs(dsl::KernelBuilder &k, DType dtype) {
  CeTvdForwardArgs a;
  a.student = k.pointerArg("student", dtype);
  a.teacher = k.pointerArg("teacher", dtype);
  a.target = k.pointerArg("target", DType::I64);
  const char *names[8] = {"ce",       "tvd",   "sigma",    "max_s",
                          "logsum_s", "max_t", "logsum_t", "fast_signs"};
  for (int i = 0; i < 8; ++i)
    a.rowOutputs[i] = k.pointerArg(names[i], DType::F32);
  a.badTarget = k.pointerArg("bad_target", DType::I32);
  a.V = k.scalarArg("V", DType::I32);
  a.rowStride = k.scalarArg("row_stride", DType::I64);
  a.ignoreIndex = k.scalarArg("ignore_index", DType::I64);
  return a;
}

/// Stores the eight per-row results (in rowOutputs' order) at `row`.
inline void storeRowOutputs(dsl::KernelBuilder &k, const CeTvdForwardArgs &a,
                            dsl::Value row,
                            const std::array<dsl::Value, 8> &values) {
  for (int i = 0; i < 8; ++i)
    k.store(a.rowOutputs[i], row, values[i]);
}

} // namespace tilejit

#endif // TILEJIT_KERNELS_SPEC_FUSEDCETVDFORWARD_H
