//===- TileExpandSoftmax.cpp - online softmax ops to arith and math --------===//
//
// tile.softmax_fold and tile.softmax_total say what a row kernel reduces,
// so that the row schedules can combine the states of a split row; once
// they have run, this pass writes the ops out:
//
//   fold:  bigger = x > m
//          e  = x == -inf ? 0 : exp(bigger ? m - x : x - m)
//          d' = bigger ? d e + 1 : d + e,   m' = max(m, x)
//   total: M = max(m),  S = sum(d exp(m - (M == -inf ? 0 : M)))
//
// One exp per element: the smaller of m and x is the one rescaled. The exps
// are the GPU's approximate ones (fastmath afn), as the DSL's exp.
//
//===----------------------------------------------------------------------===//
#include "tilejit/compiler/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"

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
