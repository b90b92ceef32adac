//===- InterpArith.cpp - arith ops in the interpreter -----------------------===//
//
// Float and integer arithmetic, casts, constants, comparisons and selects,
// element by element with the GPU's rounding (InterpValues.h).
//
//===----------------------------------------------------------------------===//
#include "runtime/InterpRunner.h"

namespace tilejit {
namespace interp {

bool Runner::execFloat(Operation *op) {
  // Binary arithmetic.
  if (isa<arith::AddFOp>(op))
    return floatBinary(op, [](float a, float b) { return a + b; }), true;
  if (isa<arith::SubFOp>(op))
    return floatBinary(op, [](float a, float b) { return a - b; }), true;
  if (isa<arith::MulFOp>(op))
    return floatBinary(op, [](float a, float b) { return a * b; }), true;
  if (isa<arith::DivFOp>(op))
    return floatBinary(op, [](float a, float b) { return a / b; }), true;
  if (isa<arith::MaximumFOp>(op))
    return floatBinary(op, maximumF), true;
  if (isa<arith::MinimumFOp>(op))
    return floatBinary(op, minimumF), true;
  if (isa<arith::MaxNumFOp>(op))
    return floatBinary(op, maxnumF), true;
  if (isa<arith::MinNumFOp>(op))
    return floatBinary(op, minnumF), true;
  if (isa<arith::RemFOp>(op))
    return floatBinary(op, [](float a, float b) { return std::fmod(a, b); }),
           true;
  if (isa<math::PowFOp>(op))
    return floatBinary(op, [](float a, float b) { return std::pow(a, b); }),
           true;
  if (isa<math::CopySignOp>(op))
    return floatBinary(op,
                       [](float a, float b) { return std::copysign(a, b); }),
           true;
  if (isa<math::Atan2Op>(op))
    return floatBinary(op, [](float a, float b) { return std::atan2(a, b); }),
           true;
  // Unary.
  if (isa<arith::NegFOp>(op))
    return floatUnary(op, [](float a) { return -a; }), true;
  if (isa<math::ExpOp>(op))
    return floatUnary(op, [](float a) { return std::exp(a); }), true;
  if (isa<math::Exp2Op>(op))
    return floatUnary(op, [](float a) { return std::exp2(a); }), true;
  if (isa<math::ExpM1Op>(op))
    return floatUnary(op, [](float a) { return std::expm1(a); }), true;
  if (isa<math::LogOp>(op))
    return floatUnary(op, [](float a) { return std::log(a); }), true;
  if (isa<math::Log2Op>(op))
    return floatUnary(op, [](float a) { return std::log2(a); }), true;
  if (isa<math::Log1pOp>(op))
    return floatUnary(op, [](float a) { return std::log1p(a); }), true;
  if (isa<math::AbsFOp>(op))
    return floatUnary(op, [](float a) { return std::fabs(a); }), true;
  if (isa<math::TanhOp>(op))
    return floatUnary(op, [](float a) { return std::tanh(a); }), true;
  if (isa<math::SqrtOp>(op))
    return floatUnary(op, [](float a) { return std::sqrt(a); }), true;
  if (isa<math::RsqrtOp>(op))
    return floatUnary(op, [](float a) { return 1.0f / std::sqrt(a); }), true;
  if (isa<math::SinOp>(op))
    return floatUnary(op, [](float a) { return std::sin(a); }), true;
  if (isa<math::CosOp>(op))
    return floatUnary(op, [](float a) { return std::cos(a); }), true;
  if (isa<math::ErfOp>(op))
    return floatUnary(op, [](float a) { return std::erf(a); }), true;
  if (isa<math::FloorOp>(op))
    return floatUnary(op, [](float a) { return std::floor(a); }), true;
  if (isa<math::CeilOp>(op))
    return floatUnary(op, [](float a) { return std::ceil(a); }), true;
  if (isa<math::TruncOp>(op))
    return floatUnary(op, [](float a) { return std::trunc(a); }), true;
  if (isa<math::RoundOp>(op))
    return floatUnary(op, [](float a) { return std::round(a); }), true;
  if (isa<math::RoundEvenOp>(op))
    return floatUnary(op, [](float a) { return std::nearbyint(a); }), true;
  if (isa<math::FmaOp>(op)) {
    const RuntimeValue &a = floatOperand(op, 0);
    const RuntimeValue &b = floatOperand(op, 1);
    const RuntimeValue &c = floatOperand(op, 2);
    checkSizes(a.size(), b.size());
    checkSizes(a.size(), c.size());
    Shape s = shapeOf(op->getResult(0).getType());
    auto out = std::make_shared<FVec>(a.size());
    for (size_t j = 0, n = a.size(); j < n; ++j)
      (*out)[j] = std::fma((*a.f)[j], (*b.f)[j], (*c.f)[j]);
    roundInPlace(*out, s.elem);
    set(op->getResult(0), makeF(s, std::move(out)));
    return true;
  }
  return false;
}

bool Runner::execInt(Operation *op) {
  using U = uint64_t;
  if (isa<arith::AddIOp>(op))
    return intBinary(op,
                     [](int64_t a, int64_t b, Elem) { return U(a) + U(b); }),
           true;
  if (isa<arith::SubIOp>(op))
    return intBinary(op,
                     [](int64_t a, int64_t b, Elem) { return U(a) - U(b); }),
           true;
  if (isa<arith::MulIOp>(op))
    return intBinary(op,
                     [](int64_t a, int64_t b, Elem) { return U(a) * U(b); }),
           true;
  if (isa<arith::AndIOp>(op))
    return intBinary(op, [](int64_t a, int64_t b, Elem) { return U(a & b); }),
           true;
  if (isa<arith::OrIOp>(op))
    return intBinary(op, [](int64_t a, int64_t b, Elem) { return U(a | b); }),
           true;
  if (isa<arith::XOrIOp>(op))
    return intBinary(op, [](int64_t a, int64_t b, Elem) { return U(a ^ b); }),
           true;
  // Division by zero is undefined in MLIR; the interpreter yields 0 rather
  // than trapping, since masked-off lanes may legitimately divide by zero.
  if (isa<arith::DivSIOp>(op))
    return intBinary(op,
                     [](int64_t a, int64_t b, Elem) -> U {
                       if (b == 0)
                         return 0;
                       if (b == -1)
                         return U(0) - U(a); // wraps for the minimum
                       return U(a / b);
                     }),
           true;
  if (isa<arith::RemSIOp>(op))
    return intBinary(op,
                     [](int64_t a, int64_t b, Elem) -> U {
                       if (b == 0 || b == -1)
                         return 0;
                       return U(a % b);
                     }),
           true;
  if (isa<arith::DivUIOp>(op))
    return intBinary(op,
                     [](int64_t a, int64_t b, Elem e) -> U {
                       U ub = zext(b, e);
                       return ub == 0 ? 0 : zext(a, e) / ub;
                     }),
           true;
  if (isa<arith::RemUIOp>(op))
    return intBinary(op,
                     [](int64_t a, int64_t b, Elem e) -> U {
                       U ub = zext(b, e);
                       return ub == 0 ? 0 : zext(a, e) % ub;
                     }),
           true;
  if (isa<arith::FloorDivSIOp>(op) || isa<arith::CeilDivSIOp>(op)) {
    bool floor = isa<arith::FloorDivSIOp>(op);
    if (floor)
      intBinary(op, [](int64_t a, int64_t b, Elem) -> U {
        if (b == 0)
          return 0;
        if (b == -1)
          return U(0) - U(a);
        int64_t q = a / b;
        if ((a % b != 0) && ((a < 0) != (b < 0)))
          --q;
        return U(q);
      });
    else
      intBinary(op, [](int64_t a, int64_t b, Elem) -> U {
        if (b == 0)
          return 0;
        if (b == -1)
          return U(0) - U(a);
        int64_t q = a / b;
        if ((a % b != 0) && ((a < 0) == (b < 0)))
          ++q;
        return U(q);
      });
    return true;
  }
  if (isa<arith::MaxSIOp>(op))
    return intBinary(op,
                     [](int64_t a, int64_t b, Elem e) {
                       return U(std::max(sext(a, e), sext(b, e)));
                     }),
           true;
  if (isa<arith::MinSIOp>(op))
    return intBinary(op,
                     [](int64_t a, int64_t b, Elem e) {
                       return U(std::min(sext(a, e), sext(b, e)));
                     }),
           true;
  if (isa<arith::MaxUIOp>(op))
    return intBinary(op,
                     [](int64_t a, int64_t b, Elem e) {
                       return std::max(zext(a, e), zext(b, e));
                     }),
           true;
  if (isa<arith::MinUIOp>(op))
    return intBinary(op,
                     [](int64_t a, int64_t b, Elem e) {
                       return std::min(zext(a, e), zext(b, e));
                     }),
           true;
  // Shifts by >= the width are poison in MLIR; give 0 (or the sign fill).
  if (isa<arith::ShLIOp>(op))
    return intBinary(op,
                     [](int64_t a, int64_t b, Elem e) -> U {
                       U s = zext(b, e);
                       return s >= bitWidth(e) ? 0 : U(a) << s;
                     }),
           true;
  if (isa<arith::ShRSIOp>(op))
    return intBinary(op,
                     [](int64_t a, int64_t b, Elem e) -> U {
                       U s = zext(b, e);
                       if (s >= bitWidth(e))
                         return a < 0 ? ~U(0) : 0;
                       return U(a >> s);
                     }),
           true;
  if (isa<arith::ShRUIOp>(op))
    return intBinary(op,
                     [](int64_t a, int64_t b, Elem e) -> U {
                       U s = zext(b, e);
                       return s >= bitWidth(e) ? 0 : zext(a, e) >> s;
                     }),
           true;
  return false;
}

bool Runner::execCast(Operation *op) {
  if (isa<arith::ExtFOp>(op) || isa<arith::TruncFOp>(op)) {
    // Float values are held as floats, exactly; narrowing rounds.
    floatUnary(op, [](float a) { return a; });
    return true;
  }
  if (isa<arith::ExtSIOp>(op) || isa<arith::IndexCastOp>(op) ||
      isa<arith::TruncIOp>(op)) {
    // Held values are already sign-extended (but for i1); truncation wraps
    // on normalize.
    intToInt(op, [](int64_t a, Elem from) { return uint64_t(sext(a, from)); });
    return true;
  }
  if (isa<arith::ExtUIOp>(op) || isa<arith::IndexCastUIOp>(op)) {
    intToInt(op, [](int64_t a, Elem from) { return zext(a, from); });
    return true;
  }
  if (isa<arith::SIToFPOp>(op) || isa<arith::UIToFPOp>(op)) {
    bool isUnsigned = isa<arith::UIToFPOp>(op);
    const RuntimeValue &a = intOperand(op, 0);
    Shape s = shapeOf(op->getResult(0).getType());
    auto out = std::make_shared<FVec>(a.size());
    for (size_t j = 0, n = a.size(); j < n; ++j) {
      int64_t v = (*a.i)[j];
      v = isUnsigned ? static_cast<int64_t>(zext(v, a.elem)) : sext(v, a.elem);
      (*out)[j] = intToFloat(v, isUnsigned, s.elem);
    }
    set(op->getResult(0), makeF(s, std::move(out)));
    return true;
  }
  if (isa<arith::FPToSIOp>(op) || isa<arith::FPToUIOp>(op)) {
    bool isUnsigned = isa<arith::FPToUIOp>(op);
    const RuntimeValue &a = floatOperand(op, 0);
    Shape s = shapeOf(op->getResult(0).getType());
    auto out = std::make_shared<IVec>(a.size());
    for (size_t j = 0, n = a.size(); j < n; ++j)
      (*out)[j] = floatToInt((*a.f)[j], isUnsigned, s.elem);
    set(op->getResult(0), makeI(s, std::move(out)));
    return true;
  }
  return false;
}

void Runner::execConstant(arith::ConstantOp op) {
  auto cached = constants.find(op);
  if (cached != constants.end())
    return set(op.getResult(), cached->second);
  Shape s = shapeOf(op.getType());
  Attribute attr = op.getValue();
  RuntimeValue r;
  if (!s.tile) {
    if (auto fa = dyn_cast<FloatAttr>(attr)) {
      r = makeF(s, std::make_shared<FVec>(
                       1, roundTo(apToFloat(fa.getValue()), s.elem)));
    } else if (auto ia = dyn_cast<IntegerAttr>(attr)) {
      llvm::APInt v = ia.getValue();
      int64_t x = s.elem == Elem::I1 ? int64_t(!v.isZero()) : v.getSExtValue();
      r = intScalar(s.elem, x);
    } else {
      fail("unsupported constant attribute");
    }
  } else {
    auto dense = dyn_cast<DenseElementsAttr>(attr);
    if (!dense)
      fail("unsupported tile constant (expected dense elements)");
    if (isFloatElem(s.elem)) {
      auto out = std::make_shared<FVec>(s.n);
      if (dense.isSplat()) {
        std::fill(out->begin(), out->end(),
                  apToFloat(dense.getSplatValue<llvm::APFloat>()));
      } else {
        int64_t j = 0;
        for (const llvm::APFloat &v : dense.getValues<llvm::APFloat>())
          (*out)[j++] = apToFloat(v);
      }
      roundInPlace(*out, s.elem);
      r = makeF(s, std::move(out));
    } else {
      auto out = std::make_shared<IVec>(s.n);
      auto conv = [&](const llvm::APInt &v) {
        return s.elem == Elem::I1 ? int64_t(!v.isZero())
                                  : normalize(v.getSExtValue(), s.elem);
      };
      if (dense.isSplat()) {
        std::fill(out->begin(), out->end(),
                  conv(dense.getSplatValue<llvm::APInt>()));
      } else {
        int64_t j = 0;
        for (const llvm::APInt &v : dense.getValues<llvm::APInt>())
          (*out)[j++] = conv(v);
      }
      r = makeI(s, std::move(out));
    }
  }
  r = spread(std::move(r));
  constants.try_emplace(op, r);
  set(op.getResult(), std::move(r));
}

void Runner::execCmpF(arith::CmpFOp op) {
  const RuntimeValue &a = floatOperand(op, 0);
  const RuntimeValue &b = floatOperand(op, 1);
  checkSizes(a.size(), b.size());
  Shape s = shapeOf(op.getType());
  size_t n = a.size();
  auto out = std::make_shared<IVec>(n);
  const float *pa = a.f->data(), *pb = b.f->data();
  int64_t *po = out->data();
  auto run = [&](auto pred) {
    for (size_t j = 0; j < n; ++j)
      po[j] = pred(pa[j], pb[j]) ? 1 : 0;
  };
  auto unord = [](float x, float y) { return std::isnan(x) || std::isnan(y); };
  using P = arith::CmpFPredicate;
  switch (op.getPredicate()) {
  case P::AlwaysFalse:
    run([](float, float) { return false; });
    break;
  case P::AlwaysTrue:
    run([](float, float) { return true; });
    break;
  case P::OEQ:
    run([](float x, float y) { return x == y; });
    break;
  case P::OGT:
    run([](float x, float y) { return x > y; });
    break;
  case P::OGE:
    run([](float x, float y) { return x >= y; });
    break;
  case P::OLT:
    run([](float x, float y) { return x < y; });
    break;
  case P::OLE:
    run([](float x, float y) { return x <= y; });
    break;
  case P::ONE:
    run([&](float x, float y) { return !unord(x, y) && x != y; });
    break;
  case P::ORD:
    run([&](float x, float y) { return !unord(x, y); });
    break;
  case P::UEQ:
    run([&](float x, float y) { return unord(x, y) || x == y; });
    break;
  case P::UGT:
    run([&](float x, float y) { return unord(x, y) || x > y; });
    break;
  case P::UGE:
    run([&](float x, float y) { return unord(x, y) || x >= y; });
    break;
  case P::ULT:
    run([&](float x, float y) { return unord(x, y) || x < y; });
    break;
  case P::ULE:
    run([&](float x, float y) { return unord(x, y) || x <= y; });
    break;
  case P::UNE:
    run([](float x, float y) { return x != y; }); // true for NaN
    break;
  case P::UNO:
    run([&](float x, float y) { return unord(x, y); });
    break;
  }
  set(op.getResult(), makeI(s, std::move(out)));
}

void Runner::execCmpI(arith::CmpIOp op) {
  const RuntimeValue &a = intOperand(op, 0);
  const RuntimeValue &b = intOperand(op, 1);
  checkSizes(a.size(), b.size());
  Shape s = shapeOf(op.getType());
  size_t n = a.size();
  Elem e = a.elem;
  auto out = std::make_shared<IVec>(n);
  const int64_t *pa = a.i->data(), *pb = b.i->data();
  int64_t *po = out->data();
  auto run = [&](auto pred) {
    if (e == Elem::I1) // signed predicates see true as -1
      for (size_t j = 0; j < n; ++j)
        po[j] = pred(-pa[j], -pb[j]) ? 1 : 0;
    else
      for (size_t j = 0; j < n; ++j)
        po[j] = pred(pa[j], pb[j]) ? 1 : 0;
  };
  using P = arith::CmpIPredicate;
  switch (op.getPredicate()) {
  case P::eq:
    run([](int64_t x, int64_t y) { return x == y; });
    break;
  case P::ne:
    run([](int64_t x, int64_t y) { return x != y; });
    break;
  case P::slt:
    run([](int64_t x, int64_t y) { return x < y; });
    break;
  case P::sle:
    run([](int64_t x, int64_t y) { return x <= y; });
    break;
  case P::sgt:
    run([](int64_t x, int64_t y) { return x > y; });
    break;
  case P::sge:
    run([](int64_t x, int64_t y) { return x >= y; });
    break;
  case P::ult:
    run([e](int64_t x, int64_t y) { return zext(x, e) < zext(y, e); });
    break;
  case P::ule:
    run([e](int64_t x, int64_t y) { return zext(x, e) <= zext(y, e); });
    break;
  case P::ugt:
    run([e](int64_t x, int64_t y) { return zext(x, e) > zext(y, e); });
    break;
  case P::uge:
    run([e](int64_t x, int64_t y) { return zext(x, e) >= zext(y, e); });
    break;
  }
  set(op.getResult(), makeI(s, std::move(out)));
}

void Runner::execSelect(arith::SelectOp op) {
  const RuntimeValue &c = intOperand(op, 0);
  const RuntimeValue &a = get(op.getTrueValue());
  const RuntimeValue &b = get(op.getFalseValue());
  // A scalar condition picks a whole value: a pointer, or a tile.
  if (c.size() == 1 || a.elem == Elem::Ptr) {
    RuntimeValue r =
        uniformInt(op.getCondition(), "a select's condition") ? a : b;
    return set(op.getResult(), std::move(r));
  }
  // Element by element; in a SIMT kernel a thread's scalar condition picks
  // its whole vector.
  checkSizes(a.size(), b.size());
  Shape s = shapeOf(op.getType());
  size_t n = a.size();
  size_t div = repeatOf(c.size(), n);
  const int64_t *pc = c.i->data();
  if (a.f && b.f) {
    auto out = std::make_shared<FVec>(n);
    for (size_t j = 0; j < n; ++j)
      (*out)[j] = pc[j / div] ? (*a.f)[j] : (*b.f)[j];
    return set(op.getResult(), makeF(s, std::move(out)));
  }
  if (a.i && b.i) {
    auto out = std::make_shared<IVec>(n);
    for (size_t j = 0; j < n; ++j)
      (*out)[j] = pc[j / div] ? (*a.i)[j] : (*b.i)[j];
    return set(op.getResult(), makeI(s, std::move(out)));
  }
  fail("select operands have mismatched kinds");
}

/// Typed element access to an argument buffer.

} // namespace interp
} // namespace tilejit
