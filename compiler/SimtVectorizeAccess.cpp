//===- SimtVectorizeAccess.cpp - find loads/stores that can be vectorized -===//
//
// A small axis analysis in the spirit of Triton's AxisInfo, for the one
// property the emitter needs: how many adjacent elements of a thread's offset
// vector are consecutive integers. tile-assign-layout arranges aranges in
// groups of adjacent elements (up to simt.vec), so `i + arange(BLOCK)` keeps
// that grouping, and each group can become one 16-byte access. Tracking
// which elements are equal and what divides a group's first element also
// follows a 2-D tile's rows and columns (e / C and e % C with C a multiple
// of the group), so `row * ld + col` is found contiguous too.
//
//===----------------------------------------------------------------------===//
#include "tilejit/compiler/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/MathExtras.h"
#include "mlir/IR/Matchers.h"

namespace tilejit {
#define GEN_PASS_DEF_SIMTVECTORIZEACCESS
#include "compiler/Passes.h.inc"
} // namespace tilejit

using namespace mlir;

namespace tilejit {
namespace {

/// What is known of a per-thread integer vector (or, for scalars, of the
/// value every element would hold), over the thread's elements in aligned
/// groups, as Triton's AxisInfo tracks it along a tensor's axis:
///  - group (contiguity): within each aligned group of `group` elements the
///    values are consecutive integers;
///  - constancy: within each aligned group of `constancy` elements the
///    values are equal (`uniform`: all of them, as a scalar's);
///  - divisor: the element at each index that is a multiple of `group` is a
///    multiple of `divisor` (a power of two);
///  - nonNegative: every element is >= 0, so that division and remainder by
///    a positive constant keep the groups that floor division would.
struct Contiguity {
  bool uniform = false;
  int64_t group = 1;
  int64_t constancy = 1;
  int64_t divisor = 1;
  bool nonNegative = false;
};

constexpr int64_t kMaxDivisor = int64_t(1) << 30;

/// The largest power of two dividing v (kMaxDivisor for 0).
int64_t pow2Divisor(int64_t v) {
  if (v == 0)
    return kMaxDivisor;
  return std::min<int64_t>(kMaxDivisor, v & -v);
}

/// The divisor of x's elements at indices that are multiples of g (a power
/// of two): x's own where g is a multiple of its groups; inside a group,
/// the group's first element plus a multiple of g.
int64_t divisorAt(const Contiguity &x, int64_t g) {
  return g >= x.group ? x.divisor : std::min(x.divisor, g);
}

/// Largest power-of-two g dividing the length such that in each aligned
/// group of g elements every element is `next` of the one before it.
int64_t groupWhere(ArrayRef<int64_t> v,
                   llvm::function_ref<bool(int64_t, int64_t)> next) {
  int64_t n = v.size(), g = 1;
  while (2 * g <= n && n % (2 * g) == 0) {
    bool ok = true;
    for (int64_t i = 0; i < n && ok; ++i)
      ok = i % (2 * g) == 0 || next(v[i - 1], v[i]);
    if (!ok)
      break;
    g *= 2;
  }
  return g;
}

Contiguity ofConstant(ArrayRef<int64_t> v, int64_t length) {
  Contiguity c;
  c.group = groupWhere(v, [](int64_t a, int64_t b) { return b == a + 1; });
  c.constancy = groupWhere(v, [](int64_t a, int64_t b) { return a == b; });
  c.uniform = c.constancy == int64_t(v.size());
  if (c.uniform)
    c.constancy = length;
  c.divisor = kMaxDivisor;
  c.nonNegative = true;
  for (size_t i = 0; i < v.size(); ++i) {
    if (int64_t(i) % c.group == 0)
      c.divisor = std::min(c.divisor, pow2Divisor(v[i]));
    c.nonNegative &= v[i] >= 0;
  }
  return c;
}

Contiguity ofUniform(int64_t divisor, bool nonNegative, int64_t length) {
  return {true, 1, length, divisor, nonNegative};
}

class ContiguityAnalysis {
public:
  Contiguity get(Value v) {
    auto it = cache.find(v);
    if (it != cache.end())
      return it->second;
    Contiguity c = compute(v);
    cache[v] = c;
    return c;
  }

private:
  static int64_t lengthOf(Value v) {
    auto vec = dyn_cast<VectorType>(v.getType());
    return vec ? vec.getNumElements() : 1;
  }

  Contiguity compute(Value v) {
    int64_t n = lengthOf(v);
    Operation *def = v.getDefiningOp();
    if (!def) // a kernel argument (scalar) or a loop's carried value
      return isa<VectorType>(v.getType()) ? Contiguity{}
                                          : ofUniform(1, false, 1);
    if (isa<simt::ThreadIdOp, simt::BlockIdOp, simt::GridDimOp>(def))
      return ofUniform(1, true, 1);
    if (auto b = dyn_cast<vector::BroadcastOp>(def)) {
      Contiguity s = get(b.getSource());
      if (isa<VectorType>(b.getSource().getType()) && !s.uniform)
        return {};
      return ofUniform(s.divisor, s.nonNegative, n);
    }
    if (auto cst = dyn_cast<arith::ConstantOp>(def)) {
      SmallVector<int64_t> values;
      if (auto dense = dyn_cast<DenseIntElementsAttr>(cst.getValue()))
        for (const APInt &x : dense.getValues<APInt>())
          values.push_back(x.getSExtValue());
      else if (auto i = dyn_cast<IntegerAttr>(cst.getValue()))
        values.push_back(i.getValue().getSExtValue());
      return values.empty() ? Contiguity{} : ofConstant(values, n);
    }
    if (isa<arith::ExtSIOp, arith::IndexCastOp>(def))
      return get(def->getOperand(0));
    // Zero extension keeps the values only where they are not negative.
    if (isa<arith::ExtUIOp>(def)) {
      Contiguity s = get(def->getOperand(0));
      return s.nonNegative ? s : uniformOrUnknown(def, n);
    }
    // The rules below assume integers that do not wrap: index arithmetic in
    // i32 or i64 (CudaEmitter.h: signed overflow does not happen).
    Type elem = getElementTypeOrSelf(v.getType());
    if (def->getNumOperands() != 2 || !(elem.isInteger(32) || elem.isInteger(64)))
      return uniformOrUnknown(def, n);
    Contiguity a = get(def->getOperand(0)), b = get(def->getOperand(1));
    Contiguity r;
    r.uniform = a.uniform && b.uniform;
    r.constancy = std::min(a.constancy, b.constancy);
    if (isa<arith::AddIOp>(def)) {
      r.group = std::max(std::min(a.group, b.constancy),
                         std::min(a.constancy, b.group));
      r.divisor = std::min(divisorAt(a, r.group), divisorAt(b, r.group));
      r.nonNegative = a.nonNegative && b.nonNegative;
    } else if (isa<arith::SubIOp>(def)) {
      r.group = std::min(a.group, b.constancy);
      r.divisor = std::min(divisorAt(a, r.group), divisorAt(b, r.group));
    } else if (isa<arith::MulIOp>(def)) {
      std::optional<int64_t> ca = constantOf(def->getOperand(0)),
                             cb = constantOf(def->getOperand(1));
      r.group = cb == 1 ? a.group : ca == 1 ? b.group : 1;
      r.divisor = std::min(kMaxDivisor, divisorAt(a, r.group) *
                                            divisorAt(b, r.group));
      r.nonNegative = a.nonNegative && b.nonNegative;
    } else if (isa<arith::DivSIOp, arith::DivUIOp, arith::RemSIOp,
                   arith::RemUIOp>(def)) {
      // x / c and x % c for a positive constant c, x >= 0 (or read
      // unsigned): a group of g consecutive values starting at a multiple
      // of g, g dividing c, has one quotient and consecutive remainders.
      std::optional<int64_t> c = constantOf(def->getOperand(1));
      bool unsignedOp = isa<arith::DivUIOp, arith::RemUIOp>(def);
      if (!c || *c <= 0 || !(a.nonNegative || unsignedOp))
        return uniformOrUnknown(def, n);
      int64_t g = std::min(a.group, a.divisor);
      bool aligned = *c % g == 0;
      // Unsigned division by 1 keeps the bits, and their sign.
      r.nonNegative = a.nonNegative || *c > 1;
      if (isa<arith::DivSIOp, arith::DivUIOp>(def)) {
        r.group = *c == 1 ? a.group : 1;
        r.constancy = std::max(a.constancy, aligned ? g : 1);
        r.divisor = *c == 1 ? a.divisor : 1;
      } else {
        r.group = aligned ? g : 1;
        r.constancy = a.constancy;
        r.divisor = std::min(divisorAt(a, r.group), pow2Divisor(*c));
      }
    } else {
      return uniformOrUnknown(def, n);
    }
    if (r.uniform)
      r.constancy = n;
    return r;
  }

  /// An op the analysis does not follow: for an elementwise arith op whose
  /// operands are all uniform, uniform; else nothing known.
  Contiguity uniformOrUnknown(Operation *def, int64_t n) {
    if (!isa<arith::ArithDialect>(def->getDialect()) ||
        def->getNumOperands() == 0)
      return {};
    for (Value operand : def->getOperands())
      if (!get(operand).uniform)
        return {};
    return ofUniform(1, false, n);
  }

  /// The value of a scalar, or of every element of a splat, where constant.
  std::optional<int64_t> constantOf(Value v) {
    APInt c;
    if (matchPattern(v, m_ConstantInt(&c)))
      return c.getSExtValue();
    if (auto b = v.getDefiningOp<vector::BroadcastOp>())
      return constantOf(b.getSource());
    return std::nullopt;
  }

  llvm::DenseMap<Value, Contiguity> cache;
};

/// The vector width to mark on an access with these offsets and elements.
int64_t accessWidth(ContiguityAnalysis &analysis, Value offsets,
                    Type elementType) {
  auto vec = dyn_cast<VectorType>(offsets.getType());
  if (!vec)
    return 1;
  if (elementType.isInteger(1)) // no vector accesses of i1
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
