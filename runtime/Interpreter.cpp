//===- Interpreter.cpp - CPU interpreter for tile-level kernels -----------===//
//
// Every SSA value of a program is a RuntimeValue: a scalar or a 1-D tile of
// one element type. Float values (bf16, f16, f32) are held as floats, which
// represent all three formats exactly; integer values (i1, i32, i64) as
// int64_t, kept normalized (sign-extended from their width; i1 is 0 or 1).
// Ops work on whole vectors, so one dispatch covers a full tile, and each
// result is rounded to its type right away: f32 ops are done in float
// arithmetic, bf16/f16 results are rounded to nearest even (computing in
// float and then rounding is exact for + - * / sqrt: float has more than
// twice their precision plus two bits), integers wrap at their width.
//
// Programs are independent, so a large grid is split across a few threads,
// each with its own environment (Value -> RuntimeValue).
//
//===----------------------------------------------------------------------===//
#include "tilejit/Interpreter.h"

#include "tilejit/Error.h"
#include "tilejit/HostFloat.h"
#include "tilejit/ir/Dialects.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/bit.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

using namespace mlir;

namespace tilejit {
namespace {

//===----------------------------------------------------------------------===//
// Runtime values
//===----------------------------------------------------------------------===//

enum class Elem : uint8_t { I1, I32, I64, BF16, F16, F32, Ptr };

bool isFloatElem(Elem e) {
  return e == Elem::BF16 || e == Elem::F16 || e == Elem::F32;
}

const char *elemName(Elem e) {
  switch (e) {
  case Elem::I1:
    return "i1";
  case Elem::I32:
    return "i32";
  case Elem::I64:
    return "i64";
  case Elem::BF16:
    return "bf16";
  case Elem::F16:
    return "f16";
  case Elem::F32:
    return "f32";
  case Elem::Ptr:
    return "ptr";
  }
  return "?";
}

using FVec = std::vector<float>;
using IVec = std::vector<int64_t>;

/// A scalar (one element) or a 1-D tile. The payload is immutable and shared,
/// so copying a value (into loop-carried arguments, for example) is cheap.
struct RuntimeValue {
  Elem elem = Elem::I32;
  bool tile = false;
  std::shared_ptr<const FVec> f; // float elements
  std::shared_ptr<const IVec> i; // integer elements
  int ptrArg = -1;    // pointers: the kernel argument (past the last one: a
                      // shared array of the program) ...
  int64_t ptrOff = 0; // ... and an element offset into it

  size_t size() const { return f ? f->size() : i ? i->size() : 1; }
  int64_t intScalar() const { return (*i)[0]; }
  float floatScalar() const { return (*f)[0]; }
};

/// Sign-extends the low `width(e)` bits of `x` (i1: 0 or 1).
inline int64_t normalize(uint64_t x, Elem e) {
  switch (e) {
  case Elem::I1:
    return static_cast<int64_t>(x & 1u);
  case Elem::I32:
    return static_cast<int64_t>(static_cast<int32_t>(static_cast<uint32_t>(x)));
  default:
    return static_cast<int64_t>(x);
  }
}

/// The value of `x` read as an unsigned integer of `e`'s width.
inline uint64_t zext(int64_t x, Elem e) {
  switch (e) {
  case Elem::I1:
    return static_cast<uint64_t>(x) & 1u;
  case Elem::I32:
    return static_cast<uint32_t>(x);
  default:
    return static_cast<uint64_t>(x);
  }
}

/// The signed value of normalized `x` (only i1 differs: true is -1).
inline int64_t sext(int64_t x, Elem e) { return e == Elem::I1 ? -x : x; }

inline unsigned bitWidth(Elem e) {
  return e == Elem::I1 ? 1 : e == Elem::I32 ? 32 : 64;
}

/// Rounds a float to the nearest value of float type `e`, ties to even.
inline float roundTo(float x, Elem e) {
  if (e == Elem::BF16)
    return bf16ToFloat(floatToBf16(x));
  if (e == Elem::F16)
    return halfToFloat(floatToHalf(x));
  return x;
}

void roundInPlace(FVec &v, Elem e) {
  if (e == Elem::BF16) {
    for (float &x : v)
      x = bf16ToFloat(floatToBf16(x));
  } else if (e == Elem::F16) {
    for (float &x : v)
      x = halfToFloat(floatToHalf(x));
  }
}

const llvm::fltSemantics &semanticsOf(Elem e) {
  if (e == Elem::BF16)
    return llvm::APFloat::BFloat();
  if (e == Elem::F16)
    return llvm::APFloat::IEEEhalf();
  return llvm::APFloat::IEEEsingle();
}

/// APFloat (of any float type) -> float, exactly for bf16/f16/f32.
float apToFloat(llvm::APFloat v) {
  bool losesInfo = false;
  v.convert(llvm::APFloat::IEEEsingle(), llvm::APFloat::rmNearestTiesToEven,
            &losesInfo);
  return v.convertToFloat();
}

/// Integer -> float type `e` with a single rounding (nearest even).
float intToFloat(int64_t v, bool isUnsigned, Elem e) {
  if (e == Elem::F32)
    return isUnsigned ? static_cast<float>(static_cast<uint64_t>(v))
                      : static_cast<float>(v);
  constexpr int64_t kExact = int64_t(1) << 24; // every such int fits a float
  if (isUnsigned ? static_cast<uint64_t>(v) <= uint64_t(kExact)
                 : (v >= -kExact && v <= kExact))
    return roundTo(static_cast<float>(v), e);
  llvm::APFloat r(semanticsOf(e));
  r.convertFromAPInt(llvm::APInt(64, static_cast<uint64_t>(v)), !isUnsigned,
                     llvm::APFloat::rmNearestTiesToEven);
  return apToFloat(r);
}

/// Float -> integer of `e`'s width, truncating toward zero; saturates and
/// maps NaN to 0 (what PTX cvt.rzi does; MLIR leaves these cases poison).
int64_t floatToInt(float x, bool isUnsigned, Elem e) {
  if (std::isnan(x))
    return 0;
  double t = std::trunc(static_cast<double>(x));
  unsigned w = bitWidth(e);
  if (isUnsigned) {
    if (t <= 0)
      return 0;
    double maxv = std::ldexp(1.0, static_cast<int>(w)); // exclusive
    if (t >= maxv)
      return normalize(w == 64 ? ~uint64_t(0) : (uint64_t(1) << w) - 1, e);
    return normalize(static_cast<uint64_t>(t), e);
  }
  double lim = std::ldexp(1.0, static_cast<int>(w) - 1);
  if (t >= lim)
    return normalize((uint64_t(1) << (w - 1)) - 1, e);
  if (t < -lim)
    return normalize(uint64_t(1) << (w - 1), e); // the minimum
  return normalize(static_cast<uint64_t>(static_cast<int64_t>(t)), e);
}

/// MLIR arith.maximumf / minimumf: NaN propagates, -0 < +0.
inline float maximumF(float a, float b) {
  if (std::isnan(a) || std::isnan(b))
    return std::numeric_limits<float>::quiet_NaN();
  if (a == b)
    return std::signbit(a) ? b : a;
  return a > b ? a : b;
}
inline float minimumF(float a, float b) {
  if (std::isnan(a) || std::isnan(b))
    return std::numeric_limits<float>::quiet_NaN();
  if (a == b)
    return std::signbit(a) ? a : b;
  return a < b ? a : b;
}
/// One step of a reduction (tile.reduce, reduce_rows, cluster_reduce):
/// floats combine in f32 (max/min as maximumF/minimumF), integers wrap to
/// their width.
inline float combineF(ReduceKind kind, float a, float b) {
  return kind == ReduceKind::Sum   ? a + b
         : kind == ReduceKind::Max ? maximumF(a, b)
                                   : minimumF(a, b);
}
inline int64_t combineI(ReduceKind kind, int64_t a, int64_t b, Elem e) {
  return kind == ReduceKind::Sum   ? normalize(uint64_t(a) + uint64_t(b), e)
         : kind == ReduceKind::Max ? std::max(a, b)
                                   : std::min(a, b);
}

/// arith.maxnumf / minnumf: a NaN operand yields the other one.
inline float maxnumF(float a, float b) {
  if (std::isnan(a))
    return b;
  if (std::isnan(b))
    return a;
  return maximumF(a, b);
}
inline float minnumF(float a, float b) {
  if (std::isnan(a))
    return b;
  if (std::isnan(b))
    return a;
  return minimumF(a, b);
}

DType dtypeOfElem(Elem e) {
  switch (e) {
  case Elem::I1:
    return DType::I1;
  case Elem::I32:
    return DType::I32;
  case Elem::I64:
    return DType::I64;
  case Elem::BF16:
    return DType::BF16;
  case Elem::F16:
    return DType::F16;
  default:
    return DType::F32;
  }
}

std::string locationOf(Operation *op) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << op->getLoc();
  return s;
}

std::string typeString(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << t;
  return s;
}

/// Element type of a scalar or tile type; std::nullopt when unsupported.
std::optional<Elem> elemOfScalar(Type t) {
  if (t.isF32())
    return Elem::F32;
  if (t.isBF16())
    return Elem::BF16;
  if (t.isF16())
    return Elem::F16;
  if (t.isInteger(1))
    return Elem::I1;
  if (t.isInteger(32))
    return Elem::I32;
  if (t.isInteger(64) || t.isIndex())
    return Elem::I64;
  if (isa<tile::PtrType>(t))
    return Elem::Ptr;
  return std::nullopt;
}

//===----------------------------------------------------------------------===//
// The kernel: checked arguments and shared, read-only state
//===----------------------------------------------------------------------===//

struct Kernel {
  mutable func::FuncOp func; // op handles are not const-correct
  std::string name;
  Grid grid;
  const std::vector<InterpArg> *args;
  llvm::SmallVector<RuntimeValue> argValues; // bound once, shared
  int64_t blockThreads = 128; // threads per program on the GPU (sum order)
  int64_t clusterSize = 1;    // programs per cluster along x
};

/// The meeting point of the programs of one cluster, each on its own
/// thread: tile.cluster_reduce waits until every program has brought its
/// values for the same op, and a program that ends (or fails) while others
/// wait is reported instead of hanging, as the GPU would.
class ClusterExchange {
public:
  struct Scalar {
    float f = 0;
    int64_t i = 0;
  };
  explicit ClusterExchange(int64_t size) : slots(size) {}

  /// Contributes `values` for `op` from program `rank` and returns every
  /// program's values, in rank order, once all have arrived.
  std::vector<std::vector<Scalar>> exchange(int64_t rank, Operation *op,
                                            std::vector<Scalar> values) {
    std::unique_lock<std::mutex> lock(mutex);
    if (done > 0)
      abort("a program of the cluster ended before reaching this "
            "tile.cluster_reduce (a condition that is not uniform in the "
            "cluster)");
    if (aborted)
      throw Error(reason);
    uint64_t gen = generation;
    slots[rank] = {op, std::move(values)};
    if (++arrived == static_cast<int64_t>(slots.size())) {
      for (const Slot &s : slots)
        if (s.op != op) {
          abort("the programs of a cluster reached different ops (a "
                "tile.cluster_reduce under a condition that is not uniform "
                "in the cluster)");
          break;
        }
      if (!aborted) {
        result.clear();
        for (Slot &s : slots)
          result.push_back(std::move(s.values));
      }
      arrived = 0;
      ++generation;
      cv.notify_all();
    } else {
      cv.wait(lock, [&] { return generation != gen || aborted; });
    }
    if (aborted)
      throw Error(reason);
    return result;
  }

  /// Program `rank` has ended: nobody may wait for it any more.
  void finished() {
    std::lock_guard<std::mutex> lock(mutex);
    if (arrived > 0)
      abort("a program of the cluster ended while others wait in "
            "tile.cluster_reduce (a condition that is not uniform in the "
            "cluster)");
    ++done;
  }

  /// Wakes and fails every waiting program.
  void abort(const std::string &why) {
    if (!aborted)
      reason = why;
    aborted = true;
    cv.notify_all();
  }
  void abortLocked(const std::string &why) {
    std::lock_guard<std::mutex> lock(mutex);
    abort(why);
  }

private:
  struct Slot {
    Operation *op = nullptr;
    std::vector<Scalar> values;
  };
  std::mutex mutex;
  std::condition_variable cv;
  std::vector<Slot> slots;
  std::vector<std::vector<Scalar>> result;
  int64_t arrived = 0, done = 0;
  uint64_t generation = 0;
  bool aborted = false;
  std::string reason;
};

/// Guards MLIR printing when an error message is built on a worker thread.
std::mutex &printMutex() {
  static std::mutex m;
  return m;
}

//===----------------------------------------------------------------------===//
// Runner: executes programs of one kernel, one at a time, on one thread
//===----------------------------------------------------------------------===//

class Runner {
public:
  explicit Runner(const Kernel &k, ClusterExchange *cluster = nullptr)
      : k(k), cluster(cluster) {}

  void runProgram(int64_t px, int64_t py, int64_t pz) {
    pid[0] = px;
    pid[1] = py;
    pid[2] = pz;
    env.clear();
    sharedStore.clear();
    sharedBufs.clear();
    openCopies.clear();
    copyGroups.clear();
    Block &entry = k.func.getBody().front();
    for (auto [arg, val] : llvm::zip(entry.getArguments(), k.argValues))
      env[arg] = val;
    runBlock(entry);
    cur = nullptr;
    if (!openCopies.empty() || !copyGroups.empty())
      fail("the program ends with copies in flight: every copyAsync needs "
           "commitCopies() and a waitCopies() that retires its group");
  }

private:
  const Kernel &k;
  ClusterExchange *cluster;
  int64_t pid[3] = {0, 0, 0};
  llvm::DenseMap<Value, RuntimeValue> env;
  llvm::DenseMap<Operation *, RuntimeValue> constants; // across programs
  Operation *cur = nullptr;
  // This program's tile.shared_alloc arrays (pointer ptrArg = args + index).
  std::vector<std::vector<unsigned char>> sharedStore;
  std::vector<InterpBuffer> sharedBufs;

  /// Shared arrays are numbered after the kernel's arguments.
  bool pointsIntoSharedArray(const RuntimeValue &ptr) const {
    return size_t(ptr.ptrArg) >= k.args->size();
  }
  /// The buffer a pointer value points into: a kernel argument or one of
  /// this program's shared arrays.
  const InterpBuffer &bufferOf(const RuntimeValue &ptr) const {
    if (!pointsIntoSharedArray(ptr))
      return std::get<InterpBuffer>((*k.args)[ptr.ptrArg]);
    return sharedBufs[ptr.ptrArg - k.args->size()];
  }

  /// tile.shared_alloc: a fresh array for this program, all bytes 0xFF
  /// (NaN in every float type), so reading before writing shows.
  void execSharedAlloc(tile::SharedAllocOp op) {
    auto elem = elemOfScalar(op.getType().getElementType());
    if (!elem || *elem == Elem::Ptr || *elem == Elem::I1)
      fail("a shared array of this element type is not supported");
    DType dt = dtypeOfElem(*elem);
    int64_t n = op.getSize();
    sharedStore.emplace_back(size_t(n) * dtypeSize(dt), 0xFF);
    sharedBufs.push_back({sharedStore.back().data(), dt, n});
    RuntimeValue v;
    v.elem = Elem::Ptr;
    v.ptrArg = static_cast<int>(k.args->size() + sharedBufs.size() - 1);
    set(op.getResult(), std::move(v));
  }

  //--- errors ---------------------------------------------------------------

  [[noreturn]] void fail(const std::string &msg) {
    std::string where;
    {
      std::lock_guard<std::mutex> lock(printMutex());
      if (cur)
        where = "'" + cur->getName().getStringRef().str() + "' at " +
                locationOf(cur) + ": ";
    }
    throw Error("interpret: kernel '" + k.name + "', program (" +
                std::to_string(pid[0]) + ", " + std::to_string(pid[1]) + ", " +
                std::to_string(pid[2]) + "): " + where + msg);
  }

  //--- environment ----------------------------------------------------------

  const RuntimeValue &get(Value v) {
    auto it = env.find(v);
    if (it == env.end())
      fail("internal error: operand has no value yet");
    return it->second;
  }

  void set(Value v, RuntimeValue r) { env.insert_or_assign(v, std::move(r)); }

  struct Shape {
    Elem elem;
    bool tile;
    int64_t n;
  };

  Shape shapeOf(Type t) {
    if (auto tensor = dyn_cast<RankedTensorType>(t)) {
      if (tensor.getRank() != 1 || tensor.isDynamicDim(0))
        fail("unsupported tile type " + typeString(t) +
             " (tiles are 1-D with a static size)");
      auto e = elemOfScalar(tensor.getElementType());
      if (!e || *e == Elem::Ptr)
        fail("unsupported tile element type " + typeString(t));
      return {*e, true, tensor.getDimSize(0)};
    }
    auto e = elemOfScalar(t);
    if (!e)
      fail("unsupported type " + typeString(t));
    return {*e, false, 1};
  }

  static RuntimeValue makeF(const Shape &s, std::shared_ptr<FVec> d) {
    RuntimeValue r;
    r.elem = s.elem;
    r.tile = s.tile;
    r.f = std::move(d);
    return r;
  }
  static RuntimeValue makeI(const Shape &s, std::shared_ptr<IVec> d) {
    RuntimeValue r;
    r.elem = s.elem;
    r.tile = s.tile;
    r.i = std::move(d);
    return r;
  }
  static RuntimeValue intScalar(Elem e, int64_t v) {
    RuntimeValue r;
    r.elem = e;
    r.i = std::make_shared<IVec>(1, normalize(static_cast<uint64_t>(v), e));
    return r;
  }

  const RuntimeValue &floatOperand(Operation *op, unsigned idx) {
    const RuntimeValue &v = get(op->getOperand(idx));
    if (!v.f)
      fail("operand #" + std::to_string(idx) + " is not a float value");
    return v;
  }
  const RuntimeValue &intOperand(Operation *op, unsigned idx) {
    const RuntimeValue &v = get(op->getOperand(idx));
    if (!v.i)
      fail("operand #" + std::to_string(idx) + " is not an integer value");
    return v;
  }

  void checkSizes(size_t a, size_t b) {
    if (a != b)
      fail("operand sizes differ (" + std::to_string(a) + " vs " +
           std::to_string(b) + ")");
  }

  //--- elementwise helpers -------------------------------------------------

  template <typename Fn> void floatUnary(Operation *op, Fn fn) {
    const RuntimeValue &a = floatOperand(op, 0);
    Shape s = shapeOf(op->getResult(0).getType());
    size_t n = a.size();
    auto out = std::make_shared<FVec>(n);
    const float *pa = a.f->data();
    float *po = out->data();
    for (size_t j = 0; j < n; ++j)
      po[j] = fn(pa[j]);
    roundInPlace(*out, s.elem);
    set(op->getResult(0), makeF(s, std::move(out)));
  }

  template <typename Fn> void floatBinary(Operation *op, Fn fn) {
    const RuntimeValue &a = floatOperand(op, 0);
    const RuntimeValue &b = floatOperand(op, 1);
    checkSizes(a.size(), b.size());
    Shape s = shapeOf(op->getResult(0).getType());
    size_t n = a.size();
    auto out = std::make_shared<FVec>(n);
    const float *pa = a.f->data(), *pb = b.f->data();
    float *po = out->data();
    for (size_t j = 0; j < n; ++j)
      po[j] = fn(pa[j], pb[j]);
    roundInPlace(*out, s.elem);
    set(op->getResult(0), makeF(s, std::move(out)));
  }

  /// fn(a, b) computes on normalized int64 operands (use zext() for unsigned
  /// views); the result is wrapped to the result's width.
  template <typename Fn> void intBinary(Operation *op, Fn fn) {
    const RuntimeValue &a = intOperand(op, 0);
    const RuntimeValue &b = intOperand(op, 1);
    checkSizes(a.size(), b.size());
    Shape s = shapeOf(op->getResult(0).getType());
    size_t n = a.size();
    auto out = std::make_shared<IVec>(n);
    const int64_t *pa = a.i->data(), *pb = b.i->data();
    int64_t *po = out->data();
    Elem e = s.elem;
    for (size_t j = 0; j < n; ++j)
      po[j] = normalize(static_cast<uint64_t>(fn(pa[j], pb[j], e)), e);
    set(op->getResult(0), makeI(s, std::move(out)));
  }

  /// Integer -> integer/float conversions (one operand).
  template <typename Fn> void intToInt(Operation *op, Fn fn) {
    const RuntimeValue &a = intOperand(op, 0);
    Shape s = shapeOf(op->getResult(0).getType());
    Elem from = a.elem;
    auto out = std::make_shared<IVec>(a.size());
    for (size_t j = 0, n = a.size(); j < n; ++j)
      (*out)[j] = normalize(static_cast<uint64_t>(fn((*a.i)[j], from)), s.elem);
    set(op->getResult(0), makeI(s, std::move(out)));
  }

  //--- ops ---------------------------------------------------------------

  void runBlockOps(Block &b) {
    for (Operation &op : b.without_terminator())
      exec(&op);
  }

  Operation *runBlock(Block &b) {
    runBlockOps(b);
    return b.getTerminator();
  }

  /// Runs `region`'s single block with `args` bound to its arguments and
  /// returns the values its terminator passes on.
  llvm::SmallVector<RuntimeValue, 4>
  runRegion(Region &region, llvm::ArrayRef<RuntimeValue> args,
            Operation **terminator = nullptr) {
    Block &b = region.front();
    for (auto [arg, v] : llvm::zip(b.getArguments(), args))
      set(arg, v);
    Operation *term = runBlock(b);
    if (terminator)
      *terminator = term;
    llvm::SmallVector<RuntimeValue, 4> results;
    for (Value v : term->getOperands())
      results.push_back(get(v));
    return results;
  }

  void exec(Operation *op);
  void execTile(Operation *op);
  bool execFloat(Operation *op);
  bool execInt(Operation *op);
  bool execCast(Operation *op);
  void execConstant(arith::ConstantOp op);
  void execCmpF(arith::CmpFOp op);
  void execCmpI(arith::CmpIOp op);
  void execSelect(arith::SelectOp op);
  void execLoad(tile::LoadOp op);
  void execStore(tile::StoreOp op);
  RuntimeValue loadElements(const RuntimeValue &ptr, const RuntimeValue &offs,
                            const RuntimeValue *mask, const RuntimeValue *other,
                            Shape s);
  void storeElements(const RuntimeValue &ptr, const RuntimeValue &offs,
                     const RuntimeValue &val, const RuntimeValue *mask);

  // tile.copy_async: the source is read when the copy starts and written to
  // the destination only when a tile.copy_wait retires its group, so a
  // kernel that reads the destination too early sees the old (0xFF) bytes,
  // as it might on the GPU.
  struct PendingCopy {
    RuntimeValue dst, offsets, values;
    std::optional<RuntimeValue> mask;
  };
  std::vector<PendingCopy> openCopies;             // since the last commit
  std::deque<std::vector<PendingCopy>> copyGroups; // committed, in flight

  void execCopyAsync(tile::CopyAsyncOp op) {
    const RuntimeValue &src = get(op.getSrc());
    const RuntimeValue *mask = op.getMask() ? &get(op.getMask()) : nullptr;
    PendingCopy c;
    c.dst = get(op.getDst());
    c.offsets = intOperand(op, 1);
    // The destination is checked now, so an error names this op.
    const InterpBuffer &dst = bufferOf(c.dst);
    const int64_t *po = c.offsets.i->data();
    for (size_t j = 0; j < c.offsets.size(); ++j)
      if (!mask || (*mask->i)[mask->size() == 1 ? 0 : j])
        checkedOffset(c.dst, dst.numElements, po[j], j, "copy");
    // The values: the source's element type in the offsets' shape.
    Shape s = shapeOf(op.getSrcOffsets().getType());
    s.elem = *elemOfScalar(op.getSrc().getType().getElementType());
    c.values = loadElements(src, intOperand(op, 3), mask, nullptr, s);
    if (mask)
      c.mask = *mask;
    openCopies.push_back(std::move(c));
  }
  void execCopyWait(tile::CopyWaitOp op) {
    if (!openCopies.empty())
      fail("copies not committed: call commitCopies() before waitCopies()");
    while (copyGroups.size() > static_cast<size_t>(op.getPending())) {
      for (const PendingCopy &c : copyGroups.front())
        storeElements(c.dst, c.offsets, c.values, c.mask ? &*c.mask : nullptr);
      copyGroups.pop_front();
    }
  }
  /// A hint with no effect here, but its range must lie in the buffer.
  void execPrefetchL2(tile::PrefetchL2Op op) {
    const RuntimeValue &ptr = get(op.getPtr());
    int64_t offset = intOperand(op, 1).i->front();
    int64_t count = intOperand(op, 2).i->front();
    if (count <= 0)
      return;
    int64_t size = bufferOf(ptr).numElements;
    checkedOffset(ptr, size, offset, 0, "prefetchL2");
    checkedOffset(ptr, size, offset + count - 1, 0, "prefetchL2");
  }
  void execReduce(tile::ReduceOp op);
  void execClusterReduce(tile::ClusterReduceOp op);
  void execDot(tile::DotOp op);
  void execDotLoop(tile::DotLoopOp op);
  void execReduceRows(tile::ReduceRowsOp op);
  void execBroadcastRows(tile::BroadcastRowsOp op);
  void execFor(scf::ForOp op);
  void execIf(scf::IfOp op);
  void execWhile(scf::WhileOp op);

  /// The bounds-checked absolute element offset of lane `lane`.
  int64_t checkedOffset(const RuntimeValue &ptr, int64_t size, int64_t laneOff,
                        size_t lane, const char *what) {
    int64_t o;
    if (__builtin_expect(__builtin_add_overflow(ptr.ptrOff, laneOff, &o) ||
                             static_cast<uint64_t>(o) >=
                                 static_cast<uint64_t>(size),
                         0))
      outOfBounds(ptr, laneOff, lane, what);
    return o;
  }

  [[noreturn]] __attribute__((noinline, cold)) void
  outOfBounds(const RuntimeValue &ptr, int64_t laneOff, size_t lane,
              const char *what) {
    const InterpBuffer &buf = bufferOf(ptr);
    int64_t o;
    bool overflow = __builtin_add_overflow(ptr.ptrOff, laneOff, &o);
    fail(std::string("out-of-bounds unmasked ") + what + ": element offset " +
         (overflow
              ? std::to_string(ptr.ptrOff) + " + " + std::to_string(laneOff)
              : std::to_string(o)) +
         " (pointer offset " + std::to_string(ptr.ptrOff) + " + lane " +
         std::to_string(lane) + " offset " + std::to_string(laneOff) +
         ") is outside " +
         (pointsIntoSharedArray(ptr)
              ? "shared array #" + std::to_string(ptr.ptrArg - k.args->size())
              : "argument #" + std::to_string(ptr.ptrArg)) +
         ", a buffer of " + std::to_string(buf.numElements) + " " +
         dtypeName(buf.dtype) + " elements");
  }
};

void Runner::exec(Operation *op) {
  cur = op;
  Dialect *dialect = op->getDialect();
  StringRef ns = dialect ? dialect->getNamespace() : "";
  if (ns == "tile")
    return execTile(op);
  if (ns == "arith" || ns == "math") {
    if (auto c = dyn_cast<arith::ConstantOp>(op))
      return execConstant(c);
    if (execFloat(op) || execInt(op) || execCast(op))
      return;
    if (auto c = dyn_cast<arith::CmpFOp>(op))
      return execCmpF(c);
    if (auto c = dyn_cast<arith::CmpIOp>(op))
      return execCmpI(c);
    if (auto s = dyn_cast<arith::SelectOp>(op))
      return execSelect(s);
  }
  if (auto f = dyn_cast<scf::ForOp>(op))
    return execFor(f);
  if (auto i = dyn_cast<scf::IfOp>(op))
    return execIf(i);
  if (auto w = dyn_cast<scf::WhileOp>(op))
    return execWhile(w);
  fail("unsupported op in the CPU interpreter");
}

void Runner::execTile(Operation *op) {
  if (auto load = dyn_cast<tile::LoadOp>(op))
    return execLoad(load);
  if (auto store = dyn_cast<tile::StoreOp>(op))
    return execStore(store);
  if (auto r = dyn_cast<tile::ReduceOp>(op))
    return execReduce(r);
  if (auto r = dyn_cast<tile::ClusterReduceOp>(op))
    return execClusterReduce(r);
  if (auto a = dyn_cast<tile::SharedAllocOp>(op))
    return execSharedAlloc(a);
  if (auto c = dyn_cast<tile::CopyAsyncOp>(op))
    return execCopyAsync(c);
  if (isa<tile::CopyCommitOp>(op)) {
    copyGroups.push_back(std::move(openCopies));
    openCopies.clear();
    return;
  }
  if (auto w = dyn_cast<tile::CopyWaitOp>(op))
    return execCopyWait(w);
  if (isa<tile::BarrierOp>(op))
    return; // a program runs as one sequence here: nothing to wait for
  if (auto pf = dyn_cast<tile::PrefetchL2Op>(op))
    return execPrefetchL2(pf);
  if (auto d = dyn_cast<tile::DotOp>(op))
    return execDot(d);
  if (auto d = dyn_cast<tile::DotLoopOp>(op))
    return execDotLoop(d);
  if (auto r = dyn_cast<tile::ReduceRowsOp>(op))
    return execReduceRows(r);
  if (auto b = dyn_cast<tile::BroadcastRowsOp>(op))
    return execBroadcastRows(b);
  if (isa<tile::ArangeOp>(op)) {
    Shape s = shapeOf(op->getResult(0).getType());
    auto out = std::make_shared<IVec>(s.n);
    for (int64_t j = 0; j < s.n; ++j)
      (*out)[j] = j;
    return set(op->getResult(0), makeI(s, std::move(out)));
  }
  if (auto splat = dyn_cast<tile::SplatOp>(op)) {
    const RuntimeValue &src = get(splat.getSrc());
    Shape s = shapeOf(splat.getType());
    if (src.f)
      return set(splat.getResult(),
                 makeF(s, std::make_shared<FVec>(s.n, src.floatScalar())));
    if (src.i)
      return set(splat.getResult(),
                 makeI(s, std::make_shared<IVec>(s.n, src.intScalar())));
    fail("cannot splat a pointer");
  }
  if (auto addptr = dyn_cast<tile::AddPtrOp>(op)) {
    RuntimeValue r = get(addptr.getPtr());
    const RuntimeValue &off = intOperand(op, 1);
    if (r.elem != Elem::Ptr)
      fail("operand is not a pointer");
    if (__builtin_add_overflow(r.ptrOff, off.intScalar(), &r.ptrOff))
      fail("pointer offset overflows int64");
    return set(addptr.getResult(), std::move(r));
  }
  if (auto p = dyn_cast<tile::ProgramIdOp>(op))
    return set(p.getResult(), intScalar(Elem::I32, pid[p.getAxis()]));
  if (auto p = dyn_cast<tile::NumProgramsOp>(op)) {
    int64_t dims[3] = {k.grid.x, k.grid.y, k.grid.z};
    return set(p.getResult(), intScalar(Elem::I32, dims[p.getAxis()]));
  }
  if (auto c = dyn_cast<tile::ConstexprOp>(op))
    fail("tile.constexpr \"" + c.getName().str() +
         "\" is not specialized: run tile-specialize before interpreting");
  fail("unsupported tile op in the CPU interpreter");
}

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
  if (!c.tile) { // a scalar condition picks a whole value
    RuntimeValue r = c.intScalar() ? a : b;
    return set(op.getResult(), std::move(r));
  }
  checkSizes(c.size(), a.size());
  checkSizes(a.size(), b.size());
  Shape s = shapeOf(op.getType());
  size_t n = c.size();
  const int64_t *pc = c.i->data();
  if (a.f && b.f) {
    auto out = std::make_shared<FVec>(n);
    for (size_t j = 0; j < n; ++j)
      (*out)[j] = pc[j] ? (*a.f)[j] : (*b.f)[j];
    return set(op.getResult(), makeF(s, std::move(out)));
  }
  if (a.i && b.i) {
    auto out = std::make_shared<IVec>(n);
    for (size_t j = 0; j < n; ++j)
      (*out)[j] = pc[j] ? (*a.i)[j] : (*b.i)[j];
    return set(op.getResult(), makeI(s, std::move(out)));
  }
  fail("select operands have mismatched kinds");
}

/// Typed element access to an argument buffer.
template <typename Fn> void withBufferType(DType t, Fn fn) {
  switch (t) {
  case DType::I1:
    return fn(static_cast<uint8_t *>(nullptr));
  case DType::I32:
    return fn(static_cast<int32_t *>(nullptr));
  case DType::I64:
    return fn(static_cast<int64_t *>(nullptr));
  case DType::BF16:
  case DType::F16:
    return fn(static_cast<uint16_t *>(nullptr));
  case DType::F32:
    return fn(static_cast<float *>(nullptr));
  }
}

void Runner::execLoad(tile::LoadOp op) {
  const RuntimeValue &ptr = get(op.getPtr());
  const RuntimeValue &offs = intOperand(op, 1);
  const RuntimeValue *mask = op.getMask() ? &get(op.getMask()) : nullptr;
  const RuntimeValue *other = op.getOther() ? &get(op.getOther()) : nullptr;
  set(op.getResult(),
      loadElements(ptr, offs, mask, other, shapeOf(op.getType())));
}

RuntimeValue Runner::loadElements(const RuntimeValue &ptr,
                                  const RuntimeValue &offs,
                                  const RuntimeValue *mask,
                                  const RuntimeValue *other, Shape s) {
  if (ptr.elem != Elem::Ptr || ptr.ptrArg < 0)
    fail("load from a non-pointer value");
  size_t n = offs.size();
  size_t maskStride = 0;
  if (mask) {
    if (mask->size() != 1)
      checkSizes(mask->size(), n);
    maskStride = mask->size() == 1 ? 0 : 1;
  }
  const InterpBuffer &buf = bufferOf(ptr);
  const int64_t *po = offs.i->data();
  const int64_t *pm = mask ? mask->i->data() : nullptr;
  DType dt = buf.dtype;
  const int64_t size = buf.numElements;

  if (isFloatElem(s.elem)) {
    float fill = other ? other->floatScalar() : 0.0f;
    auto out = std::make_shared<FVec>(n, fill);
    float *dst = out->data();
    withBufferType(dt, [&](auto *typed) {
      using T = std::remove_pointer_t<decltype(typed)>;
      const T *base = static_cast<const T *>(buf.data);
      for (size_t j = 0; j < n; ++j) {
        if (pm && !pm[j * maskStride])
          continue;
        int64_t o = checkedOffset(ptr, size, po[j], j, "load");
        if constexpr (std::is_same_v<T, uint16_t>)
          dst[j] =
              dt == DType::BF16 ? bf16ToFloat(base[o]) : halfToFloat(base[o]);
        else
          dst[j] = static_cast<float>(base[o]);
      }
    });
    return makeF(s, std::move(out));
  }
  int64_t fill = other ? other->intScalar() : 0;
  auto out = std::make_shared<IVec>(n, fill);
  int64_t *dst = out->data();
  withBufferType(dt, [&](auto *typed) {
    using T = std::remove_pointer_t<decltype(typed)>;
    const T *base = static_cast<const T *>(buf.data);
    for (size_t j = 0; j < n; ++j) {
      if (pm && !pm[j * maskStride])
        continue;
      int64_t o = checkedOffset(ptr, size, po[j], j, "load");
      if constexpr (std::is_same_v<T, uint8_t>)
        dst[j] = base[o] != 0 ? 1 : 0;
      else
        dst[j] = static_cast<int64_t>(base[o]);
    }
  });
  return makeI(s, std::move(out));
}

void Runner::execStore(tile::StoreOp op) {
  storeElements(get(op.getPtr()), intOperand(op, 1), get(op.getValue()),
                op.getMask() ? &get(op.getMask()) : nullptr);
}

void Runner::storeElements(const RuntimeValue &ptr, const RuntimeValue &offs,
                           const RuntimeValue &val, const RuntimeValue *mask) {
  if (ptr.elem != Elem::Ptr || ptr.ptrArg < 0)
    fail("store to a non-pointer value");
  size_t n = offs.size();
  if (val.size() != 1)
    checkSizes(val.size(), n);
  size_t valStride = val.size() == 1 ? 0 : 1;
  size_t maskStride = 0;
  if (mask) {
    if (mask->size() != 1)
      checkSizes(mask->size(), n);
    maskStride = mask->size() == 1 ? 0 : 1;
  }
  const InterpBuffer &buf = bufferOf(ptr);
  const int64_t *po = offs.i->data();
  const int64_t *pm = mask ? mask->i->data() : nullptr;
  DType dt = buf.dtype;
  const int64_t size = buf.numElements;
  if (isFloat(dt) != bool(val.f))
    fail(std::string("cannot store ") + elemName(val.elem) +
         " values into a buffer of " + dtypeName(dt));
  withBufferType(dt, [&](auto *typed) {
    using T = std::remove_pointer_t<decltype(typed)>;
    T *base = static_cast<T *>(buf.data);
    for (size_t j = 0; j < n; ++j) {
      if (pm && !pm[j * maskStride])
        continue;
      int64_t o = checkedOffset(ptr, size, po[j], j, "store");
      if constexpr (std::is_same_v<T, uint16_t>) {
        float x = (*val.f)[j * valStride];
        base[o] = dt == DType::BF16 ? floatToBf16(x) : floatToHalf(x);
      } else if constexpr (std::is_same_v<T, float>) {
        base[o] = (*val.f)[j * valStride];
      } else if constexpr (std::is_same_v<T, uint8_t>) {
        base[o] = (*val.i)[j * valStride] != 0 ? 1 : 0;
      } else {
        base[o] = static_cast<T>((*val.i)[j * valStride]);
      }
    }
  });
}

void Runner::execReduce(tile::ReduceOp op) {
  const RuntimeValue &src = get(op.getSrc());
  Shape s = shapeOf(op.getType());
  size_t n = src.size();
  if (n == 0)
    fail("reduction of an empty tile");
  ReduceKind kind = op.getKind();
  if (src.f) {
    const float *x = src.f->data();
    float r;
    if (kind == ReduceKind::Sum) {
      // The GPU order: each of the P threads sums its K = n/P consecutive
      // elements, then a tree combines the partials (stride P/2, P/4, ...).
      size_t p = llvm::bit_floor(
          static_cast<uint64_t>(std::max<int64_t>(k.blockThreads, 1)));
      while (p > 1 && n % p != 0)
        p /= 2;
      // (Lanes outermost so that the P independent chains pipeline.)
      size_t kk = n / p;
      llvm::SmallVector<float, 256> partial(p);
      for (size_t t = 0; t < p; ++t)
        partial[t] = x[t * kk];
      for (size_t j = 1; j < kk; ++j)
        for (size_t t = 0; t < p; ++t)
          partial[t] += x[t * kk + j];
      for (size_t stride = p / 2; stride >= 1; stride /= 2)
        for (size_t t = 0; t < stride; ++t)
          partial[t] += partial[t + stride];
      r = partial[0];
    } else {
      r = x[0];
      for (size_t j = 1; j < n; ++j)
        r = combineF(kind, r, x[j]);
    }
    return set(op.getResult(),
               makeF(s, std::make_shared<FVec>(1, roundTo(r, s.elem))));
  }
  const int64_t *x = src.i->data();
  int64_t r = x[0];
  for (size_t j = 1; j < n; ++j)
    r = combineI(kind, r, x[j], s.elem);
  set(op.getResult(), intScalar(s.elem, r));
}

void Runner::execReduceRows(tile::ReduceRowsOp op) {
  const RuntimeValue &src = get(op.getSrc());
  Shape s = shapeOf(op.getType());
  int64_t cols = op.getCols();
  ReduceKind kind = op.getKind();
  if (src.f) { // in column order, as the GPU lowering
    auto out = std::make_shared<FVec>(s.n);
    for (int64_t r = 0; r < s.n; ++r) {
      float acc = (*src.f)[r * cols];
      for (int64_t j = 1; j < cols; ++j)
        acc = combineF(kind, acc, (*src.f)[r * cols + j]);
      (*out)[r] = acc;
    }
    return set(op.getResult(), makeF(s, std::move(out)));
  }
  auto out = std::make_shared<IVec>(s.n);
  for (int64_t r = 0; r < s.n; ++r) {
    int64_t acc = (*src.i)[r * cols];
    for (int64_t j = 1; j < cols; ++j)
      acc = combineI(kind, acc, (*src.i)[r * cols + j], s.elem);
    (*out)[r] = acc;
  }
  set(op.getResult(), makeI(s, std::move(out)));
}

void Runner::execBroadcastRows(tile::BroadcastRowsOp op) {
  const RuntimeValue &src = get(op.getSrc());
  Shape s = shapeOf(op.getType());
  int64_t cols = op.getCols();
  if (src.f) {
    auto out = std::make_shared<FVec>(s.n);
    for (int64_t i = 0; i < s.n; ++i)
      (*out)[i] = (*src.f)[i / cols];
    return set(op.getResult(), makeF(s, std::move(out)));
  }
  auto out = std::make_shared<IVec>(s.n);
  for (int64_t i = 0; i < s.n; ++i)
    (*out)[i] = (*src.i)[i / cols];
  set(op.getResult(), makeI(s, std::move(out)));
}

/// acc += a b for row-major a (M x K), b (K x N), acc (M x N): products
/// of bf16/f16 values are exact in f32; sums in k order (tile.dot).
void accumulateProduct(const FVec &a, const FVec &b, FVec &acc,
                       int64_t M, int64_t N, int64_t K) {
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      float s = acc[i * N + j];
      for (int64_t kk = 0; kk < K; ++kk)
        s += a[i * K + kk] * b[kk * N + j];
      acc[i * N + j] = s;
    }
}

void Runner::execDot(tile::DotOp op) {
  auto out = std::make_shared<FVec>(*get(op.getAcc()).f);
  accumulateProduct(*get(op.getA()).f, *get(op.getB()).f, *out, op.getM(),
                    op.getN(), op.getK());
  set(op.getResult(), makeF(shapeOf(op.getType()), std::move(out)));
}

void Runner::execDotLoop(tile::DotLoopOp op) {
  auto scalar = [&](Value v) { return get(v).intScalar(); };
  // The R x C block at (r0, c0) of a view, zeros outside it (tile.load_block).
  auto block = [&](Value ptr, Value rows, Value cols, Value rs, Value cs,
                   int64_t r0, int64_t c0, int64_t R, int64_t C) {
    int64_t nr = scalar(rows), nc = scalar(cols), sr = scalar(rs),
            sc = scalar(cs);
    auto offs = std::make_shared<IVec>(R * C, 0);
    auto mask = std::make_shared<IVec>(R * C, 0);
    for (int64_t i = 0; i < R; ++i)
      for (int64_t j = 0; j < C; ++j) {
        int64_t r = r0 + i, c = c0 + j;
        if (r >= 0 && r < nr && c >= 0 && c < nc) {
          (*mask)[i * C + j] = 1;
          (*offs)[i * C + j] = r * sr + c * sc;
        }
      }
    RuntimeValue o = makeI({Elem::I64, true, R * C}, std::move(offs));
    RuntimeValue m = makeI({Elem::I1, true, R * C}, std::move(mask));
    return loadElements(get(ptr), o, &m, nullptr, {Elem::F32, true, R * C});
  };
  int64_t M = op.getM(), N = op.getN(), K = op.getK();
  auto out = std::make_shared<FVec>(*get(op.getAcc()).f);
  for (int64_t kk = scalar(op.getKBegin()); kk < scalar(op.getKEnd());
       kk += K) {
    RuntimeValue a = block(op.getA(), op.getARows(), op.getACols(),
                           op.getARowStride(), op.getAColStride(),
                           scalar(op.getARow0()), kk, M, K);
    RuntimeValue b = block(op.getB(), op.getBRows(), op.getBCols(),
                           op.getBRowStride(), op.getBColStride(), kk,
                           scalar(op.getBCol0()), K, N);
    accumulateProduct(*a.f, *b.f, *out, M, N, K);
  }
  set(op.getResult(), makeF(shapeOf(op.getType()), std::move(out)));
}

void Runner::execClusterReduce(tile::ClusterReduceOp op) {
  std::vector<ClusterExchange::Scalar> mine;
  for (Value src : op.getSrcs()) {
    const RuntimeValue &v = get(src);
    mine.push_back(v.f ? ClusterExchange::Scalar{v.floatScalar(), 0}
                       : ClusterExchange::Scalar{0, v.intScalar()});
  }
  if (!cluster) { // a cluster of one program
    for (auto [src, res] : llvm::zip(op.getSrcs(), op.getResults()))
      set(res, get(src));
    return;
  }
  auto all = cluster->exchange(pid[0] % k.clusterSize, op, std::move(mine));
  ReduceKind kind = op.getKind();
  for (auto [i, res] : llvm::enumerate(op.getResults())) {
    Shape s = shapeOf(res.getType());
    if (s.elem == Elem::F32) {
      float r = all[0][i].f;
      for (size_t c = 1; c < all.size(); ++c)
        r = combineF(kind, r, all[c][i].f);
      set(res, makeF(s, std::make_shared<FVec>(1, r)));
      continue;
    }
    int64_t r = all[0][i].i;
    for (size_t c = 1; c < all.size(); ++c)
      r = combineI(kind, r, all[c][i].i, s.elem);
    set(res, intScalar(s.elem, r));
  }
}

void Runner::execFor(scf::ForOp op) {
  const RuntimeValue &lbv = intOperand(op, 0);
  const RuntimeValue &ubv = intOperand(op, 1);
  const RuntimeValue &stepv = intOperand(op, 2);
  Elem ivElem = lbv.elem;
  bool isUnsigned = op.getUnsignedCmp();
  int64_t lb = lbv.intScalar(), ub = ubv.intScalar(), step = stepv.intScalar();
  if (isUnsigned ? zext(step, ivElem) == 0 : step <= 0)
    fail("scf.for step must be positive, got " + std::to_string(step));
  llvm::SmallVector<RuntimeValue, 4> iter;
  for (Value v : op.getInitArgs())
    iter.push_back(get(v));
  Block &body = *op.getBody();
  Value iv = op.getInductionVar();
  auto inRange = [&](int64_t i) {
    return isUnsigned ? zext(i, ivElem) < zext(ub, ivElem) : i < ub;
  };
  for (int64_t i = lb; inRange(i);) {
    set(iv, intScalar(ivElem, i));
    for (auto [arg, v] : llvm::zip(op.getRegionIterArgs(), iter))
      set(arg, v);
    Operation *term = runBlock(body);
    for (auto [j, v] : llvm::enumerate(term->getOperands()))
      iter[j] = get(v);
    // The next value in the loop's width; leave when it passes the bound.
    int64_t next;
    if (isUnsigned) {
      uint64_t un = zext(i, ivElem) + zext(step, ivElem);
      if (un < zext(i, ivElem) ||
          (ivElem != Elem::I64 && un > zext(-1, ivElem)))
        break;
      next = normalize(un, ivElem);
    } else {
      if (__builtin_add_overflow(i, step, &next) ||
          next != normalize(uint64_t(next), ivElem))
        break;
    }
    i = next;
  }
  cur = op;
  for (auto [res, v] : llvm::zip(op.getResults(), iter))
    set(res, v);
}

void Runner::execIf(scf::IfOp op) {
  bool cond = intOperand(op, 0).intScalar() != 0;
  Region &region = cond ? op.getThenRegion() : op.getElseRegion();
  if (region.empty()) {
    if (op.getNumResults() != 0)
      fail("scf.if with results has no else region");
    return;
  }
  auto results = runRegion(region, {});
  cur = op;
  for (auto [res, v] : llvm::zip(op.getResults(), results))
    set(res, std::move(v));
}

void Runner::execWhile(scf::WhileOp op) {
  llvm::SmallVector<RuntimeValue, 4> args;
  for (Value v : op.getInits())
    args.push_back(get(v));
  while (true) {
    Operation *term = nullptr;
    auto carried = runRegion(op.getBefore(), args, &term);
    auto condOp = dyn_cast<scf::ConditionOp>(term);
    if (!condOp || carried.empty())
      fail("scf.while: malformed before region");
    bool cond = carried.front().intScalar() != 0;
    carried.erase(carried.begin());
    if (!cond) {
      cur = op;
      for (auto [res, v] : llvm::zip(op.getResults(), carried))
        set(res, std::move(v));
      return;
    }
    args = runRegion(op.getAfter(), carried);
  }
}

//===----------------------------------------------------------------------===//
// Kernel lookup and argument binding
//===----------------------------------------------------------------------===//

func::FuncOp findKernel(Operation *module, const std::string &name) {
  if (auto f = dyn_cast<func::FuncOp>(module))
    return f.getSymName() == name ? f : func::FuncOp();
  func::FuncOp found;
  for (Region &region : module->getRegions())
    for (Block &block : region)
      for (Operation &op : block)
        if (auto f = dyn_cast<func::FuncOp>(&op))
          if (f.getSymName() == name)
            found = f;
  return found;
}

std::string kernelNames(Operation *module) {
  std::string names;
  for (Region &region : module->getRegions())
    for (Block &block : region)
      for (Operation &op : block)
        if (auto f = dyn_cast<func::FuncOp>(&op)) {
          if (!names.empty())
            names += ", ";
          names += "'" + f.getSymName().str() + "'";
        }
  return names.empty() ? "none" : names;
}

const char *argKindName(const InterpArg &a) {
  if (std::holds_alternative<InterpBuffer>(a))
    return "a buffer";
  if (std::holds_alternative<int32_t>(a))
    return "an int32_t";
  if (std::holds_alternative<int64_t>(a))
    return "an int64_t";
  return "a float";
}

void bindArguments(Kernel &k) {
  auto prefix = [&](size_t i) {
    return "interpret: kernel '" + k.name + "' at " +
           locationOf(k.func.getOperation()) + ": argument #" +
           std::to_string(i) + " ";
  };
  auto argTypes = k.func.getArgumentTypes();
  if (argTypes.size() != k.args->size())
    throw Error("interpret: kernel '" + k.name + "' at " +
                locationOf(k.func.getOperation()) + " takes " +
                std::to_string(argTypes.size()) + " arguments, got " +
                std::to_string(k.args->size()));
  for (size_t i = 0; i < argTypes.size(); ++i) {
    Type t = argTypes[i];
    const InterpArg &a = (*k.args)[i];
    RuntimeValue v;
    if (auto ptrType = dyn_cast<tile::PtrType>(t)) {
      auto elem = elemOfScalar(ptrType.getElementType());
      if (!elem || *elem == Elem::Ptr)
        throw Error(prefix(i) + "has unsupported type " + typeString(t));
      auto *buf = std::get_if<InterpBuffer>(&a);
      if (!buf)
        throw Error(prefix(i) + "(" + typeString(t) + ") needs a buffer, got " +
                    argKindName(a));
      if (buf->dtype != dtypeOfElem(*elem))
        throw Error(prefix(i) + "(" + typeString(t) + ") needs a buffer of " +
                    elemName(*elem) + ", got a buffer of " +
                    dtypeName(buf->dtype));
      if (buf->numElements < 0 || (buf->numElements > 0 && !buf->data))
        throw Error(prefix(i) + "is a null or negative-sized buffer");
      v.elem = Elem::Ptr;
      v.ptrArg = static_cast<int>(i);
    } else if (t.isInteger(32)) {
      if (!std::holds_alternative<int32_t>(a))
        throw Error(prefix(i) + "(i32) needs an int32_t, got " +
                    argKindName(a));
      v.elem = Elem::I32;
      v.i = std::make_shared<IVec>(1, std::get<int32_t>(a));
    } else if (t.isInteger(64)) {
      if (!std::holds_alternative<int64_t>(a))
        throw Error(prefix(i) + "(i64) needs an int64_t, got " +
                    argKindName(a));
      v.elem = Elem::I64;
      v.i = std::make_shared<IVec>(1, std::get<int64_t>(a));
    } else if (t.isF32()) {
      if (!std::holds_alternative<float>(a))
        throw Error(prefix(i) + "(f32) needs a float, got " + argKindName(a));
      v.elem = Elem::F32;
      v.f = std::make_shared<FVec>(1, std::get<float>(a));
    } else {
      throw Error(prefix(i) + "has unsupported type " + typeString(t) +
                  " (kernels take !tile.ptr, i32, i64 or f32)");
    }
    k.argValues.push_back(std::move(v));
  }
}

unsigned workerCount(int64_t programs) {
  if (programs < 2)
    return 1;
  unsigned n = std::thread::hardware_concurrency();
  if (const char *env = std::getenv("TILEJIT_INTERP_THREADS")) {
    int v = std::atoi(env);
    if (v > 0)
      n = static_cast<unsigned>(v);
  }
  n = std::clamp(n, 1u, 16u);
  return static_cast<unsigned>(std::min<int64_t>(n, programs));
}

/// Runs the programs of each cluster together, one thread each (they meet in
/// tile.cluster_reduce); clusters run one after another.
void runClusters(const Kernel &k, Grid grid) {
  int64_t c = k.clusterSize;
  for (int64_t z = 0; z < grid.z; ++z)
    for (int64_t y = 0; y < grid.y; ++y)
      for (int64_t x0 = 0; x0 < grid.x; x0 += c) {
        ClusterExchange exchange(c);
        std::mutex errorMutex;
        std::exception_ptr error;
        std::vector<std::thread> threads;
        for (int64_t r = 0; r < c; ++r)
          threads.emplace_back([&, r] {
            try {
              Runner(k, &exchange).runProgram(x0 + r, y, z);
              exchange.finished();
            } catch (const std::exception &e) {
              exchange.abortLocked(e.what());
              std::lock_guard<std::mutex> lock(errorMutex);
              if (!error) // the first failure is the cause
                error = std::current_exception();
            }
          });
        for (std::thread &t : threads)
          t.join();
        if (error)
          std::rethrow_exception(error);
      }
}

} // namespace

void interpret(mlir::Operation *module, const std::string &kernelName,
               Grid grid, const std::vector<InterpArg> &args) {
  if (!module)
    throw Error("interpret: no module");
  Kernel k;
  k.name = kernelName;
  k.grid = grid;
  k.args = &args;
  k.func = findKernel(module, kernelName);
  if (!k.func)
    throw Error("interpret: unknown kernel '" + kernelName +
                "' (the module has: " + kernelNames(module) + ")");
  if (k.func.getBody().empty())
    throw Error("interpret: kernel '" + kernelName + "' has no body");
  if (grid.x < 0 || grid.y < 0 || grid.z < 0 || grid.x > INT32_MAX ||
      grid.y > INT32_MAX || grid.z > INT32_MAX)
    throw Error("interpret: kernel '" + kernelName + "': bad grid (" +
                std::to_string(grid.x) + ", " + std::to_string(grid.y) + ", " +
                std::to_string(grid.z) + ")");
  // A row split over a cluster runs as that many programs; a module that
  // asks for the split but has not been through tile-split-rows would run
  // unsplit code on too many programs.
  auto asked = k.func->getAttrOfType<IntegerAttr>(attr::kSplitRows);
  auto split = k.func->getAttrOfType<IntegerAttr>(attr::kRowsSplit);
  if (asked && asked.getInt() > 1 && !split)
    throw Error("interpret: kernel '" + kernelName +
                "' asks for tile.split_rows but its rows are not split: "
                "interpret the module optimizeTile() returns");
  if (auto r = split; r && r.getInt() > 1) {
    if (grid.x > INT32_MAX / r.getInt())
      throw Error("interpret: kernel '" + kernelName + "': a grid of " +
                  std::to_string(grid.x) + " rows split over " +
                  std::to_string(r.getInt()) + " programs is too large");
    grid.x *= r.getInt();
    k.grid = grid;
  }
  if (auto c = k.func->getAttrOfType<IntegerAttr>(attr::kClusterSize))
    k.clusterSize = c.getInt();
  if (k.clusterSize < 1 || grid.x % k.clusterSize != 0)
    throw Error("interpret: kernel '" + kernelName + "': the grid's x (" +
                std::to_string(grid.x) +
                ") is not a multiple of its cluster "
                "size (" +
                std::to_string(k.clusterSize) + ")");
  if (auto threads = k.func->getAttrOfType<IntegerAttr>(attr::kThreads))
    k.blockThreads = threads.getInt();
  else if (auto warps = k.func->getAttrOfType<IntegerAttr>(attr::kNumWarps))
    k.blockThreads = 32 * warps.getInt();
  bindArguments(k);

  int64_t programs = grid.x * grid.y * grid.z;
  if (programs == 0)
    return;
  auto runRange = [&](Runner &runner, int64_t idx) {
    int64_t px = idx % grid.x, py = (idx / grid.x) % grid.y,
            pz = idx / (grid.x * grid.y);
    runner.runProgram(px, py, pz);
  };
  if (k.clusterSize > 1)
    return runClusters(k, grid);
  unsigned workers = workerCount(programs);
  if (workers == 1) {
    Runner runner(k);
    for (int64_t idx = 0; idx < programs; ++idx)
      runRange(runner, idx);
    return;
  }

  std::atomic<int64_t> next{0};
  std::atomic<bool> stop{false};
  std::mutex errorMutex;
  std::exception_ptr error;
  int64_t errorProgram = INT64_MAX;
  auto work = [&]() {
    Runner runner(k);
    while (!stop.load(std::memory_order_relaxed)) {
      int64_t idx = next.fetch_add(1);
      if (idx >= programs)
        return;
      try {
        runRange(runner, idx);
      } catch (...) {
        std::lock_guard<std::mutex> lock(errorMutex);
        if (idx < errorProgram) { // report the lowest failing program seen
          errorProgram = idx;
          error = std::current_exception();
        }
        stop = true;
      }
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(workers);
  for (unsigned t = 0; t < workers; ++t)
    threads.emplace_back(work);
  for (std::thread &t : threads)
    t.join();
  if (error)
    std::rethrow_exception(error);
}

} // namespace tilejit
