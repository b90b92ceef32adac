//===- TileAssignLayout.cpp - spread tiles over a program's threads -----===//
//
// With P = 32 * num_warps threads and a tile of N elements, each thread holds
// K = N / P elements in groups of G adjacent ones: element e of thread t is
// tile element (e / G) * P * G + t * G + e % G. simt.vec is the number of
// elements of the narrowest type the kernel loads or stores that fit in 16
// bytes, and G = min(simt.vec, the largest power of two dividing K): each
// group is one 16-byte access, and consecutive threads touch consecutive
// groups, so a warp reads 512 contiguous bytes per access (coalesced), as with
// Triton's blocked layout of sizePerThread = G. Tiles of the same size share
// G (elementwise ops pair their elements); reductions do not care about the
// order.
//
// Row ops (tile.reduce_rows / broadcast_rows over rows of C columns) between
// a matrix of M elements and a vector of M / C: when C divides G(M), each row
// lies within one thread's group, and giving the vector G(M) / C makes the
// thread that holds a row also hold its entry, so the op needs neither
// shared memory nor a barrier (tile-lower-to-simt). Those vector sizes are
// recorded in simt.groups. tile-verify has already checked that every tile
// size is a multiple of P.
//
//===----------------------------------------------------------------------===//
#include "compiler/Layout.h"
#include "tilejit/compiler/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/MapVector.h"

namespace tilejit {
#define GEN_PASS_DEF_TILEASSIGNLAYOUT
#include "compiler/Passes.h.inc"
} // namespace tilejit

using namespace mlir;

namespace tilejit {

int64_t accessVectorWidth(func::FuncOp kernel) {
  int64_t vec = 1;
  kernel.walk([&](Operation *op) {
    Type accessed;
    if (auto ld = dyn_cast<tile::LoadOp>(op))
      accessed = ld.getType();
    else if (auto st = dyn_cast<tile::StoreOp>(op))
      accessed = st.getValue().getType();
    if (auto t = dyn_cast_or_null<RankedTensorType>(accessed))
      vec = std::max<int64_t>(
          vec, 16 / std::max<int64_t>(1, t.getElementTypeBitWidth() / 8));
  });
  return vec;
}

int64_t plannedLayoutGroup(func::FuncOp kernel, int64_t tileElements) {
  auto warps = kernel->getAttrOfType<IntegerAttr>(attr::kNumWarps);
  if (!warps || warps.getInt() <= 0)
    return 0;
  return defaultLayoutGroup(accessVectorWidth(kernel),
                            tileElements / (32 * warps.getInt()));
}

namespace {

/// simt.groups: for each row op whose rows lie within a thread's groups,
/// the vector's group width that keeps each row's entry with that thread.
SmallVector<int64_t> rowVectorGroups(func::FuncOp kernel) {
  llvm::MapVector<int64_t, int64_t> groups; // vector size -> group
  auto record = [&](Value matrix, Value vector, int64_t cols) {
    int64_t g = layoutGroup(
        kernel, cast<RankedTensorType>(matrix.getType()).getNumElements());
    if (g % cols == 0)
      groups.try_emplace(
          cast<RankedTensorType>(vector.getType()).getNumElements(), g / cols);
  };
  kernel.walk([&](Operation *op) {
    if (auto rr = dyn_cast<tile::ReduceRowsOp>(op))
      record(rr.getSrc(), rr.getResult(), rr.getCols());
    else if (auto br = dyn_cast<tile::BroadcastRowsOp>(op))
      record(br.getResult(), br.getSrc(), br.getCols());
  });
  SmallVector<int64_t> flat;
  for (auto [size, group] : groups)
    flat.append({size, group});
  return flat;
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
      kernel->setAttr(attr::kVec, b.getI64IntegerAttr(accessVectorWidth(kernel)));
      kernel->removeAttr(attr::kGroups); // from an earlier run: recomputed
      SmallVector<int64_t> groups = rowVectorGroups(kernel);
      if (!groups.empty())
        kernel->setAttr(attr::kGroups, b.getDenseI64ArrayAttr(groups));
    });
  }
};

} // namespace
} // namespace tilejit
