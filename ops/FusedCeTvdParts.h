//===- FusedCeTvdParts.h - the reduced CE+TVD op for its runner -*- C++ -*-===//
//
// What the host-vector runner and tuner of the reduced CE+TVD
// (ops/harness/) read of the op beyond tilejit/ops/FusedCeTvd.h: the config
// a call uses, its loss kernel (whose resources the tuner checks), and the
// valid-row count the call leaves in its workspace; and what both CE+TVD
// ops check of their shapes.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_OPS_FUSEDCETVDPARTS_H
#define TILEJIT_OPS_FUSEDCETVDPARTS_H

#include "ops/RowOpParts.h"
#include "tilejit/Kernel.h"
#include "tilejit/ops/FusedCeTvd.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace tilejit {
namespace ops {

/// The config of fused_ce_tvd_loss_grad that ceTvdReduced(args, ..., device)
/// uses, and where it came from: "CLUSTER_SIZE=8,... (default)". Builds the
/// kernels of `args` if not done yet; throws tilejit::Error as ceTvdReduced.
std::string ceTvdReducedConfig(const CeTvdReducedArgs &args, Device device);

/// The fused_ce_tvd_loss_grad kernel that ceTvdReduced launches for `args`
/// on the GPU, loaded (prepareCeTvdReduced) when this returns.
const Kernel &ceTvdReducedLossGrad(const CeTvdReducedArgs &args);

/// Where in the workspace a call leaves n_valid, the rows it counted whose
/// target is not ignore_index (an f32).
size_t ceTvdReducedValidCountOffset();

/// `n` rounded up to a multiple of 16 (the parts of workspace and state).
inline size_t align16(size_t n) { return (n + 15) / 16 * 16; }

/// Whether every row of a buffer at `p`, rows `stride` elements of `es`
/// bytes apart, starts 16-byte aligned: the kernels then skip their
/// per-access alignment check.
inline bool rowsStartAligned(const void *p, int64_t stride, size_t es) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0 && stride * es % 16 == 0;
}

/// Throws tilejit::Error, prefixed "fused_ce_tvd (what): ", for a dtype
/// other than bf16, f16 or f32, BT outside [0, 2^31), V outside [1, 2^31),
/// or a teacher stride other than the student's (0 means the same).
void checkLogitRows(const char *what, DType dtype, int64_t BT, int64_t V,
                    int64_t rowStride, int64_t teacherStride);

} // namespace ops
} // namespace tilejit

#endif // TILEJIT_OPS_FUSEDCETVDPARTS_H
