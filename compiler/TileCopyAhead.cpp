//===- TileCopyAhead.cpp - fill a kept row with copies issued ahead -------===//
//
// A kernel with `tile.copy_ahead = A` (1 to 7): in each row walk, a global
// load of the iteration's own tile whose value the body stores unchanged
// into a shared array (what tile-keep-rows makes of the first walk over a
// kept row) becomes an asynchronous copy straight into that array, issued
// A iterations ahead:
//
//   copy tiles lb, lb + B, ..., lb + (A-1) B; one group each
//   for i: copy tile i + A B (masked off when ub - i <= A B); commit
//          wait until at most A groups are in flight (this lane's own)
//          x = load array[the store's offsets]  (the load's mask and fill)
//          ... the body, on x ...
//   wait for every group
//
// The copies hold no registers, so a program has A tiles of the row in
// flight whatever its body keeps live: with a row kept on chip a program
// takes most of an SM's shared memory, few programs share the SM, and one
// tile ahead in registers (tile-load-ahead) leaves the memory system idle.
// Each lane reads back only the elements it copied (one tile type, one
// layout for the copy and the load), so the wait needs no barrier.
// Walks that already copy asynchronously, or that read the array
// themselves, are left alone.
//
//===----------------------------------------------------------------------===//
#include "compiler/RowWalk.h"
#include "tilejit/compiler/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace tilejit {
#define GEN_PASS_DEF_TILECOPYAHEAD
#include "compiler/Passes.h.inc"
} // namespace tilejit

using namespace mlir;

namespace tilejit {
namespace {

/// A load of the iteration's own tile and the store of its value into a
/// shared array.
struct KeptTile {
  tile::LoadOp load;
  tile::StoreOp store;
};

/// Whether `offsets` is splat(%iv - c) + arange(B) for a `c` defined
/// outside the walk: a distinct slot of the array per iteration (what
/// tile-keep-rows stores to), so no two copy groups in flight share one.
bool isLocalTile(scf::ForOp loop, Value offsets) {
  auto add = offsets.getDefiningOp<arith::AddIOp>();
  auto tensor = dyn_cast<RankedTensorType>(offsets.getType());
  if (!add || !tensor || tensor.getDimSize(0) != walkStep(loop))
    return false;
  auto isLocal = [&](Value v) {
    auto splat = v.getDefiningOp<tile::SplatOp>();
    auto sub = splat ? splat.getOperand().getDefiningOp<arith::SubIOp>()
                     : arith::SubIOp();
    return sub && sub.getLhs() == loop.getInductionVar() &&
           !loop->isAncestor(sub.getRhs().getParentBlock()->getParentOp());
  };
  auto isRange = [&](Value v) { return v.getDefiningOp<tile::ArangeOp>(); };
  return (isLocal(add.getLhs()) && isRange(add.getRhs())) ||
         (isRange(add.getLhs()) && isLocal(add.getRhs()));
}

/// The walk's tiles that can be copied ahead; none when the walk copies
/// asynchronously already or reads one of the arrays.
SmallVector<KeptTile> keptTiles(scf::ForOp loop, WalkBody &body) {
  SmallVector<KeptTile> tiles;
  bool copies = false;
  loop->walk([&](Operation *op) {
    copies |= isa<tile::CopyAsyncOp, tile::CopyCommitOp, tile::CopyWaitOp>(op);
  });
  if (copies)
    return tiles;
  auto recomputable = [&](Value v) { return !v || body.recomputable(v); };
  for (auto store : loop.getBody()->getOps<tile::StoreOp>()) {
    auto load = store.getValue().getDefiningOp<tile::LoadOp>();
    if (!load || load->getBlock() != store->getBlock() ||
        llvm::any_of(tiles, [&](const KeptTile &t) { return t.load == load; }) ||
        !isLocalTile(loop, store.getOffsets()) ||
        !pointerRoot(store.getPtr()).getDefiningOp<tile::SharedAllocOp>() ||
        pointerRoot(load.getPtr()).getDefiningOp<tile::SharedAllocOp>() ||
        store.getMask() != load.getMask() ||
        !isOwnTile(loop, load.getOffsets()) ||
        !storesKeepElements(loop, load) || !recomputable(load.getPtr()) ||
        !recomputable(load.getMask()) || !recomputable(store.getPtr()))
      continue;
    tiles.push_back({load, store});
  }
  // The array is written only by its store: nothing else in the walk may
  // read it before the copies land.
  for (KeptTile t : tiles) {
    Value array = pointerRoot(t.store.getPtr());
    bool readHere = false;
    loop->walk([&](Operation *op) {
      if (op == t.store.getOperation())
        return;
      for (Value v : op->getOperands())
        readHere |= isa<tile::PtrType>(v.getType()) && pointerRoot(v) == array;
    });
    if (readHere)
      return {};
  }
  return tiles;
}

/// Copies of `tiles` at induction value `iv` (each lane's elements where
/// `inRange` and the load's mask hold), then one commit.
void copyAt(OpBuilder &b, const WalkBody &body, ArrayRef<KeptTile> tiles,
            Value iv, Value inRange) {
  for (KeptTile t : tiles) {
    Location loc = t.load.getLoc();
    IRMapping map;
    map.map(body.inductionVar(), iv);
    Value src = body.recompute(b, t.load.getPtr(), map);
    Value srcOffsets = body.recompute(b, t.load.getOffsets(), map);
    Value dst = body.recompute(b, t.store.getPtr(), map);
    Value dstOffsets = body.recompute(b, t.store.getOffsets(), map);
    auto shape = cast<RankedTensorType>(srcOffsets.getType()).getShape();
    Value mask = tile::SplatOp::create(
        b, loc, RankedTensorType::get(shape, b.getI1Type()), inRange);
    if (t.load.getMask())
      mask = arith::AndIOp::create(
          b, loc, body.recompute(b, t.load.getMask(), map), mask);
    tile::CopyAsyncOp::create(b, loc, dst, dstOffsets, src, srcOffsets, mask);
  }
  tile::CopyCommitOp::create(b, tiles.front().load->getLoc());
}

void copyAhead(scf::ForOp loop, int64_t ahead) {
  WalkBody body(loop);
  SmallVector<KeptTile> tiles = keptTiles(loop, body);
  if (tiles.empty())
    return;
  Location loc = loop.getLoc();
  Value lb = loop.getLowerBound(), ub = loop.getUpperBound();
  Value iv = loop.getInductionVar();
  Type t = ub.getType();
  auto constant = [&](OpBuilder &b, int64_t v) -> Value {
    return arith::ConstantOp::create(b, loc, IntegerAttr::get(t, v));
  };
  // Tile lb + j B exists where ub - lb > j B (lb + j B could overflow).
  OpBuilder before(loop);
  Value extent = arith::SubIOp::create(before, loc, ub, lb);
  for (int64_t j = 0; j < ahead; ++j) {
    Value distance = constant(before, j * walkStep(loop));
    Value at = arith::AddIOp::create(before, loc, lb, distance);
    Value exists = arith::CmpIOp::create(before, loc, arith::CmpIPredicate::sgt,
                                         extent, distance);
    copyAt(before, body, tiles, at, exists);
  }

  OpBuilder top = OpBuilder::atBlockBegin(loop.getBody());
  Value distance = constant(top, ahead * walkStep(loop));
  Value next = arith::AddIOp::create(top, loc, iv, distance);
  Value left = arith::SubIOp::create(top, loc, ub, iv);
  Value exists = arith::CmpIOp::create(top, loc, arith::CmpIPredicate::sgt,
                                       left, distance);
  copyAt(top, body, tiles, next, exists);
  tile::CopyWaitOp::create(top, loc, ahead, /*laneOnly=*/true);

  for (KeptTile k : tiles) {
    OpBuilder at(k.load);
    IRMapping same;
    same.map(iv, iv);
    Value offsets = body.recompute(at, k.store.getOffsets(), same);
    Value array = body.recompute(at, k.store.getPtr(), same);
    auto kept = tile::LoadOp::create(at, k.load.getLoc(), k.load.getType(),
                                     array, offsets, k.load.getMask(),
                                     k.load.getOther());
    k.store.erase();
    k.load.getResult().replaceAllUsesWith(kept.getResult());
    k.load.erase();
  }

  OpBuilder after(loop->getContext());
  after.setInsertionPointAfter(loop);
  tile::CopyWaitOp::create(after, loc, 0, /*laneOnly=*/true);
}

struct TileCopyAheadPass : public impl::TileCopyAheadBase<TileCopyAheadPass> {
  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp kernel) {
      auto ahead = kernel->getAttrOfType<IntegerAttr>(attr::kCopyAhead);
      if (!ahead || ahead.getInt() == 0)
        return;
      if (ahead.getInt() < 0 || ahead.getInt() > 7) {
        kernel.emitError() << attr::kCopyAhead << " = " << ahead.getInt()
                           << ": copies run 1 to 7 iterations ahead";
        return signalPassFailure();
      }
      SmallVector<scf::ForOp> walks;
      kernel.walk([&](scf::ForOp loop) {
        if (isRowWalk(loop))
          walks.push_back(loop);
      });
      for (scf::ForOp loop : walks)
        copyAhead(loop, ahead.getInt());
    });
  }
};

} // namespace
} // namespace tilejit
