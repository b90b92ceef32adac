//===- GpuTest.h - skipping GPU tests on machines without one ---*- C++ -*-===//
#ifndef TILEJIT_TESTS_UNIT_GPUTEST_H
#define TILEJIT_TESTS_UNIT_GPUTEST_H

#include "runtime/Cache.h"
#include "runtime/CudaDriver.h"
#include "tilejit/Compiler.h"
#include "tilejit/Error.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

/// Ends the current test (or SetUp) as skipped, saying why, when there is no
/// usable GPU and driver. CI has none; the GPU machine runs these tests.
#define TILEJIT_SKIP_WITHOUT_GPU()                                             \
  do {                                                                         \
    std::string tilejitWhyNoGpu;                                               \
    if (!::tilejit::cuda::driverAvailable(&tilejitWhyNoGpu))                   \
      GTEST_SKIP() << "no GPU: " << tilejitWhyNoGpu;                           \
  } while (false)

/// Compiles `m` for `device` and runs `programs` programs of it, whose
/// arguments are the pointers of `buffers` in order, then waits for it. The
/// device (its context) must outlive the buffers, so the caller opens it
/// first.
inline void
runOnGpu(const ::tilejit::cuda::Device &device, const ::tilejit::TileModule &m,
         int64_t programs,
         const std::vector<const ::tilejit::cuda::DeviceBuffer *> &buffers) {
  using namespace ::tilejit;
  CompiledKernel k = compile(m, {device.archString(), Stage::Cubin, {}});
  if (!k.tensorMaps.empty()) // Kernel::launch encodes them from the args
    throw Error("runOnGpu passes no tensor maps: launch '" + k.name +
                "' through Kernel::launch");
  LoadedKernels loaded;
  std::vector<CUdeviceptr> ptrs;
  for (const cuda::DeviceBuffer *b : buffers)
    ptrs.push_back(b->ptr());
  std::vector<void *> args;
  for (CUdeviceptr &p : ptrs)
    args.push_back(&p);
  cuda::launch(loaded.function(k), {unsigned(programs)}, {unsigned(k.threads)},
               size_t(k.dynamicSharedBytes), nullptr, args);
  cuda::synchronize();
}

#endif // TILEJIT_TESTS_UNIT_GPUTEST_H
