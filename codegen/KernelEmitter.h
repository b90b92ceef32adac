//===- KernelEmitter.h - prints one kernel's CUDA C++ ------------*- C++ -*-===//
//
// The emitter's state for one kernel and its helpers (names, element
// expressions, types, #line directives), shared by the printers of each op
// family: CudaEmitter.cpp (the kernel, its blocks and control flow),
// EmitArith.cpp (constants, arith and math), EmitSimt.cpp (vector and simt
// ops: thread ids, reductions, loads, stores, copies, dot and dot loops,
// cluster combines). Internal to codegen/.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_CODEGEN_KERNELEMITTER_H
#define TILEJIT_CODEGEN_KERNELEMITTER_H

#include "tilejit/Error.h"
#include "tilejit/ir/Dialects.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/raw_ostream.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>

namespace tilejit {
namespace emit {

using namespace mlir;

//===----------------------------------------------------------------------===//
// Literals
//===----------------------------------------------------------------------===//

/// The prelude's combiner struct of a reduction.
inline const char *combinerName(ReduceKind kind) {
  return kind == ReduceKind::Sum   ? "tj_sum_op"
         : kind == ReduceKind::Max ? "tj_max_op"
                                   : "tj_min_op";
}

inline std::string floatLiteral(float f) {
  char buf[48];
  if (std::isnan(f) || std::isinf(f)) {
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    std::snprintf(buf, sizeof buf, "__uint_as_float(0x%08xu)", bits);
    return buf;
  }
  std::snprintf(buf, sizeof buf, "%.9g", f); // round-trips every float
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos)
    s += ".0";
  return s + "f";
}

inline std::string int32Literal(int64_t v) {
  if (v == INT32_MIN)
    return "(-2147483647 - 1)";
  return std::to_string(v);
}

inline std::string int64Literal(int64_t v) {
  if (v == INT64_MIN)
    return "(-9223372036854775807LL - 1)";
  return std::to_string(v) + "LL";
}

inline bool isIdentifier(StringRef s) {
  if (s.empty() || !(std::isalpha((unsigned char)s[0]) || s[0] == '_'))
    return false;
  for (char c : s)
    if (!(std::isalnum((unsigned char)c) || c == '_'))
      return false;
  return true;
}

inline std::string escapeForString(StringRef s) {
  std::string r;
  for (char c : s) {
    if (c == '\\' || c == '"')
      r += '\\';
    if (c == '\n')
      continue;
    r += c;
  }
  return r;
}


//===----------------------------------------------------------------------===//
// KernelEmitter
//===----------------------------------------------------------------------===//

using ElemExpr = std::function<std::string(const std::string &e)>;

class KernelEmitter {
public:
  KernelEmitter(std::string &out, func::FuncOp func) : out(out), func(func) {}

  void emit();

private:
  std::string &out;
  func::FuncOp func;
  std::string kernelName;
  int64_t threads = 0;
  int64_t clusterSize = 1;
  bool alignedVectors = false; // attr::kAlignedVectors: no alignment checks
  unsigned clusterOps = 0;     // tile.cluster_reduce ops printed so far
  int indent = 0;
  bool inGroupFallback = false; // printing forEachGroup's scalar fallback
  bool resident = false;        // simt.resident: the body loops over programs
  unsigned nextId = 0;
  llvm::DenseMap<Value, std::string> names;
  // #line tracking: the file and line the compiler assumes for the next
  // physical line; presumedLine < 0 until the first directive.
  std::string curFile;
  int64_t presumedLine = -1;
  std::string pendingFile; // empty: no location pending
  int64_t pendingLine = 0;

  /// A cluster combine's first mbarrier in tj_cluster_bar and its slot
  /// buffers (simt-cluster-barriers: 1, or 2 used in turn in a loop).
  int64_t clusterMbarrier(tile::ClusterReduceOp op) const {
    return clusterAttr(op, attr::kClusterMbarrier);
  }
  int64_t clusterBuffers(tile::ClusterReduceOp op) const {
    return clusterAttr(op, attr::kClusterBuffers);
  }
  int64_t clusterAttr(tile::ClusterReduceOp op, const char *name) const {
    auto a = op->getAttrOfType<IntegerAttr>(name);
    if (!a)
      fail(op, std::string("missing '") + name +
                   "' (run simt-cluster-barriers)");
    return a.getInt();
  }

  //--- errors ---------------------------------------------------------------
  [[noreturn]] void fail(Operation *op, const Twine &why) const {
    std::string msg;
    llvm::raw_string_ostream os(msg);
    os << "emitCuda: kernel '" << kernelName << "'";
    if (op) {
      os << ": cannot print '" << op->getName().getStringRef() << "'";
      if (auto loc = fileLoc(op->getLoc()))
        os << " at " << loc->getFilename().getValue() << ":" << loc->getLine()
           << ":" << loc->getColumn();
    }
    os << ": " << why.str();
    throw Error(msg);
  }

  //--- output ---------------------------------------------------------------
  void line(const std::string &text) {
    out.append(2 * indent, ' ');
    out += text;
    out += '\n';
    if (presumedLine >= 0)
      ++presumedLine;
  }

  static std::optional<FileLineColLoc> fileLoc(Location loc) {
    std::optional<FileLineColLoc> found;
    loc->walk([&](Location l) {
      if (auto f = dyn_cast<FileLineColLoc>(l)) {
        found = f;
        return WalkResult::interrupt();
      }
      return WalkResult::advance();
    });
    return found;
  }

  /// Makes `op`'s source line the pending location: the next stmt() (the
  /// op's main statement, e.g. the body of an element loop) is preceded by a
  /// `#line` directive unless the compiler would already assume that line.
  void locate(Operation *op) {
    pendingFile.clear();
    auto loc = fileLoc(op->getLoc());
    // "-" is what the parser calls an unnamed buffer: not worth a directive.
    if (!loc || loc->getLine() == 0 || loc->getFilename().getValue().empty() ||
        loc->getFilename().getValue() == "-")
      return;
    pendingFile = loc->getFilename().getValue().str();
    pendingLine = loc->getLine();
  }

  /// A line that holds the current op's main statement.
  void stmt(const std::string &text) {
    if (!pendingFile.empty()) {
      // The file name is repeated only when it changes.
      if (pendingFile != curFile) {
        out += "#line " + std::to_string(pendingLine) + " \"" +
               escapeForString(pendingFile) + "\"\n";
      } else if (presumedLine != pendingLine) {
        out += "#line " + std::to_string(pendingLine) + "\n";
      }
      curFile = pendingFile;
      presumedLine = pendingLine;
      pendingFile.clear();
    }
    line(text);
  }

  //--- values and types -----------------------------------------------------
  std::string freshName() { return "v" + std::to_string(nextId++); }

  std::string bind(Value v) {
    std::string n = freshName();
    names[v] = n;
    return n;
  }
  void bindAs(Value v, std::string name) { names[v] = std::move(name); }

  /// A copy, not a reference into `names`: a later bind() may grow the map
  /// and move its strings (a reference then dangled in declareCopy).
  std::string name(Value v, Operation *user) const {
    auto it = names.find(v);
    if (it == names.end())
      fail(user, "operand has no C variable (defined in an unsupported way)");
    return it->second;
  }

  /// The C type of a scalar (element) type.
  std::string scalarType(Type t, Operation *op) const {
    if (t.isInteger(1))
      return "bool";
    if (t.isInteger(32))
      return "int";
    if (t.isInteger(64) || t.isIndex())
      return "long long";
    if (t.isF32())
      return "float";
    if (t.isF16())
      return "__half";
    if (t.isBF16())
      return "__nv_bfloat16";
    if (auto ptr = dyn_cast<tile::PtrType>(t))
      return scalarType(ptr.getElementType(), op) + " *";
    std::string s;
    llvm::raw_string_ostream os(s);
    os << "unsupported type " << t;
    fail(op, s);
  }

  /// K for vector<K x T>, nullopt for scalars.
  std::optional<int64_t> vecLen(Type t, Operation *op) const {
    auto vt = dyn_cast<VectorType>(t);
    if (!vt)
      return std::nullopt;
    if (vt.getRank() != 1 || vt.isScalable())
      fail(op, "only fixed 1-D vectors are supported");
    return vt.getNumElements();
  }

  static Type elemType(Type t) {
    if (auto vt = dyn_cast<VectorType>(t))
      return vt.getElementType();
    return t;
  }

  /// `T vN` or `T vN[K]` (pointers: `T *vN`).
  std::string declaration(Type t, const std::string &n, Operation *op) const {
    std::string ct = scalarType(elemType(t), op);
    std::string sep = ct.back() == '*' ? "" : " ";
    if (auto k = vecLen(t, op))
      return ct + sep + n + "[" + std::to_string(*k) + "]";
    return ct + sep + n;
  }

  /// `vN[e]` for a vector, `vN` for a scalar.
  std::string ref(Value v, const std::string &e, Operation *user) const {
    const std::string &n = name(v, user);
    if (isa<VectorType>(v.getType()))
      return n + "[" + e + "]";
    return n;
  }

  //--- float helpers (bf16/f16 math goes through float) ----------------------
  static std::string toF32(const std::string &x, Type t) {
    if (t.isBF16())
      return "__bfloat162float(" + x + ")";
    if (t.isF16())
      return "__half2float(" + x + ")";
    return x;
  }
  static std::string fromF32(const std::string &x, Type t) {
    if (t.isBF16())
      return "__float2bfloat16_rn(" + x + ")";
    if (t.isF16())
      return "__float2half_rn(" + x + ")";
    return x;
  }
  void requireFloat(Type t, Operation *op) const {
    if (!(t.isF32() || t.isF16() || t.isBF16()))
      fail(op, "only f32, f16 and bf16 floats are supported");
  }
  std::string unsignedType(Type t, Operation *op) const {
    if (t.isInteger(32))
      return "unsigned";
    if (t.isInteger(64) || t.isIndex())
      return "unsigned long long";
    if (t.isInteger(1))
      return "unsigned";
    fail(op, "unsupported integer type");
  }

  std::string zeroOf(Type t, Operation *op) const {
    if (t.isInteger(1))
      return "false";
    if (t.isInteger(32))
      return "0";
    if (t.isInteger(64) || t.isIndex())
      return "0LL";
    if (t.isF32() || t.isF16() || t.isBF16())
      return fromF32("0.0f", t);
    fail(op, "no zero value for this type");
  }

  std::string literal(Attribute a, Type t, Operation *op) const {
    if (auto ia = dyn_cast<IntegerAttr>(a)) {
      const APInt &v = ia.getValue();
      if (t.isInteger(1))
        return v.isZero() ? "false" : "true";
      if (t.isInteger(32))
        return int32Literal(v.getSExtValue());
      if (t.isInteger(64) || t.isIndex())
        return int64Literal(v.getSExtValue());
    }
    if (auto fa = dyn_cast<FloatAttr>(a))
      return floatConstant(fa.getValue(), t, op);
    fail(op, "unsupported constant");
  }
  std::string floatConstant(APFloat v, Type t, Operation *op) const {
    requireFloat(t, op);
    bool lostInfo = false;
    // f16/bf16 -> f32 is exact.
    v.convert(APFloat::IEEEsingle(), APFloat::rmNearestTiesToEven, &lostInfo);
    return fromF32(floatLiteral(v.convertToFloat()), t);
  }

  //--- statements -------------------------------------------------------------
  /// Runs body(e) for each element index: an unrolled loop over `e`.
  void forEach(int64_t k,
               const std::function<void(const std::string &)> &body) {
    if (k == 1) {
      body("0");
      return;
    }
    line("#pragma unroll");
    line("for (int e = 0; e < " + std::to_string(k) + "; ++e)");
    ++indent;
    body("e");
    --indent;
  }

  /// The `vec` group width simt-vectorize-access put on a load or store.
  static int64_t accessWidth(Operation *op) {
    auto w = op->getAttrOfType<IntegerAttr>(attr::kAccessVec);
    return w ? w.getInt() : 1;
  }

  /// Loops over the groups of `width` adjacent elements of a vector access.
  /// A group is one vector access (vectorAccess(address, bytes)) when its
  /// address is aligned (checked at run time unless the kernel promised it)
  /// and its mask all true; otherwise each element goes through element(e).
  /// `tj_g` is the group's first element. A copy passes its destination as
  /// `ptr2`/`offsets2`: both addresses must then be aligned.
  void forEachGroup(
      Operation *op, Value ptr, Value offsets, Value mask, Type elem,
      int64_t width,
      const std::function<std::string(const std::string &, const std::string &)>
          &vectorAccess,
      const std::function<std::string(const std::string &)> &element,
      Value ptr2 = {}, Value offsets2 = {}) {
    int64_t k = *vecLen(offsets.getType(), op);
    std::string w = std::to_string(width);
    std::string bytes = std::to_string(width * elemBytes(elem, op));
    line("#pragma unroll");
    line("for (int tj_g = 0; tj_g < " + std::to_string(k) + "; tj_g += " + w +
         ") {");
    ++indent;
    std::string addr = name(ptr, op) + " + " + ref(offsets, "tj_g", op);
    auto aligned = [&](const std::string &a) {
      return "(reinterpret_cast<unsigned long long>(" + a + ") % " + bytes +
             ") == 0";
    };
    std::string check = "true";
    if (!alignedVectors) {
      check = aligned(addr);
      if (ptr2)
        check += " && " +
                 aligned(name(ptr2, op) + " + " + ref(offsets2, "tj_g", op));
    }
    stmt("bool tj_full = " + check + ";");
    if (mask) {
      line("#pragma unroll");
      line("for (int tj_j = 0; tj_j < " + w + "; ++tj_j)");
      ++indent;
      stmt("tj_full = tj_full && " + ref(mask, "tj_g + tj_j", op) + ";");
      --indent;
    }
    stmt("if (tj_full) {");
    ++indent;
    stmt(vectorAccess(addr, bytes));
    --indent;
    line("} else {");
    ++indent;
    line("#pragma unroll");
    line("for (int tj_j = 0; tj_j < " + w + "; ++tj_j)");
    ++indent;
    inGroupFallback = true;
    stmt(element("tj_g + tj_j"));
    inGroupFallback = false;
    indent -= 2;
    line("}");
    --indent;
    line("}");
  }

  /// A vector access's mask `m & broadcast(s)` (either order) as m and the
  /// name of the uniform s, so that the access is printed under one
  /// `if (s)` rather than testing s with every element (a GEMM's read of C
  /// when beta != 0); any other mask as itself and "".
  std::pair<Value, std::string> splitUniformMask(Value mask, Operation *op) {
    auto andi = mask ? mask.getDefiningOp<arith::AndIOp>() : arith::AndIOp();
    if (!andi)
      return {mask, ""};
    for (auto [m, b] : {std::pair(andi.getLhs(), andi.getRhs()),
                        std::pair(andi.getRhs(), andi.getLhs())})
      if (auto bc = b.getDefiningOp<vector::BroadcastOp>())
        if (!isa<VectorType>(bc.getSource().getType()))
          return {m, name(bc.getSource(), op)};
    return {mask, ""};
  }

  /// Element e of an access's offsets. In the element-by-element fallback
  /// of a vector access, whose offsets are consecutive within each group
  /// (simt-vectorize-access), the group's first offset plus the element's
  /// place in it: only the groups' first offsets stay live in registers.
  std::string offsetRef(Value offsets, const std::string &e, Operation *op) {
    if (inGroupFallback)
      return "(" + ref(offsets, "tj_g", op) + " + tj_j)";
    return ref(offsets, e, op);
  }

  int64_t elemBytes(Type t, Operation *op) const {
    if (t.isInteger(1))
      fail(op, "vector access of i1 is not supported");
    return t.getIntOrFloatBitWidth() / 8;
  }

  /// Defines `result` element-wise from expr(e).
  void define(Operation *op, Value result, const ElemExpr &expr) {
    std::string n = bind(result);
    if (auto k = vecLen(result.getType(), op)) {
      line(declaration(result.getType(), n, op) + ";");
      forEach(*k, [&](const std::string &e) {
        stmt(n + "[" + e + "] = " + expr(e) + ";");
      });
      return;
    }
    stmt(declaration(result.getType(), n, op) + " = " + expr("") + ";");
  }

  /// dst = src (arrays element-wise).
  void assign(Operation *op, Type t, const std::string &dst,
              const std::string &src) {
    if (auto k = vecLen(t, op)) {
      forEach(*k, [&](const std::string &e) {
        stmt(dst + "[" + e + "] = " + src + "[" + e + "];");
      });
      return;
    }
    stmt(dst + " = " + src + ";");
  }

  /// Declares a variable for `v` initialized from `src` (a C variable name).
  void declareCopy(Operation *op, Value v, const std::string &src) {
    std::string n = bind(v);
    if (vecLen(v.getType(), op)) {
      line(declaration(v.getType(), n, op) + ";");
      assign(op, v.getType(), n, src);
      return;
    }
    stmt(declaration(v.getType(), n, op) + " = " + src + ";");
  }

  /// Parallel assignment targets[i] = sources[i] (scf.yield).
  void yieldTo(Operation *yield, ArrayRef<std::string> targets,
               ArrayRef<Value> targetValues) {
    locate(yield);
    auto sources = yield->getOperands();
    if (sources.size() != targets.size())
      fail(yield, "yields the wrong number of values");
    // A source that is itself a target (e.g. a loop-carried value yielded in
    // another position) could be overwritten before it is read: copy all
    // sources to temporaries first in that case.
    bool clash = false;
    for (auto [j, src] : llvm::enumerate(sources))
      for (auto [i, tv] : llvm::enumerate(targetValues))
        if (i != j && src == tv)
          clash = true;
    std::vector<std::string> from;
    for (Value src : sources) {
      const std::string &s = name(src, yield);
      if (!clash) {
        from.push_back(s);
        continue;
      }
      std::string tmp = freshName();
      stmt(declaration(src.getType(), tmp, yield) +
           (vecLen(src.getType(), yield) ? ";" : " = " + s + ";"));
      if (vecLen(src.getType(), yield))
        assign(yield, src.getType(), tmp, s);
      from.push_back(tmp);
    }
    for (auto [i, src] : llvm::enumerate(sources))
      if (from[i] != targets[i])
        assign(yield, src.getType(), targets[i], from[i]);
  }

  //--- ops --------------------------------------------------------------------
  void emitBlock(Block &block, ArrayRef<std::string> yieldTargets,
                 ArrayRef<Value> yieldTargetValues);
  void emitOp(Operation *op);
  void emitFor(scf::ForOp op);
  void emitIf(scf::IfOp op);
  void emitConstant(arith::ConstantOp op);
  bool emitArith(Operation *op);
  bool emitMath(Operation *op);
  bool emitVector(Operation *op);
  bool emitSimt(Operation *op);
  void emitClusterReduce(tile::ClusterReduceOp op);
  void emitNextProgramDotArgs(simt::DotLoopOp op);
  /// A resident kernel's tj_pid_x, _y, _z: program `prog` of the grid
  /// tj_grid_x x tj_grid_y x tj_grid_z, x fastest.
  void declareProgramIds(const std::string &prog) {
    line("const int tj_pid_x = (int)(" + prog + " % tj_grid_x), tj_pid_y = "
         "(int)(" + prog + " / tj_grid_x % tj_grid_y), tj_pid_z = (int)(" +
         prog + " / tj_grid_x / tj_grid_y);");
  }

  std::string r(Operation *op, unsigned i, const std::string &e) const {
    return ref(op->getOperand(i), e, op);
  }
};

} // namespace emit
} // namespace tilejit

#endif // TILEJIT_CODEGEN_KERNELEMITTER_H
