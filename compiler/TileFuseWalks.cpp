//===- TileFuseWalks.cpp - one walk where two read the same row -----------===//
//
// A kernel with `tile.fuse_walks = 1`: two row walks A and B in the same
// block, over the same range with the same step, become one walk when B
// needs nothing A computes, so that a row written as "first sum the loss,
// then write the gradient" is read once:
//
//   %l = scf.for %i ... { x = load p[%i + r]; acc + f(x) }   // A
//   store loss, reduce(%l)
//   scf.for %i ... { x = load p[%i + r]; store g[%i + r], h(x) }   // B
//
// becomes one scf.for carrying A's values then B's, A's body then B's, and
// CSE then leaves one load of each element and one copy of what both
// compute from it. Legal when
//   - A writes no memory (a reduction over its loads);
//   - B uses no result of A, nor of an op between them that does;
//   - every op between them moves: those that do not depend on A before it
//     (no writes), the others after the fused walk (B neither uses their
//     results nor touches memory they write, nor writes what they read);
//   - each store of B that may overlap a load of A (the gradient written
//     over its input) writes the element that load reads, in the tile the
//     iteration owns, so no iteration reads what an earlier one wrote.
// Ops with regions between the walks, and walks of other blocks, are left
// alone.
//
//===----------------------------------------------------------------------===//
#include "compiler/RowWalk.h"
#include "tilejit/compiler/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"

namespace tilejit {
#define GEN_PASS_DEF_TILEFUSEWALKS
#include "compiler/Passes.h.inc"
} // namespace tilejit

using namespace mlir;

namespace tilejit {
namespace {

bool sameIndex(Value a, Value b) {
  if (a == b)
    return true;
  APInt x, y;
  return matchPattern(a, m_ConstantInt(&x)) &&
         matchPattern(b, m_ConstantInt(&y)) && x == y;
}

/// Whether `op` or an op inside it may write memory (or has effects it
/// does not declare).
bool writesMemory(Operation *op) {
  bool writes = false;
  op->walk([&](Operation *inner) {
    if (inner->hasTrait<OpTrait::HasRecursiveMemoryEffects>())
      return; // its body is walked
    writes |= !isa<MemoryEffectOpInterface>(inner) ||
              hasEffect<MemoryEffects::Write>(inner);
  });
  return writes;
}

/// The pointers `region` loads from and stores to.
struct Accesses {
  SmallVector<tile::LoadOp> loads;
  SmallVector<tile::StoreOp> stores;
};

Accesses accessesOf(Operation *op) {
  Accesses a;
  op->walk([&](tile::LoadOp l) { a.loads.push_back(l); });
  op->walk([&](tile::StoreOp s) { a.stores.push_back(s); });
  return a;
}

/// Whether `load` (in walk `a`) and `store` (in walk `b`) touch the same
/// element at the same iteration: each at its walk's own tile, through the
/// same pointer or through the same offset from two arguments (the store
/// over the load's input, in place).
bool sameElement(scf::ForOp a, tile::LoadOp load, scf::ForOp b,
                 tile::StoreOp store) {
  if (!isOwnTile(a, load.getOffsets()) || !isOwnTile(b, store.getOffsets()))
    return false;
  if (load.getPtr() == store.getPtr())
    return true;
  auto lp = load.getPtr().getDefiningOp<tile::AddPtrOp>();
  auto sp = store.getPtr().getDefiningOp<tile::AddPtrOp>();
  return lp && sp && lp.getOffset() == sp.getOffset() &&
         !lp.getPtr().getDefiningOp() && !sp.getPtr().getDefiningOp();
}

/// Whether any operand of `op` or of an op inside it is in `values`.
bool uses(Operation *op, const llvm::SetVector<Value> &values) {
  bool found = false;
  op->walk([&](Operation *inner) {
    for (Value v : inner->getOperands())
      found |= values.contains(v);
  });
  return found;
}

bool overlapsAny(Value ptr, ArrayRef<tile::LoadOp> loads,
                 ArrayRef<tile::StoreOp> stores) {
  for (tile::LoadOp l : loads)
    if (mayOverlap(ptr, l.getPtr()))
      return true;
  for (tile::StoreOp s : stores)
    if (mayOverlap(ptr, s.getPtr()))
      return true;
  return false;
}

/// Fuses `a` and `b` when the header's conditions hold; returns whether it
/// did.
bool fuse(scf::ForOp a, scf::ForOp b) {
  if (a->getBlock() != b->getBlock() || !a->isBeforeInBlock(b) ||
      !sameIndex(a.getLowerBound(), b.getLowerBound()) ||
      !sameIndex(a.getUpperBound(), b.getUpperBound()) ||
      walkStep(a) != walkStep(b) || writesMemory(a))
    return false;
  // The ops between: those that depend on A (moved after the fused walk)
  // and the others (moved before A).
  llvm::SetVector<Value> fromA(a.getResults().begin(), a.getResults().end());
  SmallVector<Operation *> before, after;
  for (Operation *op = a->getNextNode(); op != b; op = op->getNextNode()) {
    if (op->getNumRegions() != 0)
      return false;
    if (uses(op, fromA)) {
      fromA.insert(op->getResults().begin(), op->getResults().end());
      after.push_back(op);
    } else {
      if (writesMemory(op))
        return false;
      before.push_back(op);
    }
  }
  if (uses(b, fromA))
    return false;
  Accesses inA = accessesOf(a), inB = accessesOf(b);
  for (Operation *op : after) {
    Accesses here = accessesOf(op);
    for (tile::StoreOp s : here.stores)
      if (overlapsAny(s.getPtr(), inB.loads, inB.stores))
        return false;
    for (tile::LoadOp l : here.loads)
      if (overlapsAny(l.getPtr(), {}, inB.stores))
        return false;
  }
  for (tile::StoreOp s : inB.stores)
    for (tile::LoadOp l : inA.loads)
      if (mayOverlap(s.getPtr(), l.getPtr()) && !sameElement(a, l, b, s))
        return false;

  for (Operation *op : before)
    op->moveBefore(a);
  OpBuilder builder(b);
  SmallVector<Value> inits(a.getInitArgs());
  llvm::append_range(inits, b.getInitArgs());
  auto fused =
      scf::ForOp::create(builder, a.getLoc(), a.getLowerBound(),
                         a.getUpperBound(), a.getStep(), inits);
  fused->setAttrs(a->getAttrs());
  Block *body = fused.getBody();
  IRMapping map;
  unsigned na = a.getNumRegionIterArgs();
  map.map(a.getInductionVar(), fused.getInductionVar());
  map.map(b.getInductionVar(), fused.getInductionVar());
  for (unsigned i = 0; i < na; ++i)
    map.map(a.getRegionIterArgs()[i], fused.getRegionIterArgs()[i]);
  for (unsigned i = 0; i < b.getNumRegionIterArgs(); ++i)
    map.map(b.getRegionIterArgs()[i], fused.getRegionIterArgs()[na + i]);
  // scf.for's builder leaves the body without a terminator when it carries
  // values, and with an empty yield when it does not.
  if (!body->empty())
    body->getTerminator()->erase();
  OpBuilder in = OpBuilder::atBlockEnd(body);
  SmallVector<Value> yields;
  for (scf::ForOp walk : {a, b}) {
    for (Operation &op : walk.getBody()->without_terminator())
      in.clone(op, map);
    for (Value v : walk.getBody()->getTerminator()->getOperands())
      yields.push_back(map.lookupOrDefault(v));
  }
  scf::YieldOp::create(in, a.getLoc(), yields);
  a.replaceAllUsesWith(fused.getResults().take_front(na));
  b.replaceAllUsesWith(fused.getResults().drop_front(na));
  Operation *last = fused;
  for (Operation *op : after) {
    op->moveAfter(last);
    last = op;
  }
  b.erase();
  a.erase();
  return true;
}

struct TileFuseWalksPass
    : public impl::TileFuseWalksBase<TileFuseWalksPass> {
  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp kernel) {
      for (bool again = true; again;) {
        again = false;
        SmallVector<scf::ForOp> walks =
            scheduledWalks(kernel, attr::kFuseWalks);
        for (size_t i = 0; i + 1 < walks.size() && !again; ++i)
          again = fuse(walks[i], walks[i + 1]);
      }
    });
  }
};

} // namespace
} // namespace tilejit
