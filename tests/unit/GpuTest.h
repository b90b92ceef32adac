//===- GpuTest.h - skipping GPU tests on machines without one ---*- C++ -*-===//
#ifndef TILEJIT_TESTS_UNIT_GPUTEST_H
#define TILEJIT_TESTS_UNIT_GPUTEST_H

#include "runtime/CudaDriver.h"

#include <gtest/gtest.h>

#include <string>

/// Ends the current test (or SetUp) as skipped, saying why, when there is no
/// usable GPU and driver. CI has none; the GPU machine runs these tests.
#define TILEJIT_SKIP_WITHOUT_GPU()                                             \
  do {                                                                         \
    std::string tilejitWhyNoGpu;                                               \
    if (!::tilejit::cuda::driverAvailable(&tilejitWhyNoGpu))                   \
      GTEST_SKIP() << "no GPU: " << tilejitWhyNoGpu;                           \
  } while (false)

#endif // TILEJIT_TESTS_UNIT_GPUTEST_H
