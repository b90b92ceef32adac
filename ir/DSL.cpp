//===- DSL.cpp - the C++ DSL records tile-dialect IR ----------------------===//
//
// Values are mlir::Value handles (their opaque pointers) owned by the
// builder's module. Vars live in a list on the builder: when a loop or an if is
// built, every live Var is threaded through it as an iter_arg / result (the
// ones a body never assigns are removed again by canonicalization).
//
//===----------------------------------------------------------------------===//
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

int64_t Config::get(const std::string &name) const {
  auto it = params.find(name);
  if (it == params.end())
    throw Error("compile-time parameter '" + name +
                "' is not set (have: " + str() + ")");
  return it->second;
}

std::string Config::str() const {
  std::ostringstream os;
  for (auto &[k, v] : params)
    os << k << "=" << v << ",";
  os << "dtype=" << dtypeName(dtype);
  return os.str();
}

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

namespace {

Type elementOf(Type t) {
  if (auto p = mlir::dyn_cast<tile::PtrType>(t))
    return p.getElementType();
  if (auto s = mlir::dyn_cast<mlir::ShapedType>(t))
    return s.getElementType();
  return t;
}

int64_t sizeOf(Type t) {
  if (auto s = mlir::dyn_cast<mlir::RankedTensorType>(t))
    return s.getNumElements();
  return 1;
}

bool isTileType(Type t) { return mlir::isa<mlir::RankedTensorType>(t); }

DType dtypeOf(Type t) {
  return dtypeOfScalar(elementOf(t)).value_or(DType::F32);
}

std::string typeStr(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << t;
  return s;
}

/// Same shape as `like` (scalar or tile) with element type `elem`.
Type withElement(Type like, Type elem) {
  if (auto s = mlir::dyn_cast<mlir::RankedTensorType>(like))
    return mlir::RankedTensorType::get(s.getShape(), elem);
  return elem;
}

} // namespace

//===----------------------------------------------------------------------===//
// Core conversions shared by every operator
//===----------------------------------------------------------------------===//

namespace {

KernelBuilder &builderOf(Value a, Value b) {
  if (a.valid())
    return a.builder();
  if (b.valid())
    return b.builder();
  throw Error("operation on empty Values");
}

/// Converts v's element type to `elem` (same shape).
MValue castTo(KernelBuilder::Impl &k, MValue v, Type elem) {
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
MValue splatTo(KernelBuilder::Impl &k, MValue v, int64_t n) {
  if (isTileType(v.getType()))
    return v;
  auto t = mlir::RankedTensorType::get({n}, v.getType());
  return tile::SplatOp::create(k.b, k.loc, t, v);
}

/// The wider of two element types of the same kind; mixing kinds is an error.
Type commonElement(KernelBuilder::Impl &k, Type a, Type b, const char *op) {
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
std::pair<MValue, MValue> promote(KernelBuilder::Impl &k, MValue a, MValue b,
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

MValue scalarConstant(KernelBuilder::Impl &k, double v, Type elem) {
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
MValue asFloat32(KernelBuilder::Impl &k, MValue v, const char *op) {
  Type e = elementOf(v.getType());
  if (!e.isFloat())
    k.fail(std::string("'") + op + "' needs a float operand, got " +
           typeStr(e));
  return e.isF32() ? v : castTo(k, v, k.b.getF32Type());
}

template <typename FloatOp, typename IntOp>
Value binary(Value a, Value b, const char *name) {
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

Value compare(Value a, Value b, mlir::arith::CmpFPredicate fp,
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

template <typename Op> Value unaryMath(Value a, const char *name) {
  auto &k = a.builder().impl();
  MValue x = asFloat32(k, k.use(a), name);
  return k.wrap(&a.builder(), Op::create(k.b, k.loc, x));
}

Value logical(Value a, Value b, bool isAnd) {
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
Value withConstant(Value v, double c) {
  auto &k = v.builder().impl();
  Type elem = elementOf(k.use(v).getType());
  return k.wrap(&v.builder(), scalarConstant(k, c, elem));
}

} // namespace

//===----------------------------------------------------------------------===//
// Value
//===----------------------------------------------------------------------===//

KernelBuilder &Value::builder() const {
  if (!kb_)
    throw Error("use of an empty tilejit::dsl::Value");
  return *kb_;
}

static Type typeOf(const Value &v) {
  return MValue::getFromOpaquePointer(v.raw()).getType();
}

bool Value::isTile() const { return valid() && isTileType(typeOf(*this)); }
bool Value::isPointer() const {
  return valid() && mlir::isa<tile::PtrType>(typeOf(*this));
}
int64_t Value::size() const { return sizeOf(typeOf(*this)); }
DType Value::dtype() const { return dtypeOf(typeOf(*this)); }

Value Value::to(DType type) const {
  auto &k = builder().impl();
  MValue v = k.use(*this);
  if (mlir::isa<tile::PtrType>(v.getType()))
    k.fail("cannot convert a pointer with .to()");
  return k.wrap(kb_, castTo(k, v, k.elementType(type)));
}

/// The tile a reduction `name` folds: a tile, not of i1, with bf16/f16
/// widened to f32.
static MValue reductionOperand(const Value &v, const char *name) {
  auto &k = v.builder().impl();
  MValue x = k.use(v);
  if (!isTileType(x.getType()))
    k.fail(std::string(".") + name + "() of a scalar");
  Type e = elementOf(x.getType());
  if (e.isInteger(1))
    k.fail(std::string(".") + name + "() of an i1 tile; convert it first");
  if (e.isFloat() && !e.isF32())
    x = castTo(k, x, k.b.getF32Type());
  return x;
}

static Value reduce(const Value &v, ReduceKind kind, const char *name) {
  auto &k = v.builder().impl();
  MValue x = reductionOperand(v, name);
  auto r = tile::ReduceOp::create(k.b, k.loc, elementOf(x.getType()),
                                  ReduceKindAttr::get(k.ctx.get(), kind), x);
  return k.wrap(&v.builder(), r);
}

static Value reduceRows(const Value &v, ReduceKind kind, int64_t cols,
                        const char *name) {
  auto &k = v.builder().impl();
  MValue x = reductionOperand(v, name);
  int64_t n = sizeOf(x.getType());
  if (cols <= 0 || n % cols != 0)
    k.fail(std::string(".") + name + "(" + std::to_string(cols) +
           "): the tile's " + std::to_string(n) +
           " elements are not whole rows");
  auto type = mlir::RankedTensorType::get({n / cols}, elementOf(x.getType()));
  auto r = tile::ReduceRowsOp::create(k.b, k.loc, type,
                                      ReduceKindAttr::get(k.ctx.get(), kind), x,
                                      k.b.getI64IntegerAttr(cols));
  if (mlir::failed(mlir::verify(r)))
    k.fail(std::string(".") + name + "(" + std::to_string(cols) +
           "): the matrix must fit 32 KiB of shared memory");
  return k.wrap(&v.builder(), r);
}

Value Value::sumRows(int64_t cols) const {
  return reduceRows(*this, ReduceKind::Sum, cols, "sumRows");
}
Value Value::maxRows(int64_t cols) const {
  return reduceRows(*this, ReduceKind::Max, cols, "maxRows");
}
Value Value::minRows(int64_t cols) const {
  return reduceRows(*this, ReduceKind::Min, cols, "minRows");
}

Value Value::sum() const { return reduce(*this, ReduceKind::Sum, "sum"); }
Value Value::max() const { return reduce(*this, ReduceKind::Max, "max"); }
Value Value::min() const { return reduce(*this, ReduceKind::Min, "min"); }

//===----------------------------------------------------------------------===//
// Var
//===----------------------------------------------------------------------===//

Var::Var(Value init) : Value(init) {
  builder().impl().liveVars.push_back(this);
}

Var::~Var() {
  if (!kb_)
    return;
  auto &vars = kb_->impl().liveVars;
  vars.erase(std::remove(vars.begin(), vars.end(), this), vars.end());
}

Var &Var::operator=(Value v) {
  auto &k = builder().impl();
  Type want = typeOf(*this), got = k.use(v).getType();
  if (want != got)
    k.fail("assigning a " + typeStr(got) + " to a Var of type " +
           typeStr(want) + "; convert with .to() first");
  impl_ = v.raw();
  return *this;
}

//===----------------------------------------------------------------------===//
// Operators and functions
//===----------------------------------------------------------------------===//

Value operator+(Value a, Value b) {
  if (a.isPointer()) { // pointer arithmetic, in elements
    auto &k = a.builder().impl();
    MValue p = k.use(a), off = k.use(b);
    if (isTileType(off.getType()) || !elementOf(off.getType()).isInteger() ||
        elementOf(off.getType()).isInteger(1))
      k.fail("a pointer can only be advanced by an i32/i64 scalar; tile "
             "offsets go into load/store");
    return k.wrap(&a.builder(),
                  tile::AddPtrOp::create(k.b, k.loc, p.getType(), p, off));
  }
  return binary<mlir::arith::AddFOp, mlir::arith::AddIOp>(a, b, "+");
}
Value operator-(Value a, Value b) {
  return binary<mlir::arith::SubFOp, mlir::arith::SubIOp>(a, b, "-");
}
Value operator*(Value a, Value b) {
  return binary<mlir::arith::MulFOp, mlir::arith::MulIOp>(a, b, "*");
}
Value operator/(Value a, Value b) {
  return binary<mlir::arith::DivFOp, mlir::arith::DivSIOp>(a, b, "/");
}
Value operator%(Value a, Value b) {
  return binary<mlir::arith::RemFOp, mlir::arith::RemSIOp>(a, b, "%");
}
Value operator-(Value a) { return withConstant(a, 0) - a; }

using mlir::arith::CmpFPredicate;
using mlir::arith::CmpIPredicate;
Value operator<(Value a, Value b) {
  return compare(a, b, CmpFPredicate::OLT, CmpIPredicate::slt, "<");
}
Value operator<=(Value a, Value b) {
  return compare(a, b, CmpFPredicate::OLE, CmpIPredicate::sle, "<=");
}
Value operator>(Value a, Value b) {
  return compare(a, b, CmpFPredicate::OGT, CmpIPredicate::sgt, ">");
}
Value operator>=(Value a, Value b) {
  return compare(a, b, CmpFPredicate::OGE, CmpIPredicate::sge, ">=");
}
Value operator==(Value a, Value b) {
  return compare(a, b, CmpFPredicate::OEQ, CmpIPredicate::eq, "==");
}
Value operator!=(Value a, Value b) {
  return compare(a, b, CmpFPredicate::UNE, CmpIPredicate::ne, "!=");
}
Value operator&&(Value a, Value b) { return logical(a, b, true); }
Value operator||(Value a, Value b) { return logical(a, b, false); }
Value operator!(Value a) {
  auto &k = a.builder().impl();
  if (!elementOf(k.use(a).getType()).isInteger(1))
    k.fail("'!' needs an i1 (comparison) operand");
  return a != withConstant(a, 1);
}

#define TILEJIT_DSL_SCALAR_OVERLOADS(op)                                       \
  Value operator op(Value a, double b) { return a op withConstant(a, b); }     \
  Value operator op(double a, Value b) { return withConstant(b, a) op b; }
TILEJIT_DSL_SCALAR_OVERLOADS(+)
TILEJIT_DSL_SCALAR_OVERLOADS(-)
TILEJIT_DSL_SCALAR_OVERLOADS(*)
TILEJIT_DSL_SCALAR_OVERLOADS(/)
TILEJIT_DSL_SCALAR_OVERLOADS(<)
TILEJIT_DSL_SCALAR_OVERLOADS(<=)
TILEJIT_DSL_SCALAR_OVERLOADS(>)
TILEJIT_DSL_SCALAR_OVERLOADS(>=)
TILEJIT_DSL_SCALAR_OVERLOADS(==)
TILEJIT_DSL_SCALAR_OVERLOADS(!=)
#undef TILEJIT_DSL_SCALAR_OVERLOADS

Value max(Value a, Value b) {
  return binary<mlir::arith::MaximumFOp, mlir::arith::MaxSIOp>(a, b, "max");
}
Value min(Value a, Value b) {
  return binary<mlir::arith::MinimumFOp, mlir::arith::MinSIOp>(a, b, "min");
}
Value minNum(Value a, Value b) {
  return binary<mlir::arith::MinNumFOp, mlir::arith::MinSIOp>(a, b, "minNum");
}
Value copysign(Value a, Value b) {
  auto &k = builderOf(a, b).impl();
  if (!elementOf(k.use(a).getType()).isFloat() ||
      !elementOf(k.use(b).getType()).isFloat())
    k.fail("'copysign' needs float operands");
  return binary<mlir::math::CopySignOp, mlir::math::CopySignOp>(a, b,
                                                                "copysign");
}
Value fma(Value a, Value b, Value c) {
  KernelBuilder &kb = builderOf(a, b);
  auto &k = kb.impl();
  MValue x = asFloat32(k, k.use(a), "fma"), y = asFloat32(k, k.use(b), "fma"),
         z = asFloat32(k, k.use(c), "fma");
  std::tie(x, y) = promote(k, x, y, "fma");
  std::tie(x, z) = promote(k, x, z, "fma");
  std::tie(y, z) = promote(k, y, z, "fma");
  return k.wrap(&kb, mlir::math::FmaOp::create(k.b, k.loc, x, y, z));
}
/// Approximate functions allowed (fastmath<afn>): the GPU uses its ex2 unit,
/// as Triton does.
template <typename Op> Value approximateMath(Value a, const char *name) {
  auto &k = a.builder().impl();
  MValue x = asFloat32(k, k.use(a), name);
  return k.wrap(&a.builder(),
                Op::create(k.b, k.loc, x, mlir::arith::FastMathFlags::afn));
}
Value exp(Value a) { return approximateMath<mlir::math::ExpOp>(a, "exp"); }
Value exp2(Value a) { return approximateMath<mlir::math::Exp2Op>(a, "exp2"); }
Value log(Value a) { return unaryMath<mlir::math::LogOp>(a, "log"); }
Value abs(Value a) { return unaryMath<mlir::math::AbsFOp>(a, "abs"); }
Value sqrt(Value a) { return unaryMath<mlir::math::SqrtOp>(a, "sqrt"); }
Value tanh(Value a) { return unaryMath<mlir::math::TanhOp>(a, "tanh"); }

Value sign(Value a) {
  auto &k = a.builder().impl();
  Value x =
      a.builder().impl().wrap(&a.builder(), asFloat32(k, k.use(a), "sign"));
  return where(x > 0.0, 1.0, where(x < 0.0, -1.0, withConstant(x, 0.0)));
}

Value where(Value cond, Value a, Value b) {
  KernelBuilder &kb = builderOf(a, b);
  auto &k = kb.impl();
  MValue c = k.use(cond);
  if (!elementOf(c.getType()).isInteger(1))
    k.fail("where() needs an i1 (comparison) condition");
  auto [x, y] = promote(k, k.use(a), k.use(b), "where");
  int64_t n = std::max(sizeOf(c.getType()), sizeOf(x.getType()));
  bool tile = isTileType(c.getType()) || isTileType(x.getType());
  if (tile) {
    if (sizeOf(c.getType()) != sizeOf(x.getType()) && isTileType(c.getType()) &&
        isTileType(x.getType()))
      k.fail("where() condition and values have different tile sizes");
    c = splatTo(k, c, n);
    x = splatTo(k, x, n);
    y = splatTo(k, y, n);
  }
  return k.wrap(&kb, mlir::arith::SelectOp::create(k.b, k.loc, c, x, y));
}
Value where(Value cond, Value a, double b) {
  return where(cond, a, withConstant(a, b));
}
Value where(Value cond, double a, Value b) {
  return where(cond, withConstant(b, a), b);
}

//===----------------------------------------------------------------------===//
// KernelBuilder
//===----------------------------------------------------------------------===//

KernelBuilder::KernelBuilder(const std::string &kernelName,
                             const Config &config)
    : impl_(std::make_unique<Impl>(kernelName, config, makeTilejitContext())) {
  auto &k = *impl_;
  k.module = mlir::ModuleOp::create(k.loc);
  k.b.setInsertionPointToEnd(k.module->getBody());
  k.func = mlir::func::FuncOp::create(k.b, k.loc, kernelName,
                                      k.b.getFunctionType({}, {}));
  mlir::Block *entry = k.func.addEntryBlock();
  k.b.setInsertionPointToEnd(entry);
  auto ret = mlir::func::ReturnOp::create(k.b, k.loc);
  k.b.setInsertionPoint(ret);

  int64_t warps =
      config.params.count("num_warps") ? config.get("num_warps") : 4;
  llvm::SmallVector<mlir::NamedAttribute> constexprs;
  for (auto &[name, v] : config.params)
    constexprs.push_back(k.b.getNamedAttr(name, k.b.getI64IntegerAttr(v)));
  k.func->setAttr(attr::kKernel, k.b.getUnitAttr());
  k.func->setAttr(attr::kNumWarps, k.b.getI64IntegerAttr(warps));
  k.func->setAttr(attr::kClusterSize, k.b.getI64IntegerAttr(clusterSize()));
  // The row schedules the compiler applies (compiler/TileSplitRows.cpp,
  // TileKeepRows.cpp), chosen like any parameter.
  auto param = [&](const char *name) {
    auto it = config.params.find(name);
    return it == config.params.end() ? int64_t(0) : it->second;
  };
  if (int64_t split = param("SPLIT_ROWS"); split > 1) {
    if (clusterSize() > 1)
      throw Error(kernelName + ": SPLIT_ROWS and CLUSTER_SIZE both ask for "
                               "a cluster; a kernel takes one of them");
    if (split > 8)
      throw Error(kernelName + ": SPLIT_ROWS = " + std::to_string(split) +
                  " is more than the 8 programs of a portable cluster");
    k.func->setAttr(attr::kClusterSize, k.b.getI64IntegerAttr(split));
    k.func->setAttr(attr::kSplitRows, k.b.getI64IntegerAttr(split));
  }
  if (param("KEEP_ROW"))
    k.func->setAttr(attr::kKeepRow, k.b.getI64IntegerAttr(1));
  if (param("LOAD_AHEAD"))
    k.func->setAttr(attr::kLoadAhead, k.b.getI64IntegerAttr(1));
  if (int64_t ahead = param("KEEP_COPY_AHEAD"); ahead != 0) {
    if (ahead < 1 || ahead > 7)
      throw Error(kernelName + ": KEEP_COPY_AHEAD = " + std::to_string(ahead) +
                  " is not 0 (off) or 1 to 7 (the copy groups in flight)");
    k.func->setAttr(attr::kCopyAhead, k.b.getI64IntegerAttr(ahead));
  }
  if (config.params.count("DOT_STAGES")) {
    int64_t stages = param("DOT_STAGES");
    if (stages < 2 || stages > 8)
      throw Error(kernelName + ": DOT_STAGES = " + std::to_string(stages) +
                  " is not 2 to 8 (the blocks in flight in a dot loop)");
    k.func->setAttr(attr::kDotStages, k.b.getI64IntegerAttr(stages));
  }
  if (param("DOT_SPECIALIZE"))
    k.func->setAttr(attr::kDotSpecialize, k.b.getUnitAttr());
  if (int64_t extent = param("ROW_EXTENT"); extent > 0)
    k.func->setAttr(attr::kRowExtent, k.b.getI64IntegerAttr(extent));
  if (config.params.count("min_programs_per_sm")) {
    int64_t programs = config.get("min_programs_per_sm");
    if (programs < 0)
      throw Error(kernelName +
                  ": min_programs_per_sm must be 0 (no minimum) "
                  "or more, not " +
                  std::to_string(programs));
    k.func->setAttr(attr::kMinProgramsPerSm, k.b.getI64IntegerAttr(programs));
  }
  k.func->setAttr(attr::kConstexprs, k.b.getDictionaryAttr(constexprs));
}

KernelBuilder::~KernelBuilder() = default;

const std::string &KernelBuilder::name() const { return impl_->name; }
const Config &KernelBuilder::config() const { return impl_->config; }

int64_t KernelBuilder::param(const std::string &name) const {
  auto it = impl_->config.params.find(name);
  if (it == impl_->config.params.end())
    impl_->fail("compile-time parameter '" + name + "' is not set");
  return it->second;
}

Value KernelBuilder::paramValue(const std::string &name, DType type,
                                SourceLoc loc) {
  auto &k = *impl_;
  k.at(loc);
  param(name);
  if (type != DType::I32 && type != DType::I64)
    k.fail("paramValue('" + name + "') must be i32 or i64");
  return k.wrap(
      this, tile::ConstexprOp::create(k.b, k.loc, k.elementType(type), name));
}

static Value addArgument(KernelBuilder &kb, Type t, const std::string &name) {
  auto &k = kb.impl();
  k.checkOpen();
  unsigned index = k.func.getNumArguments();
  if (failed(k.func.insertArgument(index, t, {}, k.loc)))
    k.fail("cannot add argument");
  k.func.setArgAttr(index, attr::kArgName, k.b.getStringAttr(name));
  return k.wrap(&kb, k.func.getArgument(index));
}

Value KernelBuilder::pointerArg(const std::string &name, DType elementType) {
  if (elementType == DType::I1)
    impl_->fail("pointer argument '" + name + "' to i1 is not supported");
  return addArgument(
      *this,
      tile::PtrType::get(impl_->ctx.get(), impl_->elementType(elementType)),
      name);
}

Value KernelBuilder::aliasedPointerArg(const std::string &name,
                                       DType elementType) {
  Value p = pointerArg(name, elementType);
  auto &k = *impl_;
  k.func.setArgAttr(k.func.getNumArguments() - 1, attr::kMayAlias,
                    mlir::UnitAttr::get(k.ctx.get()));
  return p;
}

Value KernelBuilder::scalarArg(const std::string &name, DType type) {
  if (type != DType::I32 && type != DType::I64 && type != DType::F32)
    impl_->fail("scalar argument '" + name + "' must be i32, i64 or f32");
  return addArgument(*this, impl_->elementType(type), name);
}

Value KernelBuilder::programId(int axis, SourceLoc loc) {
  auto &k = *impl_;
  k.at(loc);
  if (axis < 0 || axis > 2)
    k.fail("programId axis must be 0, 1 or 2");
  return k.wrap(this,
                tile::ProgramIdOp::create(k.b, k.loc, k.b.getI32Type(), axis));
}

std::vector<Value> KernelBuilder::clusterReduce(ClusterOp combine,
                                                const std::vector<Value> &xs,
                                                SourceLoc loc) {
  auto &k = *impl_;
  k.at(loc);
  if (xs.empty())
    k.fail("clusterReduce of no values");
  llvm::SmallVector<MValue> srcs;
  for (const Value &x : xs) {
    MValue v = k.use(x);
    Type t = v.getType();
    if (isTileType(t) || mlir::isa<tile::PtrType>(t))
      k.fail("clusterReduce combines scalars; reduce a tile with .sum()/.max() "
             "first");
    if (t.isFloat() && !t.isF32())
      v = castTo(k, v, k.b.getF32Type());
    if (!srcs.empty() && v.getType() != srcs.front().getType())
      k.fail("clusterReduce operands must share one type, got " +
             typeStr(srcs.front().getType()) + " and " + typeStr(v.getType()));
    srcs.push_back(v);
  }
  ReduceKind kind = combine == ClusterOp::Sum   ? ReduceKind::Sum
                    : combine == ClusterOp::Max ? ReduceKind::Max
                                                : ReduceKind::Min;
  llvm::SmallVector<Type> types(srcs.size(), srcs.front().getType());
  auto op = tile::ClusterReduceOp::create(
      k.b, k.loc, types, ReduceKindAttr::get(k.ctx.get(), kind), srcs);
  std::vector<Value> out;
  for (MValue r : op.getResults())
    out.push_back(k.wrap(this, r));
  return out;
}

std::pair<Value, Value> KernelBuilder::softmaxFold(Value m, Value d, Value x,
                                                   SourceLoc loc) {
  auto &k = *impl_;
  k.at(loc);
  MValue vm = k.use(m), vd = k.use(d), vx = k.use(x);
  if (!isTileType(vm.getType()) || vm.getType() != vd.getType() ||
      vm.getType() != vx.getType() ||
      !mlir::cast<mlir::RankedTensorType>(vm.getType()).getElementType().isF32())
    k.fail("softmaxFold needs three f32 tiles of one size, got " +
           typeStr(vm.getType()) + ", " + typeStr(vd.getType()) + " and " +
           typeStr(vx.getType()));
  auto op = tile::SoftmaxFoldOp::create(k.b, k.loc, vm.getType(), vm.getType(),
                                        vm, vd, vx);
  return {k.wrap(this, op.getMNext()), k.wrap(this, op.getDNext())};
}

std::pair<Value, Value> KernelBuilder::softmaxTotal(Value m, Value d,
                                                    SourceLoc loc) {
  auto &k = *impl_;
  k.at(loc);
  MValue vm = k.use(m), vd = k.use(d);
  if (!isTileType(vm.getType()) || vm.getType() != vd.getType() ||
      !mlir::cast<mlir::RankedTensorType>(vm.getType()).getElementType().isF32())
    k.fail("softmaxTotal needs two f32 tiles of one size, got " +
           typeStr(vm.getType()) + " and " + typeStr(vd.getType()));
  auto f32 = k.b.getF32Type();
  auto op = tile::SoftmaxTotalOp::create(k.b, k.loc, f32, f32, vm, vd);
  return {k.wrap(this, op.getMax()), k.wrap(this, op.getSum())};
}

Value KernelBuilder::dot(Value a, Value b, Value acc, int64_t M, int64_t N,
                         int64_t K, SourceLoc loc) {
  auto &k = *impl_;
  k.at(loc);
  MValue va = k.use(a), vb = k.use(b), vc = k.use(acc);
  auto sizeOk = [&](MValue v, int64_t n) {
    return isTileType(v.getType()) && sizeOf(v.getType()) == n;
  };
  if (!sizeOk(va, M * K) || !sizeOk(vb, K * N) || !sizeOk(vc, M * N))
    k.fail("dot(a, b, acc, M = " + std::to_string(M) +
           ", N = " + std::to_string(N) + ", K = " + std::to_string(K) +
           ") needs tiles of M*K, K*N and M*N elements, got " +
           typeStr(va.getType()) + ", " + typeStr(vb.getType()) + ", " +
           typeStr(vc.getType()));
  Type ea = elementOf(va.getType()), eb = elementOf(vb.getType());
  if (ea != eb || !(ea.isBF16() || ea.isF16()))
    k.fail("dot needs a and b both bf16 or both f16, got " + typeStr(ea) +
           " and " + typeStr(eb));
  if (!elementOf(vc.getType()).isF32())
    k.fail("dot accumulates into an f32 tile, got " + typeStr(vc.getType()));
  auto op = tile::DotOp::create(
      k.b, k.loc, vc.getType(), va, vb, vc, k.b.getI64IntegerAttr(M),
      k.b.getI64IntegerAttr(N), k.b.getI64IntegerAttr(K));
  if (mlir::failed(mlir::verify(op)))
    k.fail("dot(M = " + std::to_string(M) + ", N = " + std::to_string(N) +
           ", K = " + std::to_string(K) + "): " +
           "M and K must be multiples of 16, N of 8");
  return k.wrap(this, op);
}

Value KernelBuilder::loadBlock(const TensorDescriptor &view, Value row0,
                              Value col0, int64_t R, int64_t C,
                              SourceLoc loc) {
  auto &k = *impl_;
  k.at(loc);
  MValue p = k.use(view.ptr);
  if (!mlir::isa<tile::PtrType>(p.getType()))
    k.fail("loadBlock needs a pointer in its TensorDescriptor");
  auto index = [&](Value v, const char *what) {
    MValue x = k.use(v);
    if (isTileType(x.getType()) || !elementOf(x.getType()).isInteger() ||
        elementOf(x.getType()).getIntOrFloatBitWidth() < 32)
      k.fail(std::string("loadBlock: ") + what +
             " must be an i32 or i64 scalar, got " + typeStr(x.getType()));
    return castTo(k, x, k.b.getI64Type());
  };
  const int64_t most = kMaxElementsPerThread * 1024; // 1024 threads at most
  if (R <= 0 || C <= 0 || R > most / C)
    k.fail("loadBlock: a block of " + std::to_string(R) + " x " +
           std::to_string(C) + " elements: rows and columns must be at "
           "least 1 and the block at most " + std::to_string(most) +
           " elements");
  Type elem = mlir::cast<tile::PtrType>(p.getType()).getElementType();
  auto type = mlir::RankedTensorType::get({R * C}, elem);
  auto op = tile::LoadBlockOp::create(
      k.b, k.loc, type, p, index(view.rows, "rows"), index(view.cols, "cols"),
      index(view.rowStride, "rowStride"), index(view.colStride, "colStride"),
      index(row0, "row0"), index(col0, "col0"), k.b.getI64IntegerAttr(R),
      k.b.getI64IntegerAttr(C));
  if (mlir::failed(mlir::verify(op)))
    k.fail("loadBlock: blocks hold i32, i64, bf16, f16 or f32 elements, "
           "not " + typeStr(elem));
  return k.wrap(this, op);
}

Value KernelBuilder::broadcastRows(Value v, int64_t cols, SourceLoc loc) {
  auto &k = *impl_;
  k.at(loc);
  MValue x = k.use(v);
  if (!isTileType(x.getType()) || cols <= 0)
    k.fail("broadcastRows needs a tile and cols > 0");
  auto type = mlir::RankedTensorType::get({sizeOf(x.getType()) * cols},
                                          elementOf(x.getType()));
  auto r = tile::BroadcastRowsOp::create(k.b, k.loc, type, x,
                                         k.b.getI64IntegerAttr(cols));
  if (mlir::failed(mlir::verify(r)))
    k.fail("broadcastRows(" + std::to_string(cols) +
           "): the matrix must fit 32 KiB of shared memory");
  return k.wrap(this, r);
}

void KernelBuilder::assumeAlignedVectors() {
  auto &k = *impl_;
  k.checkOpen();
  k.func->setAttr(attr::kAlignedVectors, mlir::UnitAttr::get(k.ctx.get()));
}

int64_t KernelBuilder::clusterSize() const {
  auto it = impl_->config.params.find("CLUSTER_SIZE");
  return it == impl_->config.params.end() ? 1 : it->second;
}

int64_t KernelBuilder::threadGroup(int64_t tileSize,
                                   DType narrowestAccessed) const {
  auto &k = *impl_;
  int64_t threads =
      32 * k.func->getAttrOfType<mlir::IntegerAttr>(attr::kNumWarps).getInt();
  if (tileSize <= 0 || tileSize % threads != 0)
    k.fail("threadGroup: a tile of " + std::to_string(tileSize) +
           " elements is not a multiple of the " + std::to_string(threads) +
           " threads");
  return defaultLayoutGroup(16 / int64_t(dtypeSize(narrowestAccessed)),
                            tileSize / threads);
}

Value KernelBuilder::sharedArray(int64_t n, DType type, SourceLoc loc) {
  auto &k = *impl_;
  k.at(loc);
  k.checkOpen();
  if (type == DType::I1)
    k.fail("sharedArray of i1 is not supported");
  if (n <= 0)
    k.fail("sharedArray(" + std::to_string(n) + ") needs a positive size");
  if (k.b.getInsertionBlock()->getParentOp() != k.func.getOperation())
    k.fail("sharedArray must be called outside loops and branches (the "
           "array lives for the whole program)");
  auto total = k.func->getAttrOfType<mlir::IntegerAttr>(attr::kSharedBytes);
  int64_t offset = total ? total.getInt() : 0;
  int64_t bytes = n * int64_t(dtypeSize(type));
  int64_t end = offset + (bytes + 15) / 16 * 16;
  if (end > kMaxSharedArrayBytes)
    k.fail("sharedArray(" + std::to_string(n) + " x " + dtypeName(type) +
           "): the kernel's shared arrays would take " + std::to_string(end) +
           " bytes, more than the " + std::to_string(kMaxSharedArrayBytes) +
           " a block may have");
  k.func->setAttr(attr::kSharedBytes, k.b.getI64IntegerAttr(end));
  auto ptrType = tile::PtrType::get(k.ctx.get(), k.elementType(type));
  return k.wrap(this,
                tile::SharedAllocOp::create(k.b, k.loc, ptrType, n, offset));
}

void KernelBuilder::barrier(SourceLoc loc) {
  impl_->statement<tile::BarrierOp>(loc);
}

Value KernelBuilder::numPrograms(int axis, SourceLoc loc) {
  auto &k = *impl_;
  k.at(loc);
  if (axis < 0 || axis > 2)
    k.fail("numPrograms axis must be 0, 1 or 2");
  return k.wrap(
      this, tile::NumProgramsOp::create(k.b, k.loc, k.b.getI32Type(), axis));
}

/// Tiles live in registers, n / threads elements per thread: a size that
/// cannot fit is an error here, not a compile that runs for minutes.
static void checkTileSize(KernelBuilder::Impl &k, int64_t n, const char *what) {
  int64_t threads =
      32 * k.func->getAttrOfType<mlir::IntegerAttr>(attr::kNumWarps).getInt();
  if (n <= 0)
    k.fail(std::string(what) + "(" + std::to_string(n) +
           ") needs a positive size (is a BLOCK_SIZE-like parameter 0?)");
  if (n > kMaxElementsPerThread * threads)
    k.fail(std::string(what) + "(" + std::to_string(n) +
           "): " + std::to_string(ceilDiv(n, threads)) +
           " elements per thread over " + std::to_string(threads) +
           " threads; at most " + std::to_string(kMaxElementsPerThread) +
           " fit in registers (a smaller tile, or more num_warps)");
}

Value KernelBuilder::arange(int64_t n, SourceLoc loc) {
  auto &k = *impl_;
  k.at(loc);
  k.checkOpen();
  checkTileSize(k, n, "arange");
  auto t = mlir::RankedTensorType::get({n}, k.b.getI32Type());
  return k.wrap(this, tile::ArangeOp::create(k.b, k.loc, t));
}

Value KernelBuilder::constant(double v, DType type, SourceLoc loc) {
  auto &k = *impl_;
  k.at(loc);
  k.checkOpen();
  return k.wrap(this, scalarConstant(k, v, k.elementType(type)));
}

Value KernelBuilder::full(int64_t n, Value v, SourceLoc loc) {
  auto &k = *impl_;
  k.at(loc);
  MValue s = k.use(v);
  if (isTileType(s.getType()))
    k.fail("full() takes a scalar");
  checkTileSize(k, n, "full");
  return k.wrap(this, splatTo(k, s, n));
}

/// Checks a pointer and i32/i64 offsets for load/store.
static std::pair<MValue, MValue> access(KernelBuilder::Impl &k, Value ptr,
                                        Value offsets, const char *op) {
  MValue p = k.use(ptr), off = k.use(offsets);
  if (!mlir::isa<tile::PtrType>(p.getType()))
    k.fail(std::string(op) + "() needs a pointer, got " + typeStr(p.getType()));
  Type e = elementOf(off.getType());
  if (!e.isInteger(32) && !e.isInteger(64))
    k.fail(std::string(op) + "() offsets must be i32 or i64, got " +
           typeStr(off.getType()));
  return {p, off};
}

static MValue maskFor(KernelBuilder::Impl &k, Value mask, MValue offsets,
                      const char *op) {
  MValue m = k.use(mask);
  if (!elementOf(m.getType()).isInteger(1))
    k.fail(std::string(op) + "() mask must be i1 (a comparison), got " +
           typeStr(m.getType()));
  if (isTileType(offsets.getType()))
    m = splatTo(k, m, sizeOf(offsets.getType()));
  if (sizeOf(m.getType()) != sizeOf(offsets.getType()) ||
      isTileType(m.getType()) != isTileType(offsets.getType()))
    k.fail(std::string(op) + "() mask and offsets have different shapes");
  return m;
}

Value KernelBuilder::load(Value ptr, Value offsets, SourceLoc loc) {
  auto &k = *impl_;
  k.at(loc);
  auto [p, off] = access(k, ptr, offsets, "load");
  Type elem = mlir::cast<tile::PtrType>(p.getType()).getElementType();
  auto r = tile::LoadOp::create(k.b, k.loc, withElement(off.getType(), elem), p,
                                off, MValue(), MValue());
  return k.wrap(this, r);
}

Value KernelBuilder::load(Value ptr, Value offsets, Mask mask, double other,
                          SourceLoc loc) {
  if (!mask)
    return load(ptr, offsets, loc);
  auto &k = *impl_;
  k.at(loc);
  auto [p, off] = access(k, ptr, offsets, "load");
  MValue m = maskFor(k, *mask, off, "load");
  Type elem = mlir::cast<tile::PtrType>(p.getType()).getElementType();
  MValue o = scalarConstant(k, other, elem);
  auto r = tile::LoadOp::create(k.b, k.loc, withElement(off.getType(), elem), p,
                                off, m, o);
  return k.wrap(this, r);
}

static void storeImpl(KernelBuilder &kb, Value ptr, Value offsets, Value value,
                      const Value *mask) {
  auto &k = kb.impl();
  auto [p, off] = access(k, ptr, offsets, "store");
  MValue v = k.use(value);
  if (isTileType(v.getType()) && !isTileType(off.getType()))
    k.fail("store() of a tile needs tile offsets");
  if (isTileType(v.getType()) && sizeOf(v.getType()) != sizeOf(off.getType()))
    k.fail("store() value and offsets have different tile sizes");
  v = castTo(k, v, mlir::cast<tile::PtrType>(p.getType()).getElementType());
  if (isTileType(off.getType()))
    v = splatTo(k, v, sizeOf(off.getType()));
  MValue m = mask ? maskFor(k, *mask, off, "store") : MValue();
  tile::StoreOp::create(k.b, k.loc, p, off, v, m);
}

void KernelBuilder::store(Value ptr, Value offsets, Value value,
                          SourceLoc loc) {
  impl_->at(loc);
  storeImpl(*this, ptr, offsets, value, nullptr);
}

void KernelBuilder::store(Value ptr, Value offsets, Value value, Mask mask,
                          SourceLoc loc) {
  impl_->at(loc);
  storeImpl(*this, ptr, offsets, value, mask ? &*mask : nullptr);
}

void KernelBuilder::copyAsync(Value dst, Value dstOffsets, Value src,
                              Value srcOffsets, Mask mask, SourceLoc loc) {
  auto &k = *impl_;
  k.at(loc);
  auto [d, dOff] = access(k, dst, dstOffsets, "copyAsync");
  auto [s, sOff] = access(k, src, srcOffsets, "copyAsync");
  if (d.getType() != s.getType())
    k.fail("copyAsync() between pointers of different element types (" +
           typeStr(d.getType()) + " and " + typeStr(s.getType()) + ")");
  if (!isTileType(dOff.getType()) || !isTileType(sOff.getType()))
    k.fail("copyAsync() copies tiles: both offsets must be tiles");
  if (sizeOf(dOff.getType()) != sizeOf(sOff.getType()))
    k.fail("copyAsync() offsets have different tile sizes");
  MValue m = mask ? maskFor(k, *mask, sOff, "copyAsync") : MValue();
  tile::CopyAsyncOp::create(k.b, k.loc, d, dOff, s, sOff, m);
}

void KernelBuilder::prefetchL2(Value ptr, Value offset, Value count,
                               SourceLoc loc) {
  auto &k = *impl_;
  k.at(loc);
  auto [p, off] = access(k, ptr, offset, "prefetchL2");
  MValue n = k.use(count);
  if (isTileType(off.getType()) || isTileType(n.getType()))
    k.fail("prefetchL2() takes a scalar offset and count, not tiles");
  if (!n.getType().isInteger(32) && !n.getType().isInteger(64))
    k.fail("prefetchL2() count must be i32 or i64, got " +
           typeStr(n.getType()));
  if (pointerRoot(p).getDefiningOp<tile::SharedAllocOp>())
    k.fail("prefetchL2() fetches global memory, not a shared array");
  tile::PrefetchL2Op::create(k.b, k.loc, p, off, n);
}

void KernelBuilder::commitCopies(SourceLoc loc) {
  impl_->statement<tile::CopyCommitOp>(loc);
}

static void createCopyWait(KernelBuilder::Impl &k, int64_t pending,
                           bool laneOnly) {
  k.checkOpen();
  if (pending < 0 || pending > 7)
    k.fail(std::string(laneOnly ? "waitOwnCopies(" : "waitCopies(") +
           std::to_string(pending) + "): pending must be 0 to 7");
  tile::CopyWaitOp::create(k.b, k.loc, pending, laneOnly);
}

void KernelBuilder::waitCopies(int64_t pending, SourceLoc loc) {
  impl_->at(loc);
  createCopyWait(*impl_, pending, /*laneOnly=*/false);
}

void KernelBuilder::waitOwnCopies(int64_t pending, SourceLoc loc) {
  impl_->at(loc);
  createCopyWait(*impl_, pending, /*laneOnly=*/true);
}

/// Current values of `vars`, as the operands of a yield.
static llvm::SmallVector<MValue> currentValues(KernelBuilder::Impl &k,
                                               llvm::ArrayRef<Var *> vars,
                                               llvm::ArrayRef<Type> types) {
  llvm::SmallVector<MValue> values;
  for (auto [var, type] : llvm::zip(vars, types)) {
    MValue v = k.use(*var);
    if (v.getType() != type)
      k.fail("a Var changed type inside a loop or if body (" + typeStr(type) +
             " -> " + typeStr(v.getType()) + ")");
    values.push_back(v);
  }
  return values;
}

/// The live Vars on entry to a loop or if body, with their values and types
/// there: the state the region carries.
namespace {
struct Carried {
  std::vector<Var *> vars;
  llvm::SmallVector<MValue> values;
  llvm::SmallVector<Type> types;
};
} // namespace
static Carried carriedState(KernelBuilder::Impl &k) {
  Carried c{k.liveVars, {}, {}};
  for (Var *v : c.vars) {
    c.values.push_back(k.use(*v));
    c.types.push_back(c.values.back().getType());
  }
  return c;
}

void KernelBuilder::forRange(Value lo, Value hi, Value step,
                             const std::function<void(Value)> &body,
                             SourceLoc loc) {
  auto &k = *impl_;
  k.at(loc);
  MValue l = k.use(lo), h = k.use(hi), s = k.use(step);
  for (MValue v : {l, h, s})
    if (isTileType(v.getType()) || !v.getType().isInteger() ||
        v.getType().isInteger(1))
      k.fail("forRange bounds and step must be i32/i64 scalars");
  Type t = commonElement(k, commonElement(k, l.getType(), h.getType(), "for"),
                         s.getType(), "for");
  l = castTo(k, l, t);
  h = castTo(k, h, t);
  s = castTo(k, s, t);

  auto [carried, inits, types] = carriedState(k);
  auto forOp = mlir::scf::ForOp::create(k.b, k.loc, l, h, s, inits);
  OpBuilder::InsertionGuard guard(k.b);
  mlir::Block *blk = forOp.getBody();
  if (!blk->empty())
    blk->back().erase(); // the default empty yield
  k.b.setInsertionPointToEnd(blk);
  for (auto [var, arg] : llvm::zip(carried, forOp.getRegionIterArgs()))
    *var = k.wrap(this, arg);
  body(k.wrap(this, forOp.getInductionVar()));
  auto yields = currentValues(k, carried, types);
  mlir::scf::YieldOp::create(k.b, k.loc, yields);
  for (auto [var, res] : llvm::zip(carried, forOp.getResults()))
    var->Value::operator=(k.wrap(this, res));
}

void KernelBuilder::forRange(int64_t lo, Value hi, int64_t step,
                             const std::function<void(Value)> &body,
                             SourceLoc loc) {
  impl_->at(loc);
  DType t = hi.dtype();
  forRange(constant(lo, t, loc), hi, constant(step, t, loc), body, loc);
}

void KernelBuilder::forTiles(
    Value lo, Value hi, int64_t n, int64_t unroll,
    const std::function<void(const std::vector<Value> &,
                             const std::vector<Mask> &)> &body,
    SourceLoc loc) {
  walkTiles(lo, hi, n, unroll, /*backward=*/false, body, loc);
}

void KernelBuilder::forTilesBackward(
    Value lo, Value hi, int64_t n, int64_t unroll,
    const std::function<void(const std::vector<Value> &,
                             const std::vector<Mask> &)> &body,
    SourceLoc loc) {
  walkTiles(lo, hi, n, unroll, /*backward=*/true, body, loc);
}

void KernelBuilder::walkTiles(
    Value lo, Value hi, int64_t n, int64_t unroll, bool backward,
    const std::function<void(const std::vector<Value> &,
                             const std::vector<Mask> &)> &body,
    SourceLoc loc) {
  impl_->at(loc);
  if (n < 1 || unroll < 1 || unroll > 16)
    impl_->fail("forTiles needs a tile width of at least 1 and an unroll in "
                "1..16 (got " +
                std::to_string(n) + " and " + std::to_string(unroll) + ")");
  if (lo.isTile() || hi.isTile() || lo.dtype() != DType::I32 ||
      hi.dtype() != DType::I32)
    impl_->fail("forTiles bounds must be i32 scalars (offsets are i32 tiles)");
  // The whole steps, then the whole tiles left one at a time, then the
  // partial tile: a tail of 1.2 tiles costs one unmasked and one masked
  // tile where a masked step of `unroll` tiles cost about twice `unroll`
  // unmasked ones (in SASS: 528 instructions for a masked step of 2 tiles
  // against 276 for a whole one).
  // The ends are lo for an empty or reversed range.
  Value span = max(hi - lo, constant(0, hi.dtype(), loc));
  auto wholeEnd = [&](int64_t width) {
    Value w = constant(double(width), hi.dtype(), loc);
    return lo + span / w * w;
  };
  Value stepsEnd = wholeEnd(n * unroll);
  Value tilesEnd = unroll > 1 ? wholeEnd(n) : stepsEnd;
  auto walk = [&](Value from, Value to, int64_t tiles, bool whole) {
    Value step = constant(double(n * tiles), hi.dtype(), loc);
    // Backward, step i of [from, to) becomes its mirror image.
    Value last = whole && backward ? to - step : Value();
    forRange(
        from, to, step,
        [&](Value i) {
          Value first = last.valid() ? last - (i - from) : i;
          std::vector<Value> offs;
          std::vector<Mask> masks;
          for (int64_t u = 0; u < tiles; ++u) {
            offs.push_back(first + double(u * n) + arange(n, loc));
            masks.push_back(whole ? std::nullopt : Mask(offs.back() < hi));
          }
          body(offs, masks);
        },
        loc);
  };
  walk(lo, stepsEnd, unroll, true);
  if (unroll > 1)
    walk(stepsEnd, tilesEnd, 1, true);
  walk(tilesEnd, hi, 1, false);
}

void KernelBuilder::ifThen(Value cond, const std::function<void()> &thenBody,
                           const std::function<void()> &elseBody,
                           SourceLoc loc) {
  auto &k = *impl_;
  k.at(loc);
  MValue c = k.use(cond);
  if (isTileType(c.getType()) || !c.getType().isInteger(1))
    k.fail("ifThen needs a scalar i1 condition");
  Carried state = carriedState(k);
  const std::vector<Var *> &carried = state.vars;
  const llvm::SmallVector<MValue> &before = state.values;
  const llvm::SmallVector<Type> &types = state.types;
  auto ifOp = mlir::scf::IfOp::create(k.b, k.loc, types, c,
                                      /*addThenBlock=*/true,
                                      /*addElseBlock=*/true);
  auto buildBranch = [&](mlir::Block *blk, const std::function<void()> &fn) {
    OpBuilder::InsertionGuard guard(k.b);
    if (!blk->empty())
      blk->back().erase();
    k.b.setInsertionPointToEnd(blk);
    for (auto [var, v] : llvm::zip(carried, before))
      var->Value::operator=(k.wrap(this, v));
    if (fn)
      fn();
    mlir::scf::YieldOp::create(k.b, k.loc, currentValues(k, carried, types));
  };
  buildBranch(ifOp.thenBlock(), thenBody);
  buildBranch(ifOp.elseBlock(), elseBody);
  for (auto [var, res] : llvm::zip(carried, ifOp.getResults()))
    var->Value::operator=(k.wrap(this, res));
}

TileModule KernelBuilder::finish() {
  auto &k = *impl_;
  k.checkOpen();
  collectDiagnostics(*k.ctx, "kernel '" + k.name + "' failed verification",
                     [&] { return mlir::verify(*k.module); });
  k.finished = true;
  auto impl = std::make_shared<TileModule::Impl>();
  impl->context = k.ctx;
  impl->module = std::move(k.module);
  impl->kernelName = k.name;
  return TileModule(impl);
}

} // namespace dsl
} // namespace tilejit
