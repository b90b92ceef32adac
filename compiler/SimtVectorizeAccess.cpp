//===- SimtVectorizeAccess.cpp - find loads/stores that can be vectorized -===//
//
// A small axis analysis in the spirit of Triton's AxisInfo, for the one
// property the emitter needs: how many adjacent elements of a thread's offset
// vector are consecutive integers. tile-assign-layout arranges aranges in
// groups of adjacent elements (up to simt.vec), so `i + arange(BLOCK)` keeps
// that grouping, and each group can become one 16-byte access.
//
//===----------------------------------------------------------------------===//
#include "tilejit/compiler/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/MathExtras.h"

namespace tilejit {
#define GEN_PASS_DEF_SIMTVECTORIZEACCESS
#include "compiler/Passes.h.inc"
} // namespace tilejit

using namespace mlir;

namespace tilejit {
namespace {

/// What is known of a per-thread integer vector: all elements equal
/// (uniform), or consecutive within aligned groups of `group` elements.
struct Contiguity {
  bool uniform = false;
  int64_t group = 1;
};

/// Largest power-of-two g dividing the length such that each aligned group of
/// g elements of the constant holds consecutive integers.
int64_t constantGroup(DenseIntElementsAttr values) {
  SmallVector<int64_t> v;
  for (const APInt &x : values.getValues<APInt>())
    v.push_back(x.getSExtValue());
  int64_t n = v.size(), g = 1;
  while (2 * g <= n && n % (2 * g) == 0) {
    bool ok = true;
    for (int64_t i = 0; i < n && ok; ++i)
      ok = i % (2 * g) == 0 || v[i] == v[i - 1] + 1;
    if (!ok)
      break;
    g *= 2;
  }
  return g;
}

class ContiguityAnalysis {
public:
  Contiguity get(Value v) {
    if (!isa<VectorType>(v.getType()))
      return {true, 1}; // scalars are uniform
    auto it = cache.find(v);
    if (it != cache.end())
      return it->second;
    Contiguity c = compute(v);
    cache[v] = c;
    return c;
  }

private:
  Contiguity compute(Value v) {
    Operation *def = v.getDefiningOp();
    if (!def)
      return {}; // block arguments: unknown
    if (isa<vector::BroadcastOp>(def))
      return {true, 1};
    if (auto cst = dyn_cast<arith::ConstantOp>(def)) {
      auto values = dyn_cast<DenseIntElementsAttr>(cst.getValue());
      if (!values)
        return {};
      if (values.isSplat())
        return {true, 1};
      return {false, constantGroup(values)};
    }
    if (isa<arith::ExtSIOp, arith::ExtUIOp>(def))
      return get(def->getOperand(0));
    if (isa<arith::AddIOp, arith::SubIOp>(def)) {
      Contiguity a = get(def->getOperand(0)), b = get(def->getOperand(1));
      if (a.uniform && b.uniform)
        return {true, 1};
      if (b.uniform)
        return a; // x + c and x - c keep x's groups
      if (a.uniform && isa<arith::AddIOp>(def))
        return b;
    }
    return {};
  }

  llvm::DenseMap<Value, Contiguity> cache;
};

/// The vector width to mark on an access with these offsets and elements.
int64_t accessWidth(ContiguityAnalysis &analysis, Value offsets,
                    Type elementType) {
  auto vec = dyn_cast<VectorType>(offsets.getType());
  if (!vec)
    return 1;
  Contiguity c = analysis.get(offsets);
  int64_t maxElems =
      16 / std::max<int64_t>(1, elementType.getIntOrFloatBitWidth() / 8);
  return c.uniform ? 1 : std::min(c.group, maxElems);
}

struct SimtVectorizeAccessPass
    : public impl::SimtVectorizeAccessBase<SimtVectorizeAccessPass> {
  void runOnOperation() override {
    ContiguityAnalysis analysis;
    Builder b(&getContext());
    auto setWidth = [&](Operation *op, int64_t width) {
      if (width >= 2)
        op->setAttr(attr::kAccessVec, b.getI64IntegerAttr(width));
    };
    auto mark = [&](Operation *op, Value offsets, Type value) {
      setWidth(op, accessWidth(analysis, offsets,
                               mlir::getElementTypeOrSelf(value)));
    };
    getOperation().walk([&](Operation *op) {
      if (auto ld = dyn_cast<simt::LoadOp>(op))
        mark(op, ld.getOffsets(), ld.getType());
      else if (auto st = dyn_cast<simt::StoreOp>(op))
        mark(op, st.getOffsets(), st.getValue().getType());
      else if (auto cp = dyn_cast<simt::CopyAsyncOp>(op)) {
        // Both sides must be contiguous in groups: the narrower one counts.
        Type elem = cp.getSrc().getType().getElementType();
        setWidth(op, std::min(accessWidth(analysis, cp.getDstOffsets(), elem),
                              accessWidth(analysis, cp.getSrcOffsets(), elem)));
      }
    });
  }
};

} // namespace
} // namespace tilejit
