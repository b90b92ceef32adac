//===- FusedCeTvdReducedTest.cpp - reduced CE+TVD and the cluster forward
//--===//
//
// The reduced loss + gradient (three kernels) and the cluster-split forward
// against the fp64 reference: in the CPU interpreter on every CI run, and on
// the GPU when there is one.
//
//===----------------------------------------------------------------------===//
#include "codegen/Nvrtc.h"
#include "ops/harness/FusedCeTvdReducedOp.h"
#include "kernels_spec/SoftmaxParts.h"
#include "kernels_spec/reference/CeTvdReference.h"
#include "runtime/CudaDriver.h"
#include "tilejit/Compiler.h"
#include "tilejit/Error.h"
#include "tilejit/HostFloat.h"
#include "tilejit/KernelSpec.h"

#include "TestData.h"

#include "GpuTest.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <tuple>

using namespace tilejit;
using namespace tilejit::testdata;

namespace {

struct Case {
  int64_t BT, V;
  DType dtype;
  bool mean, inPlace;
  std::vector<std::string> overrides;
};

std::string caseName(const Case &c) {
  std::string n = "BT" + std::to_string(c.BT) + "_V" + std::to_string(c.V) +
                  "_" + dtypeName(c.dtype) + (c.mean ? "_mean" : "_sum") +
                  (c.inPlace ? "_inplace" : "");
  for (auto &o : c.overrides)
    n += "_" + o;
  for (char &ch : n)
    if (!isalnum(static_cast<unsigned char>(ch)))
      ch = '_';
  return n;
}

void PrintTo(const Case &c, std::ostream *os) { *os << caseName(c); }

using Runner = CeTvdReducedOutputs (*)(const ref::CeTvdInputs &,
                                       const CeTvdReducedOptions &);

void expectReducedMatchesReference(const Case &c, Runner run) {
  ref::CeTvdInputs in = ref::makeCeTvdInputs(c.BT, c.V, c.dtype, 3);
  CeTvdReducedOptions o;
  o.alpha = 0.7;
  o.beta = 1.3;
  o.mean = c.mean;
  o.inPlace = c.inPlace;
  o.overrides = c.overrides;
  o.iterations = 1;
  CeTvdReducedOutputs out = run(in, o);
  CeTvdCheck check = checkCeTvdReduced(in, o, out);
  EXPECT_TRUE(check.passed) << check.summary;
  EXPECT_EQ(check.rowsChecked, c.BT);
}

class CeTvdReducedInterpreter : public ::testing::TestWithParam<Case> {};

TEST_P(CeTvdReducedInterpreter, MatchesReference) {
  expectReducedMatchesReference(GetParam(), runCeTvdReducedCpu);
}

// V = 1 and 3 (most programs of a cluster own nothing), V not a multiple of
// the slice or the tile, several tiles per slice, every dtype, both
// reductions, in place and not.
INSTANTIATE_TEST_SUITE_P(
    Shapes, CeTvdReducedInterpreter,
    ::testing::Values(
        Case{7,
             1,
             DType::F32,
             true,
             false,
             {"CLUSTER_SIZE=4", "BLOCK_SIZE=1024", "num_warps=4"}},
        Case{7,
             3,
             DType::BF16,
             false,
             true,
             {"CLUSTER_SIZE=2", "BLOCK_SIZE=1024", "num_warps=4"}},
        Case{14,
             5000,
             DType::F32,
             true,
             true,
             {"CLUSTER_SIZE=4", "BLOCK_SIZE=1024", "num_warps=4"}},
        Case{8,
             4096,
             DType::F16,
             false,
             false,
             {"CLUSTER_SIZE=2", "BLOCK_SIZE=1024", "num_warps=8"}},
        Case{9, 30001, DType::BF16, true, false, {}},
        // Pass 1 per thread group: bf16 rows of 8, f16 with BLOCK 2048 (2
        // groups per thread), f32 in place.
        Case{9,
             5001,
             DType::BF16,
             true,
             false,
             {"CLUSTER_SIZE=4", "BLOCK_SIZE=1024", "num_warps=4"}},
        Case{8,
             4097,
             DType::F16,
             false,
             true,
             {"CLUSTER_SIZE=2", "BLOCK_SIZE=2048", "num_warps=4"}},
        Case{7,
             3,
             DType::F32,
             true,
             true,
             {"CLUSTER_SIZE=4", "BLOCK_SIZE=1024", "num_warps=8"}},
        // Several tiles per loop step (UNROLL): whole steps, a tail of
        // whole tiles and a partial one, in place and not.
        Case{9,
             9001,
             DType::BF16,
             true,
             true,
             {"UNROLL=4", "CLUSTER_SIZE=2", "BLOCK_SIZE=1024", "num_warps=4"}},
        Case{7,
             3,
             DType::F32,
             false,
             false,
             {"UNROLL=2", "CLUSTER_SIZE=2", "BLOCK_SIZE=1024", "num_warps=4"}},
        Case{7,
             5001,
             DType::BF16,
             false,
             true,
             {"UNROLL=2", "CLUSTER_SIZE=4", "BLOCK_SIZE=1024", "num_warps=4"}},
        // KEEP=1 (the default) keeps the student's slice, then p sign, in
        // shared memory; KEEP=0 re-reads both inputs: every dtype, in place,
        // a tail, clusters whose programs own nothing.
        Case{9,
             9001,
             DType::BF16,
             true,
             true,
             {"KEEP=1", "UNROLL=2", "CLUSTER_SIZE=2", "BLOCK_SIZE=1024",
              "num_warps=4"}},
        Case{9,
             9001,
             DType::BF16,
             false,
             true,
             {"KEEP=0", "UNROLL=2", "CLUSTER_SIZE=2", "BLOCK_SIZE=1024",
              "num_warps=4"}},
        Case{8,
             4097,
             DType::F16,
             true,
             true,
             {"KEEP=1", "CLUSTER_SIZE=4", "BLOCK_SIZE=1024", "num_warps=8"}},
        Case{8,
             4097,
             DType::F16,
             false,
             false,
             {"KEEP=0", "CLUSTER_SIZE=4", "BLOCK_SIZE=1024", "num_warps=8"}},
        Case{7,
             3,
             DType::F32,
             false,
             true,
             {"KEEP=1", "CLUSTER_SIZE=4", "BLOCK_SIZE=1024", "num_warps=4"}},
        Case{7,
             3001,
             DType::F32,
             true,
             false,
             {"KEEP=0", "CLUSTER_SIZE=2", "BLOCK_SIZE=1024", "num_warps=4"}},
        Case{7,
             3001,
             DType::F32,
             true,
             true,
             {"KEEP=1", "UNROLL=2", "CLUSTER_SIZE=2", "BLOCK_SIZE=1024",
              "num_warps=4"}},
        // COPY_AHEAD: pass 1's copies run 1 or 2 steps ahead over 5 steps,
        // the last a tail of a whole tile and a partial one in the second
        // program; with KEEP=0 it has no array to fill.
        Case{6,
             20001,
             DType::BF16,
             true,
             true,
             {"COPY_AHEAD=2", "CLUSTER_SIZE=2", "BLOCK_SIZE=1024",
              "num_warps=4"}},
        Case{6,
             20000,
             DType::F32,
             false,
             false,
             {"COPY_AHEAD=1", "CLUSTER_SIZE=2", "BLOCK_SIZE=1024",
              "num_warps=4"}},
        Case{6,
             20000,
             DType::BF16,
             false,
             true,
             {"COPY_AHEAD=2", "KEEP=0", "CLUSTER_SIZE=2", "BLOCK_SIZE=1024",
              "num_warps=4"}}),
    [](const auto &info) { return caseName(info.param); });

// The default cluster follows V (slices of at least 16000 elements); a
// --set or tuned CLUSTER_SIZE wins.
TEST(CeTvdReduced, DefaultClusterFollowsTheVocab) {
  const KernelSpec &spec = findKernel("fused_ce_tvd_loss_grad");
  auto cluster = [&](int64_t V, std::vector<std::string> overrides = {}) {
    return spec.config(DType::BF16, overrides, {{"V", V}}).get("CLUSTER_SIZE");
  };
  EXPECT_EQ(cluster(151936), 8);
  EXPECT_EQ(cluster(128256), 8);
  EXPECT_EQ(cluster(65536), 4);
  EXPECT_EQ(cluster(32000), 2);
  EXPECT_EQ(cluster(3), 2);
  EXPECT_EQ(cluster(32000, {"BLOCK_SIZE=1024"}), 2);
  EXPECT_EQ(cluster(151936, {"CLUSTER_SIZE=4"}), 4);
  EXPECT_EQ(cluster(32000, {"CLUSTER_SIZE=16"}), 16);
}

// The cluster forward follows V in every dtype, with KEEP where it fits.
TEST(CeTvdClusterForward, DefaultsFollowTheVocab) {
  const KernelSpec &spec = findKernel("fused_ce_tvd_fwd_cluster");
  auto config = [&](DType dt, int64_t V) {
    dsl::Config c = spec.config(dt, {}, {{"V", V}});
    return std::make_pair(c.get("CLUSTER_SIZE"), c.get("KEEP"));
  };
  EXPECT_EQ(config(DType::BF16, 151936),
            std::make_pair(int64_t(8), int64_t(1)));
  EXPECT_EQ(config(DType::BF16, 32000), std::make_pair(int64_t(2), int64_t(1)));
  EXPECT_EQ(config(DType::F32, 151936), std::make_pair(int64_t(8), int64_t(1)));
  EXPECT_EQ(config(DType::F32, 32000), std::make_pair(int64_t(2), int64_t(1)));
  EXPECT_EQ(config(DType::F32, 500000), std::make_pair(int64_t(8), int64_t(0)));
}

/// Whether every byte of `bytes` (a gradient buffer) is 0.
bool allZero(const std::vector<uint8_t> &bytes) {
  return std::all_of(bytes.begin(), bytes.end(),
                     [](uint8_t b) { return b == 0; });
}

ref::CeTvdInputs smallBatch(DType dtype = DType::F32) {
  return ref::makeCeTvdInputs(6, 700, dtype, 9);
}

CeTvdReducedOptions smallOptions() {
  CeTvdReducedOptions o;
  o.overrides = {"CLUSTER_SIZE=2", "BLOCK_SIZE=1024", "num_warps=4"};
  return o;
}

/// loss = sum ce + sum tvd (alpha = beta = 1, no mean) in the interpreter,
/// with smallOptions and `keep` (KEEP=0 or KEEP=1).
CeTvdReducedOutputs runSumOfBoth(const ref::CeTvdInputs &in, const char *keep) {
  CeTvdReducedOptions o = smallOptions();
  o.overrides.push_back(keep);
  o.alpha = 1;
  o.beta = 1;
  o.mean = false;
  return runCeTvdReducedCpu(in, o);
}

TEST(CeTvdReduced, InPlaceGivesTheSameBitsAsASeparateGradient) {
  ref::CeTvdInputs in = smallBatch(DType::BF16);
  CeTvdReducedOptions o = smallOptions();
  CeTvdReducedOutputs separate = runCeTvdReducedCpu(in, o);
  o.inPlace = true;
  CeTvdReducedOutputs inPlace = runCeTvdReducedCpu(in, o);
  EXPECT_EQ(separate.grad, inPlace.grad);
  EXPECT_EQ(separate.loss, inPlace.loss);
}

// Only an in-place run writes the gradient over the student, so only its
// kernel gives up __restrict__ on those two pointers (the first and the
// seventh argument).
TEST(CeTvdReduced, OnlyTheInPlaceKernelAliasesStudentAndGrad) {
  const KernelSpec &spec = findKernel("fused_ce_tvd_loss_grad");
  for (bool inPlace : {false, true}) {
    CompiledKernel k =
        compile(spec.build(spec.config(DType::BF16, {},
                                       {{"V", 1000}, {"IN_PLACE", inPlace}})),
                {"sm_90", Stage::Cuda, {}});
    for (const char *arg : {"v0,", "v6,"}) {
      bool restricted =
          k.cuda.find(std::string("__restrict__ ") + arg) != std::string::npos;
      EXPECT_EQ(restricted, !inPlace) << arg << " in place " << inPlace;
    }
  }
}

// Rows of a multiple of 16 bytes skip the per-group alignment check (the
// GPU tests run both forms: V = 151936 and V = 1001).
TEST(CeTvdReduced, WholeSixteenByteRowsSkipTheAlignmentCheck) {
  const KernelSpec &spec = findKernel("fused_ce_tvd_loss_grad");
  for (auto [V, dtype, aligned] : {std::tuple{1004, DType::BF16, false},
                                   {1008, DType::BF16, true},
                                   {1002, DType::F32, false},
                                   {1004, DType::F32, true}}) {
    dsl::Config c = spec.config(dtype, {}, {{"V", V}});
    EXPECT_EQ(c.get("ALIGNED"), aligned) << V;
    CompiledKernel k = compile(spec.build(c), {"sm_90", Stage::Cuda, {}});
    bool checked =
        k.cuda.find("bool tj_full = (reinterpret_cast") != std::string::npos;
    EXPECT_EQ(checked, !aligned) << V;
  }
  // A caller that knows better (an unaligned base) turns it off.
  EXPECT_EQ(spec.config(DType::BF16, {}, {{"V", 1008}, {"ALIGNED", 0}})
                .get("ALIGNED"),
            0);
}

TEST(CeTvdReduced, AllIgnoredBatchGivesZeroLossAndGradient) {
  ref::CeTvdInputs in = smallBatch();
  for (int64_t &y : in.target)
    y = ref::kCeTvdIgnoreIndex;
  CeTvdReducedOutputs out = runCeTvdReducedCpu(in, smallOptions());
  EXPECT_EQ(out.loss, 0.f);
  EXPECT_EQ(out.nValid, 0.f);
  EXPECT_TRUE(allZero(out.grad));
}

TEST(CeTvdReduced, SelfDistillationGivesExactlyZeroTvdAndGradient) {
  ref::CeTvdInputs in = smallBatch(DType::BF16);
  in.teacher = in.student;
  for (const char *keep : {"KEEP=0", "KEEP=1"}) {
    SCOPED_TRACE(keep);
    CeTvdReducedOptions o = smallOptions();
    o.overrides.push_back(keep);
    o.alpha = 0; // the TVD term alone
    CeTvdReducedOutputs out = runCeTvdReducedCpu(in, o);
    EXPECT_EQ(out.loss, 0.f);
    for (float t : out.tvd)
      EXPECT_EQ(t, 0.f);
    EXPECT_TRUE(allZero(out.grad));
  }
}

// KEEP=1 forms the gradient from p sign in shared memory, rounded to bf16
// before the gradient's own rounding, except in programs whose slice has a
// tie (p == q), which re-read the inputs. Rows 0-2 below are self-distilled
// (every element ties), rows 3-5 are not; both programs of each row own
// elements. The tied rows must match KEEP=0 bit for bit (the same re-read
// on the same statistics), the others must differ (the kept path ran).
TEST(CeTvdReduced, KeptSignedPMatchesWithAndWithoutTies) {
  ref::CeTvdInputs in = ref::makeCeTvdInputs(6, 3000, DType::BF16, 9);
  size_t rowBytes = in.V * dtypeSize(in.dtype);
  std::copy(in.student.begin(), in.student.begin() + 3 * rowBytes,
            in.teacher.begin());
  CeTvdReducedOptions o = smallOptions();
  o.alpha = 0.7;
  o.overrides.push_back("KEEP=0");
  CeTvdReducedOutputs reread = runCeTvdReducedCpu(in, o);
  o.overrides.back() = "KEEP=1";
  CeTvdReducedOutputs kept = runCeTvdReducedCpu(in, o);
  CeTvdCheck check = checkCeTvdReduced(in, o, kept);
  EXPECT_TRUE(check.passed) << check.summary;
  auto firstUntiedRow = kept.grad.begin() + 3 * rowBytes;
  EXPECT_TRUE(
      std::equal(kept.grad.begin(), firstUntiedRow, reread.grad.begin()));
  EXPECT_FALSE(std::equal(firstUntiedRow, kept.grad.end(),
                          reread.grad.begin() + 3 * rowBytes));
}

// The f16 loss + gradient kernel keeps p sign(p - q) scaled by 2^15: p of
// 1e-7 to 6e-5 would be f16 subnormals, with absolute errors up to 3e-8,
// which a CE weight of 1000 would carry into gradients of 1e-4 to 6e-2 far
// beyond f16's own rounding (29 times the check's tolerance unscaled). Logits
// scaled by 4 make many p that small.
TEST(CeTvdReduced, F16KeptSignedPKeepsSmallP) {
  ref::CeTvdInputs in = ref::makeCeTvdInputs(4, 3000, DType::F16, 12);
  for (auto *x : {&in.student, &in.teacher})
    for (int64_t i = 0; i < in.BT * in.V; ++i)
      storeFromDouble(x->data(), DType::F16, i,
                      4 * loadAsDouble(x->data(), DType::F16, i));
  CeTvdReducedOptions o = smallOptions();
  o.overrides.push_back("KEEP=1");
  o.alpha = 1000;
  o.mean = false;
  CeTvdReducedOutputs out = runCeTvdReducedCpu(in, o);
  CeTvdCheck c = checkCeTvdReduced(in, o, out);
  EXPECT_TRUE(c.passed) << c.summary;
}

// KEEP's array must fit in a block's shared memory: asked for, a clear
// error names the bytes and the way out; by default, KEEP is on only where
// it fits.
TEST(CeTvdReduced, KeepOnlyWhereItsArrayFits) {
  const KernelSpec &spec = findKernel("fused_ce_tvd_loss_grad");
  auto keep = [&](DType dt, std::vector<std::string> overrides, int64_t V) {
    return spec.config(dt, overrides, {{"V", V}}).get("KEEP");
  };
  try {
    keep(DType::F32, {"KEEP=1", "CLUSTER_SIZE=2"}, 151936);
    FAIL() << "an array of 311296 bytes must be refused";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("311296 bytes"), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(keep(DType::F32, {"CLUSTER_SIZE=2"}, 151936), 0);
  EXPECT_EQ(keep(DType::BF16, {"CLUSTER_SIZE=2"}, 151936), 1);
  EXPECT_EQ(keep(DType::F16, {"CLUSTER_SIZE=2"}, 151936), 1);
  EXPECT_EQ(keep(DType::F32, {}, 151936), 1); // 8 programs of 20480
  EXPECT_EQ(keep(DType::F32, {}, 500000), 0); // 8 programs of 63488
  EXPECT_EQ(keep(DType::BF16, {}, 500000), 1);
  EXPECT_EQ(keep(DType::BF16, {"KEEP=0"}, 32000), 0);
}

// The launch bounds ask for as many programs per SM as REGISTER_BUDGET
// registers per thread and the KEEP array allow, in both cluster kernels.
// The budget is 48 by default for bf16 with aligned rows, 64 otherwise.
TEST(CeTvdReduced, RegisterCapFollowsWarpsAndTheKeepArray) {
  for (const char *name :
       {"fused_ce_tvd_loss_grad", "fused_ce_tvd_fwd_cluster"}) {
    const KernelSpec &spec = findKernel(name);
    auto programs = [&](DType dt, std::vector<std::string> overrides) {
      return spec.config(dt, overrides, {{"V", 151936}})
          .get("min_programs_per_sm");
    };
    EXPECT_EQ(programs(DType::BF16, {}), 5); // 48 registers
    EXPECT_EQ(programs(DType::BF16, {"REGISTER_BUDGET=64"}), 4);
    EXPECT_EQ(programs(DType::BF16, {"num_warps=4"}), 5); // by the array
    EXPECT_EQ(programs(DType::F32, {}), 2);               // 80 KiB array
    EXPECT_EQ(programs(DType::F32, {"KEEP=0", "num_warps=4"}), 8);
    EXPECT_EQ(
        programs(DType::F32, {"KEEP=0", "num_warps=4", "REGISTER_BUDGET=48"}),
        10);
    auto budget = [&](DType dt, int64_t V, std::vector<std::string> o = {}) {
      return spec.config(dt, o, {{"V", V}}).get("REGISTER_BUDGET");
    };
    EXPECT_EQ(budget(DType::BF16, 151936), 48);
    EXPECT_EQ(budget(DType::BF16, 151937), 64); // rows not 16-byte aligned
    EXPECT_EQ(budget(DType::F32, 151936), 64);
    EXPECT_EQ(budget(DType::F16, 32000), 64);
    EXPECT_EQ(budget(DType::BF16, 151937, {"REGISTER_BUDGET=48"}), 48);
    EXPECT_EQ(programs(DType::BF16, {"num_warps=32"}), 1);
  }
}

// COPY_AHEAD is 0 in the derived config where it has no array to fill (no
// KEEP). Both kernels keep their array in the logits' type (the loss +
// gradient kernel's f16 p sign(p - q) scaled): 4 f16 programs per SM, as
// many as their registers allow (an f32 array allowed 2).
TEST(CeTvdReduced, CopyAheadOnlyWhereItApplies) {
  for (const char *name :
       {"fused_ce_tvd_loss_grad", "fused_ce_tvd_fwd_cluster"}) {
    SCOPED_TRACE(name);
    const KernelSpec &spec = findKernel(name);
    auto config = [&](DType dt, std::vector<std::string> o) {
      o.push_back("COPY_AHEAD=2");
      return spec.config(dt, o, {{"V", 151936}});
    };
    for (DType dt : {DType::BF16, DType::F16, DType::F32})
      EXPECT_EQ(config(dt, {}).get("COPY_AHEAD"), 2);
    EXPECT_EQ(config(DType::F16, {}).get("min_programs_per_sm"), 4);
    EXPECT_EQ(config(DType::BF16, {"KEEP=0"}).get("COPY_AHEAD"), 0);
  }
}

// ptxas spills nothing in either cluster kernel's default config, at
// aligned and unaligned V, small and large: REGISTER_BUDGET is 48 only where
// that holds. (At V = 16384 the f16 and f32 loss + gradient kernel spills
// 24-44 bytes at its 64 registers, a spill the register budget does not
// cause; those shapes are left out.)
class CeTvdClusterSpills : public ::testing::TestWithParam<std::string> {};

TEST_P(CeTvdClusterSpills, DefaultsDoNotSpill) {
  const KernelSpec &spec = findKernel(GetParam());
  for (DType dt : {DType::BF16, DType::F16, DType::F32})
    for (int64_t V : {16384, 32000, 151936, 151937}) {
      if (V == 16384 && dt != DType::BF16)
        continue;
      dsl::Config c = spec.config(dt, {}, {{"BT", 64}, {"V", V}});
      CompiledKernel k = compile(spec.build(c), {"sm_90", Stage::Ptx, {}});
      std::string log;
      ASSERT_TRUE(nvrtc::ptxasAccepts(k.ptx, "sm_90", &log, /*verbose=*/true))
          << log;
      EXPECT_NE(log.find(" 0 bytes spill stores"), std::string::npos)
          << dtypeName(dt) << " V=" << V << " " << c.str() << "\n"
          << log;
    }
}

INSTANTIATE_TEST_SUITE_P(Kernels, CeTvdClusterSpills,
                         ::testing::Values("fused_ce_tvd_loss_grad",
                                           "fused_ce_tvd_fwd_cluster"));

TEST(CeTvdReduced, BadInputsAreClearErrors) {
  ref::CeTvdInputs in = smallBatch();
  in.target[3] = in.V; // out of range, not ignore_index
  try {
    runCeTvdReducedCpu(in, smallOptions());
    FAIL() << "an out-of-range target must be reported";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("at row 3"), std::string::npos)
        << e.what();
  }
  ref::CeTvdInputs shortTargets = smallBatch();
  shortTargets.target.pop_back();
  EXPECT_THROW(runCeTvdReducedCpu(shortTargets, smallOptions()), Error);
  CeTvdReducedOptions typo = smallOptions();
  typo.overrides.push_back("CLUSTER=4");
  EXPECT_THROW(runCeTvdReducedCpu(smallBatch(), typo), Error);
  EXPECT_THROW(parseReduction("avg"), Error);
}

// tests/data/numerics.json "mean-over-valid-rows": uniform logits over 8
// classes, two of four rows ignored, alpha = 1, beta = 0.
TEST(CeTvdReduced, MeanIsOverValidRowsAsInTheNumericsCase) {
  llvm::json::Object c = numericsCase("mean-over-valid-rows");
  const llvm::json::Array &rows = *c.getArray("student");
  ref::CeTvdInputs in;
  in.BT = rows.size();
  in.V = rows[0].getAsArray()->size();
  in.dtype = DType::F32;
  in.student.resize(in.BT * in.V * sizeof(float));
  for (int64_t r = 0; r < in.BT; ++r)
    for (int64_t v = 0; v < in.V; ++v)
      storeFromDouble(in.student.data(), DType::F32, r * in.V + v,
                      *(*rows[r].getAsArray())[v].getAsNumber());
  in.teacher = in.student;
  for (auto &y : *c.getArray("target"))
    in.target.push_back(*y.getAsInteger());
  const llvm::json::Object &expect = *c.getObject("expect");
  CeTvdReducedOptions o = smallOptions();
  o.beta = 0;
  for (bool mean : {true, false}) {
    o.mean = mean;
    CeTvdReducedOutputs out = runCeTvdReducedCpu(in, o);
    EXPECT_NEAR(out.loss, *expect.getNumber(mean ? "loss_mean" : "loss_sum"),
                1e-6);
  }
  o.mean = true;
  CeTvdReducedOutputs out = runCeTvdReducedCpu(in, o);
  for (const char *key : {"grad_row0_mean", "grad_row1_mean"}) {
    int64_t row = key[8] - '0';
    const llvm::json::Array &g = *expect.getArray(key);
    for (int64_t v = 0; v < in.V; ++v)
      EXPECT_NEAR(loadAsDouble(out.grad.data(), DType::F32, row * in.V + v),
                  *g[v].getAsNumber(), 1e-7)
          << key << " v " << v;
  }
}

// The hand-checked TVD gradient of docs/semantics.md §1: s = [0, 0, 1, 2],
// t = [0, 0, 2, 1], the two tied entries take sign 0 (numerics.json
// "tvd-ties").
TEST(CeTvdReduced, TvdTiesUseThreeWaySign) {
  json::Object c = numericsCase("tvd-ties");
  ref::CeTvdInputs in = oneRow(numbers((*c.getArray("student"))[0]),
                               numbers((*c.getArray("teacher"))[0]), 0);
  CeTvdReducedOptions o = smallOptions();
  o.alpha = 0;
  o.mean = false;
  CeTvdReducedOutputs out = runCeTvdReducedCpu(in, o);
  std::vector<double> want =
      numbers(*c.getObject("expect")->get("grad_student_g_ce_0_g_tvd_1"));
  for (int64_t v = 0; v < in.V; ++v)
    EXPECT_NEAR(loadAsDouble(out.grad.data(), DType::F32, v), want[v], 1e-6)
        << "v " << v;
}

// numerics.json's edge rows through the cluster kernels (their pass 2 works
// in log2 units): the reduced loss + gradient with KEEP 0 and 1, and the
// cluster forward with its backward.
TEST(CeTvdReduced, NumericsCasesInTheClusterKernels) {
  for (const char *id : {"ce-all-neg-inf-but-target", "ce-all-very-negative"}) {
    json::Object c = numericsCase(id);
    ref::CeTvdInputs in = oneRow(numbers((*c.getArray("student"))[0]),
                                 numbers((*c.getArray("teacher"))[0]),
                                 *(*c.getArray("target"))[0].getAsInteger());
    const json::Object &expect = *c.getObject("expect");
    double ce = number((*expect.getArray("ce"))[0]);
    double tvd = number((*expect.getArray("tvd"))[0]);
    std::vector<double> grad =
        numbers((*expect.getArray("grad_student_with_g_ce_1_g_tvd_1"))[0]);
    auto expectGrad = [&](const std::vector<uint8_t> &g) {
      for (size_t v = 0; v < grad.size(); ++v)
        EXPECT_NEAR(loadAsDouble(g.data(), DType::F32, v), grad[v],
                    1e-2 * std::fabs(grad[v]) + 1e-7)
            << id << " v " << v;
    };
    for (const char *keep : {"KEEP=0", "KEEP=1"}) {
      SCOPED_TRACE(std::string(id) + " " + keep);
      CeTvdReducedOutputs out = runSumOfBoth(in, keep);
      EXPECT_NEAR(out.ce[0], ce, 1e-6);
      EXPECT_NEAR(out.tvd[0], tvd, 1e-6);
      expectGrad(out.grad);
    }
    CeTvdRunOptions o;
    o.forwardKernel = forwardKernelFor("cluster");
    o.overrides = {"CLUSTER_SIZE=2", "BLOCK_SIZE=1024", "num_warps=4",
                   "KEEP=1"};
    CeTvdOutputs out = runCeTvdCpu(in, {1.f}, {1.f}, o);
    EXPECT_NEAR(out.ce[0], ce, 1e-6) << id;
    EXPECT_NEAR(out.tvd[0], tvd, 1e-6) << id;
    expectGrad(out.grad);
  }
  json::Object c = numericsCase("large-common-offset");
  const json::Object &expect = *c.getObject("expect");
  std::vector<double> ce = numbers(*expect.get("ce"));
  std::vector<double> grad0 = numbers(*expect.get("grad_row0"));
  for (size_t r = 0; r < 2; ++r) {
    std::vector<double> s = numbers((*c.getArray("logits"))[r]);
    CeTvdReducedOptions o = smallOptions();
    o.beta = 0;
    o.mean = false;
    CeTvdReducedOutputs out = runCeTvdReducedCpu(oneRow(s, s, 0), o);
    EXPECT_NEAR(out.ce[0], ce[r], 1e-6) << "row " << r;
    if (r == 0)
      for (size_t v = 0; v < grad0.size(); ++v)
        EXPECT_NEAR(loadAsDouble(out.grad.data(), DType::F32, v), grad0[v],
                    1e-6);
  }
}

/// The cluster forward's outputs for `in` (KEEP as `keep`, and `more`
/// overrides), and its backward for upstream gradients of 1, in the
/// interpreter.
CeTvdOutputs clusterForward(const ref::CeTvdInputs &in, const char *keep,
                            const std::vector<std::string> &more = {}) {
  CeTvdRunOptions f;
  f.forwardKernel = forwardKernelFor("cluster");
  f.overrides = {"CLUSTER_SIZE=2", "BLOCK_SIZE=1024", "num_warps=4", keep};
  f.overrides.insert(f.overrides.end(), more.begin(), more.end());
  std::vector<float> ones(in.BT, 1.f);
  return runCeTvdCpu(in, ones, ones, f);
}

/// The student's row of three ties at a and one element a bf16 step or more
/// below, or the teacher's of two ties, then `padding` logits of -3e38
/// (masked entries: groups whose max is out of the scaled form's range
/// while the row's is in it).
std::vector<double> tiedRow(double a, int ties, size_t padding) {
  std::vector<double> x(4, a - std::fabs(a) / 64);
  std::fill(x.begin(), x.begin() + ties, a);
  x.resize(4 + padding, -3.0e38);
  return x;
}

// bf16 pass 1 takes the scaled form (SumForm::Scaled) up to row maxima of
// kScaledMaxAbs = 2^22 in magnitude and the exact form beyond; logits of
// -3e38 (masked) in other groups stay harmless. A row of three ties
// at A and one element a bf16 step below (p = 1/3, 1/3, 1/3, 0) against a
// teacher of two ties (q = 1/2, 1/2, 0, 0): ce = ln 3, tvd = 1/3, sigma =
// -1/3, and with alpha = beta = 1 the gradient is p - [v = 0] + p (sign -
// sigma) / 2 = (-7/9, 2/9, 5/9, 0), whatever A is.
TEST(CeTvdCluster, Bf16LargeOffsetsOnBothSidesOfTheScaledForm) {
  auto check = [](double aS, double aT, size_t padding) {
    ref::CeTvdInputs in = oneRow(tiedRow(aS, 3, padding),
                                 tiedRow(aT, 2, padding), 0, DType::BF16);
    const double ce = std::log(3.0), tvd = 1.0 / 3;
    std::vector<double> grad = {-7.0 / 9, 2.0 / 9, 5.0 / 9, 0};
    grad.resize(in.V, 0.0);
    for (const char *keep : {"KEEP=0", "KEEP=1"}) {
      SCOPED_TRACE("student at " + std::to_string(aS) + ", teacher at " +
                   std::to_string(aT) + ", V = " + std::to_string(in.V) + " " +
                   keep);
      CeTvdReducedOutputs out = runSumOfBoth(in, keep);
      EXPECT_NEAR(out.ce[0], ce, 1e-6);
      EXPECT_NEAR(out.tvd[0], tvd, 1e-6);
      for (size_t v = 0; v < grad.size(); ++v)
        EXPECT_NEAR(loadAsDouble(out.grad.data(), DType::BF16, v), grad[v],
                    std::fabs(grad[v]) / 128 + 1e-7)
            << "v " << v;
      CeTvdOutputs fwd = clusterForward(in, keep);
      EXPECT_NEAR(fwd.ce[0], ce, 1e-6);
      EXPECT_NEAR(fwd.tvd[0], tvd, 1e-6);
      EXPECT_NEAR(fwd.sigma[0], -1.0 / 3, 1e-6);
    }
  };
  // 2^22 is the scaled form's last row max; 1.6e7 and beyond take the
  // exact form again.
  for (double a :
       {-3.0e4, 3.0e4, 4194304.0, -4194304.0, 1.6e7, 1.0e8, -1.0e8, 1.0e30})
    for (size_t padding : {0, 3000})
      check(a, a, padding);
  // Either input alone out of range sends the row to the exact form.
  check(3.0e4, 1.0e8, 0);
  check(1.0e8, 3.0e4, 0);
  check(-4.0e6, 1.6e7, 0);
}

// A NaN in the teacher (NaN max) does not keep the student's row, out of
// the scaled form's range, from its exact form: ce needs only the student.
TEST(CeTvdCluster, Bf16NaNTeacherLeavesTheStudentsCeRight) {
  std::vector<double> t = tiedRow(1.0e8, 2, 0);
  t[3] = std::nan("");
  ref::CeTvdInputs in = oneRow(tiedRow(1.0e8, 3, 0), t, 0, DType::BF16);
  for (const char *keep : {"KEEP=0", "KEEP=1"}) {
    SCOPED_TRACE(keep);
    EXPECT_NEAR(runSumOfBoth(in, keep).ce[0], std::log(3.0), 1e-6);
    EXPECT_NEAR(clusterForward(in, keep).ce[0], std::log(3.0), 1e-6);
  }
}

// A teacher equal to the student gives exactly zero TVD and sigma, and no
// TVD gradient, in both cluster kernels; so does one that differs only
// where p = q = 0 (row 1: -1000 against -2000), all of whose other elements
// tie. Pass 2's fast form signs a tie +p, so such rows (equal offsets) must
// take the exact walk.
TEST(CeTvdCluster, TiesGiveExactlyZeroTvdInBothKernels) {
  const int64_t BT = 3, V = 3000;
  ref::CeTvdInputs in = ref::makeCeTvdInputs(BT, V, DType::BF16, 11);
  in.target = {0, 1, 2};
  in.teacher = in.student;
  storeFromDouble(in.student.data(), DType::BF16, V + 2500, -1000);
  storeFromDouble(in.teacher.data(), DType::BF16, V + 2500, -2000);
  for (const char *keep : {"KEEP=0", "KEEP=1"}) {
    SCOPED_TRACE(keep);
    CeTvdOutputs fwd = clusterForward(in, keep);
    for (int64_t r = 0; r < BT; ++r) {
      EXPECT_EQ(fwd.tvd[r], 0.f) << "row " << r;
      EXPECT_EQ(fwd.sigma[r], 0.f) << "row " << r;
    }
    // In place too: the walk again reads the student from memory before
    // any program writes over it.
    for (bool inPlace : {false, true}) {
      CeTvdReducedOptions o = smallOptions();
      o.overrides.push_back(keep);
      o.alpha = 0; // the TVD term alone
      o.inPlace = inPlace;
      CeTvdReducedOutputs reduced = runCeTvdReducedCpu(in, o);
      for (int64_t r = 0; r < BT; ++r)
        EXPECT_EQ(reduced.tvd[r], 0.f) << "row " << r;
      EXPECT_TRUE(allZero(reduced.grad))
          << (inPlace ? "in place" : "separate gradient");
    }
  }
}

// A teacher that is the student shifted by 1 (exact in bf16 for these
// integer logits) has p = q, but its offsets differ, so the fast form takes
// it and its gaps come out 0 or a rounding either way. Pass 3 must sign each
// element as sigma did, a gap of +0 as +: then the TVD gradient p (sign -
// sigma) / 2 sums to 0 over the row, with the logits re-read (KEEP=0) or the
// signs kept (KEEP=1), and the two agree. Signing a +0 gap 0 in pass 3
// alone misses both by about p / 2 per such element.
/// Integer student logits and a teacher one above them, both exact in bf16:
/// p = q exactly, but the two rows' offsets differ, so the fast form signs
/// every p - q by rounding noise.
ref::CeTvdInputs shiftedTeacherInputs(int64_t BT, int64_t V) {
  ref::CeTvdInputs in = ref::makeCeTvdInputs(BT, V, DType::BF16, 3);
  for (int64_t i = 0; i < BT * V; ++i) {
    double s = std::round(loadAsDouble(in.student.data(), DType::BF16, i));
    storeFromDouble(in.student.data(), DType::BF16, i, s);
    storeFromDouble(in.teacher.data(), DType::BF16, i, s + 1);
  }
  return in;
}

/// Each row's sum of a bf16 (BT, V) gradient.
std::vector<double> rowSums(const std::vector<uint8_t> &grad, int64_t BT,
                            int64_t V) {
  std::vector<double> sums(BT, 0.0);
  for (int64_t i = 0; i < BT * V; ++i)
    sums[i / V] += loadAsDouble(grad.data(), DType::BF16, i);
  return sums;
}

TEST(CeTvdCluster, ShiftedTeacherSignsTheGradientAsSigma) {
  const int64_t BT = 4, V = 20000;
  ref::CeTvdInputs in = shiftedTeacherInputs(BT, V);
  ref::CeTvdForward f =
      ref::ceTvdForward(in.student.data(), in.teacher.data(), DType::BF16,
                        in.target.data(), BT, V, V);
  auto p = [&](int64_t i) {
    return std::exp(loadAsDouble(in.student.data(), DType::BF16, i) -
                    f.lseS[i / V]);
  };
  std::vector<std::vector<double>> grads;
  for (const char *keep : {"KEEP=0", "KEEP=1"}) {
    SCOPED_TRACE(keep);
    CeTvdReducedOptions o = smallOptions();
    o.overrides.push_back(keep);
    o.overrides.push_back("FAST_LOG2=1");
    o.alpha = 0; // the TVD term alone: gradient p (sign - sigma) / 2
    o.mean = false;
    CeTvdReducedOutputs out = runCeTvdReducedCpu(in, o);
    std::vector<double> g(BT * V);
    for (int64_t i = 0; i < BT * V; ++i)
      g[i] = loadAsDouble(out.grad.data(), DType::BF16, i);
    std::vector<double> sums = rowSums(out.grad, BT, V);
    for (int64_t r = 0; r < BT; ++r)
      EXPECT_LE(std::fabs(sums[r]), 1e-3) << "row " << r; // sum p / 2 = 0.5
    grads.push_back(g);
  }
  for (int64_t i = 0; i < BT * V; ++i)
    ASSERT_NEAR(grads[0][i], grads[1][i], 1e-2 * p(i) + 1e-9)
        << "element " << i;
}

// The unreduced API on the same rows: the backward signs each p - q in the
// form the forward's sigma did (its fast_signs), so the TVD gradient sums
// to 0 per row in every forward; signed each its own way, a row summed to
// -sigma / 2, anywhere in [-0.5, 0.5].
void expectShiftedTeacherGradientSumsToZero(decltype(&runCeTvdCpu) run,
                                            int64_t BT, int64_t V) {
  ref::CeTvdInputs in = shiftedTeacherInputs(BT, V);
  std::vector<float> gCe(BT, 0.f), gTvd(BT, 1.f);
  for (std::vector<std::string> forward : {std::vector<std::string>{"loop"},
                                           {"cluster", "FAST_LOG2=1"},
                                           {"cluster", "FAST_LOG2=1", "KEEP=0"},
                                           {"cluster", "FAST_LOG2=0"}}) {
    std::string trace;
    for (const std::string &part : forward)
      trace += part + " ";
    SCOPED_TRACE(trace);
    CeTvdRunOptions o;
    o.forwardKernel = forwardKernelFor(forward[0]);
    o.overrides.assign(forward.begin() + 1, forward.end());
    o.iterations = 1;
    CeTvdOutputs out = run(in, gCe, gTvd, o);
    std::vector<double> sums = rowSums(out.grad, BT, V);
    for (int64_t r = 0; r < BT; ++r)
      EXPECT_LE(std::fabs(sums[r]), 1e-3)
          << "row " << r << ", sigma " << out.sigma[r];
    CeTvdCheck c = checkCeTvd(in, gCe, gTvd, out);
    EXPECT_TRUE(c.passed) << c.summary;
  }
}

/// Confident rows: the target logit 14 above the others' max (p_y near 1 -
/// 1e-5; the teacher's 4 lower), the rows shifted by 0 to 70 so that the
/// fast form's offsets K reach [64, 128), where their rounding moves every p
/// by up to 2.6e-6 (at 70 the student's K passes 128: the exact walk).
/// Without log2OffsetScale, sigma and the target's gradient g_ce (p_y - 1)
/// were off by that much, beyond the checks.
ref::CeTvdInputs confidentInputs(DType dt) {
  const std::vector<double> shifts = {0, 10, 20, 35, 40, 45, 50, 55, 60, 70};
  const int64_t BT = shifts.size(), V = 4096, y = 17;
  ref::CeTvdInputs in = ref::makeCeTvdInputs(BT, V, dt, 5);
  std::mt19937 rng(7);
  std::normal_distribution<double> logit(0, 2), noise(0, 0.3);
  for (int64_t r = 0; r < BT; ++r) {
    in.target[r] = y;
    std::vector<double> s(V);
    for (double &x : s)
      x = shifts[r] + logit(rng);
    s[y] = *std::max_element(s.begin(), s.end()) + 14;
    for (int64_t v = 0; v < V; ++v) {
      storeFromDouble(in.student.data(), dt, r * V + v, s[v]);
      storeFromDouble(in.teacher.data(), dt, r * V + v,
                      v == y ? s[v] - 4 : s[v] + noise(rng));
    }
  }
  return in;
}

TEST(CeTvdCluster, ConfidentRowsMatchTheReference) {
  for (DType dt : {DType::F32, DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtypeName(dt));
    ref::CeTvdInputs in = confidentInputs(dt);
    std::vector<float> gCe(in.BT, 1.f), gTvd(in.BT, 0.5f);
    for (const char *fast : {"FAST_LOG2=1", "FAST_LOG2=0"}) {
      SCOPED_TRACE(fast);
      for (const char *keep : {"KEEP=0", "KEEP=1"}) {
        SCOPED_TRACE(keep);
        CeTvdReducedOptions o;
        o.overrides = {fast, keep};
        o.mean = false;
        CeTvdReducedOutputs out = runCeTvdReducedCpu(in, o);
        CeTvdCheck c = checkCeTvdReduced(in, o, out);
        EXPECT_TRUE(c.passed) << c.summary;
      }
      CeTvdRunOptions o;
      o.forwardKernel = forwardKernelFor("cluster");
      o.overrides = {fast};
      CeTvdOutputs out = runCeTvdCpu(in, gCe, gTvd, o);
      CeTvdCheck c = checkCeTvd(in, gCe, gTvd, out);
      EXPECT_TRUE(c.passed) << c.summary;
    }
  }
}

TEST(CeTvdCluster, ShiftedTeacherUnreducedGradientSumsToZero) {
  expectShiftedTeacherGradientSumsToZero(runCeTvdCpu, 4, 20000);
}

TEST(CeTvdClusterGpu, ShiftedTeacherUnreducedGradientSumsToZero) {
  TILEJIT_SKIP_WITHOUT_GPU();
  expectShiftedTeacherGradientSumsToZero(runCeTvdGpu, 64, 151936);
}

// Pass 2 forms log2 p in one fma (log2SoftmaxFast) in rows whose offsets
// (m + log d) log2(e), student's and teacher's, lie within kFastLog2Max =
// 128, and with the max subtracted first in the others. Rows shifted by
// -100 to 100 fall on both sides (the teacher a little further), those
// shifted by 1000 and 2000 far beyond (where the fast form would err by
// 4e-5 to 9e-5 of p, beyond the f32 gradient's tolerance; the f32 lse the
// forward stores allows no larger shift). Each must match the fp64
// reference in both cluster kernels, both KEEP values (FAST_LOG2=1, f32's
// too).
TEST(CeTvdCluster, RowsOnBothSidesOfTheFastLog2Form) {
  const std::vector<double> shifts = {-2000, -1000, -100, -92, -90,  -89, -88,
                                      -86,   -40,   0,    40,  82,   84,  86,
                                      87,    88,    90,   100, 1000, 2000};
  for (DType dt : {DType::BF16, DType::F32}) {
    const int64_t BT = shifts.size(), V = 3000;
    ref::CeTvdInputs in = ref::makeCeTvdInputs(BT, V, dt, 5);
    for (int64_t r = 0; r < BT; ++r)
      for (int64_t v = 0; v < V; ++v) {
        int64_t i = r * V + v;
        auto shift = [&](std::vector<uint8_t> &x, double by) {
          storeFromDouble(x.data(), dt, i, loadAsDouble(x.data(), dt, i) + by);
        };
        shift(in.student, shifts[r]);
        shift(in.teacher, shifts[r] + 1);
      }
    ref::CeTvdForward f = ref::ceTvdForward(
        in.student.data(), in.teacher.data(), dt, in.target.data(), BT, V, V);
    int fast = 0, exact = 0;
    for (int64_t r = 0; r < BT; ++r) {
      double k = std::max(std::fabs(f.lseS[r]), std::fabs(f.lseT[r])) * kLog2e;
      fast += k < 127;
      exact += k > 129;
    }
    EXPECT_GE(fast, 4);
    EXPECT_GE(exact, 8);
    std::vector<float> ones(BT, 1.f);
    for (const char *keep : {"KEEP=0", "KEEP=1"}) {
      SCOPED_TRACE(std::string(dtypeName(dt)) + " " + keep);
      CeTvdReducedOptions o = smallOptions();
      o.overrides.push_back(keep);
      o.overrides.push_back("FAST_LOG2=1");
      o.alpha = 0.7;
      o.beta = 1.3;
      CeTvdCheck reduced = checkCeTvdReduced(in, o, runCeTvdReducedCpu(in, o));
      EXPECT_TRUE(reduced.passed) << reduced.summary;
      CeTvdCheck fwd =
          checkCeTvd(in, ones, ones, clusterForward(in, keep, {"FAST_LOG2=1"}));
      EXPECT_TRUE(fwd.passed) << fwd.summary;
    }
  }
}

// Every dtype; the f16 KEEP array is f16, filled by copies ahead.
TEST(CeTvdClusterForward, MatchesReferenceInTheInterpreter) {
  const std::map<DType, std::vector<std::string>> runs = {
      {DType::BF16, {"UNROLL=1", "KEEP=0"}},
      {DType::F32, {"UNROLL=4", "KEEP=1"}},
      {DType::F16, {"UNROLL=2", "KEEP=1", "COPY_AHEAD=1"}}};
  for (const auto &[dt, more] : runs) {
    SCOPED_TRACE(dtypeName(dt));
    ref::CeTvdInputs in = ref::makeCeTvdInputs(9, 5001, dt, 4);
    std::vector<float> gCe, gTvd;
    defaultUpstream(in.BT, gCe, gTvd);
    CeTvdRunOptions o;
    o.forwardKernel = forwardKernelFor("cluster");
    o.overrides = {"CLUSTER_SIZE=4", "BLOCK_SIZE=1024", "num_warps=4"};
    o.overrides.insert(o.overrides.end(), more.begin(), more.end());
    CeTvdOutputs out = runCeTvdCpu(in, gCe, gTvd, o);
    CeTvdCheck c = checkCeTvd(in, gCe, gTvd, out);
    EXPECT_TRUE(c.passed) << c.summary;
  }
  EXPECT_THROW(forwardKernelFor("twopass"), Error);
}

class CeTvdReducedGpu : public ::testing::TestWithParam<Case> {
protected:
  void SetUp() override { TILEJIT_SKIP_WITHOUT_GPU(); }
};

TEST_P(CeTvdReducedGpu, MatchesReference) {
  expectReducedMatchesReference(GetParam(), runCeTvdReducedGpu);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CeTvdReducedGpu,
    ::testing::Values(
        Case{7, 1, DType::F32, true, false, {}},
        // cp.async copies (aligned rows) two steps ahead, with a partial
        // last tile; and one tile per step.
        Case{8, 151936, DType::BF16, true, true, {"COPY_AHEAD=2"}},
        Case{8,
             100000,
             DType::F32,
             false,
             false,
             {"COPY_AHEAD=2", "UNROLL=1", "CLUSTER_SIZE=4"}},
        Case{16, 151937, DType::BF16, true, true, {}},
        Case{16,
             30001,
             DType::F16,
             false,
             false,
             {"CLUSTER_SIZE=16", "num_warps=16"}},
        Case{32, 32000, DType::BF16, true, false, {"CLUSTER_SIZE=2"}},
        Case{16,
             151937,
             DType::BF16,
             true,
             true,
             {"UNROLL=4", "CLUSTER_SIZE=8"}},
        Case{8,
             151936,
             DType::F32,
             false,
             false,
             {"UNROLL=1", "CLUSTER_SIZE=16"}},
        Case{16,
             151937,
             DType::BF16,
             true,
             true,
             {"CLUSTER_SIZE=4", "num_warps=4", "BLOCK_SIZE=1024"}},
        Case{16, 128256, DType::F32, false, false, {"CLUSTER_SIZE=8"}},
        // Without KEEP (on by default where it fits).
        Case{16, 151937, DType::BF16, true, true, {"KEEP=0", "CLUSTER_SIZE=8"}},
        Case{16,
             151936,
             DType::BF16,
             false,
             false,
             {"KEEP=0", "CLUSTER_SIZE=4", "UNROLL=1"}},
        Case{8,
             32001,
             DType::F32,
             true,
             false,
             {"KEEP=0", "CLUSTER_SIZE=4", "UNROLL=1"}},
        Case{8, 128256, DType::F32, true, true, {"KEEP=1", "CLUSTER_SIZE=16"}},
        Case{16, 32000, DType::F16, false, true, {"KEEP=1", "CLUSTER_SIZE=2"}}),
    [](const auto &info) { return caseName(info.param); });

} // namespace
