//===- CeTvdMathTest.cpp - the reduced CE+TVD written one row at a time ---===//
//
// ce_tvd_loss_grad (kernels_spec/CeTvd.cpp) through the reduced op
// (lossGradKernel) against the fp64 reference: in the CPU interpreter under
// the schedules the compiler may give it (split rows, kept rows, copies
// ahead, smaller tiles), in place and not; the limits of docs/semantics.md
// §1; on the GPU at the vocab sizes whose default keeps rows on chip.
//
//===----------------------------------------------------------------------===//
#include "ops/harness/FusedCeTvdReducedOp.h"

#include "kernels_spec/reference/CeTvdReference.h"
#include "tilejit/Error.h"

#include "GpuTest.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace tilejit;

namespace {

struct Case {
  int64_t BT, V;
  DType dtype;
  bool mean, inPlace;
  std::vector<std::string> overrides;
};

void PrintTo(const Case &c, std::ostream *os) {
  *os << "BT" << c.BT << "_V" << c.V << "_" << dtypeName(c.dtype)
      << (c.mean ? "_mean" : "_sum") << (c.inPlace ? "_inplace" : "");
  for (const std::string &o : c.overrides)
    *os << "_" << o;
}

CeTvdReducedOptions options(const Case &c) {
  CeTvdReducedOptions o;
  o.lossGradKernel = "ce_tvd_loss_grad";
  o.alpha = 0.7;
  o.beta = 1.3;
  o.mean = c.mean;
  o.inPlace = c.inPlace;
  o.overrides = c.overrides;
  o.iterations = 1;
  return o;
}

class CeTvdMath : public ::testing::TestWithParam<Case> {};

TEST_P(CeTvdMath, MatchesTheReference) {
  const Case &c = GetParam();
  ref::CeTvdInputs in = ref::makeCeTvdInputs(c.BT, c.V, c.dtype, 3);
  CeTvdReducedOptions o = options(c);
  CeTvdReducedOutputs out = runCeTvdReducedCpu(in, o);
  CeTvdCheck check = checkCeTvdReduced(in, o, out);
  EXPECT_TRUE(check.passed) << check.summary;
  EXPECT_EQ(check.rowsChecked, c.BT);
}

// V = 1 and 3, V not a multiple of the tile, each dtype and reduction, in
// place and not; rows split over 2 and 4 programs, kept on chip, with
// copies ahead, and the default schedule of a vocab that keeps its rows.
INSTANTIATE_TEST_SUITE_P(
    Schedules, CeTvdMath,
    ::testing::Values(
        Case{7, 1, DType::F32, true, false, {"BLOCK_SIZE=1024"}},
        Case{7, 3, DType::BF16, false, true, {"SPLIT_ROWS=2"}},
        Case{9, 5001, DType::F32, true, true, {"BLOCK_SIZE=1024"}},
        Case{8, 4097, DType::F16, false, false,
             {"SPLIT_ROWS=2", "KEEP_ROW=1", "BLOCK_SIZE=1024"}},
        Case{9, 9001, DType::BF16, true, true,
             {"SPLIT_ROWS=4", "KEEP_ROW=1", "KEEP_COPY_AHEAD=2",
              "BLOCK_SIZE=1024", "num_warps=4"}},
        Case{5, 20001, DType::BF16, true, true, {}}));

TEST(CeTvdMathLimits, AllIgnoredBatchGivesZeroLossAndGradient) {
  ref::CeTvdInputs in = ref::makeCeTvdInputs(5, 700, DType::BF16, 4);
  for (int64_t &y : in.target)
    y = ref::kCeTvdIgnoreIndex;
  CeTvdReducedOutputs out =
      runCeTvdReducedCpu(in, options({5, 700, DType::BF16, true, false, {}}));
  EXPECT_EQ(out.loss, 0.f);
  EXPECT_EQ(out.nValid, 0.f);
  for (uint8_t b : out.grad)
    ASSERT_EQ(b, 0);
}

// A teacher equal to the student: p = q in every element, so sign 0, TVD 0
// and, with alpha 0, a zero gradient, exactly.
TEST(CeTvdMathLimits, SelfDistillationGivesExactlyZeroTvdAndGradient) {
  ref::CeTvdInputs in = ref::makeCeTvdInputs(6, 3001, DType::BF16, 5);
  in.teacher = in.student;
  CeTvdReducedOptions o = options({6, 3001, DType::BF16, true, false, {}});
  o.alpha = 0;
  CeTvdReducedOutputs out = runCeTvdReducedCpu(in, o);
  EXPECT_EQ(out.loss, 0.f);
  for (float t : out.tvd)
    EXPECT_EQ(t, 0.f);
  for (uint8_t b : out.grad)
    ASSERT_EQ(b, 0);
}

TEST(CeTvdMathLimits, InPlaceGivesTheSameBitsAsASeparateGradient) {
  ref::CeTvdInputs in = ref::makeCeTvdInputs(6, 9001, DType::BF16, 6);
  Case c{6, 9001, DType::BF16, true, false, {"SPLIT_ROWS=4", "KEEP_ROW=1"}};
  CeTvdReducedOutputs separate = runCeTvdReducedCpu(in, options(c));
  c.inPlace = true;
  CeTvdReducedOutputs inPlace = runCeTvdReducedCpu(in, options(c));
  EXPECT_EQ(separate.grad, inPlace.grad);
  EXPECT_EQ(separate.loss, inPlace.loss);
}

TEST(CeTvdMathLimits, AnUnknownLossGradKernelIsAClearError) {
  ref::CeTvdInputs in = ref::makeCeTvdInputs(2, 10, DType::F32, 1);
  CeTvdReducedOptions o = options({2, 10, DType::F32, true, false, {}});
  o.lossGradKernel = "jsd";
  try {
    runCeTvdReducedCpu(in, o);
    FAIL() << "no error";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("fused_ce_tvd_loss_grad or "
                                         "ce_tvd_loss_grad"),
              std::string::npos)
        << e.what();
  }
}

// The default schedules of 32000 and 151936 (rows split over a cluster and
// kept on chip), in place, every 7th row ignored: sampled rows against the
// fp64 reference.
TEST(CeTvdMathGpu, KeptRowsInPlaceMatchTheReference) {
  TILEJIT_SKIP_WITHOUT_GPU();
  for (int64_t V : {int64_t(32000), int64_t(151936)}) {
    SCOPED_TRACE(V);
    ref::CeTvdInputs in = ref::makeCeTvdInputs(256, V, DType::BF16, 7);
    CeTvdReducedOptions o = options({256, V, DType::BF16, true, true, {}});
    CeTvdReducedOutputs out = runCeTvdReducedGpu(in, o);
    CeTvdCheck check =
        checkCeTvdReduced(in, o, out, sampleCheckRows(in.BT, 32));
    EXPECT_TRUE(check.passed) << check.summary;
  }
}

} // namespace
