//===- Interpreter.cpp - CPU interpreter for tile and SIMT kernels --------===//
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
#include "runtime/InterpRunner.h"

using namespace mlir;

namespace tilejit {
namespace interp {

void Runner::exec(Operation *op) {
  cur = op;
  Dialect *dialect = op->getDialect();
  StringRef ns = dialect ? dialect->getNamespace() : "";
  if (ns == "tile")
    return execTile(op);
  if (ns == "simt")
    return execSimt(op);
  if (ns == "vector")
    return execVector(op);
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
    int64_t off = uniformInt(addptr.getOffset(), "a pointer's offset");
    if (r.elem != Elem::Ptr)
      fail("operand is not a pointer");
    if (__builtin_add_overflow(r.ptrOff, off, &r.ptrOff))
      fail("pointer offset overflows int64");
    return set(addptr.getResult(), std::move(r));
  }
  if (auto p = dyn_cast<tile::ProgramIdOp>(op))
    return set(p.getResult(), spread(intScalar(Elem::I32, pid[p.getAxis()])));
  if (auto p = dyn_cast<tile::NumProgramsOp>(op))
    return set(p.getResult(),
               spread(intScalar(Elem::I32, gridDim(p.getAxis()))));
  if (auto c = dyn_cast<tile::ConstexprOp>(op))
    fail("tile.constexpr \"" + c.getName().str() +
         "\" is not specialized: run tile-specialize before interpreting");
  fail("unsupported tile op in the CPU interpreter");
}

} // namespace interp

using namespace interp;

namespace {

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
    // Every thread of a SIMT kernel holds it.
    k.argValues.push_back(repeatForThreads(std::move(v), k.lanes));
  }
}

/// Whether `func` is thread-level code (after tile-lower-to-simt): it has a
/// thread count and no tile-typed value is left.
bool isSimtKernel(func::FuncOp func) {
  if (!func->hasAttr(attr::kThreads))
    return false;
  auto isTile = [](Type t) { return isa<RankedTensorType>(t); };
  bool tiles = false;
  func.walk([&](Operation *op) {
    tiles |= llvm::any_of(op->getResultTypes(), isTile);
    for (Region &r : op->getRegions())
      for (Block &b : r)
        tiles |= llvm::any_of(b.getArgumentTypes(), isTile);
  });
  return !tiles;
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

namespace {
/// -1: not read from the environment yet.
std::atomic<int> defaultLevel{-1};
} // namespace

InterpretLevel defaultInterpretLevel() {
  int level = defaultLevel.load();
  if (level < 0) {
    const char *env = std::getenv("TILEJIT_INTERPRET");
    std::string v = env ? env : "";
    if (v != "" && v != "tile" && v != "simt")
      throw Error("TILEJIT_INTERPRET='" + v + "': expected tile or simt");
    int fromEnv =
        int(v == "simt" ? InterpretLevel::Simt : InterpretLevel::Tile);
    defaultLevel.compare_exchange_strong(level, fromEnv);
    level = defaultLevel.load();
  }
  return InterpretLevel(level);
}

void setDefaultInterpretLevel(InterpretLevel level) {
  defaultLevel.store(int(level));
}

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
  if (isSimtKernel(k.func))
    k.lanes = k.blockThreads;
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
