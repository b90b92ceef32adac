//===- TileUnswitch.cpp - a walk per value of a fixed condition -----------===//
//
// A kernel with `tile.unswitch = 1`: a row walk whose body chooses by a
// condition fixed before the walk (an arith.select on it, or on its splat
// over a tile; an scf.if on it; `not c`, `c == false` and the like count as
// c) becomes one walk per value of the condition:
//
//   scf.if %c { walk, %c := true } else { walk, %c := false }
//
// so that each copy computes only its side, once canonicalization has
// folded the constants (a kernel written for several forms of a loss, such
// as forward and reverse KL, runs the body of the one it was called for).
// At most two conditions per walk (four copies of it), the first the body
// uses. Walks that carry an online-softmax state are left alone: its
// per-group form (tile-expand-softmax) needs the state's chain of walks
// unbroken.
//
//===----------------------------------------------------------------------===//
#include "compiler/RowWalk.h"
#include "tilejit/compiler/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"

namespace tilejit {
#define GEN_PASS_DEF_TILEUNSWITCH
#include "compiler/Passes.h.inc"
} // namespace tilejit

using namespace mlir;

namespace tilejit {
namespace {

constexpr unsigned kMaxConditions = 2;

/// For an i1 op over `c` alone: whether its result is c (true) or not c
/// (false): `c xor true`, `c == true`, `c != false` and the like.
std::optional<bool> relation(Operation *op, Value c) {
  auto bit = [](Value v) -> std::optional<bool> {
    APInt x;
    if (!matchPattern(v, m_ConstantInt(&x)) || x.getBitWidth() != 1)
      return std::nullopt;
    return x.isOne();
  };
  if (op->getNumOperands() != 2 || op->getOperand(0) != c)
    return std::nullopt;
  std::optional<bool> k = bit(op->getOperand(1));
  if (!k)
    return std::nullopt;
  if (isa<arith::XOrIOp>(op))
    return !*k;
  if (auto cmp = dyn_cast<arith::CmpIOp>(op)) {
    if (cmp.getPredicate() == arith::CmpIPredicate::eq)
      return *k;
    if (cmp.getPredicate() == arith::CmpIPredicate::ne)
      return !*k;
  }
  return std::nullopt;
}

/// The condition `c` is about: x where c is `not x` (or `x == true`, ...).
Value conditionRoot(Value c) {
  if (Operation *def = c.getDefiningOp())
    if (def->getNumOperands() == 2 && relation(def, def->getOperand(0)))
      return def->getOperand(0);
  return c;
}

/// The i1 scalars defined before `walk` that its body chooses by, in the
/// order the body first uses them.
SmallVector<Value> conditions(scf::ForOp walk) {
  SmallVector<Value> found;
  auto consider = [&](Value c) {
    if (auto splat = c.getDefiningOp<tile::SplatOp>())
      c = splat.getOperand();
    c = conditionRoot(c);
    if (!c.getType().isInteger(1) ||
        walk->isAncestor(c.getParentBlock()->getParentOp()) ||
        llvm::is_contained(found, c))
      return;
    found.push_back(c);
  };
  walk.getBody()->walk([&](Operation *op) {
    if (auto select = dyn_cast<arith::SelectOp>(op))
      consider(select.getCondition());
    else if (auto branch = dyn_cast<scf::IfOp>(op))
      consider(branch.getCondition());
  });
  return found;
}

/// Gives `v`, an i1 scalar or tile defined before `walk`, the constant
/// `value` inside it, and so splats and negations of `v` made before it.
void fix(scf::ForOp walk, Value v, bool value) {
  for (Operation *user : llvm::to_vector(v.getUsers())) {
    if (walk->isAncestor(user) || user->getNumResults() != 1)
      continue;
    if (isa<tile::SplatOp>(user))
      fix(walk, user->getResult(0), value);
    else if (std::optional<bool> same = relation(user, v))
      fix(walk, user->getResult(0), *same ? value : !value);
  }
  OpBuilder b = OpBuilder::atBlockBegin(walk.getBody());
  Attribute bit = b.getBoolAttr(value);
  if (auto tile = dyn_cast<RankedTensorType>(v.getType()))
    bit = DenseElementsAttr::get(tile, value);
  Value inside =
      arith::ConstantOp::create(b, walk.getLoc(), cast<TypedAttr>(bit));
  // Inside the body only: the walk's own operands (an init of its carried
  // values) are outside it.
  v.replaceUsesWithIf(inside, [&](OpOperand &use) {
    return use.getOwner() != walk && walk->isAncestor(use.getOwner());
  });
}

/// Splits `walk` on `c`; returns the two copies (true side, false side).
std::pair<scf::ForOp, scf::ForOp> unswitch(scf::ForOp walk, Value c) {
  OpBuilder b(walk);
  Location loc = walk.getLoc();
  auto branch = scf::IfOp::create(b, loc, walk.getResultTypes(), c,
                                  /*withElseRegion=*/true);
  std::pair<scf::ForOp, scf::ForOp> sides;
  for (bool value : {true, false}) {
    Block &block =
        value ? branch.getThenRegion().front() : branch.getElseRegion().front();
    // The builder gives a branch without results its empty yield: the
    // copy's yield replaces it.
    if (!block.empty())
      block.getTerminator()->erase();
    OpBuilder in = OpBuilder::atBlockEnd(&block);
    auto copy = cast<scf::ForOp>(in.clone(*walk));
    fix(copy, c, value);
    scf::YieldOp::create(in, loc, copy.getResults());
    (value ? sides.first : sides.second) = copy;
  }
  walk.replaceAllUsesWith(branch.getResults());
  walk.erase();
  return sides;
}

void unswitchAll(scf::ForOp walk, ArrayRef<Value> conds) {
  if (conds.empty())
    return;
  auto [yes, no] = unswitch(walk, conds.front());
  unswitchAll(yes, conds.drop_front());
  unswitchAll(no, conds.drop_front());
}

struct TileUnswitchPass : public impl::TileUnswitchBase<TileUnswitchPass> {
  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp kernel) {
      for (scf::ForOp walk : scheduledWalks(kernel, attr::kUnswitch)) {
        bool carriesSoftmax = walk->walk([](tile::SoftmaxFoldOp) {
                                    return WalkResult::interrupt();
                                  }).wasInterrupted();
        if (carriesSoftmax)
          continue;
        SmallVector<Value> conds = conditions(walk);
        if (conds.size() > kMaxConditions)
          conds.resize(kMaxConditions);
        unswitchAll(walk, conds);
      }
    });
  }
};

} // namespace
} // namespace tilejit
