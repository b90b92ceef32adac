//===- BadInputTest.cpp - scalars an f32 cannot hold, empty batches -------===//
//
// Every op takes its loss weights, z-loss and softcap as doubles and hands
// them to the kernels as f32: a value beyond the f32 range, or a nonzero one
// that rounds to 0, is an error naming the argument, not inf, NaN or a wrong
// loss. An empty batch (a packed micro-batch can be one) gets empty per-row
// outputs and a loss of 0 without a launch, as PyTorch gives. The GPU runs of
// empty batches need no GPU: nothing is launched.
//
//===----------------------------------------------------------------------===//
#include "ops/harness/FusedCeTvdOp.h"
#include "ops/harness/FusedCeTvdReducedOp.h"
#include "ops/harness/LinearCeOp.h"
#include "tilejit/Error.h"
#include "tilejit/HostFloat.h"

#include "ExpectError.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <functional>
#include <string>

using namespace tilejit;

namespace {

TEST(F32Scalar, RangeAndUnderflowAreRejected) {
  for (double ok : {0.0, 1.0, -2.5, double(FLT_MAX), -double(FLT_MAX),
                    double(FLT_TRUE_MIN), 1e-45, 30.0})
    EXPECT_NO_THROW(checkF32Scalar("x", ok)) << ok;
  expectError([] { checkF32Scalar("--softcap", 4e38); },
              {"--softcap = 4e+38", "beyond the f32 range"});
  expectError([] { checkF32Scalar("alpha", -1e39); },
              {"alpha = -1e+39", "beyond the f32 range"});
  expectError([] { checkF32Scalar("--softcap", 1e-46); },
              {"--softcap = 1e-46", "rounds to 0"});
  expectError([] { checkF32Scalar("z", NAN); }, {"z = nan", "finite"});
  expectError([] { checkF32Scalar("z", INFINITY); }, {"finite"});
}

TEST(F32Scalar, ReducedCeTvdRejectsWeightsBeyondF32) {
  ref::CeTvdInputs in = ref::makeCeTvdInputs(2, 300, DType::F32, 1);
  CeTvdReducedOptions o;
  o.alpha = 1e39;
  expectError([&] { runCeTvdReducedCpu(in, o); },
              {"alpha = 1e+39", "f32 range"});
  o.alpha = 1;
  o.beta = 1e-46;
  expectError([&] { runCeTvdReducedCpu(in, o); }, {"beta", "rounds to 0"});
  o.beta = -4e38;
  expectError([&] { runCeTvdReducedGpu(in, o); }, {"beta", "f32 range"});
}

TEST(F32Scalar, LinearCeRejectsSoftcapAndZLossBeyondF32) {
  ref::LinearCeInputs in =
      makeLinearCeInputs(4, 8, 40, DType::F32, false, false, 1);
  struct Case {
    double smoothing, zLoss, softcap;
    const char *what, *why;
  } cases[] = {{0, 0, 4e38, "softcap", "f32 range"},
               {0, 0, 1e-46, "softcap", "rounds to 0"},
               {0, 1e39, 0, "z-loss", "f32 range"},
               {1e-50, 0, 0, "label smoothing", "rounds to 0"}};
  for (const Case &c : cases) {
    LinearCeOptions o;
    o.params.labelSmoothing = c.smoothing;
    o.params.zLoss = c.zLoss;
    o.params.softcap = c.softcap;
    expectError([&] { runLinearCeCpu(in, o); }, {c.what, c.why});
    expectError([&] { runLinearCeGpu(in, o); }, {c.what, c.why});
  }
}

TEST(EmptyBatch, UnreducedCeTvdReturnsEmptyRows) {
  for (DType dtype : {DType::BF16, DType::F32}) {
    ref::CeTvdInputs in = ref::makeCeTvdInputs(0, 32000, dtype, 1);
    CeTvdRunOptions o;
    for (auto run : {runCeTvdCpu, runCeTvdGpu}) {
      CeTvdOutputs out = run(in, {}, {}, o);
      EXPECT_TRUE(out.ce.empty() && out.tvd.empty() && out.grad.empty());
      EXPECT_FALSE(out.forwardKernel.empty());
    }
    // Options are still checked.
    o.overrides = {"NO_SUCH_PARAM=1"};
    EXPECT_THROW(runCeTvdCpu(in, {}, {}, o), Error);
  }
}

TEST(EmptyBatch, ReducedCeTvdLossIsZero) {
  ref::CeTvdInputs in = ref::makeCeTvdInputs(0, 1000, DType::BF16, 1);
  for (bool mean : {true, false})
    for (bool inPlace : {false, true}) {
      CeTvdReducedOptions o;
      o.mean = mean;
      o.inPlace = inPlace;
      o.alpha = 0.5;
      for (auto run : {runCeTvdReducedCpu, runCeTvdReducedGpu}) {
        CeTvdReducedOutputs out = run(in, o);
        EXPECT_EQ(out.loss, 0.f);
        EXPECT_EQ(out.nValid, 0.f);
        EXPECT_TRUE(out.ce.empty() && out.tvd.empty() && out.grad.empty());
      }
    }
}

TEST(EmptyBatch, LinearCeLossIsZeroAndWeightGradientsAreZeros) {
  using Reduction = ref::LinearCeParams::Reduction;
  ref::LinearCeInputs in =
      makeLinearCeInputs(0, 16, 50, DType::BF16, true, true, 1);
  for (Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None}) {
    LinearCeOptions o;
    o.params.reduction = r;
    o.params.zLoss = 1e-4;
    o.params.labelSmoothing = 0.1;
    o.chunkRows = 8;
    for (auto run : {runLinearCeCpu, runLinearCeGpu}) {
      LinearCeOutputs out = run(in, o);
      EXPECT_EQ(out.loss, 0.f);
      EXPECT_EQ(out.zLoss, 0.f);
      EXPECT_TRUE(out.rowLoss.empty() && out.dh.empty());
      EXPECT_EQ(out.dW, std::vector<float>(50 * 16, 0.f));
      EXPECT_EQ(out.db, std::vector<float>(50, 0.f));
      EXPECT_EQ(out.chunks, 0);
    }
  }
  // The check against the fp64 reference agrees.
  LinearCeOptions o;
  LinearCeCheck c = checkLinearCe(in, o, runLinearCeCpu(in, o));
  EXPECT_TRUE(c.passed) << c.summary;
}

TEST(EmptyBatch, NegativeSizesAreStillErrors) {
  EXPECT_THROW(ref::makeCeTvdInputs(-1, 10, DType::F32, 1), Error);
  EXPECT_THROW(makeLinearCeInputs(-1, 4, 10, DType::F32, false, false, 1),
               Error);
}

} // namespace
