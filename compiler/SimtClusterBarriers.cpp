//===- SimtClusterBarriers.cpp - mbarriers and slots of cluster combines --===//
//
// A tile.cluster_reduce pushes each program's values into the shared slots
// of every program of its cluster and signals that program's mbarrier.
// Outside loops an op runs once: one mbarrier and one buffer of slots. In a
// loop the next run may write while a slower program still reads: two
// mbarriers and two buffers used in turn (Cluster.cuh). This pass gives each
// op its first mbarrier in the kernel's array and its number of buffers, and
// the kernel the array's size; the emitter only prints them.
//
//===----------------------------------------------------------------------===//
#include "tilejit/compiler/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Interfaces/LoopLikeInterface.h"

namespace tilejit {
#define GEN_PASS_DEF_SIMTCLUSTERBARRIERS
#include "compiler/Passes.h.inc"
} // namespace tilejit

using namespace mlir;

namespace tilejit {
namespace {

struct SimtClusterBarriersPass
    : public impl::SimtClusterBarriersBase<SimtClusterBarriersPass> {
  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp kernel) {
      auto size = kernel->getAttrOfType<IntegerAttr>(attr::kClusterSize);
      if (!kernel->hasAttr(attr::kKernel) || !size || size.getInt() <= 1)
        return;
      Builder b(kernel);
      int64_t next = 0;
      kernel.walk([&](tile::ClusterReduceOp op) {
        int64_t buffers = op->getParentOfType<LoopLikeOpInterface>() ? 2 : 1;
        op->setAttr(attr::kClusterMbarrier, b.getI64IntegerAttr(next));
        op->setAttr(attr::kClusterBuffers, b.getI64IntegerAttr(buffers));
        next += buffers;
      });
      if (next > 0)
        kernel->setAttr(attr::kClusterMbarriers, b.getI64IntegerAttr(next));
    });
  }
};

} // namespace
} // namespace tilejit
