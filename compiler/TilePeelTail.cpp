//===- TilePeelTail.cpp - run a walk's whole tiles without their masks ----===//
//
// A kernel with `tile.peel_tail = 1`: a row walk `scf.for %i = lb to ub
// step B` whose body masks its own tile against a bound, `%i + arange(B) <
// X` (X the same for the whole walk), is split into a walk over the whole
// tiles, where every such mask is true, and the original walk over what is
// left:
//
//   n = (max(lb, min(ub, X)) - lb) / B,  mid = lb + n B
//   for %i = lb to mid step B     (the masks: constant true)
//   for %i = mid to ub step B     (as written; tile.tail_walk)
//
// Every offset of a tile in the first walk is below mid <= X, so the masks
// it drops were true, and the second walk runs the iterations left in their
// order, from the first one's results: the rewrite holds for any X. With X
// = ub (a row of V elements walked to V) the second walk is the partial
// tile, one iteration at most. The whole tiles then load, compute and store
// with no compare, select or scalar fallback per element.
//
//===----------------------------------------------------------------------===//
#include "compiler/RowWalk.h"
#include "tilejit/compiler/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"

namespace tilejit {
#define GEN_PASS_DEF_TILEPEELTAIL
#include "compiler/Passes.h.inc"
} // namespace tilejit

using namespace mlir;

namespace tilejit {
namespace {

/// The scalar bound X of `cmp` when it is `own < splat(X)` (or `splat(X) >
/// own`) for the walk's own tile and an X defined outside the walk.
Value ownTileBound(scf::ForOp loop, arith::CmpIOp cmp) {
  Value own, bound;
  if (cmp.getPredicate() == arith::CmpIPredicate::slt)
    own = cmp.getLhs(), bound = cmp.getRhs();
  else if (cmp.getPredicate() == arith::CmpIPredicate::sgt)
    own = cmp.getRhs(), bound = cmp.getLhs();
  else
    return {};
  auto splat = bound.getDefiningOp<tile::SplatOp>();
  if (!isOwnTile(loop, own) || !splat)
    return {};
  Value x = splat.getOperand();
  if (x.getType() != loop.getInductionVar().getType() ||
      loop->isAncestor(x.getParentBlock()->getParentOp()))
    return {};
  return x;
}

void peel(scf::ForOp walk) {
  // The masks of the walk's own tile, and their bounds.
  SmallVector<arith::CmpIOp> masks;
  SmallVector<Value> bounds;
  walk.getBody()->walk([&](arith::CmpIOp cmp) {
    if (Value x = ownTileBound(walk, cmp)) {
      masks.push_back(cmp);
      if (!llvm::is_contained(bounds, x))
        bounds.push_back(x);
    }
  });
  if (masks.empty())
    return;

  OpBuilder b(walk);
  Location loc = walk.getLoc();
  Value lb = walk.getLowerBound(), hi = walk.getUpperBound();
  for (Value x : bounds)
    if (x != hi)
      hi = arith::MinSIOp::create(b, loc, hi, x);
  hi = arith::MaxSIOp::create(b, loc, hi, lb);
  Value span = arith::SubIOp::create(b, loc, hi, lb);
  Value tiles = arith::DivSIOp::create(b, loc, span, walk.getStep());
  Value mid = arith::AddIOp::create(
      b, loc, lb, arith::MulIOp::create(b, loc, tiles, walk.getStep()));

  IRMapping map;
  auto whole = cast<scf::ForOp>(b.clone(*walk, map));
  whole.getUpperBoundMutable().set(mid);
  walk.getLowerBoundMutable().set(mid);
  for (auto [init, r] : llvm::zip(walk.getInitsMutable(), whole.getResults()))
    init.set(r);
  walk->setAttr(attr::kTailWalk, UnitAttr::get(walk->getContext()));

  for (arith::CmpIOp cmp : masks) {
    auto copy = map.lookup(cmp.getResult()).getDefiningOp<arith::CmpIOp>();
    OpBuilder cb(copy);
    auto type = cast<RankedTensorType>(copy.getType());
    Value all = arith::ConstantOp::create(cb, copy.getLoc(),
                                          DenseElementsAttr::get(type, true));
    copy.getResult().replaceAllUsesWith(all);
    copy.erase();
  }
}

struct TilePeelTailPass : public impl::TilePeelTailBase<TilePeelTailPass> {
  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp kernel) {
      for (scf::ForOp walk : scheduledWalks(kernel, attr::kPeelTail))
        peel(walk);
    });
  }
};

} // namespace
} // namespace tilejit
