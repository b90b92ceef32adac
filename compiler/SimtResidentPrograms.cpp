//===- SimtResidentPrograms.cpp - programs that stay resident -------------===//
//
// A GEMM's program spends its first K steps waiting for its first blocks
// and its last ones passing the accumulator out and storing it, and one
// program of 128 x 256 fills an SM (registers), so nothing overlaps those
// steps. A kernel that asks for resident programs (tile.resident) and whose
// one dot loop the copy engine feeds runs each launched block over the
// programs blockIdx.x, blockIdx.x + gridDim.x, ...: the dot loop keeps its
// ring and mbarriers from one program to the next and fills the next
// program's first blocks while the current one runs its epilogue. To know
// them it recomputes the dot loop's A row, B column and K range for the
// next program id, so those may only depend on program ids, grid sizes,
// kernel parameters and arithmetic.
//
//===----------------------------------------------------------------------===//
#include "tilejit/compiler/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Matchers.h"

namespace tilejit {
#define GEN_PASS_DEF_SIMTRESIDENTPROGRAMS
#include "compiler/Passes.h.inc"
} // namespace tilejit

using namespace mlir;

namespace tilejit {
namespace {

/// The values `roots` are computed from only by arithmetic on scalars,
/// program ids, grid sizes and kernel parameters, in `body`.
bool recomputable(ArrayRef<Value> roots, Block &body) {
  SmallVector<Value> work(roots.begin(), roots.end());
  llvm::SmallPtrSet<Operation *, 16> seen;
  while (!work.empty()) {
    Value v = work.pop_back_val();
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      if (arg.getOwner() != &body)
        return false;
      continue;
    }
    Operation *op = v.getDefiningOp();
    if (!seen.insert(op).second)
      continue;
    if (op->getBlock() != &body || isa<VectorType>(v.getType()))
      return false;
    if (!isa<simt::BlockIdOp, simt::GridDimOp>(op) &&
        op->getDialect()->getNamespace() != "arith")
      return false;
    llvm::append_range(work, op->getOperands());
  }
  return true;
}

struct SimtResidentProgramsPass
    : public impl::SimtResidentProgramsBase<SimtResidentProgramsPass> {
  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp kernel) {
      if (kernel->hasAttr(attr::kResidentRequest))
        makeResident(kernel);
    });
  }

  static void makeResident(func::FuncOp kernel) {
    SmallVector<simt::DotLoopOp> loops;
    kernel.walk([&](simt::DotLoopOp op) { loops.push_back(op); });
    auto threads = kernel->getAttrOfType<IntegerAttr>(attr::kThreads);
    auto cluster = kernel->getAttrOfType<IntegerAttr>(attr::kClusterSize);
    if (loops.size() != 1 || !threads || threads.getInt() % 128 != 0 ||
        (cluster && cluster.getInt() > 1))
      return;
    simt::DotLoopOp loop = loops.front();
    Block &body = kernel.getBody().front();
    if (!loop.getTensorMaps() || loop->getBlock() != &body ||
        !matchPattern(loop.getAcc(), m_AnyZeroFloat()) ||
        !recomputable({loop.getARow0(), loop.getBCol0(), loop.getKBegin(),
                       loop.getKEnd()},
                      body))
      return;
    loop.setResident(true);
    kernel->setAttr(attr::kResident, UnitAttr::get(kernel.getContext()));
  }
};

} // namespace
} // namespace tilejit
