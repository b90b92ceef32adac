//===- RowWalk.h - the loops of a row kernel, as the row schedules see them ===//
//
// A row kernel walks a row in tiles: `scf.for %i = lb to ub step B` whose
// body reads and writes `ptr[%i + arange(B)]` under `offs < ub`. The row
// schedules (tile-split-rows, tile-keep-rows) rewrite such walks; these are
// the facts about them both passes need.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_COMPILER_ROWWALK_H
#define TILEJIT_COMPILER_ROWWALK_H

#include "tilejit/ir/Dialects.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseMap.h"

#include <optional>

namespace tilejit {

/// A loop at the kernel's loop level 0 (inside no other scf.for) with a
/// constant step: the walks the row schedules may split or keep.
bool isRowWalk(mlir::scf::ForOp loop);

/// The row walks of `kernel` when it asks for a schedule (its attribute
/// `attrName` is a nonzero integer), in program order: all but the walks
/// that run past a kept slice (tile.row_tail) or over a peeled walk's
/// partial tile (tile.tail_walk), which run at most once per row.
llvm::SmallVector<mlir::scf::ForOp> scheduledWalks(mlir::Operation *kernel,
                                                   llvm::StringRef attrName);

/// The step of a row walk.
int64_t walkStep(mlir::scf::ForOp loop);

/// How the walk combines its carried value `i` across iterations, when the
/// body's yield is `combine(iter_arg, x)` (arith add, maximumf/maxsi or
/// minimumf/minsi, in either order), that is the iter_arg's only use and the
/// yield its result's only use; none otherwise.
std::optional<ReduceKind> carriedCombine(mlir::scf::ForOp loop, unsigned i);

/// Whether `a`, computed in or above walk A, and `b`, in or above walk B,
/// are the same value once A's induction variable stands for B's: the same
/// SSA value, or the same pure op (name, attributes, types) over equivalent
/// operands. Loads are equivalent only through this check's caller.
class WalkEquivalence {
public:
  WalkEquivalence(mlir::scf::ForOp a, mlir::scf::ForOp b) : a(a), b(b) {}
  bool equivalent(mlir::Value x, mlir::Value y);

private:
  mlir::scf::ForOp a, b;
  llvm::DenseMap<std::pair<mlir::Value, mlir::Value>, bool> memo;
};

/// Whether memory reached through `x` may overlap memory reached through
/// `y`: the same base, or two arguments both marked tile.may_alias. Shared
/// arrays and distinct non-aliasing arguments do not overlap.
bool mayOverlap(mlir::Value x, mlir::Value y);

/// Whether `offsets` is `%iv + arange(step)` (in either order, the scalar
/// through a splat) for the walk's induction variable: the tile the
/// iteration owns.
bool isOwnTile(mlir::scf::ForOp loop, mlir::Value offsets);

/// Whether no store in `walk` changes what `load` (in its body) reads
/// before it reads it: every store that may overlap writes the element the
/// load read, after it, in the same block (same offsets from the same base
/// offset: a gradient written in place over its input).
bool storesKeepElements(mlir::scf::ForOp walk, tile::LoadOp load);

/// A walk's body, for moving its loads to another iteration: which of its
/// values follow from the induction variable alone, and those values for
/// another one.
class WalkBody {
public:
  explicit WalkBody(mlir::scf::ForOp loop)
      : block(loop.getBody()), iv(loop.getInductionVar()) {}
  mlir::Value inductionVar() const { return iv; }
  /// Whether `op` is in the body.
  bool inside(mlir::Operation *op) const;
  /// Whether `v`, used in the body, is defined outside the walk, is the
  /// induction variable, or is a pure op over such values.
  bool recomputable(mlir::Value v);
  /// `v` under `map` (which maps the induction variable); the body's ops it
  /// needs are cloned at the builder's position.
  mlir::Value recompute(mlir::OpBuilder &b, mlir::Value v,
                        mlir::IRMapping &map) const;

private:
  mlir::Block *block;
  mlir::Value iv;
  llvm::DenseMap<mlir::Value, bool> known;
};

} // namespace tilejit

#endif // TILEJIT_COMPILER_ROWWALK_H
