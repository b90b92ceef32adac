//===- Kernel.cpp - compile a kernel spec, launch it with checked arguments -===//
#include "tilejit/Kernel.h"

#include "ops/TunedConfig.h"
#include "runtime/Cache.h"
#include "runtime/CudaDriver.h"
#include "tilejit/CachedCompile.h"
#include "tilejit/Error.h"
#include "tilejit/KernelSpec.h"
#include "tilejit/Log.h"
#include "tilejit/TensorMap.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/ThreadPool.h"
#include "llvm/Support/Threading.h"

#include <algorithm>
#include <exception>
#include <future>
#include <map>
#include <mutex>
#include <optional>

namespace tilejit {

struct Kernel::State {
  TileModule module;
  std::string config, configSource;
  std::string arch;
  std::vector<KernelParam> params;

  std::mutex mutex;
  /// For the interpreter, each made once: the tile-level and the
  /// thread-level module.
  std::optional<TileModule> optimized, simt;
  /// The binary per target ("sm_90", ...), and per GPU the module loaded
  /// from it: a kernel runs on the GPU current on the calling thread.
  std::map<std::string, std::shared_ptr<const CompiledKernel>> compiled;
  struct OnGpu {
    // The device outlives the module loaded in its context (declared
    // first, destroyed last).
    cuda::Device device;
    LoadedKernels loaded;
    std::shared_ptr<const CompiledKernel> compiled;
    const cuda::Function *function = nullptr;
    explicit OnGpu(int ordinal) : device(cuda::Device::open(ordinal)) {}
  };
  std::map<int, std::unique_ptr<OnGpu>> gpus;

  State(TileModule m, std::string c, std::string a)
      : module(std::move(m)), config(std::move(c)), arch(std::move(a)),
        params(module.params()) {}
};

Kernel Kernel::compile(const std::string &name, const KernelOptions &options) {
  return compile(findKernel(name), options);
}

Kernel Kernel::compile(const KernelSpec &spec, const KernelOptions &options) {
  std::vector<std::string> set = options.set;
  std::string source = set.empty() ? "default" : "set";
  if (options.tuned && set.empty())
    set = tunedOverridesHere(spec, options.dtype, options.shape, &source);
  dsl::Config config = spec.config(options.dtype, set, options.shape);
  Kernel k(spec.build(config), options.arch);
  k.S->config = config.str();
  k.S->configSource = std::move(source);
  return k;
}

Kernel::Kernel(TileModule module, std::string arch)
    : S(std::make_shared<State>(std::move(module), "", std::move(arch))) {}

const std::string &Kernel::name() const { return S->module.kernelName(); }
const std::string &Kernel::config() const { return S->config; }
const std::string &Kernel::configSource() const { return S->configSource; }
const std::vector<KernelParam> &Kernel::params() const { return S->params; }

static const char *kindName(KernelArg::Kind k) {
  switch (k) {
  case KernelArg::Kind::Pointer:
    return "a pointer";
  case KernelArg::Kind::I32:
    return "an i32";
  case KernelArg::Kind::I64:
    return "an i64";
  case KernelArg::Kind::F32:
    return "an f32";
  }
  return "?";
}

static std::string describe(const KernelParam &p) {
  return p.pointer ? std::string("a pointer to ") + dtypeName(p.dtype)
                   : std::string("an ") + dtypeName(p.dtype) + " scalar";
}

void Kernel::checkArgs(const std::vector<KernelArg> &args, bool onCpu) const {
  const std::vector<KernelParam> &ps = S->params;
  auto fail = [&](const std::string &why) {
    throw Error("kernel '" + name() + "': " + why);
  };
  if (args.size() != ps.size()) {
    std::string names;
    for (const KernelParam &p : ps)
      names += (names.empty() ? "" : ", ") + p.name;
    fail(std::to_string(ps.size()) + " arguments expected (" + names +
         "), got " + std::to_string(args.size()));
  }
  for (size_t i = 0; i < ps.size(); ++i) {
    const KernelParam &p = ps[i];
    const KernelArg &a = args[i];
    // Built only for a message: every launch checks its arguments.
    auto which = [&] {
      return "argument " + std::to_string(i) + " '" + p.name + "'";
    };
    bool isPointer = a.kind == KernelArg::Kind::Pointer;
    if (p.pointer != isPointer || a.dtype != p.dtype)
      fail(which() + " is " + describe(p) + ", got " + kindName(a.kind) +
           (isPointer ? std::string(" to ") + dtypeName(a.dtype) : ""));
    if (isPointer && onCpu && (a.ptr == nullptr || a.numElements < 0))
      fail(which() + ": a CPU run needs a host pointer and its number of "
                     "elements");
    if (!isPointer && a.kind == KernelArg::Kind::I32 &&
        (a.i < INT32_MIN || a.i > INT32_MAX))
      fail(which() + " = " + std::to_string(a.i) + " does not fit in i32");
  }
}

void Kernel::runOnCpu(Grid grid, const std::vector<KernelArg> &args,
                      std::optional<InterpretLevel> asked) const {
  checkArgs(args, /*onCpu=*/true);
  InterpretLevel level = asked ? *asked : defaultInterpretLevel();
  const TileModule *m;
  {
    std::lock_guard<std::mutex> lock(S->mutex);
    if (!S->optimized) {
      TileModule copy = S->module.clone();
      optimizeTile(copy);
      S->optimized.emplace(std::move(copy));
    }
    if (level == InterpretLevel::Simt && !S->simt) {
      TileModule copy = S->optimized->clone();
      lowerToSimt(copy);
      S->simt.emplace(std::move(copy));
    }
    m = level == InterpretLevel::Simt ? &*S->simt : &*S->optimized;
  }
  std::vector<InterpArg> interp;
  for (const KernelArg &a : args)
    switch (a.kind) {
    case KernelArg::Kind::Pointer:
      interp.push_back(InterpBuffer{a.ptr, a.dtype, a.numElements});
      break;
    case KernelArg::Kind::I32:
      interp.push_back(static_cast<int32_t>(a.i));
      break;
    case KernelArg::Kind::I64:
      interp.push_back(a.i);
      break;
    case KernelArg::Kind::F32:
      interp.push_back(a.f);
      break;
    }
  interpret(m->operation(), name(), grid, interp);
}

/// The current GPU's state (opened on first use) and the target of its
/// binary. Called with S.mutex held.
static Kernel::State::OnGpu &onCurrentGpu(Kernel::State &S,
                                          std::string *arch) {
  int ordinal = cuda::Device::currentOrdinal();
  std::unique_ptr<Kernel::State::OnGpu> &g = S.gpus[ordinal];
  if (!g)
    g = std::make_unique<Kernel::State::OnGpu>(ordinal);
  *arch = S.arch.empty() ? g->device.archString() : S.arch;
  return *g;
}

/// Loads the binary for `arch` into g's context. Called with S.mutex held,
/// after S.compiled[arch] is set.
static void load(Kernel::State &S, Kernel::State::OnGpu &g,
                 const std::string &arch) {
  g.device.makeCurrent();
  g.compiled = S.compiled.at(arch);
  g.function = &g.loaded.function(*g.compiled);
}

const CompiledKernel &Kernel::compileForGpu() const {
  std::lock_guard<std::mutex> lock(S->mutex);
  std::string arch;
  State::OnGpu &g = onCurrentGpu(*S, &arch);
  if (!g.function) {
    std::shared_ptr<const CompiledKernel> &c = S->compiled[arch];
    if (!c) {
      CompileOptions o;
      o.arch = arch;
      c = compileCached(S->module, o, KernelCache::global());
    }
    load(*S, g, arch);
  }
  return *g.compiled;
}

void Kernel::compileForGpu(const std::vector<const Kernel *> &kernels) {
  // Each state once, locked in address order (two overlapping calls cannot
  // deadlock). The device is opened and the modules loaded on this thread;
  // only the compiles (MLIR in each kernel's own context, NVRTC) run on the
  // pool, at most one per core. A kernel in the disk cache comes back in
  // about a millisecond, so the wall time is that of the slowest miss.
  std::vector<State *> states;
  for (const Kernel *k : kernels)
    states.push_back(k->S.get());
  llvm::sort(states);
  states.erase(std::unique(states.begin(), states.end()), states.end());
  std::vector<std::unique_lock<std::mutex>> locks;
  std::vector<State *> todo;
  std::vector<State::OnGpu *> gpus;
  std::vector<std::string> archs;
  for (State *s : states) {
    locks.emplace_back(s->mutex);
    std::string arch;
    State::OnGpu &g = onCurrentGpu(*s, &arch);
    if (g.function)
      continue;
    todo.push_back(s);
    gpus.push_back(&g);
    archs.push_back(arch);
  }
  if (todo.empty())
    return;
  llvm::ThreadPoolStrategy threads = llvm::hardware_concurrency(todo.size());
  threads.Limit = true;
  llvm::StdThreadPool pool(threads);
  std::vector<std::shared_future<void>> done;
  for (size_t i = 0; i < todo.size(); ++i) {
    std::shared_ptr<const CompiledKernel> *slot = &todo[i]->compiled[archs[i]];
    done.push_back(pool.async([&, i, slot] {
      if (!*slot) {
        CompileOptions o;
        o.arch = archs[i];
        *slot = compileCached(todo[i]->module, o, KernelCache::global());
      }
    }));
  }
  pool.wait();
  // Every kernel that compiled is loaded; then the first error is thrown.
  std::exception_ptr first;
  for (size_t i = 0; i < todo.size(); ++i)
    try {
      done[i].get();
      load(*todo[i], *gpus[i], archs[i]);
    } catch (...) {
      if (!first)
        first = std::current_exception();
    }
  if (first)
    std::rethrow_exception(first);
}

KernelUsage Kernel::resources() const {
  std::lock_guard<std::mutex> lock(S->mutex);
  // Nothing loaded anywhere: no need to ask the driver which GPU is current.
  auto g = S->gpus.empty() ? S->gpus.end()
                           : S->gpus.find(cuda::Device::currentOrdinal());
  if (g == S->gpus.end() || !g->second->function)
    throw Error("kernel '" + name() +
                "': its resources are known once compileForGpu() has loaded "
                "it on this GPU");
  const State::OnGpu &on = *g->second;
  return {int(on.compiled->threads), on.function->numRegs(),
          on.function->sharedBytes(), int(on.compiled->dynamicSharedBytes)};
}

namespace {

/// Encodes tensor map `i` of kernel `kernel` from a launch's arguments into
/// `map`; false (and a debug log of why) where the copy engine cannot read
/// the view. Throws for parameter indices the arguments do not have (a
/// damaged cache entry).
bool tensorMapShape(const TensorMapParam &param,
                    const std::vector<KernelArg> &args,
                    const std::string &kernel, size_t i, CUtensorMap &map) {
  auto arg = [&](int index, bool pointer) -> const KernelArg & {
    if (index < 0 || size_t(index) >= args.size() ||
        (args[index].kind == KernelArg::Kind::Pointer) != pointer)
      throw Error("kernel '" + kernel + "': tensor map " + std::to_string(i) +
                  " names parameter " + std::to_string(index) +
                  ", which is not a " + (pointer ? "pointer" : "scalar"));
    return args[index];
  };
  auto value = [&](LaunchValue v) {
    return v.param < 0 ? v.value : arg(v.param, false).i;
  };
  TensorMapShape shape;
  std::string why;
  if (resolveTensorMap(
          param, reinterpret_cast<uint64_t>(arg(param.pointer, true).ptr),
          value(param.inner), value(param.outer), value(param.outerStride),
          shape, why))
    why = cuda::encodeTensorMap(shape, map);
  if (why.empty())
    return true;
  log()->debug("{}: tensor map {} not encoded ({}): its dot loop copies "
               "with cp.async",
               kernel, i, why);
  return false;
}

} // namespace

void Kernel::launch(Grid grid, const std::vector<KernelArg> &args,
                    CUstream stream) const {
  checkArgs(args, /*onCpu=*/false);
  const CompiledKernel &k = compileForGpu();
  const cuda::Function *function;
  int smCount = 0;
  {
    std::lock_guard<std::mutex> lock(S->mutex);
    const State::OnGpu &g = *S->gpus.at(cuda::Device::currentOrdinal());
    function = g.function;
    if (k.resident)
      smCount = g.device.smCount();
  }
  // A row split over a cluster runs as splitRows programs.
  if (grid.x > 0 && grid.x <= INT32_MAX / k.splitRows)
    grid.x *= k.splitRows;
  else if (grid.x > 0)
    throw Error("kernel '" + name() + "': a grid of " +
                std::to_string(grid.x) + " rows split over " +
                std::to_string(k.splitRows) +
                " programs each is more than CUDA launches");
  if (grid.x <= 0 || grid.y <= 0 || grid.z <= 0 || grid.x > INT32_MAX ||
      grid.y > 65535 || grid.z > 65535)
    throw Error("kernel '" + name() + "': grid " + std::to_string(grid.x) +
                " x " + std::to_string(grid.y) + " x " +
                std::to_string(grid.z) + " is outside what CUDA launches");
  if (grid.x % k.clusterSize != 0)
    throw Error("kernel '" + name() + "': a grid of " +
                std::to_string(grid.x) +
                " programs along x is not a multiple of its cluster size " +
                std::to_string(k.clusterSize));
  // Each parameter's value, in the form the driver copies from.
  std::vector<int64_t> values(args.size());
  std::vector<void *> pointers(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const KernelArg &a = args[i];
    void *slot = &values[i];
    switch (a.kind) {
    case KernelArg::Kind::Pointer:
      *static_cast<CUdeviceptr *>(slot) = reinterpret_cast<CUdeviceptr>(a.ptr);
      break;
    case KernelArg::Kind::I32:
      *static_cast<int32_t *>(slot) = static_cast<int32_t>(a.i);
      break;
    case KernelArg::Kind::I64:
      *static_cast<int64_t *>(slot) = a.i;
      break;
    case KernelArg::Kind::F32:
      *static_cast<float *>(slot) = a.f;
      break;
    }
    pointers[i] = slot;
  }
  // The tensor maps of the kernel's dot loops, encoded from these
  // arguments, then the mask of those the copy engine can read.
  std::vector<CUtensorMap> maps(k.tensorMaps.size());
  uint32_t mapsOk = 0;
  for (size_t i = 0; i < maps.size(); ++i) {
    if (tensorMapShape(k.tensorMaps[i], args, name(), i, maps[i]))
      mapsOk |= uint32_t(1) << i;
    pointers.push_back(&maps[i]);
  }
  if (!maps.empty())
    pointers.push_back(&mapsOk);
  // A resident kernel's blocks run the grid's programs in turn: one block
  // per SM at most (its shared memory allows no second), the grid after
  // the mask.
  int32_t programs[3] = {int32_t(grid.x), int32_t(grid.y), int32_t(grid.z)};
  if (k.resident) {
    for (int32_t &p : programs)
      pointers.push_back(&p);
    int64_t blocks = grid.x * grid.y * grid.z;
    grid = {std::min<int64_t>(blocks, smCount), 1, 1};
  }
  cuda::launch(*function,
               {unsigned(grid.x), unsigned(grid.y), unsigned(grid.z)},
               {unsigned(k.threads)}, size_t(k.dynamicSharedBytes), stream,
               pointers);
}

} // namespace tilejit
