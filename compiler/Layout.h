//===- Layout.h - the facts about the thread layout passes share ---*- C++ -*-===//
//
// tile-assign-layout gives each tile of N elements groups of
// G(N) = defaultLayoutGroup(simt.vec, N / P) adjacent elements per thread;
// a pass that runs before it and wants its row ops kept within threads
// needs the same numbers.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_COMPILER_LAYOUT_H
#define TILEJIT_COMPILER_LAYOUT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <cstdint>

namespace tilejit {

/// simt.vec: elements per 16-byte access of the narrowest type `kernel`
/// loads or stores as a tile (1 for a kernel without tile accesses).
int64_t accessVectorWidth(mlir::func::FuncOp kernel);

/// The group width tile-assign-layout will give `kernel`'s tiles of
/// `tileElements` elements (before any row op asks for another), or 0 when
/// the kernel has no num_warps.
int64_t plannedLayoutGroup(mlir::func::FuncOp kernel, int64_t tileElements);

} // namespace tilejit

#endif // TILEJIT_COMPILER_LAYOUT_H
