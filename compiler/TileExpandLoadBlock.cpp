//===- TileExpandLoadBlock.cpp - block loads as masked gathers ------------===//
//
// A tile.load_block that tile-pipeline-dot left alone becomes the masked
// load it stands for: element e of the R x C block is (row0 + e / C,
// col0 + e % C) of the view, at offset row * row_stride + col * col_stride
// (i64), loaded where 0 <= row < rows and 0 <= col < cols and 0 elsewhere.
//
//===----------------------------------------------------------------------===//
#include "tilejit/compiler/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace tilejit {
#define GEN_PASS_DEF_TILEEXPANDLOADBLOCK
#include "compiler/Passes.h.inc"
} // namespace tilejit

using namespace mlir;

namespace tilejit {
namespace {

struct TileExpandLoadBlockPass
    : public impl::TileExpandLoadBlockBase<TileExpandLoadBlockPass> {
  void runOnOperation() override {
    SmallVector<tile::LoadBlockOp> loads;
    getOperation().walk([&](tile::LoadBlockOp op) { loads.push_back(op); });
    for (tile::LoadBlockOp op : loads)
      expand(op);
  }

  static void expand(tile::LoadBlockOp op) {
    OpBuilder b(op);
    Location loc = op.getLoc();
    int64_t n = op.getBlockRows() * op.getBlockCols();
    auto i32s = RankedTensorType::get({n}, b.getI32Type());
    auto i64s = RankedTensorType::get({n}, b.getI64Type());
    auto i1s = RankedTensorType::get({n}, b.getI1Type());
    auto splat = [&](Value scalar, RankedTensorType type) -> Value {
      return tile::SplatOp::create(b, loc, type, scalar);
    };
    auto i32 = [&](int64_t v) {
      return splat(arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(v)),
                   i32s);
    };
    Value e = tile::ArangeOp::create(b, loc, i32s);
    Value cols = i32(op.getBlockCols());
    Value r = arith::ExtSIOp::create(b, loc, i64s,
                                     arith::DivSIOp::create(b, loc, e, cols));
    Value c = arith::ExtSIOp::create(b, loc, i64s,
                                     arith::RemSIOp::create(b, loc, e, cols));
    Value row = arith::AddIOp::create(b, loc, splat(op.getRow0(), i64s), r);
    Value col = arith::AddIOp::create(b, loc, splat(op.getCol0(), i64s), c);
    Value zero =
        splat(arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(0)), i64s);
    auto inRange = [&](Value x, Value end) -> Value {
      Value lo = arith::CmpIOp::create(b, loc, i1s, arith::CmpIPredicate::sge,
                                       x, zero);
      Value hi = arith::CmpIOp::create(b, loc, i1s, arith::CmpIPredicate::slt,
                                       x, splat(end, i64s));
      return arith::AndIOp::create(b, loc, lo, hi);
    };
    Value rowIn = inRange(row, op.getRows());
    Value colIn = inRange(col, op.getCols());
    Value mask = arith::AndIOp::create(b, loc, rowIn, colIn);
    Value rowOffset =
        arith::MulIOp::create(b, loc, row, splat(op.getRowStride(), i64s));
    Value colOffset =
        arith::MulIOp::create(b, loc, col, splat(op.getColStride(), i64s));
    Value offsets = arith::AddIOp::create(b, loc, rowOffset, colOffset);
    Type elem = op.getPtr().getType().getElementType();
    Value other =
        isa<FloatType>(elem)
            ? Value(
                  arith::ConstantOp::create(b, loc, b.getFloatAttr(elem, 0.0)))
            : Value(
                  arith::ConstantOp::create(b, loc, b.getIntegerAttr(elem, 0)));
    Value load = tile::LoadOp::create(b, loc, op.getType(), op.getPtr(),
                                      offsets, mask, other);
    op.getResult().replaceAllUsesWith(load);
    op.erase();
  }
};

} // namespace
} // namespace tilejit
