//===- TileExpandSoftmax.cpp - online softmax ops to arith and math --------===//
//
// tile.softmax_fold and tile.softmax_total say what a row kernel reduces,
// so that the row schedules can combine the states of a split row; once
// they have run, this pass writes the ops out.
//
// Where a state is carried through a walk (or a chain of walks, as
// tile-keep-rows splits one) from (-inf, 0) to a total, and nothing else
// reads it, the state is kept per group of G adjacent lanes instead of per
// lane (G: the layout's group for the tile, tile-assign-layout, so that
// each group lies within one thread and the row ops below need no shared
// memory):
//
//   fold:  g = max over each group of x,  m' = max(m, g)
//          s = m' == -inf ? 0 : m'              (per group)
//          d' = d exp(m - s) + sum over each group of exp(x - s)
//
// One exp per element and one per group, where the per-lane fold below
// spends about twice the instructions per element on choosing which of m
// and x to rescale. Otherwise, per lane:
//
//   fold:  bigger = x > m
//          e  = x == -inf ? 0 : exp(bigger ? m - x : x - m)
//          d' = bigger ? d e + 1 : d + e,   m' = max(m, x)
//
// and either way
//
//   total: M = max(m),  S = sum(d exp(m - (M == -inf ? 0 : M)))
//
// The exps are the GPU's approximate ones (fastmath afn), as the DSL's exp.
//
//===----------------------------------------------------------------------===//
#include "compiler/Layout.h"
#include "tilejit/compiler/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Matchers.h"

#include <limits>

namespace tilejit {
#define GEN_PASS_DEF_TILEEXPANDSOFTMAX
#include "compiler/Passes.h.inc"
} // namespace tilejit

using namespace mlir;

namespace tilejit {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

Value f32Constant(OpBuilder &b, Location loc, Type like, double v) {
  Value c = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(float(v)));
  return isa<RankedTensorType>(like) ? Value(tile::SplatOp::create(b, loc, like, c))
                                     : c;
}

Value approxExp(OpBuilder &b, Location loc, Value x) {
  return math::ExpOp::create(b, loc, x, arith::FastMathFlags::afn);
}

void expand(tile::SoftmaxFoldOp op) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  Value m = op.getM(), d = op.getD(), x = op.getX();
  Type t = m.getType();
  Value bigger = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, x, m);
  Value mLess = arith::SubFOp::create(b, loc, m, x);
  Value xLess = arith::SubFOp::create(b, loc, x, m);
  Value lower = arith::SelectOp::create(b, loc, bigger, mLess, xLess);
  Value isNegInf = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, x,
                                         f32Constant(b, loc, t, kNegInf));
  Value zero = f32Constant(b, loc, t, 0);
  Value e = arith::SelectOp::create(b, loc, isNegInf, zero,
                                    approxExp(b, loc, lower));
  Value scaled = arith::MulFOp::create(b, loc, d, e);
  Value rescaled =
      arith::AddFOp::create(b, loc, scaled, f32Constant(b, loc, t, 1));
  Value added = arith::AddFOp::create(b, loc, d, e);
  Value dNext = arith::SelectOp::create(b, loc, bigger, rescaled, added);
  Value mNext = arith::MaximumFOp::create(b, loc, m, x);
  op.getMNext().replaceAllUsesWith(mNext);
  op.getDNext().replaceAllUsesWith(dNext);
  op.erase();
}

/// A state carried from (-inf, 0) through `loops` (the last one first) to
/// a total: in each loop, iter_args mIdx and dIdx feed one fold alone,
/// whose results are yielded there.
struct StateChain {
  struct Link {
    scf::ForOp loop;
    unsigned m, d;
    tile::SoftmaxFoldOp fold;
  };
  SmallVector<Link> links;
};

/// Whether `v` is the f32 tile splat(c): a tile.splat, a dense constant, or
/// a select between two such (tile-split-rows starts the programs other
/// than a row's first from the combine's identity).
bool isSplatOf(Value v, double c) {
  if (auto select = v.getDefiningOp<arith::SelectOp>())
    return isSplatOf(select.getTrueValue(), c) &&
           isSplatOf(select.getFalseValue(), c);
  FloatAttr scalar;
  if (auto splat = v.getDefiningOp<tile::SplatOp>()) {
    if (!matchPattern(splat.getSrc(), m_Constant(&scalar)))
      return false;
  } else {
    DenseElementsAttr dense;
    if (!matchPattern(v, m_Constant(&dense)) || !dense.isSplat())
      return false;
    scalar = dyn_cast<FloatAttr>(dense.getSplatValue<Attribute>());
  }
  return scalar && scalar.getValueAsDouble() == c;
}

std::optional<StateChain> stateChain(tile::SoftmaxTotalOp total) {
  StateChain chain;
  Value m = total.getM(), d = total.getD();
  while (auto loop = m.getDefiningOp<scf::ForOp>()) {
    auto mr = dyn_cast<OpResult>(m), dr = dyn_cast<OpResult>(d);
    if (!dr || dr.getOwner() != loop || !m.hasOneUse() || !d.hasOneUse())
      return std::nullopt;
    unsigned mi = mr.getResultNumber(), di = dr.getResultNumber();
    auto fold = loop.getYieldedValues()[mi].getDefiningOp<tile::SoftmaxFoldOp>();
    Value argM = loop.getRegionIterArgs()[mi], argD = loop.getRegionIterArgs()[di];
    if (!fold || fold.getMNext() != loop.getYieldedValues()[mi] ||
        fold.getDNext() != loop.getYieldedValues()[di] ||
        fold.getM() != argM || fold.getD() != argD || !argM.hasOneUse() ||
        !argD.hasOneUse() || !fold.getMNext().hasOneUse() ||
        !fold.getDNext().hasOneUse())
      return std::nullopt;
    chain.links.push_back({loop, mi, di, fold});
    m = loop.getInitArgs()[mi];
    d = loop.getInitArgs()[di];
  }
  if (chain.links.empty() || !isSplatOf(m, kNegInf) || !isSplatOf(d, 0))
    return std::nullopt;
  return chain;
}

/// The per-group fold (see the file comment) of x into (m, d) of
/// `groupType`, at `b`; returns (m', d').
std::pair<Value, Value> groupFold(OpBuilder &b, Location loc, Value m, Value d,
                                  Value x, int64_t group) {
  auto kind = [&](ReduceKind k) { return ReduceKindAttr::get(b.getContext(), k); };
  Type narrow = m.getType();
  IntegerAttr cols = b.getI64IntegerAttr(group);
  Value g = tile::ReduceRowsOp::create(b, loc, narrow, kind(ReduceKind::Max), x,
                                       cols);
  Value mNext = arith::MaximumFOp::create(b, loc, m, g);
  Value empty = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, mNext,
                                      f32Constant(b, loc, narrow, kNegInf));
  Value shift = arith::SelectOp::create(
      b, loc, empty, f32Constant(b, loc, narrow, 0), mNext);
  Value scale = approxExp(b, loc, arith::SubFOp::create(b, loc, m, shift));
  Value wide = tile::BroadcastRowsOp::create(b, loc, x.getType(), shift, cols);
  Value e = approxExp(b, loc, arith::SubFOp::create(b, loc, x, wide));
  Value eSum = tile::ReduceRowsOp::create(b, loc, narrow, kind(ReduceKind::Sum),
                                          e, cols);
  Value dNext = arith::AddFOp::create(
      b, loc, arith::MulFOp::create(b, loc, d, scale), eSum);
  return {mNext, dNext};
}

/// Keeps `total`'s state per group of the layout's width where its chain
/// allows (see the file comment); the total is then expanded as usual.
void narrowState(tile::SoftmaxTotalOp total) {
  std::optional<StateChain> chain = stateChain(total);
  if (!chain)
    return;
  auto wide = cast<RankedTensorType>(total.getM().getType());
  int64_t n = wide.getNumElements();
  int64_t group =
      plannedLayoutGroup(total->getParentOfType<func::FuncOp>(), n);
  // (States above 32 KiB are left wide.)
  if (group <= 1 || n % group != 0 || n * 4 > 32 * 1024)
    return;
  auto narrow = RankedTensorType::get({n / group}, wide.getElementType());
  // The first walk starts from a narrow (-inf, 0).
  scf::ForOp first = chain->links.back().loop;
  OpBuilder b(first);
  Location loc = first.getLoc();
  first.getInitArgsMutable()[chain->links.back().m].set(
      f32Constant(b, loc, narrow, kNegInf));
  first.getInitArgsMutable()[chain->links.back().d].set(
      f32Constant(b, loc, narrow, 0));
  for (StateChain::Link &link : chain->links) {
    for (unsigned i : {link.m, link.d}) {
      link.loop.getRegionIterArgs()[i].setType(narrow);
      link.loop.getResult(i).setType(narrow);
    }
    OpBuilder fb(link.fold);
    auto [mNext, dNext] =
        groupFold(fb, link.fold.getLoc(), link.fold.getM(), link.fold.getD(),
                  link.fold.getX(), group);
    link.fold.getMNext().replaceAllUsesWith(mNext);
    link.fold.getDNext().replaceAllUsesWith(dNext);
    link.fold.erase();
  }
}

void expand(tile::SoftmaxTotalOp op) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  Value m = op.getM(), d = op.getD();
  auto f32 = b.getF32Type();
  auto kind = [&](ReduceKind k) { return ReduceKindAttr::get(b.getContext(), k); };
  Value rowMax = tile::ReduceOp::create(b, loc, f32, kind(ReduceKind::Max), m);
  Value empty = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, rowMax,
                                      f32Constant(b, loc, f32, kNegInf));
  Value zero = f32Constant(b, loc, f32, 0);
  Value shift = arith::SelectOp::create(b, loc, empty, zero, rowMax);
  Value shifted = arith::SubFOp::create(
      b, loc, m, tile::SplatOp::create(b, loc, m.getType(), shift));
  Value terms = arith::MulFOp::create(b, loc, d, approxExp(b, loc, shifted));
  Value sum = tile::ReduceOp::create(b, loc, f32, kind(ReduceKind::Sum), terms);
  op.getMax().replaceAllUsesWith(rowMax);
  op.getSum().replaceAllUsesWith(sum);
  op.erase();
}

struct TileExpandSoftmaxPass
    : public impl::TileExpandSoftmaxBase<TileExpandSoftmaxPass> {
  void runOnOperation() override {
    SmallVector<tile::SoftmaxTotalOp> totals;
    getOperation().walk([&](tile::SoftmaxTotalOp t) { totals.push_back(t); });
    for (tile::SoftmaxTotalOp t : totals)
      narrowState(t);
    getOperation().walk([](Operation *op) {
      if (auto fold = dyn_cast<tile::SoftmaxFoldOp>(op))
        expand(fold);
      else if (auto total = dyn_cast<tile::SoftmaxTotalOp>(op))
        expand(total);
    });
  }
};

} // namespace
} // namespace tilejit
