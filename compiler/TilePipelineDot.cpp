//===- TilePipelineDot.cpp - a K loop of dots over blocks, as one op ------===//
//
// A matrix product written as a Triton user writes it is a loop over K whose
// body loads a block of A and a block of B and accumulates their tile.dot.
// Lowered op by op, each iteration would load both blocks into registers,
// stage them and the accumulator through shared memory and wait for the
// loads before the product. Kept whole as tile.dot_loop, the GPU code can
// copy the blocks of later iterations into shared memory while the tensor
// cores work on the current one, and keep the accumulator in the tensor
// cores' fragment registers from the first iteration to the last (one
// layout conversion at each end instead of two per iteration).
//
// The loop matched: an scf.for whose only carried value is the f32
// accumulator, whose step is the dot's K, and whose body is
//   a = tile.load_block A[a_row0, iv] (M x K), b = tile.load_block
//   B[iv, b_col0] (K x N), acc' = tile.dot(a, b, acc), yield acc'
// with every other operand of the two loads defined outside the loop (iv
// may be widened to i64 first), signed bounds, and both views over kernel
// arguments (global memory). Anything else is left alone, and
// tile-expand-load-block writes the loads out.
//
//===----------------------------------------------------------------------===//
#include "tilejit/compiler/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Matchers.h"

namespace tilejit {
#define GEN_PASS_DEF_TILEPIPELINEDOT
#include "compiler/Passes.h.inc"
} // namespace tilejit

using namespace mlir;

namespace tilejit {
namespace {

constexpr int64_t kDefaultStages = 3;
constexpr int64_t kMaxSharedBytes = 227 * 1024; // one block on sm_90

/// Whether `warps` warps can split an M x N accumulator into warp tiles of
/// whole 16 x 16 blocks (the GPU code's rule for placing warps).
bool warpsFit(int64_t m, int64_t n, int64_t warps) {
  for (int64_t wm = 1; wm <= warps; wm *= 2)
    if (m % (16 * wm) == 0 && n % (16 * (warps / wm)) == 0)
      return true;
  return false;
}

/// Bytes of shared memory the GPU code of a dot loop takes: `stages` pairs
/// of blocks, reused for the accumulator's row-padded f32 copy at the ends,
/// 1024 bytes of room to align them to wgmma's swizzle atoms, and two
/// mbarriers per stage.
int64_t sharedBytes(int64_t m, int64_t n, int64_t k, int64_t stages,
                    int64_t elementBytes) {
  return std::max(stages * (m * k + k * n) * elementBytes, m * (n + 8) * 4) +
         1024 + 16 * stages;
}

/// `v` is the loop's induction variable, possibly sign-extended.
bool isInductionVar(Value v, scf::ForOp loop) {
  if (auto ext = v.getDefiningOp<arith::ExtSIOp>())
    v = ext.getIn();
  return v == loop.getInductionVar();
}

struct Match {
  tile::LoadBlockOp a, b;
  tile::DotOp dot;
};

std::optional<Match> match(scf::ForOp loop) {
  if (loop.getNumRegionIterArgs() != 1 || loop.getUnsignedCmp())
    return std::nullopt;
  Block *body = loop.getBody();
  auto yield = cast<scf::YieldOp>(body->getTerminator());
  auto dot = yield.getOperand(0).getDefiningOp<tile::DotOp>();
  if (!dot || dot->getBlock() != body ||
      dot.getAcc() != loop.getRegionIterArgs()[0] || !dot->hasOneUse())
    return std::nullopt;
  auto a = dot.getA().getDefiningOp<tile::LoadBlockOp>();
  auto b = dot.getB().getDefiningOp<tile::LoadBlockOp>();
  if (!a || !b || a == b || !a->hasOneUse() || !b->hasOneUse())
    return std::nullopt;
  int64_t m = dot.getM(), n = dot.getN(), k = dot.getK();
  if (a.getBlockRows() != m || a.getBlockCols() != k || b.getBlockRows() != k ||
      b.getBlockCols() != n)
    return std::nullopt;
  APInt step;
  if (!matchPattern(loop.getStep(), m_ConstantInt(&step)) ||
      step.getSExtValue() != k)
    return std::nullopt;
  if (!isInductionVar(a.getCol0(), loop) || !isInductionVar(b.getRow0(), loop))
    return std::nullopt;
  // The GPU code copies from global memory (cp.async): views of shared
  // arrays stay as loads.
  if (!isa<BlockArgument>(pointerRoot(a.getPtr())) ||
      !isa<BlockArgument>(pointerRoot(b.getPtr())))
    return std::nullopt;
  for (Value v : std::initializer_list<Value>{
           a.getPtr(), a.getRows(), a.getCols(), a.getRowStride(),
           a.getColStride(), a.getRow0(), b.getPtr(), b.getRows(), b.getCols(),
           b.getRowStride(), b.getColStride(), b.getCol0()})
    if (!loop.isDefinedOutsideOfLoop(v))
      return std::nullopt;
  // Nothing else in the body but the widening of the induction variable.
  for (Operation &op : body->without_terminator())
    if (&op != a && &op != b && &op != dot &&
        !(isa<arith::ExtSIOp>(op) &&
          op.getOperand(0) == loop.getInductionVar()))
      return std::nullopt;
  return Match{a, b, dot};
}

struct TilePipelineDotPass
    : public impl::TilePipelineDotBase<TilePipelineDotPass> {
  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp kernel) {
      if (!kernel->hasAttr(attr::kKernel))
        return;
      SmallVector<scf::ForOp> loops;
      kernel.walk([&](scf::ForOp loop) { loops.push_back(loop); });
      for (scf::ForOp loop : loops)
        if (std::optional<Match> found = match(loop))
          fuse(kernel, loop, *found);
    });
  }

  void fuse(func::FuncOp kernel, scf::ForOp loop, const Match &found) {
    tile::DotOp dot = found.dot;
    int64_t m = dot.getM(), n = dot.getN(), k = dot.getK();
    auto warps = kernel->getAttrOfType<IntegerAttr>(attr::kNumWarps);
    if (!llvm::isPowerOf2_64(m) || !llvm::isPowerOf2_64(n) ||
        !llvm::isPowerOf2_64(k) || m < 16 || n < 16 || k < 16 || !warps ||
        !warpsFit(m, n, warps.getInt()))
      return;
    auto stagesAttr = kernel->getAttrOfType<IntegerAttr>(attr::kDotStages);
    int64_t stages = stagesAttr ? stagesAttr.getInt() : kDefaultStages;
    auto used = kernel->getAttrOfType<IntegerAttr>(attr::kSharedBytes);
    int64_t offset = ceilDiv(used ? used.getInt() : 0, 128) * 128;
    int64_t elementBytes = 2; // bf16 or f16
    // Fewer stages where the kernel's other arrays leave too little room.
    while (stages >= 2 && offset + sharedBytes(m, n, k, stages, elementBytes) >
                              kMaxSharedBytes)
      --stages;
    if (stages < 2)
      return;

    OpBuilder b(loop);
    Location loc = loop.getLoc();
    auto widen = [&](Value v) -> Value {
      if (v.getType().isInteger(64))
        return v;
      return arith::ExtSIOp::create(b, loc, b.getI64Type(), v);
    };
    tile::LoadBlockOp la = found.a, lb = found.b;
    Value kBegin = widen(loop.getLowerBound());
    Value kEnd = widen(loop.getUpperBound());
    auto fused = tile::DotLoopOp::create(
        b, loc, dot.getType(), la.getPtr(), la.getRows(), la.getCols(),
        la.getRowStride(), la.getColStride(), la.getRow0(), lb.getPtr(),
        lb.getRows(), lb.getCols(), lb.getRowStride(), lb.getColStride(),
        lb.getCol0(), kBegin, kEnd, loop.getInitArgs()[0],
        b.getI64IntegerAttr(m), b.getI64IntegerAttr(n), b.getI64IntegerAttr(k),
        b.getI64IntegerAttr(stages), b.getI64IntegerAttr(offset));
    kernel->setAttr(attr::kSharedBytes,
                    b.getI64IntegerAttr(
                        offset + sharedBytes(m, n, k, stages, elementBytes)));
    loop.getResult(0).replaceAllUsesWith(fused.getResult());
    loop.erase();
  }
};

} // namespace
} // namespace tilejit
