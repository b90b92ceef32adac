//===- Kernel.h - compile a kernel spec, launch it with checked arguments -*- C++ -*-===//
//
// The library's entry point for any kernel written in the DSL, registered
// (kernels_spec/, registerKernel in tilejit/KernelSpec.h, or a kernel library
// loaded with `tilejit --load`) or built by the caller:
//
//   Kernel k = Kernel::compile("fused_ce_tvd_fwd",
//                              {DType::BF16, {"BLOCK_SIZE=4096"},
//                               {{"BT", 4096}, {"V", 151936}}});
//   k.launch({4096}, {KernelArg::pointer(student, DType::BF16), ...,
//                     KernelArg::i32(151936)}, stream);
//
// Arguments are checked against the kernel's declared parameters (count,
// pointer or scalar, dtype) before anything runs; a mismatch throws
// tilejit::Error naming the parameter. The GPU binary comes through the disk
// cache (runtime/Cache.h), compiled for the current device on first use; a
// launch is asynchronous on the caller's stream, never synchronizes, and can
// be captured in a CUDA graph once the kernel is compiled (compileForGpu()
// before capture). The same kernel runs on the CPU in the interpreter, on
// host buffers whose sizes bound every access.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_KERNEL_H
#define TILEJIT_KERNEL_H

#include "tilejit/Compiler.h"
#include "tilejit/DType.h"
#include "tilejit/DSL.h"
#include "tilejit/Interpreter.h"
#include "tilejit/TileModule.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

typedef struct CUstream_st *CUstream;

namespace tilejit {

struct KernelSpec;

/// One value for a kernel parameter. Pointers are device addresses for
/// launch() and host addresses for runOnCpu(); `numElements` (the elements
/// of `dtype` the buffer holds) is required on the CPU, where it bounds
/// every access, and unused on the GPU.
struct KernelArg {
  enum class Kind { Pointer, I32, I64, F32 };
  Kind kind;
  DType dtype;         ///< the pointee's dtype, or the scalar's
  void *ptr = nullptr; ///< Kind::Pointer
  int64_t numElements = -1;
  int64_t i = 0; ///< Kind::I32, Kind::I64
  float f = 0;   ///< Kind::F32

  static KernelArg pointer(void *p, DType dtype, int64_t numElements = -1) {
    return {Kind::Pointer, dtype, p, numElements};
  }
  static KernelArg pointer(const void *p, DType dtype,
                           int64_t numElements = -1) {
    return pointer(const_cast<void *>(p), dtype, numElements);
  }
  static KernelArg i32(int32_t v) { return {Kind::I32, DType::I32, nullptr, -1, v}; }
  static KernelArg i64(int64_t v) { return {Kind::I64, DType::I64, nullptr, -1, v}; }
  static KernelArg f32(float v) {
    return {Kind::F32, DType::F32, nullptr, -1, 0, v};
  }
};

/// How to build a kernel spec: its data dtype, NAME=VALUE parameters (what
/// `tilejit --set` takes; the spec's defaults for the rest), and the launch
/// shape (e.g. BT, V) for specs whose defaults or derived values follow it.
struct KernelOptions {
  DType dtype = DType::F32;
  std::vector<std::string> set;
  std::map<std::string, int64_t> shape;
  /// GPU target, e.g. "sm_90"; empty: the current device's.
  std::string arch;
  /// With `set` empty: the config `tilejit tune` stored for the current GPU,
  /// this dtype and `shape` (which must hold the spec's tuning sizes), else
  /// the defaults; without a GPU, the defaults. configSource() says which.
  bool tuned = false;
};

/// What one program of a loaded kernel uses on the GPU.
struct KernelUsage {
  int threads = 0;   ///< per program (thread block)
  int registers = 0; ///< per thread
  int staticSharedBytes = 0;
  int dynamicSharedBytes = 0;
};

/// A kernel built for one config: its parameters, and once compiled, its
/// GPU binary. Cheap to copy (shared state); thread-safe to launch.
class Kernel {
public:
  /// Builds the registered spec `name` (tilejit list) for `options`.
  /// Throws tilejit::Error for an unknown kernel, parameter or dtype.
  static Kernel compile(const std::string &name, const KernelOptions &options);
  /// The same for a spec the caller holds (registered or not).
  static Kernel compile(const KernelSpec &spec, const KernelOptions &options);
  /// A kernel the caller built with dsl::KernelBuilder.
  explicit Kernel(TileModule module, std::string arch = "");

  const std::string &name() const;
  /// The config it was built with ("" for a module built by the caller).
  const std::string &config() const;
  /// Where the config came from: "default", "set" (KernelOptions::set),
  /// "tuned, <file>", or "default; <why no tuned entry applies>"; "" for a
  /// module built by the caller.
  const std::string &configSource() const;
  /// The parameters in declaration order: what launch() checks against.
  const std::vector<KernelParam> &params() const;

  /// Throws tilejit::Error naming the first parameter `args` do not match
  /// (or saying how many were expected), and, with `onCpu`, a pointer
  /// without numElements.
  void checkArgs(const std::vector<KernelArg> &args, bool onCpu) const;

  /// Runs every program of `grid` in the CPU interpreter on host buffers,
  /// at `level` (default: defaultInterpretLevel(), Interpreter.h).
  void runOnCpu(Grid grid, const std::vector<KernelArg> &args,
                std::optional<InterpretLevel> level = std::nullopt) const;

  /// Compiles (through the cache) and loads the binary for the current
  /// device, if not done yet. Throws when there is no GPU.
  const CompiledKernel &compileForGpu() const;
  /// compileForGpu() for several kernels at once (an operation's kernels,
  /// before graph capture): the binaries are compiled in parallel, one
  /// thread per core, then loaded. Throws the first kernel's error, after
  /// every compile has finished.
  static void compileForGpu(const std::vector<const Kernel *> &kernels);
  /// What the loaded binary uses per program, as the driver reports it.
  /// Throws tilejit::Error before compileForGpu().
  KernelUsage resources() const;
  /// Launches `grid` programs on `stream` (nullptr: the legacy default
  /// stream) after checkArgs; returns without waiting. Grids of a cluster
  /// kernel must be a multiple of its cluster size along x.
  void launch(Grid grid, const std::vector<KernelArg> &args,
              CUstream stream = nullptr) const;

  struct State;

private:
  std::shared_ptr<State> S;
};

} // namespace tilejit

#endif // TILEJIT_KERNEL_H
