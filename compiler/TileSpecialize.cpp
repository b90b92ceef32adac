//===- TileSpecialize.cpp - fold tile.constexpr into constants -------------===//
#include "tilejit/compiler/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace tilejit {
#define GEN_PASS_DEF_TILESPECIALIZE
#include "compiler/Passes.h.inc"
} // namespace tilejit

using namespace mlir;

namespace tilejit {
namespace {

struct TileSpecializePass
    : public impl::TileSpecializeBase<TileSpecializePass> {
  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp kernel) {
      auto values = kernel->getAttrOfType<DictionaryAttr>(attr::kConstexprs);
      kernel.walk([&](tile::ConstexprOp op) {
        auto value = values ? dyn_cast_or_null<IntegerAttr>(
                                  values.get(op.getName()))
                            : IntegerAttr();
        if (!value) {
          op.emitOpError("kernel '")
              << kernel.getSymName() << "' has no value for compile-time "
              << "parameter '" << op.getName() << "'";
          return signalPassFailure();
        }
        OpBuilder b(op);
        auto cst = arith::ConstantOp::create(
            b, op.getLoc(), IntegerAttr::get(op.getType(), value.getInt()));
        op.replaceAllUsesWith(cst.getResult());
        op.erase();
      });
    });
  }
};

} // namespace
} // namespace tilejit
