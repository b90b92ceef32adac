//===- Commands.h - tilejit subcommands that live in their own files -*- C++ -*-===//
//
// Each subcommand file defines its own static llvm::cl::SubCommand and
// options (they register globally at start-up) and exposes two functions
// that tilejit.cpp's main calls after parsing the command line.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_TOOLS_COMMANDS_H
#define TILEJIT_TOOLS_COMMANDS_H

#include "runtime/CudaDriver.h"
#include "tilejit/Error.h"
#include "tilejit/KernelSpec.h"

#include <cstdio>
#include <string>
#include <vector>

/// `tilejit tune` (TuneCommand.cpp).
bool tuneCommandSelected();
int runTuneCommand();

/// `tilejit cache path|list|verify|clear` (CacheCommand.cpp).
bool cacheCommandSelected();
int runCacheCommand();

/// `tilejit bench` (BenchCommand.cpp).
bool benchCommandSelected();
int runBenchCommand();

/// `tilejit run|bench|tune KERNEL --size ...` for a kernel whose spec
/// declares its arguments (SpecCommand.cpp), from each command's options.
struct SpecCommandArgs {
  std::string kernel;
  std::vector<std::string> sizes, set, inputs, outputs; ///< NAME=VALUE each
  std::string dtype = "bf16";
  bool dtypeGiven = false;
  bool cpu = false; ///< run: the interpreter even with a GPU
  bool gpu = false; ///< run: the GPU, an error without one
  /// run: --check, an error for a spec without a reference (`run` checks
  /// whenever the spec has one).
  bool check = false;
  uint64_t seed = 1234;
  int iters = 20; ///< bench: timed launches; tune: per candidate
  bool retune = false;
  std::string arch;
};
int runSpecKernel(const SpecCommandArgs &args);
int benchSpecKernel(const SpecCommandArgs &args);
int tuneSpecKernel(const SpecCommandArgs &args);

/// The dtype of a spec kernel's run: `dtype` when given, else bf16 where
/// the kernel takes it, else the spec's first dtype.
tilejit::DType specDType(const tilejit::KernelSpec &spec,
                         const std::string &dtype, bool given);

/// `tilejit --load lib.so`: dlopens a library of kernel specs (a name
/// without a slash from the current directory when a file of that name is
/// there, else as dlopen finds it). Its static initializers may call
/// tilejit::registerKernel; an exported `extern "C" void
/// tilejit_register_kernels()` is called after the load; registering no
/// kernel is a warning. The library takes tilejit's symbols from the CLI
/// (which exports them): one that links a tilejit of its own is an error,
/// after which the process must leave without running destructors
/// (std::_Exit), as both copies' static objects were constructed.
void loadKernelLibrary(const std::string &path);

/// fused_ce_tvd's --forward picks the unreduced forward kernel: given with
/// --reduction=mean|sum it would be silently ignored, so it is an error.
inline void rejectForwardWithReduction(bool forwardGiven,
                                       const std::string &reduction) {
  if (forwardGiven && reduction != "none")
    throw tilejit::Error("--forward applies to --reduction=none (the reduced "
                         "loss has one kernel)");
}

/// Throws unless a GPU can be used: `what` (e.g. "tilejit bench") says who
/// needs it. Called before any input is generated (gigabytes for the real
/// shapes).
inline void requireGpu(const std::string &what) {
  if (std::string why; !tilejit::cuda::driverAvailable(&why))
    throw tilejit::Error(what + " needs a GPU: " + why);
}

/// --check: prints a check's summary (CeTvdCheck, LinearCeCheck) and turns
/// its verdict into the exit code.
template <typename Check> int reportCheck(const Check &c) {
  std::printf("%s\n", c.summary.c_str());
  return c.passed ? 0 : 1;
}

#endif // TILEJIT_TOOLS_COMMANDS_H
