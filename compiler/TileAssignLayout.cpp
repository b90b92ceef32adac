//===- TileAssignLayout.cpp - spread tiles over a program's threads --------===//
//
// With P = 32 * num_warps threads and a tile of N elements, each thread holds
// K = N / P elements in groups of VEC adjacent ones: element e of thread t is
// tile element (e / VEC) * P * VEC + t * VEC + e % VEC. VEC is the number of
// elements of the narrowest type the kernel loads or stores that fit in 16
// bytes (capped by K), so each group is one 16-byte access, and consecutive
// threads touch consecutive groups: a warp reads 512 contiguous bytes per
// access (coalesced), as with Triton's blocked layout of sizePerThread = VEC.
// VEC = K is the plain blocked layout. Reductions do not care about the order.
// tile-verify has already checked that every tile size is a multiple of P.
//
//===----------------------------------------------------------------------===//
#include "tilejit/compiler/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <limits>

namespace tilejit {
#define GEN_PASS_DEF_TILEASSIGNLAYOUT
#include "compiler/Passes.h.inc"
} // namespace tilejit

using namespace mlir;

namespace tilejit {
namespace {

/// Elements per 16-byte access of the narrowest accessed type, capped by the
/// largest power of two that divides every per-thread tile size K.
int64_t vectorWidth(func::FuncOp kernel, int64_t threads) {
  int64_t vec = 1, kDivisor = std::numeric_limits<int64_t>::max();
  kernel.walk([&](Operation *op) {
    Type accessed;
    if (auto ld = dyn_cast<tile::LoadOp>(op))
      accessed = ld.getType();
    else if (auto st = dyn_cast<tile::StoreOp>(op))
      accessed = st.getValue().getType();
    if (auto t = dyn_cast_or_null<RankedTensorType>(accessed))
      vec = std::max<int64_t>(
          vec, 16 / std::max<int64_t>(1, t.getElementTypeBitWidth() / 8));
    for (Type t : op->getResultTypes())
      if (auto tile = dyn_cast<RankedTensorType>(t))
        kDivisor = std::min(kDivisor, (tile.getNumElements() / threads) &
                                          -(tile.getNumElements() / threads));
  });
  return std::min(vec, kDivisor); // 1 for a kernel without tile accesses
}

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
      int64_t threads = 32 * warps.getInt();
      Builder b(kernel.getContext());
      kernel->setAttr(attr::kThreads, b.getI64IntegerAttr(threads));
      kernel->setAttr(attr::kVec,
                      b.getI64IntegerAttr(vectorWidth(kernel, threads)));
    });
  }
};

} // namespace
} // namespace tilejit
