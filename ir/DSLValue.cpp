//===- DSLValue.cpp - Value, Var and the DSL's operators ----------------===//
//
// Each operator promotes its operands as Triton does (DSLImpl.h) and
// records one op at the builder's insertion point.
//
//===----------------------------------------------------------------------===//
#include "ir/DSLImpl.h"

namespace tilejit {
namespace dsl {

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
           "): the row values must fit 32 KiB of shared memory");
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
/// Approximate functions allowed (fastmath<afn>): the GPU uses its ex2 and
/// lg2 units.
template <typename Op> Value approximateMath(Value a, const char *name) {
  auto &k = a.builder().impl();
  MValue x = asFloat32(k, k.use(a), name);
  return k.wrap(&a.builder(),
                Op::create(k.b, k.loc, x, mlir::arith::FastMathFlags::afn));
}
Value exp(Value a) { return approximateMath<mlir::math::ExpOp>(a, "exp"); }
Value exp2(Value a) { return approximateMath<mlir::math::Exp2Op>(a, "exp2"); }
Value log(Value a) { return approximateMath<mlir::math::LogOp>(a, "log"); }
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


} // namespace dsl
} // namespace tilejit
