//===- DSLImpl.h - the DSL builder's state and conversions -------*- C++ -*-===//
//
// KernelBuilder::Impl (the module being built, the insertion point, the
// live Vars) and the conversions every DSL operator shares (promotion,
// splats, casts), for DSL.cpp (the builder's calls) and DSLValue.cpp
// (Value, Var and the operators). Internal to ir/.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_IR_DSLIMPL_H
#define TILEJIT_IR_DSLIMPL_H

#include "tilejit/DSL.h"

#include "tilejit/TileModule.h"
#include "tilejit/ir/Dialects.h"
#include "tilejit/ir/TileModuleImpl.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <limits>
#include <sstream>

using mlir::OpBuilder;
using mlir::Type;
using MValue = mlir::Value;

namespace tilejit {
namespace dsl {


struct KernelBuilder::Impl {
  std::string name;
  Config config;
  std::shared_ptr<mlir::MLIRContext> ctx;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  mlir::func::FuncOp func;
  OpBuilder b;
  mlir::Location loc;
  std::vector<Var *> liveVars;
  bool finished = false;

  Impl(const std::string &name, const Config &config,
       std::shared_ptr<mlir::MLIRContext> context)
      : name(name), config(config), ctx(std::move(context)), b(ctx.get()),
        loc(mlir::UnknownLoc::get(ctx.get())) {}

  [[noreturn]] void fail(const std::string &what) const {
    std::string where;
    if (auto fl = mlir::dyn_cast<mlir::FileLineColLoc>(loc))
      where =
          " at " + fl.getFilename().str() + ":" + std::to_string(fl.getLine());
    throw Error("kernel '" + name + "'" + where + ": " + what);
  }

  void at(SourceLoc l) {
    loc = mlir::FileLineColLoc::get(ctx.get(), l.file, l.line, 0);
  }

  void checkOpen() const {
    if (finished)
      fail("the kernel was already finished");
  }

  /// An operand-less, result-less op at `l` (a barrier, a copy commit).
  template <typename Op> void statement(SourceLoc l) {
    at(l);
    checkOpen();
    Op::create(b, loc);
  }

  /// The mlir::Value behind `v`, checked to be usable at the insertion point.
  MValue use(Value v) const {
    checkOpen();
    if (!v.valid())
      fail("use of an empty Value");
    if (&v.builder().impl() != this)
      fail("value comes from another kernel builder");
    MValue mv = MValue::getFromOpaquePointer(v.raw());
    mlir::Region *here = b.getInsertionBlock()->getParent();
    if (!mv.getParentRegion()->isAncestor(here))
      fail("a value defined inside a loop or if body is used outside it; "
           "assign it to a Var declared before the loop");
    return mv;
  }

  Value wrap(KernelBuilder *kb, MValue v) const {
    return Value(kb, v.getAsOpaquePointer());
  }

  Type elementType(DType t) {
    switch (t) {
    case DType::I1:
      return b.getI1Type();
    case DType::I32:
      return b.getI32Type();
    case DType::I64:
      return b.getI64Type();
    case DType::BF16:
      return b.getBF16Type();
    case DType::F16:
      return b.getF16Type();
    case DType::F32:
      return b.getF32Type();
    }
    fail("unknown dtype");
  }
};


//===----------------------------------------------------------------------===//
// Type helpers
//===----------------------------------------------------------------------===//


inline Type elementOf(Type t) {
  if (auto p = mlir::dyn_cast<tile::PtrType>(t))
    return p.getElementType();
  if (auto s = mlir::dyn_cast<mlir::ShapedType>(t))
    return s.getElementType();
  return t;
}

inline int64_t sizeOf(Type t) {
  if (auto s = mlir::dyn_cast<mlir::RankedTensorType>(t))
    return s.getNumElements();
  return 1;
}

inline bool isTileType(Type t) { return mlir::isa<mlir::RankedTensorType>(t); }

inline DType dtypeOf(Type t) {
  return dtypeOfScalar(elementOf(t)).value_or(DType::F32);
}

inline std::string typeStr(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << t;
  return s;
}

/// Same shape as `like` (scalar or tile) with element type `elem`.
inline Type withElement(Type like, Type elem) {
  if (auto s = mlir::dyn_cast<mlir::RankedTensorType>(like))
    return mlir::RankedTensorType::get(s.getShape(), elem);
  return elem;
}


//===----------------------------------------------------------------------===//
// Core conversions shared by every operator
//===----------------------------------------------------------------------===//


inline KernelBuilder &builderOf(Value a, Value b) {
  if (a.valid())
    return a.builder();
  if (b.valid())
    return b.builder();
  throw Error("operation on empty Values");
}

/// Converts v's element type to `elem` (same shape).
inline MValue castTo(KernelBuilder::Impl &k, MValue v, Type elem) {
  Type from = elementOf(v.getType());
  if (from == elem)
    return v;
  Type to = withElement(v.getType(), elem);
  OpBuilder &b = k.b;
  auto fw = [](Type t) { return mlir::cast<mlir::FloatType>(t).getWidth(); };
  if (from.isFloat() && elem.isFloat()) {
    if (fw(from) == 16 && fw(elem) == 16) // bf16 <-> f16 goes through f32
      return castTo(k, castTo(k, v, b.getF32Type()), elem);
    if (fw(from) < fw(elem))
      return mlir::arith::ExtFOp::create(b, k.loc, to, v);
    return mlir::arith::TruncFOp::create(b, k.loc, to, v);
  }
  if (from.isInteger() && elem.isInteger()) {
    if (from.getIntOrFloatBitWidth() < elem.getIntOrFloatBitWidth())
      return from.isInteger(1)
                 ? MValue(mlir::arith::ExtUIOp::create(b, k.loc, to, v))
                 : MValue(mlir::arith::ExtSIOp::create(b, k.loc, to, v));
    return mlir::arith::TruncIOp::create(b, k.loc, to, v);
  }
  if (from.isInteger() && elem.isFloat())
    return from.isInteger(1)
               ? MValue(mlir::arith::UIToFPOp::create(b, k.loc, to, v))
               : MValue(mlir::arith::SIToFPOp::create(b, k.loc, to, v));
  if (from.isFloat() && elem.isInteger() && !elem.isInteger(1))
    return mlir::arith::FPToSIOp::create(b, k.loc, to, v);
  k.fail("cannot convert " + typeStr(from) + " to " + typeStr(elem));
}

/// Broadcasts a scalar to a tile of n elements.
inline MValue splatTo(KernelBuilder::Impl &k, MValue v, int64_t n) {
  if (isTileType(v.getType()))
    return v;
  auto t = mlir::RankedTensorType::get({n}, v.getType());
  return tile::SplatOp::create(k.b, k.loc, t, v);
}

/// The wider of two element types of the same kind; mixing kinds is an error.
inline Type commonElement(KernelBuilder::Impl &k, Type a, Type b, const char *op) {
  if (a == b)
    return a;
  if (a.isFloat() && b.isFloat()) {
    if (a.getIntOrFloatBitWidth() == b.getIntOrFloatBitWidth())
      return k.b.getF32Type(); // bf16 with f16
    return a.getIntOrFloatBitWidth() > b.getIntOrFloatBitWidth() ? a : b;
  }
  if (a.isInteger() && b.isInteger())
    return a.getIntOrFloatBitWidth() > b.getIntOrFloatBitWidth() ? a : b;
  k.fail(std::string("operands of '") + op + "' mix " + typeStr(a) + " and " +
         typeStr(b) + "; convert one with .to()");
}

/// Brings two operands to one shape and element type.
inline std::pair<MValue, MValue> promote(KernelBuilder::Impl &k, MValue a, MValue b,
                                  const char *op) {
  if (mlir::isa<tile::PtrType>(a.getType()) ||
      mlir::isa<tile::PtrType>(b.getType()))
    k.fail(std::string("'") + op + "' on a pointer");
  int64_t na = sizeOf(a.getType()), nb = sizeOf(b.getType());
  bool ta = isTileType(a.getType()), tb = isTileType(b.getType());
  if (ta && tb && na != nb)
    k.fail(std::string("operands of '") + op + "' have tile sizes " +
           std::to_string(na) + " and " + std::to_string(nb));
  Type elem =
      commonElement(k, elementOf(a.getType()), elementOf(b.getType()), op);
  a = castTo(k, a, elem);
  b = castTo(k, b, elem);
  if (ta != tb) {
    a = splatTo(k, a, std::max(na, nb));
    b = splatTo(k, b, std::max(na, nb));
  }
  return {a, b};
}

inline MValue scalarConstant(KernelBuilder::Impl &k, double v, Type elem) {
  mlir::TypedAttr attr;
  if (elem.isFloat())
    attr = k.b.getFloatAttr(elem, v);
  else if (elem.isInteger(1))
    attr = k.b.getBoolAttr(v != 0);
  else
    attr = k.b.getIntegerAttr(elem, static_cast<int64_t>(v));
  return mlir::arith::ConstantOp::create(k.b, k.loc, attr);
}

/// Element type used for math functions: bf16/f16 compute in f32.
inline MValue asFloat32(KernelBuilder::Impl &k, MValue v, const char *op) {
  Type e = elementOf(v.getType());
  if (!e.isFloat())
    k.fail(std::string("'") + op + "' needs a float operand, got " +
           typeStr(e));
  return e.isF32() ? v : castTo(k, v, k.b.getF32Type());
}

template <typename FloatOp, typename IntOp>
inline Value binary(Value a, Value b, const char *name) {
  KernelBuilder &kb = builderOf(a, b);
  auto &k = kb.impl();
  auto [x, y] = promote(k, k.use(a), k.use(b), name);
  MValue r;
  if (elementOf(x.getType()).isFloat())
    r = FloatOp::create(k.b, k.loc, x, y);
  else
    r = IntOp::create(k.b, k.loc, x, y);
  return k.wrap(&kb, r);
}

inline Value compare(Value a, Value b, mlir::arith::CmpFPredicate fp,
              mlir::arith::CmpIPredicate ip, const char *name) {
  KernelBuilder &kb = builderOf(a, b);
  auto &k = kb.impl();
  auto [x, y] = promote(k, k.use(a), k.use(b), name);
  MValue r;
  if (elementOf(x.getType()).isFloat())
    r = mlir::arith::CmpFOp::create(k.b, k.loc, fp, x, y);
  else
    r = mlir::arith::CmpIOp::create(k.b, k.loc, ip, x, y);
  return k.wrap(&kb, r);
}

template <typename Op> inline Value unaryMath(Value a, const char *name) {
  auto &k = a.builder().impl();
  MValue x = asFloat32(k, k.use(a), name);
  return k.wrap(&a.builder(), Op::create(k.b, k.loc, x));
}

inline Value logical(Value a, Value b, bool isAnd) {
  KernelBuilder &kb = builderOf(a, b);
  auto &k = kb.impl();
  auto [x, y] = promote(k, k.use(a), k.use(b), isAnd ? "&&" : "||");
  if (!elementOf(x.getType()).isInteger(1))
    k.fail("'&&' and '||' need i1 (comparison) operands");
  MValue r = isAnd ? MValue(mlir::arith::AndIOp::create(k.b, k.loc, x, y))
                   : MValue(mlir::arith::OrIOp::create(k.b, k.loc, x, y));
  return k.wrap(&kb, r);
}

/// A scalar constant of v's element type, at the current location.
inline Value withConstant(Value v, double c) {
  auto &k = v.builder().impl();
  Type elem = elementOf(k.use(v).getType());
  return k.wrap(&v.builder(), scalarConstant(k, c, elem));
}

} // namespace dsl
} // namespace tilejit

#endif // TILEJIT_IR_DSLIMPL_H
