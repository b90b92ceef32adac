//===- TileLoadAhead.cpp - issue a walk's loads one tile ahead -------------===//
//
// A kernel with `tile.load_ahead = 1`: in each row walk, the loads of the
// tile the iteration owns (offsets %i + arange(B), from global memory) are
// issued one iteration early. The walk carries the loaded tiles:
//
//   x0 = load(tile at lb)                      (masked off when lb >= ub)
//   for i: x_next = load(tile at i + B)        (masked off when i + B >= ub)
//          ... the body, on x ...
//          yield x_next
//
// so each thread has the next tile's loads in flight while it computes on
// the current one and waits at the body's barriers (block reductions). The
// loads keep their masks and fills; the extra mask keeps them inside the
// walk's range, so a split row's program never reads its neighbour's slice.
// Loads whose operands depend on what the iteration computes, that read
// shared memory, or whose memory the body may write (other than each
// element it read, after reading it) stay where they are, as do the walks
// tile-keep-rows marks as running only for rows longer than the kernel's
// (`tile.row_tail`) and the partial tile tile-peel-tail leaves
// (`tile.tail_walk`): their registers would count against every program.
//
//===----------------------------------------------------------------------===//
#include "compiler/RowWalk.h"
#include "tilejit/compiler/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace tilejit {
#define GEN_PASS_DEF_TILELOADAHEAD
#include "compiler/Passes.h.inc"
} // namespace tilejit

using namespace mlir;

namespace tilejit {
namespace {

/// The load of the tile at `iv` (masked off unless `inRange`), cloned at
/// `b`.
Value loadAt(OpBuilder &b, const WalkBody &body, tile::LoadOp load, Value iv,
             Value inRange) {
  Location loc = load.getLoc();
  IRMapping map;
  map.map(body.inductionVar(), iv);
  Value offsets = body.recompute(b, load.getOffsets(), map);
  auto shape = cast<RankedTensorType>(offsets.getType()).getShape();
  Value mask = tile::SplatOp::create(
      b, loc, RankedTensorType::get(shape, b.getI1Type()), inRange);
  if (load.getMask()) {
    Value own = body.recompute(b, load.getMask(), map);
    mask = arith::AndIOp::create(b, loc, own, mask);
  }
  Value other =
      load.getOther() ? body.recompute(b, load.getOther(), map) : Value();
  Value ptr = body.recompute(b, load.getPtr(), map);
  return tile::LoadOp::create(b, loc, load.getType(), ptr, offsets, mask,
                              other);
}

void loadAhead(scf::ForOp loop) {
  WalkBody body(loop);
  SmallVector<tile::LoadOp> loads;
  for (auto load : loop.getBody()->getOps<tile::LoadOp>())
    if (isOwnTile(loop, load.getOffsets()) && storesKeepElements(loop, load) &&
        !pointerRoot(load.getPtr()).getDefiningOp<tile::SharedAllocOp>() &&
        body.recomputable(load.getPtr()) &&
        (!load.getMask() || body.recomputable(load.getMask())) &&
        (!load.getOther() || body.recomputable(load.getOther())))
      loads.push_back(load);
  if (loads.empty())
    return;

  Value lb = loop.getLowerBound(), ub = loop.getUpperBound(),
        step = loop.getStep();
  OpBuilder b(loop);
  Location loc = loop.getLoc();
  Value any = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, lb, ub);
  SmallVector<Value> first;
  for (tile::LoadOp load : loads)
    first.push_back(loadAt(b, body, load, lb, any));

  // The next tile's loads, first in the body; then the walk carries them
  // and the body's own loads become the tiles carried in.
  // A next tile exists where ub - i > step (i + step could overflow).
  OpBuilder top = OpBuilder::atBlockBegin(loop.getBody());
  Value next = arith::AddIOp::create(top, loc, body.inductionVar(), step);
  Value left = arith::SubIOp::create(top, loc, ub, body.inductionVar());
  Value more =
      arith::CmpIOp::create(top, loc, arith::CmpIPredicate::sgt, left, step);
  SmallVector<Value> ahead;
  for (tile::LoadOp load : loads)
    ahead.push_back(loadAt(top, body, load, next, more));
  IRRewriter rewriter(loop->getContext());
  auto grown = loop.replaceWithAdditionalYields(
      rewriter, first, /*replaceInitOperandUsesInLoop=*/false,
      [&](OpBuilder &, Location, ArrayRef<BlockArgument>) { return ahead; });
  if (failed(grown))
    return;
  auto carried = cast<scf::ForOp>(grown->getOperation())
                     .getRegionIterArgs()
                     .take_back(loads.size());
  for (auto [load, value] : llvm::zip(loads, carried)) {
    load.getResult().replaceAllUsesWith(value);
    load.erase();
  }
}

struct TileLoadAheadPass : public impl::TileLoadAheadBase<TileLoadAheadPass> {
  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp kernel) {
      for (scf::ForOp loop : scheduledWalks(kernel, attr::kLoadAhead))
        loadAhead(loop);
    });
  }
};

} // namespace
} // namespace tilejit
