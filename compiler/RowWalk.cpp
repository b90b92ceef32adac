//===- RowWalk.cpp - the loops of a row kernel ----------------------------===//
#include "compiler/RowWalk.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;

namespace tilejit {

bool isRowWalk(scf::ForOp loop) {
  if (loop->getParentOfType<scf::ForOp>())
    return false;
  APInt step;
  return matchPattern(loop.getStep(), m_ConstantInt(&step)) &&
         step.getSExtValue() > 0;
}

SmallVector<scf::ForOp> scheduledWalks(Operation *kernel, StringRef attrName) {
  SmallVector<scf::ForOp> walks;
  auto on = kernel->getAttrOfType<IntegerAttr>(attrName);
  if (!on || on.getInt() == 0)
    return walks;
  kernel->walk([&](scf::ForOp loop) {
    if (isRowWalk(loop) && !loop->hasAttr(attr::kRowTail) &&
        !loop->hasAttr(attr::kTailWalk))
      walks.push_back(loop);
  });
  return walks;
}

int64_t walkStep(scf::ForOp loop) {
  APInt step;
  (void)matchPattern(loop.getStep(), m_ConstantInt(&step));
  return step.getSExtValue();
}

std::optional<ReduceKind> carriedCombine(scf::ForOp loop, unsigned i) {
  BlockArgument carried = loop.getRegionIterArgs()[i];
  if (!carried.hasOneUse())
    return std::nullopt;
  Value next = loop.getYieldedValues()[i];
  Operation *op = next.getDefiningOp();
  // The running value must not be used inside the walk (a prefix sum is no
  // reduction: split, each program would see its own slice's part only).
  if (!op || op != *carried.getUsers().begin() || op->getNumOperands() != 2 ||
      !next.hasOneUse())
    return std::nullopt;
  if (isa<arith::AddFOp, arith::AddIOp>(op))
    return ReduceKind::Sum;
  // maximumf/minimumf propagate NaN as the cluster combine does; the
  // NaN-ignoring maxnumf/minnumf would not combine alike.
  if (isa<arith::MaximumFOp, arith::MaxSIOp>(op))
    return ReduceKind::Max;
  if (isa<arith::MinimumFOp, arith::MinSIOp>(op))
    return ReduceKind::Min;
  return std::nullopt;
}

bool WalkEquivalence::equivalent(Value x, Value y) {
  if (x == y)
    return true;
  if (x == a.getInductionVar() && y == b.getInductionVar())
    return true;
  auto key = std::make_pair(x, y);
  if (auto it = memo.find(key); it != memo.end())
    return it->second;
  memo[key] = false; // a cycle (through a loop's own values) is no match
  Operation *ox = x.getDefiningOp(), *oy = y.getDefiningOp();
  bool same = ox && oy && ox->getName() == oy->getName() &&
              ox->getAttrDictionary() == oy->getAttrDictionary() &&
              ox->getNumRegions() == 0 && oy->getNumRegions() == 0 &&
              isPure(ox) && isPure(oy) &&
              ox->getResultTypes() == oy->getResultTypes() &&
              ox->getNumOperands() == oy->getNumOperands() &&
              cast<OpResult>(x).getResultNumber() ==
                  cast<OpResult>(y).getResultNumber();
  auto operandsMatch = [&](bool swap) {
    for (unsigned i = 0; i < ox->getNumOperands(); ++i)
      if (!equivalent(ox->getOperand(i),
                      oy->getOperand(swap ? ox->getNumOperands() - 1 - i : i)))
        return false;
    return true;
  };
  same = same && (operandsMatch(false) ||
                  (ox->getNumOperands() == 2 &&
                   ox->hasTrait<OpTrait::IsCommutative>() && operandsMatch(true)));
  memo[key] = same;
  return same;
}

static bool markedMayAlias(Value base) {
  auto arg = dyn_cast<BlockArgument>(base);
  auto func = arg ? dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp())
                  : func::FuncOp();
  return func && func.getArgAttr(arg.getArgNumber(), attr::kMayAlias);
}

bool mayOverlap(Value x, Value y) {
  Value bx = pointerRoot(x), by = pointerRoot(y);
  if (bx == by)
    return true;
  return markedMayAlias(bx) && markedMayAlias(by);
}

bool isOwnTile(scf::ForOp loop, Value offsets) {
  auto add = offsets.getDefiningOp<arith::AddIOp>();
  auto tensor = dyn_cast<RankedTensorType>(offsets.getType());
  if (!add || !tensor || tensor.getDimSize(0) != walkStep(loop))
    return false;
  auto isIv = [&](Value v) {
    auto splat = v.getDefiningOp<tile::SplatOp>();
    return splat && splat.getOperand() == loop.getInductionVar();
  };
  auto isRange = [&](Value v) { return v.getDefiningOp<tile::ArangeOp>(); };
  return (isIv(add.getLhs()) && isRange(add.getRhs())) ||
         (isRange(add.getLhs()) && isIv(add.getRhs()));
}

bool storesKeepElements(scf::ForOp walk, tile::LoadOp load) {
  bool ok = true;
  walk->walk([&](tile::StoreOp store) {
    if (!mayOverlap(store.getPtr(), load.getPtr()))
      return;
    auto sp = store.getPtr().getDefiningOp<tile::AddPtrOp>();
    auto lp = load.getPtr().getDefiningOp<tile::AddPtrOp>();
    bool sameElement = store.getOffsets() == load.getOffsets() &&
                       (store.getPtr() == load.getPtr() ||
                        (sp && lp && sp.getOffset() == lp.getOffset() &&
                         !sp.getPtr().getDefiningOp() &&
                         !lp.getPtr().getDefiningOp()));
    ok &= sameElement && store->getBlock() == load->getBlock() &&
          load->isBeforeInBlock(store);
  });
  return ok;
}

bool WalkBody::inside(Operation *op) const {
  return block->getParentOp()->isAncestor(op);
}

bool WalkBody::recomputable(Value v) {
  if (v == iv)
    return true;
  if (auto it = known.find(v); it != known.end())
    return it->second;
  Operation *def = v.getDefiningOp();
  bool ok;
  if (!def)
    ok = !inside(v.getParentBlock()->getParentOp()); // no iter_arg
  else if (!inside(def))
    ok = true;
  else
    ok = isPure(def) && def->getNumRegions() == 0 &&
         llvm::all_of(def->getOperands(),
                      [&](Value o) { return recomputable(o); });
  known[v] = ok;
  return ok;
}

Value WalkBody::recompute(OpBuilder &b, Value v, IRMapping &map) const {
  if (Value done = map.lookupOrNull(v))
    return done;
  Operation *def = v.getDefiningOp();
  if (!def || !inside(def))
    return v;
  for (Value o : def->getOperands())
    recompute(b, o, map);
  Operation *copy = b.clone(*def, map);
  return copy->getResult(cast<OpResult>(v).getResultNumber());
}

} // namespace tilejit
