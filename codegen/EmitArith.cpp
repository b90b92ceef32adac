//===- EmitArith.cpp - constants, arith and math ops as C expressions -------===//
//
// Each op becomes one element expression per thread element (define), in
// float for bf16/f16 (CudaEmitter.h, conventions).
//
//===----------------------------------------------------------------------===//
#include "codegen/KernelEmitter.h"

namespace tilejit {
namespace emit {

void KernelEmitter::emitConstant(arith::ConstantOp op) {
  Type t = op.getType();
  Type et = elemType(t);
  if (!isa<VectorType>(t))
    return define(op, op.getResult(), [&](const std::string &) {
      return literal(op.getValue(), t, op);
    });
  auto dense = dyn_cast<DenseElementsAttr>(op.getValue());
  if (!dense)
    fail(op, "only dense vector constants are supported");
  if (dense.isSplat()) {
    std::string lit = literal(dense.getSplatValue<Attribute>(), et, op);
    return define(op, op.getResult(), [&](const std::string &) { return lit; });
  }
  std::vector<std::string> elems;
  for (Attribute a : dense.getValues<Attribute>())
    elems.push_back(literal(a, et, op));
  std::string n = bind(op.getResult());
  stmt(declaration(t, n, op) + " = {" + llvm::join(elems, ", ") + "};");
}

bool KernelEmitter::emitArith(Operation *op) {
  if (op->getName().getDialectNamespace() != "arith")
    return false;
  Value res = op->getResult(0);
  Type rt = elemType(res.getType());
  Type at = op->getNumOperands() ? elemType(op->getOperand(0).getType()) : rt;

  auto floatBin = [&](const char *sym) {
    requireFloat(rt, op);
    define(op, res, [&](const std::string &e) {
      return fromF32(toF32(r(op, 0, e), rt) + " " + sym + " " +
                         toF32(r(op, 1, e), rt),
                     rt);
    });
  };
  auto floatCall = [&](const char *fn) {
    requireFloat(rt, op);
    define(op, res, [&](const std::string &e) {
      return fromF32(std::string(fn) + "(" + toF32(r(op, 0, e), rt) + ", " +
                         toF32(r(op, 1, e), rt) + ")",
                     rt);
    });
  };
  auto intBin = [&](const char *sym) {
    if (rt.isInteger(1))
      fail(op, "not supported on i1");
    define(op, res, [&](const std::string &e) {
      return r(op, 0, e) + " " + sym + " " + r(op, 1, e);
    });
  };
  auto logic = [&](const char *sym) {
    define(op, res, [&](const std::string &e) {
      return r(op, 0, e) + " " + sym + " " + r(op, 1, e);
    });
  };
  // Unsigned integer op: compute on the unsigned type, convert back.
  auto unsignedBin = [&](const char *sym) {
    if (rt.isInteger(1))
      fail(op, "not supported on i1");
    std::string ut = unsignedType(rt, op), st = scalarType(rt, op);
    define(op, res, [&](const std::string &e) {
      return "(" + st + ")((" + ut + ")" + r(op, 0, e) + " " + sym + " (" + ut +
             ")" + r(op, 1, e) + ")";
    });
  };
  auto minMax = [&](const char *cmp, bool isUnsigned) {
    if (rt.isInteger(1))
      fail(op, "not supported on i1");
    std::string cast = isUnsigned ? "(" + unsignedType(rt, op) + ")" : "";
    define(op, res, [&](const std::string &e) {
      std::string a = r(op, 0, e), b = r(op, 1, e);
      return cast + a + " " + cmp + " " + cast + b + " ? " + a + " : " + b;
    });
  };
  // Signed view of an integer operand (i1 true is -1).
  auto signedInt = [&](const std::string &x, Type t) {
    return t.isInteger(1) ? "(" + x + " ? -1 : 0)" : x;
  };

  return llvm::TypeSwitch<Operation *, bool>(op)
      .Case<arith::AddFOp>([&](auto) {
        floatBin("+");
        return true;
      })
      .Case<arith::SubFOp>([&](auto) {
        floatBin("-");
        return true;
      })
      .Case<arith::MulFOp>([&](auto) {
        floatBin("*");
        return true;
      })
      .Case<arith::DivFOp>([&](auto) {
        floatBin("/");
        return true;
      })
      .Case<arith::RemFOp>([&](auto) {
        floatCall("fmodf");
        return true;
      })
      .Case<arith::MaximumFOp>([&](auto) {
        floatCall("tj_maximumf");
        return true;
      })
      .Case<arith::MinimumFOp>([&](auto) {
        floatCall("tj_minimumf");
        return true;
      })
      .Case<arith::MaxNumFOp>([&](auto) {
        floatCall("fmaxf");
        return true;
      })
      .Case<arith::MinNumFOp>([&](auto) {
        floatCall("fminf");
        return true;
      })
      .Case<math::CopySignOp>([&](auto) {
        floatCall("copysignf");
        return true;
      })
      .Case<arith::NegFOp>([&](auto) {
        requireFloat(rt, op);
        define(op, res, [&](const std::string &e) {
          return fromF32("-" + toF32(r(op, 0, e), rt), rt);
        });
        return true;
      })
      .Case<arith::AddIOp>([&](auto) {
        intBin("+");
        return true;
      })
      .Case<arith::SubIOp>([&](auto) {
        intBin("-");
        return true;
      })
      .Case<arith::MulIOp>([&](auto) {
        intBin("*");
        return true;
      })
      .Case<arith::DivSIOp>([&](auto) {
        intBin("/");
        return true;
      })
      .Case<arith::RemSIOp>([&](auto) {
        intBin("%");
        return true;
      })
      .Case<arith::ShLIOp>([&](auto) {
        intBin("<<");
        return true;
      })
      .Case<arith::ShRSIOp>([&](auto) {
        intBin(">>");
        return true;
      })
      .Case<arith::DivUIOp>([&](auto) {
        unsignedBin("/");
        return true;
      })
      .Case<arith::RemUIOp>([&](auto) {
        unsignedBin("%");
        return true;
      })
      .Case<arith::ShRUIOp>([&](auto) {
        unsignedBin(">>");
        return true;
      })
      .Case<arith::AndIOp>([&](auto) {
        logic("&");
        return true;
      })
      .Case<arith::OrIOp>([&](auto) {
        logic("|");
        return true;
      })
      .Case<arith::XOrIOp>([&](auto) {
        logic("^");
        return true;
      })
      .Case<arith::MaxSIOp>([&](auto) {
        minMax(">", false);
        return true;
      })
      .Case<arith::MinSIOp>([&](auto) {
        minMax("<", false);
        return true;
      })
      .Case<arith::MaxUIOp>([&](auto) {
        minMax(">", true);
        return true;
      })
      .Case<arith::MinUIOp>([&](auto) {
        minMax("<", true);
        return true;
      })
      .Case<arith::CmpFOp>([&](arith::CmpFOp c) {
        requireFloat(at, op);
        using P = arith::CmpFPredicate;
        P pred = c.getPredicate();
        define(op, res, [&](const std::string &e) -> std::string {
          std::string a = toF32(r(op, 0, e), at), b = toF32(r(op, 1, e), at);
          switch (pred) {
          case P::AlwaysFalse:
            return "false";
          case P::OEQ:
            return a + " == " + b;
          case P::OGT:
            return a + " > " + b;
          case P::OGE:
            return a + " >= " + b;
          case P::OLT:
            return a + " < " + b;
          case P::OLE:
            return a + " <= " + b;
          case P::ONE:
            return "(" + a + " < " + b + " || " + a + " > " + b + ")";
          case P::ORD:
            return "(" + a + " == " + a + " && " + b + " == " + b + ")";
          case P::UEQ:
            return "!(" + a + " < " + b + " || " + a + " > " + b + ")";
          case P::UGT:
            return "!(" + a + " <= " + b + ")";
          case P::UGE:
            return "!(" + a + " < " + b + ")";
          case P::ULT:
            return "!(" + a + " >= " + b + ")";
          case P::ULE:
            return "!(" + a + " > " + b + ")";
          case P::UNE:
            return a + " != " + b;
          case P::UNO:
            return "(" + a + " != " + a + " || " + b + " != " + b + ")";
          case P::AlwaysTrue:
            return "true";
          }
          fail(op, "unknown predicate");
        });
        return true;
      })
      .Case<arith::CmpIOp>([&](arith::CmpIOp c) {
        using P = arith::CmpIPredicate;
        P pred = c.getPredicate();
        bool isUnsigned = pred == P::ult || pred == P::ule || pred == P::ugt ||
                          pred == P::uge;
        std::string cast = isUnsigned ? "(" + unsignedType(at, op) + ")" : "";
        const char *sym = "==";
        switch (pred) {
        case P::eq:
          sym = "==";
          break;
        case P::ne:
          sym = "!=";
          break;
        case P::slt:
        case P::ult:
          sym = "<";
          break;
        case P::sle:
        case P::ule:
          sym = "<=";
          break;
        case P::sgt:
        case P::ugt:
          sym = ">";
          break;
        case P::sge:
        case P::uge:
          sym = ">=";
          break;
        }
        bool signedCmp = !isUnsigned && pred != P::eq && pred != P::ne;
        define(op, res, [&](const std::string &e) {
          std::string a = r(op, 0, e), b = r(op, 1, e);
          if (signedCmp) {
            a = signedInt(a, at);
            b = signedInt(b, at);
          }
          return cast + a + " " + sym + " " + cast + b;
        });
        return true;
      })
      .Case<arith::SelectOp>([&](auto) {
        define(op, res, [&](const std::string &e) {
          return r(op, 0, e) + " ? " + r(op, 1, e) + " : " + r(op, 2, e);
        });
        return true;
      })
      .Case<arith::ExtFOp, arith::TruncFOp>([&](auto) {
        requireFloat(at, op);
        requireFloat(rt, op);
        // bf16 pairs widen from their 32-bit word (tj_bf16_at).
        auto k = vecLen(op->getOperand(0).getType(), op);
        if (at.isBF16() && rt.isF32() && k && *k % 2 == 0) {
          std::string x = name(op->getOperand(0), op);
          define(op, res, [&](const std::string &e) {
            return "tj_bf16_at(" + x + ", " + e + ")";
          });
          return true;
        }
        define(op, res, [&](const std::string &e) {
          return fromF32(toF32(r(op, 0, e), at), rt);
        });
        return true;
      })
      .Case<arith::ExtSIOp, arith::ExtUIOp, arith::TruncIOp, arith::IndexCastOp,
            arith::IndexCastUIOp>([&](auto) {
        bool zext = isa<arith::ExtUIOp, arith::IndexCastUIOp>(op);
        std::string st = scalarType(rt, op);
        define(op, res, [&](const std::string &e) -> std::string {
          std::string a = r(op, 0, e);
          if (rt.isInteger(1))
            return "(" + a + " & 1) != 0";
          if (at.isInteger(1))
            return zext ? "(" + st + ")" + a
                        : "(" + st + ")(" + a + " ? -1 : 0)";
          if (zext && at.isInteger(32) && !rt.isInteger(32))
            return "(" + st + ")(unsigned)" + a;
          return "(" + st + ")" + a;
        });
        return true;
      })
      .Case<arith::SIToFPOp, arith::UIToFPOp>([&](auto) {
        requireFloat(rt, op);
        bool isUnsigned = isa<arith::UIToFPOp>(op);
        define(op, res, [&](const std::string &e) -> std::string {
          std::string a = r(op, 0, e);
          bool wide = at.isInteger(64) || at.isIndex();
          if (at.isInteger(1))
            a = isUnsigned ? "(" + a + " ? 1 : 0)" : "(" + a + " ? -1 : 0)";
          else if (isUnsigned)
            a = "(" + unsignedType(at, op) + ")" + a;
          if (rt.isF32())
            return "(float)" + a;
          std::string fn = isUnsigned ? (wide ? "__ull2" : "__uint2")
                                      : (wide ? "__ll2" : "__int2");
          return fn + (rt.isBF16() ? "bfloat16_rn(" : "half_rn(") + a + ")";
        });
        return true;
      })
      .Case<arith::FPToSIOp, arith::FPToUIOp>([&](auto) {
        requireFloat(at, op);
        if (rt.isInteger(1))
          fail(op, "conversion to i1 is not supported");
        bool isUnsigned = isa<arith::FPToUIOp>(op);
        std::string st = scalarType(rt, op);
        define(op, res, [&](const std::string &e) {
          std::string a = toF32(r(op, 0, e), at);
          if (isUnsigned)
            return "(" + st + ")(" + unsignedType(rt, op) + ")" + a;
          return "(" + st + ")" + a;
        });
        return true;
      })
      .Case<arith::BitcastOp>([&](auto) {
        const char *fn = nullptr;
        if (at.isF32() && rt.isInteger(32))
          fn = "__float_as_int";
        else if (at.isInteger(32) && rt.isF32())
          fn = "__int_as_float";
        if (!fn)
          fail(op, "only f32 <-> i32 bitcasts are supported");
        define(op, res, [&](const std::string &e) {
          return std::string(fn) + "(" + r(op, 0, e) + ")";
        });
        return true;
      })
      .Default([&](Operation *) { return false; });
}

bool KernelEmitter::emitMath(Operation *op) {
  if (op->getName().getDialectNamespace() != "math")
    return false;
  static const llvm::StringMap<const char *> kFloatFns = {
      {"math.exp", "expf"},           {"math.exp2", "exp2f"},
      {"math.expm1", "expm1f"},       {"math.log", "logf"},
      {"math.log2", "log2f"},         {"math.log10", "log10f"},
      {"math.log1p", "log1pf"},       {"math.absf", "fabsf"},
      {"math.tanh", "tanhf"},         {"math.sqrt", "sqrtf"},
      {"math.rsqrt", "rsqrtf"},       {"math.sin", "sinf"},
      {"math.cos", "cosf"},           {"math.tan", "tanf"},
      {"math.atan", "atanf"},         {"math.erf", "erff"},
      {"math.floor", "floorf"},       {"math.ceil", "ceilf"},
      {"math.round", "roundf"},       {"math.roundeven", "rintf"},
      {"math.trunc", "truncf"},       {"math.cbrt", "cbrtf"},
      {"math.powf", "powf"},          {"math.atan2", "atan2f"},
      {"math.copysign", "copysignf"}, {"math.fma", "fmaf"}};
  Value res = op->getResult(0);
  Type rt = elemType(res.getType());
  StringRef opName = op->getName().getStringRef();
  if (opName == "math.absi") {
    if (!(rt.isInteger(32) || rt.isInteger(64)))
      fail(op, "math.absi needs i32 or i64");
    define(op, res, [&](const std::string &e) {
      return std::string(rt.isInteger(32) ? "abs(" : "llabs(") + r(op, 0, e) +
             ")";
    });
    return true;
  }
  auto it = kFloatFns.find(opName);
  if (it == kFloatFns.end())
    return false;
  const char *fn = it->second;
  // fastmath<afn> on exp and exp2: the hardware ex2 approximation (as
  // Triton's), with denormal results flushed to zero; on log, lg2's.
  if (auto fm = op->getAttrOfType<arith::FastMathFlagsAttr>("fastmath");
      fm && arith::bitEnumContainsAll(fm.getValue(), arith::FastMathFlags::afn))
    fn = opName == "math.exp"    ? "tj_fast_exp"
         : opName == "math.exp2" ? "tj_fast_exp2"
         : opName == "math.log"  ? "tj_fast_log"
                                 : fn;
  requireFloat(rt, op);
  for (Value v : op->getOperands())
    if (elemType(v.getType()) != rt)
      fail(op, "operand and result types differ");
  define(op, res, [&](const std::string &e) {
    std::vector<std::string> args;
    for (unsigned i = 0; i < op->getNumOperands(); ++i)
      args.push_back(toF32(r(op, i, e), rt));
    return fromF32(std::string(fn) + "(" + llvm::join(args, ", ") + ")", rt);
  });
  return true;
}


} // namespace emit
} // namespace tilejit
