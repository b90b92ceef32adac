//===- TileAssignLayout.cpp - spread tiles over a program's threads --------===//
//
// The layout is blocked: with P = 32 * num_warps threads, a tile of N elements
// gives each thread N / P contiguous elements, which keeps a thread's loads of
// consecutive offsets contiguous (vectorizable) and makes reductions a local
// loop followed by one block-wide combine. tile-verify has already checked
// that every tile size is a multiple of P.
//
//===----------------------------------------------------------------------===//
#include "tilejit/compiler/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace tilejit {
#define GEN_PASS_DEF_TILEASSIGNLAYOUT
#include "compiler/Passes.h.inc"
} // namespace tilejit

using namespace mlir;

namespace tilejit {
namespace {

struct TileAssignLayoutPass
    : public impl::TileAssignLayoutBase<TileAssignLayoutPass> {
  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp kernel) {
      if (!kernel->hasAttr(attr::kKernel))
        return;
      auto warps = kernel->getAttrOfType<IntegerAttr>(attr::kNumWarps);
      if (!warps) {
        kernel.emitOpError("kernel has no ") << attr::kNumWarps;
        return signalPassFailure();
      }
      Builder b(kernel.getContext());
      kernel->setAttr(attr::kThreads, b.getI64IntegerAttr(32 * warps.getInt()));
    });
  }
};

} // namespace
} // namespace tilejit
