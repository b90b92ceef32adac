//===- TileVerify.cpp - kernel-level checks before lowering ---------------===//
//
// Op verifiers check one op at a time; this pass checks what the rest of the
// pipeline assumes of a whole kernel, so a malformed DSL program fails here
// with the kernel's name and the offending op instead of deep in lowering.
//
//===----------------------------------------------------------------------===//
#include "tilejit/compiler/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/MathExtras.h"

namespace tilejit {
#define GEN_PASS_DEF_TILEVERIFY
#include "compiler/Passes.h.inc"
} // namespace tilejit

using namespace mlir;

namespace tilejit {
namespace {

bool isAllowedArgument(Type t) {
  return isa<tile::PtrType>(t) || t.isInteger(32) || t.isInteger(64) ||
         t.isF32();
}

bool isAllowedDialect(Operation *op) {
  StringRef ns = op->getDialect() ? op->getDialect()->getNamespace() : "";
  return ns == "tile" || ns == "arith" || ns == "math" || ns == "scf" ||
         ns == "func";
}

LogicalResult verifyKernel(func::FuncOp kernel) {
  auto name = kernel.getSymName();
  auto warps = kernel->getAttrOfType<IntegerAttr>(attr::kNumWarps);
  if (!warps || !llvm::isPowerOf2_64(warps.getInt()) || warps.getInt() > 32)
    return kernel.emitOpError("kernel '")
           << name << "': " << attr::kNumWarps
           << " must be a power of two in [1, 32]";
  int64_t threads = 32 * warps.getInt();
  auto cluster = kernel->getAttrOfType<IntegerAttr>(attr::kClusterSize);
  if (cluster && (cluster.getInt() < 1 || cluster.getInt() > 16))
    return kernel.emitOpError("kernel '")
           << name << "': " << attr::kClusterSize << " = " << cluster.getInt()
           << " is not in [1, 16]";
  if (kernel.getFunctionType().getNumResults() != 0)
    return kernel.emitOpError("kernel '") << name << "' must return nothing";
  for (auto [i, t] : llvm::enumerate(kernel.getArgumentTypes()))
    if (!isAllowedArgument(t))
      return kernel.emitOpError("kernel '")
             << name << "': argument " << i << " has type " << t
             << "; kernels take !tile.ptr, i32, i64 or f32";

  WalkResult result = kernel.walk([&](Operation *op) {
    if (!isAllowedDialect(op)) {
      op->emitOpError("in kernel '")
          << name << "': ops of this dialect cannot appear in a tile program";
      return WalkResult::interrupt();
    }
    for (Type t : op->getResultTypes()) {
      auto tensor = dyn_cast<RankedTensorType>(t);
      if (!tensor)
        continue;
      int64_t n = tensor.getRank() == 1 ? tensor.getDimSize(0) : -1;
      if (n <= 0 || n % threads != 0) {
        op->emitOpError("in kernel '")
            << name << "': tile " << t << " must be 1-D with a size that "
            << "is a multiple of 32 * num_warps = " << threads;
        return WalkResult::interrupt();
      }
      if (n / threads > kMaxElementsPerThread) {
        op->emitOpError("in kernel '")
            << name << "': tile " << t << " holds " << n / threads
            << " elements per thread over " << threads << " threads; at most "
            << kMaxElementsPerThread << " fit in registers";
        return WalkResult::interrupt();
      }
    }
    return WalkResult::advance();
  });
  return failure(result.wasInterrupted());
}

struct TileVerifyPass : public impl::TileVerifyBase<TileVerifyPass> {
  void runOnOperation() override {
    for (auto kernel : getOperation().getOps<func::FuncOp>())
      if (kernel->hasAttr(attr::kKernel) && failed(verifyKernel(kernel)))
        signalPassFailure();
  }
};

} // namespace
} // namespace tilejit
