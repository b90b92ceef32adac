//===- CudaEmitter.cpp - SIMT-level MLIR to CUDA C++ ----------------------===//
//
// One KernelEmitter per kernel walks the (structured, single-block) body in
// order and prints one C statement per op. See CudaEmitter.h for the
// conventions of the emitted code.
//
//===----------------------------------------------------------------------===//
#include "tilejit/codegen/CudaEmitter.h"

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

using namespace mlir;

namespace tilejit {

namespace {

// The CUDA C++ of codegen/cuda/: the prelude every kernel gets, and the
// pieces printed only into kernels that use them.
const char *const kPrelude =
#include "Prelude.cuh.inc"
    ;
const char *const kCluster =
#include "Cluster.cuh.inc"
    ;
const char *const kMatrix =
#include "Matrix.cuh.inc"
    ;

// tile.dot_loop's CUDA C++ (codegen/cuda/), printed where a kernel has one.
const char *const kDotLoop[] = {
#include "DotLoopMma.cuh.inc"
    ,
#include "DotLoopWgmma.cuh.inc"
    ,
#include "DotLoopWgmmaWs.cuh.inc"
    ,
#include "DotLoopWgmmaTma.cuh.inc"
    ,
#include "DotLoop.cuh.inc"
};

//===----------------------------------------------------------------------===//
// Literals
//===----------------------------------------------------------------------===//

/// A cluster_reduce outside loops: tj_cluster_reduce_once, on one mbarrier
/// (in a loop: tj_cluster_reduce_loop, on two).
bool runsOnce(tile::ClusterReduceOp op) {
  return !op->getParentOfType<LoopLikeOpInterface>();
}

/// The prelude's combiner struct of a reduction.
const char *combinerName(ReduceKind kind) {
  return kind == ReduceKind::Sum   ? "tj_sum_op"
         : kind == ReduceKind::Max ? "tj_max_op"
                                   : "tj_min_op";
}

std::string floatLiteral(float f) {
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

std::string int32Literal(int64_t v) {
  if (v == INT32_MIN)
    return "(-2147483647 - 1)";
  return std::to_string(v);
}

std::string int64Literal(int64_t v) {
  if (v == INT64_MIN)
    return "(-9223372036854775807LL - 1)";
  return std::to_string(v) + "LL";
}

bool isIdentifier(StringRef s) {
  if (s.empty() || !(std::isalpha((unsigned char)s[0]) || s[0] == '_'))
    return false;
  for (char c : s)
    if (!(std::isalnum((unsigned char)c) || c == '_'))
      return false;
  return true;
}

std::string escapeForString(StringRef s) {
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
  // Each tile.cluster_reduce's first mbarrier in tj_cluster_bar: one per op
  // outside loops (tj_cluster_reduce_once), two per op in a loop
  // (tj_cluster_reduce_loop, which also counts its runs in a variable).
  llvm::DenseMap<Operation *, unsigned> clusterBarOf;
  unsigned clusterMbarriers = 0;
  int indent = 0;
  unsigned nextId = 0;
  llvm::DenseMap<Value, std::string> names;
  // #line tracking: the file and line the compiler assumes for the next
  // physical line; presumedLine < 0 until the first directive.
  std::string curFile;
  int64_t presumedLine = -1;
  std::string pendingFile; // empty: no location pending
  int64_t pendingLine = 0;

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
    stmt(element("tj_g + tj_j"));
    indent -= 2;
    line("}");
    --indent;
    line("}");
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

  std::string r(Operation *op, unsigned i, const std::string &e) const {
    return ref(op->getOperand(i), e, op);
  }
};

void KernelEmitter::emit() {
  kernelName = func.getSymName().str();
  if (!isIdentifier(kernelName))
    fail(nullptr, "the kernel name is not a C identifier");
  auto threadsAttr = func->getAttrOfType<IntegerAttr>(attr::kThreads);
  if (!threadsAttr)
    fail(nullptr, std::string("missing '") + attr::kThreads +
                      "' (run tile-assign-layout and tile-lower-to-simt)");
  threads = threadsAttr.getInt();
  if (threads < 32 || threads > 1024 || threads % 32 != 0)
    fail(nullptr, "simt.threads = " + std::to_string(threads) +
                      " is not a multiple of 32 in [32, 1024]");
  if (func.getFunctionType().getNumResults() != 0)
    fail(nullptr, "a kernel must not return values");
  if (func.isExternal() || !func.getBody().hasOneBlock())
    fail(nullptr, "the kernel body must be a single block");

  if (auto c = func->getAttrOfType<IntegerAttr>(attr::kClusterSize))
    clusterSize = c.getInt();
  alignedVectors = func->hasAttr(attr::kAlignedVectors);
  std::string p = std::to_string(threads);
  line("// tilejit: " + kernelName + ", " + p + " threads");
  std::string attrs = "__launch_bounds__(" + p;
  if (auto m = func->getAttrOfType<IntegerAttr>(attr::kMinProgramsPerSm);
      m && m.getInt() > 0)
    attrs += ", " + std::to_string(m.getInt());
  attrs += ")";
  if (clusterSize > 1) {
    line("#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900");
    line("#error \"" + kernelName +
         " uses thread-block clusters: compile for sm_90 or newer\"");
    line("#endif");
    attrs += " __cluster_dims__(" + std::to_string(clusterSize) + ", 1, 1)";
  }
  line("extern \"C\" __global__ void " + attrs);
  Block &body = func.getBody().front();
  std::vector<std::string> params;
  for (BlockArgument arg : body.getArguments()) {
    Type t = arg.getType();
    std::string n = bind(arg);
    if (isa<VectorType>(t))
      fail(nullptr,
           "argument " + std::to_string(arg.getArgNumber()) + " is a vector");
    std::string ct = scalarType(t, func);
    bool mayAlias =
        func.getArgAttr(arg.getArgNumber(), attr::kMayAlias) != nullptr;
    if (isa<tile::PtrType>(t) && !mayAlias)
      params.push_back(ct + "__restrict__ " + n);
    else
      params.push_back(ct + " " + n);
  }
  // The tensor maps each launch encodes, then the mask of those it could.
  if (auto maps = func->getAttrOfType<ArrayAttr>(attr::kTensorMaps)) {
    for (size_t i = 0; i < maps.size(); ++i)
      params.push_back("const __grid_constant__ tj_tensor_map tj_map" +
                       std::to_string(i));
    params.push_back("const unsigned tj_maps_ok");
  }
  std::string head = kernelName + "(";
  if (params.empty()) {
    line(head + ") {");
  } else if (params.size() <= 3) {
    line(head + llvm::join(params, ", ") + ") {");
  } else {
    std::string pad(head.size(), ' ');
    for (size_t i = 0; i < params.size(); ++i)
      line((i == 0 ? head : pad) + params[i] +
           (i + 1 == params.size() ? ") {" : ","));
  }
  ++indent;
  if (auto bytes = func->getAttrOfType<IntegerAttr>(attr::kSharedBytes);
      bytes && bytes.getInt() > 0)
    line("extern __shared__ __align__(16) unsigned char tj_smem[]; // " +
         std::to_string(bytes.getInt()) + " bytes, set at launch");
  if (clusterSize > 1) {
    func.walk([&](tile::ClusterReduceOp op) {
      clusterBarOf[op] = clusterMbarriers;
      clusterMbarriers += runsOnce(op) ? 1 : 2;
      if (!runsOnce(op))
        line("unsigned tj_cluster_runs" + std::to_string(clusterBarOf[op]) +
             " = 0;");
    });
    if (clusterMbarriers > 0) {
      std::string k = std::to_string(clusterMbarriers);
      line("__shared__ __align__(8) unsigned long long tj_cluster_bar[" + k +
           "];");
      line("tj_cluster_mbarriers_init<" + k + ">(tj_cluster_bar);");
      line("bool tj_cluster_init_waited = false;");
    }
  }
  emitBlock(body, {}, {});
  if (clusterMbarriers > 0)
    line("tj_cluster_init_wait(tj_cluster_init_waited);");
  --indent;
  line("}");
}

void KernelEmitter::emitBlock(Block &block, ArrayRef<std::string> yieldTargets,
                              ArrayRef<Value> yieldTargetValues) {
  for (Operation &op : block) {
    if (isa<scf::YieldOp>(op)) {
      yieldTo(&op, yieldTargets, yieldTargetValues);
      continue;
    }
    if (isa<func::ReturnOp>(op)) {
      if (op.getNumOperands() != 0)
        fail(&op, "a kernel must not return values");
      if (op.getParentOp() != func.getOperation())
        fail(&op, "return inside a region");
      continue; // the end of the kernel body
    }
    emitOp(&op);
  }
}

void KernelEmitter::emitOp(Operation *op) {
  if (auto forOp = dyn_cast<scf::ForOp>(op))
    return emitFor(forOp);
  if (auto ifOp = dyn_cast<scf::IfOp>(op))
    return emitIf(ifOp);
  if (op->getNumRegions() != 0)
    fail(op, "ops with regions other than scf.for/scf.if are not supported");
  if (auto cr = dyn_cast<tile::ClusterReduceOp>(op))
    return emitClusterReduce(cr);
  if (op->getNumResults() > 1)
    fail(op, "ops with several results are not supported");
  locate(op);
  if (auto c = dyn_cast<arith::ConstantOp>(op))
    return emitConstant(c);
  if (emitArith(op) || emitMath(op) || emitVector(op) || emitSimt(op))
    return;
  fail(op, "unsupported op");
}

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
  // Triton's), with denormal results flushed to zero.
  if (auto fm = op->getAttrOfType<arith::FastMathFlagsAttr>("fastmath");
      fm && arith::bitEnumContainsAll(fm.getValue(), arith::FastMathFlags::afn))
    fn = opName == "math.exp"    ? "tj_fast_exp"
         : opName == "math.exp2" ? "tj_fast_exp2"
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

bool KernelEmitter::emitVector(Operation *op) {
  if (op->getName().getDialectNamespace() != "vector")
    return false;
  Value res = op->getResult(0);
  if (auto b = dyn_cast<vector::BroadcastOp>(op)) {
    Type st = b.getSource().getType();
    auto k = vecLen(res.getType(), op);
    auto sk = vecLen(st, op);
    if (sk && *sk != 1 && *sk != *k)
      fail(op, "unsupported broadcast shape");
    define(op, res, [&](const std::string &e) {
      return ref(b.getSource(), sk && *sk == 1 ? "0" : e, op);
    });
    return true;
  }
  if (op->getName().getStringRef() == "vector.splat") {
    define(op, res, [&](const std::string &) { return r(op, 0, ""); });
    return true;
  }
  if (auto red = dyn_cast<vector::ReductionOp>(op)) {
    Value src = red.getVector();
    Type et = elemType(src.getType());
    int64_t k = *vecLen(src.getType(), op);
    using K = vector::CombiningKind;
    K kind = red.getKind();
    bool isFloat = isa<FloatType>(et);
    if (isFloat)
      requireFloat(et, op);
    std::string ut = isFloat ? "" : "(" + unsignedType(et, op) + ")";
    auto combine = [&](const std::string &a0,
                       const std::string &b0) -> std::string {
      std::string a = isFloat ? toF32(a0, et) : a0;
      std::string b = isFloat ? toF32(b0, et) : b0;
      std::string c;
      switch (kind) {
      case K::ADD:
        c = a + " + " + b;
        break;
      case K::MUL:
        c = a + " * " + b;
        break;
      case K::MAXIMUMF:
        c = "tj_maximumf(" + a + ", " + b + ")";
        break;
      case K::MINIMUMF:
        c = "tj_minimumf(" + a + ", " + b + ")";
        break;
      case K::MAXNUMF:
        c = "fmaxf(" + a + ", " + b + ")";
        break;
      case K::MINNUMF:
        c = "fminf(" + a + ", " + b + ")";
        break;
      case K::MAXSI:
        c = a + " > " + b + " ? " + a + " : " + b;
        break;
      case K::MINSI:
        c = a + " < " + b + " ? " + a + " : " + b;
        break;
      case K::MAXUI:
        c = ut + a + " > " + ut + b + " ? " + a + " : " + b;
        break;
      case K::MINUI:
        c = ut + a + " < " + ut + b + " ? " + a + " : " + b;
        break;
      case K::AND:
        c = a + " & " + b;
        break;
      case K::OR:
        c = a + " | " + b;
        break;
      case K::XOR:
        c = a + " ^ " + b;
        break;
      }
      return isFloat ? fromF32(c, et) : c;
    };
    bool floatKind = kind == K::MAXIMUMF || kind == K::MINIMUMF ||
                     kind == K::MAXNUMF || kind == K::MINNUMF;
    bool bothKind = kind == K::ADD || kind == K::MUL;
    if (isFloat ? !(floatKind || bothKind) : floatKind)
      fail(op, "reduction kind does not fit the element type");
    if (et.isInteger(1) && bothKind)
      fail(op, "add/mul reductions of i1 are not supported");
    std::string n = bind(res);
    const std::string &s = name(src, op);
    std::string decl = declaration(res.getType(), n, op);
    int64_t first = 0;
    if (Value acc = red.getAcc()) {
      line(decl + " = " + name(acc, op) + ";");
    } else {
      std::string init = decl + " = " + s + "[0];";
      if (k > 1)
        line(init);
      else
        stmt(init);
      first = 1;
    }
    if (first < k) {
      if (k - first == 1) {
        std::string e = std::to_string(first);
        stmt(n + " = " + combine(n, s + "[" + e + "]") + ";");
      } else {
        line("#pragma unroll");
        line("for (int e = " + std::to_string(first) + "; e < " +
             std::to_string(k) + "; ++e)");
        ++indent;
        stmt(n + " = " + combine(n, s + "[e]") + ";");
        --indent;
      }
    }
    return true;
  }
  if (auto ex = dyn_cast<vector::ExtractOp>(op)) {
    auto pos = ex.getMixedPosition();
    if (pos.empty()) {
      declareCopy(op, res, name(ex.getSource(), op));
      return true;
    }
    if (pos.size() != 1)
      fail(op, "only 1-D extracts are supported");
    std::string idx;
    if (auto a = dyn_cast<Attribute>(pos[0])) {
      int64_t i = cast<IntegerAttr>(a).getInt();
      if (i < 0)
        fail(op, "poison extract position");
      idx = std::to_string(i);
    } else {
      idx = name(cast<Value>(pos[0]), op);
    }
    define(op, res, [&](const std::string &) {
      return name(ex.getSource(), op) + "[" + idx + "]";
    });
    return true;
  }
  if (auto fe = dyn_cast<vector::FromElementsOp>(op)) {
    std::vector<std::string> elems;
    for (Value v : fe.getElements())
      elems.push_back(name(v, op));
    std::string n = bind(res);
    stmt(declaration(res.getType(), n, op) + " = {" + llvm::join(elems, ", ") +
         "};");
    return true;
  }
  if (isa<vector::StepOp>(op)) {
    std::string st = scalarType(elemType(res.getType()), op);
    define(op, res, [&](const std::string &e) {
      return "(" + st + ")" + (e.empty() ? "0" : e);
    });
    return true;
  }
  return false;
}

bool KernelEmitter::emitSimt(Operation *op) {
  if (isa<simt::ThreadIdOp>(op)) {
    define(op, op->getResult(0),
           [](const std::string &) { return "(int)threadIdx.x"; });
    return true;
  }
  auto axisName = [](uint32_t axis) {
    return axis == 0 ? "x" : axis == 1 ? "y" : "z";
  };
  if (auto b = dyn_cast<simt::BlockIdOp>(op)) {
    define(op, b.getResult(), [&](const std::string &) {
      return std::string("(int)blockIdx.") + axisName(b.getAxis());
    });
    return true;
  }
  if (auto g = dyn_cast<simt::GridDimOp>(op)) {
    define(op, g.getResult(), [&](const std::string &) {
      return std::string("(int)gridDim.") + axisName(g.getAxis());
    });
    return true;
  }
  if (auto br = dyn_cast<simt::BlockReduceOp>(op)) {
    const char *fn = br.getKind() == ReduceKind::Sum   ? "tj_block_sum"
                     : br.getKind() == ReduceKind::Max ? "tj_block_max"
                                                       : "tj_block_min";
    define(op, br.getResult(), [&](const std::string &) {
      return std::string(fn) + "<" + std::to_string(threads) + ">(" +
             name(br.getSrc(), op) + ")";
    });
    return true;
  }
  // Each tile's group width (tile-assign-layout).
  auto groupOf = [&](Value v) {
    return std::to_string(
        layoutGroup(func, *vecLen(v.getType(), op) * threads));
  };
  // result = fn<R, C, P, matrix group, vector group[, combine]>(operand 0)
  // for the row ops, whose matrix is R x C and vector R.
  auto rowsCall = [&](const char *fn, int64_t cols, Value matrix, Value vector,
                      std::optional<ReduceKind> kind) {
    Value result = op->getResult(0);
    std::string n = bind(result);
    line(declaration(result.getType(), n, op) + ";");
    locate(op);
    stmt(std::string(fn) + "<" +
         std::to_string(*vecLen(vector.getType(), op) * threads) + ", " +
         std::to_string(cols) + ", " + std::to_string(threads) + ", " +
         groupOf(matrix) + ", " + groupOf(vector) +
         (kind ? std::string(", ") + combinerName(*kind) : std::string()) +
         ">(" + name(op->getOperand(0), op) + ", " + n + ");");
  };
  if (auto rr = dyn_cast<simt::ReduceRowsOp>(op)) {
    rowsCall("tj_reduce_rows", rr.getCols(), rr.getSrc(), rr.getResult(),
             rr.getKind());
    return true;
  }
  if (auto br = dyn_cast<simt::BroadcastRowsOp>(op)) {
    rowsCall("tj_broadcast_rows", br.getCols(), br.getResult(), br.getSrc(),
             std::nullopt);
    return true;
  }
  if (auto dot = dyn_cast<simt::DotOp>(op)) {
    std::string n = bind(dot.getResult());
    line(declaration(dot.getType(), n, op) + ";");
    locate(op);
    stmt("tj_dot<" + std::to_string(dot.getM()) + ", " +
         std::to_string(dot.getN()) + ", " + std::to_string(dot.getK()) + ", " +
         std::to_string(threads) + ", " + groupOf(dot.getA()) + ", " +
         groupOf(dot.getB()) + ", " + groupOf(dot.getResult()) + ">(" +
         name(dot.getA(), op) + ", " + name(dot.getB(), op) + ", " +
         name(dot.getAcc(), op) + ", " + n + ");");
    return true;
  }
  if (auto dl = dyn_cast<simt::DotLoopOp>(op)) {
    std::string n = bind(dl.getResult());
    line(declaration(dl.getType(), n, op) + ";");
    locate(op);
    // A view whose rows are contiguous (stride 1 down a column) is kept in
    // shared memory the other way round; any other view is copied
    // element by element at run time.
    auto rowsContiguous = [](Value rowStride, Value colStride) {
      return matchPattern(rowStride, m_One()) &&
             !matchPattern(colStride, m_One());
    };
    auto flag = [](bool b) { return std::string(b ? "true" : "false"); };
    std::vector<std::string> args = {
        "tj_smem + " + std::to_string(dl.getSmemOffset())};
    for (Value v : op->getOperands()) // A's view, B's view, K range, acc
      args.push_back(name(v, op));
    args.push_back(n);
    // The tensor maps of A's and B's views where the launch encoded both.
    if (std::optional<uint64_t> i = dl.getTensorMaps()) {
      std::string ok = "(tj_maps_ok >> " + std::to_string(*i) + " & 3) == 3";
      args.push_back(ok + " ? &tj_map" + std::to_string(*i) + " : nullptr");
      args.push_back("&tj_map" + std::to_string(*i + 1));
    } else {
      args.push_back("nullptr");
      args.push_back("nullptr");
    }
    stmt("tj_dot_loop<" + std::to_string(dl.getM()) + ", " +
         std::to_string(dl.getN()) + ", " + std::to_string(dl.getK()) + ", " +
         std::to_string(dl.getStages()) + ", " + std::to_string(threads) +
         ", " + groupOf(dl.getResult()) + ", " +
         flag(rowsContiguous(dl.getARowStride(), dl.getAColStride())) + ", " +
         flag(rowsContiguous(dl.getBRowStride(), dl.getBColStride())) + ", " +
         flag(matchPattern(dl.getAcc(), m_AnyZeroFloat())) + ", " +
         flag(func->hasAttr(attr::kDotSpecialize)) + ">(" +
         llvm::join(args, ", ") + ");");
    return true;
  }
  if (auto ld = dyn_cast<simt::LoadOp>(op)) {
    Type et = elemType(ld.getType());
    std::string other =
        ld.getOther() ? name(ld.getOther(), op) : zeroOf(et, op);
    auto element = [&](const std::string &e) {
      std::string access =
          name(ld.getPtr(), op) + "[" + ref(ld.getOffsets(), e, op) + "]";
      if (!ld.getMask())
        return access;
      return ref(ld.getMask(), e, op) + " ? " + access + " : " + other;
    };
    int64_t width = accessWidth(op);
    if (width < 2) {
      define(op, ld.getResult(), element);
      return true;
    }
    std::string n = bind(ld.getResult());
    line(declaration(ld.getType(), n, op) + ";");
    forEachGroup(
        op, ld.getPtr(), ld.getOffsets(), ld.getMask(), et, width,
        [&](const std::string &addr, const std::string &bytes) {
          return "tj_vload<" + bytes + ">(&" + n + "[tj_g], " + addr + ");";
        },
        [&](const std::string &e) {
          return n + "[" + e + "] = " + element(e) + ";";
        });
    return true;
  }
  if (auto st = dyn_cast<simt::StoreOp>(op)) {
    auto store = [&](const std::string &e) {
      return name(st.getPtr(), op) + "[" + ref(st.getOffsets(), e, op) +
             "] = " + ref(st.getValue(), e, op) + ";";
    };
    auto k = vecLen(st.getOffsets().getType(), op);
    if (!k) {
      // A uniform scalar store: one thread does it.
      std::string cond = "threadIdx.x == 0";
      if (st.getMask())
        cond += " && " + ref(st.getMask(), "", op);
      stmt("if (" + cond + ") " + store(""));
      return true;
    }
    auto element = [&](const std::string &e) {
      if (st.getMask())
        return "if (" + ref(st.getMask(), e, op) + ") " + store(e);
      return store(e);
    };
    int64_t width = accessWidth(op);
    if (width < 2) {
      forEach(*k, [&](const std::string &e) { stmt(element(e)); });
      return true;
    }
    Type et = elemType(st.getValue().getType());
    std::string value = name(st.getValue(), op);
    forEachGroup(
        op, st.getPtr(), st.getOffsets(), st.getMask(), et, width,
        [&](const std::string &addr, const std::string &bytes) {
          return "tj_vstore<" + bytes + ">(" + addr + ", &" + value +
                 "[tj_g]);";
        },
        element);
    return true;
  }
  if (auto cp = dyn_cast<simt::CopyAsyncOp>(op)) {
    std::string dst = name(cp.getDst(), op), src = name(cp.getSrc(), op);
    auto at = [&](const std::string &p, Value offs, const std::string &e) {
      return p + "[" + ref(offs, e, op) + "]";
    };
    // Lanes that cannot take a whole group copy element by element, at once.
    auto element = [&](const std::string &e) {
      std::string copy = at(dst, cp.getDstOffsets(), e) + " = " +
                         at(src, cp.getSrcOffsets(), e) + ";";
      if (cp.getMask())
        return "if (" + ref(cp.getMask(), e, op) + ") " + copy;
      return copy;
    };
    auto k = vecLen(cp.getSrcOffsets().getType(), op);
    if (!k)
      fail(op, "copies tiles: its offsets must be per-thread vectors");
    int64_t width = accessWidth(op);
    Type et = cp.getSrc().getType().getElementType();
    if (width < 2) {
      forEach(*k, [&](const std::string &e) { stmt(element(e)); });
      return true;
    }
    forEachGroup(
        op, cp.getSrc(), cp.getSrcOffsets(), cp.getMask(), et, width,
        [&](const std::string &addr, const std::string &bytes) {
          return "tj_copy_async<" + bytes + ">(" + dst + " + " +
                 ref(cp.getDstOffsets(), "tj_g", op) + ", " + addr + ");";
        },
        element, cp.getDst(), cp.getDstOffsets());
    return true;
  }
  if (auto pf = dyn_cast<tile::PrefetchL2Op>(op)) {
    // One lane asks; the copy engine fetches the range.
    stmt("if (threadIdx.x == 0) tj_prefetch_l2(" + name(pf.getPtr(), op) +
         " + " + name(pf.getOffset(), op) + ", " + name(pf.getCount(), op) +
         ");");
    return true;
  }
  if (isa<tile::CopyCommitOp>(op)) {
    stmt("tj_copy_commit();");
    return true;
  }
  if (auto w = dyn_cast<tile::CopyWaitOp>(op)) {
    stmt("tj_copy_wait<" + std::to_string(w.getPending()) + ">();");
    if (!w.getLaneOnly())
      stmt("__syncthreads();");
    return true;
  }
  if (auto ap = dyn_cast<tile::AddPtrOp>(op)) {
    define(op, ap.getResult(), [&](const std::string &) {
      return name(ap.getPtr(), op) + " + " + name(ap.getOffset(), op);
    });
    return true;
  }
  if (auto sa = dyn_cast<tile::SharedAllocOp>(op)) {
    // A pointer into tj_smem within this function, so nvcc keeps its
    // accesses as shared-memory ones (LDS/STS), not generic.
    define(op, sa.getResult(), [&](const std::string &) {
      return "reinterpret_cast<" + scalarType(sa.getType(), op) +
             ">(tj_smem + " + std::to_string(sa.getOffset()) + ")";
    });
    return true;
  }
  if (isa<tile::BarrierOp>(op)) {
    stmt("__syncthreads();");
    return true;
  }
  return false;
}

void KernelEmitter::emitClusterReduce(tile::ClusterReduceOp op) {
  std::string t = scalarType(op.getSrcs().front().getType(), op);
  if (clusterSize == 1) { // a cluster of one program: nothing to combine
    for (auto [src, res] : llvm::zip(op.getSrcs(), op.getResults()))
      line(t + " " + bind(res) + " = " + name(src, op) + ";");
    return;
  }
  std::string id = "tj_cluster" + std::to_string(clusterOps++);
  std::string n = std::to_string(op.getSrcs().size());
  std::vector<std::string> srcs;
  for (Value src : op.getSrcs())
    srcs.push_back(name(src, op));
  std::string combiner =
      std::to_string(clusterSize) + ", " + combinerName(op.getKind());
  line(t + " " + id + "[" + n + "] = {" + llvm::join(srcs, ", ") + "};");
  // In a loop the slots are written again each run: two buffers used in
  // turn.
  bool once = runsOnce(op);
  std::string bar = std::to_string(clusterBarOf.lookup(op));
  std::string slots = std::to_string((once ? 1 : 2) * clusterSize *
                                     int64_t(op.getSrcs().size()));
  line("__shared__ " + t + " " + id + "_slots[" + slots + "];");
  locate(op);
  if (once)
    stmt("tj_cluster_reduce_once<" + combiner + ">(" + id +
         "_slots, tj_cluster_bar + " + bar + ", tj_cluster_init_waited, " + id +
         ");");
  else
    stmt("tj_cluster_reduce_loop<" + combiner + ">(" + id +
         "_slots, tj_cluster_bar + " + bar + ", tj_cluster_runs" + bar +
         ", tj_cluster_init_waited, " + id + ");");
  for (auto [i, res] : llvm::enumerate(op.getResults()))
    line(t + " " + bind(res) + " = " + id + "[" + std::to_string(i) + "];");
}

void KernelEmitter::emitFor(scf::ForOp op) {
  Value iv = op.getInductionVar();
  std::string ivType = scalarType(iv.getType(), op);
  // Loop-carried values live in variables declared before the loop; the
  // loop's results are those same variables after it.
  std::vector<std::string> carried;
  std::vector<Value> carriedValues;
  for (auto [arg, init, result] : llvm::zip_equal(
           op.getRegionIterArgs(), op.getInitArgs(), op.getResults())) {
    declareCopy(op, arg, name(init, op));
    std::string n = names[arg];
    bindAs(result, n);
    carried.push_back(n);
    carriedValues.push_back(arg);
  }
  locate(op); // after the carried values: #line goes before the `for`
  std::string i = bind(iv);
  std::string lb = name(op.getLowerBound(), op);
  std::string ub = name(op.getUpperBound(), op);
  std::string step = name(op.getStep(), op);
  std::string cond = i + " < " + ub;
  if (op.getUnsignedCmp()) {
    std::string ut = "(" + unsignedType(iv.getType(), op) + ")";
    cond = ut + i + " < " + ut + ub;
  }
  stmt("for (" + ivType + " " + i + " = " + lb + "; " + cond + "; " + i +
       " += " + step + ") {");
  ++indent;
  emitBlock(*op.getBody(), carried, carriedValues);
  --indent;
  line("}");
}

void KernelEmitter::emitIf(scf::IfOp op) {
  std::vector<std::string> results;
  std::vector<Value> resultValues;
  for (Value res : op.getResults()) {
    std::string n = bind(res);
    line(declaration(res.getType(), n, op) + ";");
    results.push_back(n);
    resultValues.push_back(res);
  }
  stmt("if (" + name(op.getCondition(), op) + ") {");
  ++indent;
  emitBlock(op.getThenRegion().front(), results, resultValues);
  --indent;
  if (!op.getElseRegion().empty()) {
    line("} else {");
    ++indent;
    emitBlock(op.getElseRegion().front(), results, resultValues);
    --indent;
  }
  line("}");
}

} // namespace

const char *cudaPrelude() { return kPrelude; }

std::string emitCuda(ModuleOp module) {
  std::string out = "// Generated by tilejit from SIMT-level MLIR.\n";
  out += kPrelude;
  bool clusters = false, matrices = false, dotLoops = false;
  module.walk([&](Operation *op) {
    clusters |= isa<tile::ClusterReduceOp>(op);
    matrices |= isa<simt::DotOp, simt::ReduceRowsOp, simt::BroadcastRowsOp,
                    simt::DotLoopOp>(op);
    dotLoops |= isa<simt::DotLoopOp>(op);
  });
  if (clusters)
    out += kCluster;
  if (matrices)
    out += kMatrix;
  if (dotLoops)
    for (const char *text : kDotLoop)
      out += text;
  bool any = false;
  for (auto func : module.getOps<func::FuncOp>()) {
    if (!func->hasAttr(attr::kKernel))
      continue;
    out += "\n";
    KernelEmitter(out, func).emit();
    any = true;
  }
  if (!any)
    throw Error("emitCuda: the module has no kernel (func.func with " +
                std::string(attr::kKernel) + ")");
  return out;
}

} // namespace tilejit
