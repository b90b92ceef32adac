//===- InterpRunner.h - one program of a kernel in the interpreter -*- C++ -*-===//
//
// The kernel's shared state, the exchange of a cluster's programs and the
// Runner that executes one program; its op families are in
// Interpreter.cpp (dispatch, tile ops), InterpArith.cpp, InterpMemory.cpp
// and InterpSimt.cpp (thread-level ops). Internal to runtime/.
//
// A thread-level (SIMT) kernel runs its P threads in lockstep: every value
// holds all P threads' copies, thread-major (a scalar: P elements; a
// vector<K>: P * K, thread t's at t * K), so the arithmetic of tile-level
// kernels applies unchanged and block-wide ops see every thread at once.
// Control flow, pointers and the scalars that steer them must be the same
// in every thread (the lowering is uniform); a value that differs is an
// error.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_RUNTIME_INTERPRUNNER_H
#define TILEJIT_RUNTIME_INTERPRUNNER_H

#include "runtime/InterpValues.h"

namespace tilejit {
namespace interp {

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
  int64_t lanes = 1;          // copies per value: P for a SIMT kernel, else 1
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
inline std::mutex &printMutex() {
  static std::mutex m;
  return m;
}

/// acc += a b for row-major a (M x K), b (K x N), acc (M x N) (tile.dot).
void accumulateProduct(const FVec &a, const FVec &b, FVec &acc, int64_t M,
                       int64_t N, int64_t K);

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

  int64_t gridDim(unsigned axis) const {
    return axis == 0 ? k.grid.x : axis == 1 ? k.grid.y : k.grid.z;
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
    // A thread's part of a tile in a SIMT kernel (its value holds every
    // thread's: k.lanes times as many elements).
    if (auto vec = dyn_cast<VectorType>(t)) {
      auto e = elemOfScalar(vec.getElementType());
      if (vec.getRank() != 1 || !e || *e == Elem::Ptr)
        fail("unsupported vector type " + typeString(t));
      return {*e, true, vec.getNumElements()};
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

  /// `v` held by every thread of a SIMT kernel: its elements repeated
  /// k.lanes times (unchanged in a tile-level kernel).
  RuntimeValue spread(RuntimeValue v) const {
    return repeatForThreads(std::move(v), k.lanes);
  }

  /// The one value of scalar `v` that every thread holds; fails naming
  /// `what` when threads differ (control flow, addresses and sizes must be
  /// uniform in a program).
  int64_t uniformInt(Value v, const char *what) {
    const RuntimeValue &r = get(v);
    if (!r.i)
      fail(std::string(what) + " is not an integer value");
    checkUniform(r, what);
    return r.i->front();
  }
  float uniformFloat(Value v, const char *what) {
    const RuntimeValue &r = get(v);
    if (!r.f)
      fail(std::string(what) + " is not a float value");
    checkUniform(r, what);
    return r.f->front();
  }
  void checkUniform(const RuntimeValue &r, const char *what) {
    size_t n = r.size();
    bool same =
        r.f ? std::all_of(r.f->begin(), r.f->end(),
                          [&](float x) {
                            return llvm::bit_cast<uint32_t>(x) ==
                                   llvm::bit_cast<uint32_t>(r.f->front());
                          })
            : std::all_of(r.i->begin(), r.i->end(),
                          [&](int64_t x) { return x == r.i->front(); });
    if (n != 1 && n != size_t(k.lanes))
      fail(std::string(what) + " is not a scalar");
    if (!same)
      fail(std::string(what) +
           " differs between the threads of the program (a SIMT kernel's "
           "control flow, addresses and sizes must be uniform)");
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

  /// How many consecutive elements of an n-element access share one
  /// element of an operand of `size`: n (one for the whole access), 1 (one
  /// each) or, in a SIMT kernel, K (a per-thread scalar beside a thread's
  /// vector<K>).
  size_t repeatOf(size_t size, size_t n) {
    if (n == 0)
      return 1;
    bool whole = size == 1 && k.lanes == 1;
    bool perThread = k.lanes > 1 && size == size_t(k.lanes) && n % size == 0;
    if (size != n && !whole && !perThread)
      fail("operand sizes differ (" + std::to_string(size) + " vs " +
           std::to_string(n) + ")");
    return n / size;
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
  void execSimt(Operation *op);
  void execVector(Operation *op);
  /// A SIMT value of a tile of `s.n` elements (P * K, thread-major) as the
  /// tile in element order (the kernel's layout, layoutGroup) with
  /// `toTile`, else the tile back as the threads' elements.
  RuntimeValue relayout(const RuntimeValue &v, Shape s, bool toTile);
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

  /// tile.copy_async or simt.copy_async (the same operands).
  template <typename CopyOp> void execCopyAsync(CopyOp op) {
    const RuntimeValue &src = get(op.getSrc());
    const RuntimeValue *mask = op.getMask() ? &get(op.getMask()) : nullptr;
    PendingCopy c;
    c.dst = get(op.getDst());
    c.offsets = intOperand(op, 1);
    // The destination is checked now, so an error names this op.
    const InterpBuffer &dst = bufferOf(c.dst);
    const int64_t *po = c.offsets.i->data();
    size_t maskDiv = mask ? repeatOf(mask->size(), c.offsets.size()) : 1;
    for (size_t j = 0; j < c.offsets.size(); ++j)
      if (!mask || (*mask->i)[j / maskDiv])
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
    int64_t offset = uniformInt(op->getOperand(1), "the prefetch's offset");
    int64_t count = uniformInt(op->getOperand(2), "the prefetch's count");
    if (count <= 0)
      return;
    int64_t size = bufferOf(ptr).numElements;
    checkedOffset(ptr, size, offset, 0, "prefetchL2");
    checkedOffset(ptr, size, offset + count - 1, 0, "prefetchL2");
  }
  void execReduce(tile::ReduceOp op);
  RuntimeValue reduceRows(const RuntimeValue &src, ReduceKind kind,
                          int64_t cols, Shape s);
  RuntimeValue broadcastRows(const RuntimeValue &src, int64_t cols, Shape s);
  /// tile.dot_loop's or simt.dot_loop's product plus `acc` (a whole tile).
  template <typename DotLoop>
  RuntimeValue dotLoop(DotLoop op, const RuntimeValue &acc);
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

} // namespace interp
} // namespace tilejit

#endif // TILEJIT_RUNTIME_INTERPRUNNER_H
