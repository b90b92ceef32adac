//===- FusedCeTvdTest.cpp - the CE+TVD kernels against the fp64 reference -===//
//
// CPU interpreter runs of the DSL kernels (every CI run), NVRTC + ptxas for
// every configuration, and the same checks on the GPU when there is one.
//
//===----------------------------------------------------------------------===//
#include "ops/harness/FusedCeTvdOp.h"
#include "runtime/Autotuner.h"
#include "runtime/CudaDriver.h"
#include "tilejit/Compiler.h"
#include "tilejit/HostFloat.h"
#include "tilejit/KernelSpec.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include "ConfigSample.h"
#include "TestData.h"

#include "GpuTest.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>

using namespace tilejit;
using namespace tilejit::testdata;

namespace {

struct Shape {
  int64_t BT, V;
  DType dtype;
  std::vector<std::string> overrides;
};

std::string shapeName(const Shape &s) {
  std::string n = "BT" + std::to_string(s.BT) + "_V" + std::to_string(s.V) +
                  "_" + dtypeName(s.dtype);
  for (auto &o : s.overrides)
    n += "_" + o;
  for (char &c : n)
    if (!isalnum(static_cast<unsigned char>(c)))
      c = '_';
  return n;
}

// ctest lists a parameterised test with its parameter: its name, not bytes.
void PrintTo(const Shape &s, std::ostream *os) { *os << shapeName(s); }

using CeTvdRunner = CeTvdOutputs (*)(const ref::CeTvdInputs &,
                                     const std::vector<float> &,
                                     const std::vector<float> &,
                                     const CeTvdRunOptions &);

/// Runs forward + backward on generated logits of `s` and checks every row
/// against the fp64 reference (shared by the CPU and the GPU tests).
void expectMatchesReference(const Shape &s, uint64_t seed, CeTvdRunner run,
                            const std::string &forward = "auto") {
  ref::CeTvdInputs in = ref::makeCeTvdInputs(s.BT, s.V, s.dtype, seed);
  std::vector<float> gCe, gTvd;
  defaultUpstream(s.BT, gCe, gTvd);
  CeTvdRunOptions options;
  options.forwardKernel = forwardKernelFor(forward);
  options.overrides = s.overrides;
  options.iterations = 1;
  CeTvdOutputs out = run(in, gCe, gTvd, options);
  CeTvdCheck c = checkCeTvd(in, gCe, gTvd, out);
  EXPECT_TRUE(c.passed) << c.summary;
  EXPECT_EQ(c.rowsChecked, s.BT);
}

class CeTvdInterpreter : public ::testing::TestWithParam<Shape> {};

TEST_P(CeTvdInterpreter, MatchesReference) {
  expectMatchesReference(GetParam(), 7, runCeTvdCpu);
}

// V = 1, V not a multiple of BLOCK_SIZE, several tiles per row, every dtype.
INSTANTIATE_TEST_SUITE_P(
    Shapes, CeTvdInterpreter,
    ::testing::Values(
        Shape{7, 1, DType::F32, {"BLOCK_SIZE=1024", "num_warps=4"}},
        Shape{7, 3, DType::BF16, {"BLOCK_SIZE=1024", "num_warps=4"}},
        Shape{14, 1000, DType::F32, {"BLOCK_SIZE=1024", "num_warps=4"}},
        Shape{8, 5000, DType::BF16, {"BLOCK_SIZE=1024", "num_warps=8"}},
        Shape{8, 4096, DType::F16, {"BLOCK_SIZE=2048", "num_warps=4"}},
        Shape{9, 30001, DType::BF16, {}},
        Shape{9, 30001, DType::BF16, {"LANE_STATS=1"}},
        Shape{7, 3, DType::F32, {"LANE_STATS=1", "BLOCK_SIZE=1024"}},
        // Per thread group: rows of 8 (bf16) and 4 (f32) in registers, and
        // 2 where BLOCK / threads caps the group (f32, 512 threads).
        Shape{9, 30001, DType::BF16, {"LANE_STATS=2"}},
        Shape{7, 3, DType::F32, {"LANE_STATS=2", "BLOCK_SIZE=1024"}},
        Shape{5,
              2500,
              DType::F32,
              {"LANE_STATS=2", "BLOCK_SIZE=1024", "num_warps=16"}}),
    [](const auto &info) { return shapeName(info.param); });

double gradAt(const CeTvdOutputs &out, DType dtype, int64_t i) {
  return loadAsDouble(out.grad.data(), dtype, i);
}

CeTvdOutputs runOne(const ref::CeTvdInputs &in, float gCe, float gTvd) {
  return runCeTvdCpu(in, {gCe}, {gTvd}, {{"BLOCK_SIZE=1024", "num_warps=4"}});
}

TEST(CeTvdNumerics, AllNegInfButTargetAndVeryNegative) {
  for (const char *id : {"ce-all-neg-inf-but-target", "ce-all-very-negative"}) {
    llvm::json::Object c = numericsCase(id);
    auto s = numbers((*c.getArray("student"))[0]);
    auto t = numbers((*c.getArray("teacher"))[0]);
    int64_t y = *(*c.getArray("target"))[0].getAsInteger();
    auto *expect = c.getObject("expect");
    auto grad =
        numbers((*expect->getArray("grad_student_with_g_ce_1_g_tvd_1"))[0]);
    for (DType dt : {DType::F32, DType::BF16}) {
      CeTvdOutputs out = runOne(oneRow(s, t, y, dt), 1, 1);
      EXPECT_NEAR(out.ce[0], number((*expect->getArray("ce"))[0]), 1e-6) << id;
      EXPECT_NEAR(out.tvd[0], number((*expect->getArray("tvd"))[0]), 1e-6)
          << id;
      for (size_t v = 0; v < grad.size(); ++v) {
        EXPECT_FALSE(std::isnan(gradAt(out, dt, v))) << id;
        EXPECT_NEAR(gradAt(out, dt, v), grad[v],
                    1e-2 * std::fabs(grad[v]) + 1e-7)
            << id << " v=" << v;
      }
    }
  }
}

TEST(CeTvdNumerics, TvdTiesUseThreeWaySign) {
  llvm::json::Object c = numericsCase("tvd-ties");
  auto s = numbers((*c.getArray("student"))[0]);
  auto t = numbers((*c.getArray("teacher"))[0]);
  auto *expect = c.getObject("expect");
  CeTvdOutputs out = runOne(oneRow(s, t, 0), 0, 1);
  EXPECT_NEAR(out.tvd[0], *expect->getNumber("tvd"), 1e-6);
  auto grad = numbers(*expect->get("grad_student_g_ce_0_g_tvd_1"));
  for (size_t v = 0; v < grad.size(); ++v)
    EXPECT_NEAR(gradAt(out, DType::F32, v), grad[v], 1e-6) << "v=" << v;
}

TEST(CeTvdNumerics, LargeCommonOffsetKeepsTheGap) {
  llvm::json::Object c = numericsCase("large-common-offset");
  auto *expect = c.getObject("expect");
  auto ce = numbers(*expect->get("ce"));
  auto grad0 = numbers(*expect->get("grad_row0"));
  for (size_t r = 0; r < 2; ++r) {
    auto s = numbers((*c.getArray("logits"))[r]);
    CeTvdOutputs out = runOne(oneRow(s, s, 0), 1, 0);
    EXPECT_NEAR(out.ce[0], ce[r], 1e-6) << "row " << r;
    if (r == 0) {
      for (size_t v = 0; v < grad0.size(); ++v)
        EXPECT_NEAR(gradAt(out, DType::F32, v), grad0[v], 1e-6);
    }
  }
}

TEST(CeTvdNumerics, TargetGradientKeepsPrecisionInBf16) {
  llvm::json::Object c = numericsCase("target-grad-precision");
  auto *expect = c.getObject("expect");
  std::vector<double> s(32000, 0.0);
  s[7] = 17.25;
  CeTvdOutputs out = runOne(oneRow(s, s, 7, DType::BF16), 1, 0);
  double want = *expect->getNumber("grad_target");
  EXPECT_NEAR(gradAt(out, DType::BF16, 7), want, 0.01 * std::fabs(want));
  double off = *expect->getNumber("grad_off_target");
  EXPECT_NEAR(gradAt(out, DType::BF16, 0), off, 0.01 * off);
}

TEST(CeTvdNumerics, SelfDistillationGivesExactlyZeroTvd) {
  ref::CeTvdInputs in = ref::makeCeTvdInputs(8, 1000, DType::BF16, 3);
  in.teacher = in.student;
  std::vector<float> gCe(8, 0.f), gTvd(8, 1.f);
  CeTvdOutputs out = runCeTvdCpu(in, gCe, gTvd, {{"BLOCK_SIZE=1024"}});
  for (int64_t r = 0; r < 8; ++r) {
    EXPECT_EQ(out.tvd[r], 0.f) << "row " << r;
    for (int64_t v = 0; v < 1000; ++v)
      ASSERT_EQ(gradAt(out, DType::BF16, r * 1000 + v), 0.0);
  }
}

TEST(CeTvdErrors, OutOfRangeTargetIsReported) {
  ref::CeTvdInputs in = ref::makeCeTvdInputs(4, 100, DType::F32, 1);
  in.target[2] = 100;
  std::vector<float> g(4, 1.f);
  try {
    runCeTvdCpu(in, g, g, {{"BLOCK_SIZE=1024", "num_warps=4"}});
    FAIL() << "expected an error";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("target 100 at row 2"),
              std::string::npos)
        << e.what();
  }
}

TEST(CeTvdErrors, EmptyBatchAndMismatchedShapes) {
  ref::CeTvdInputs in = ref::makeCeTvdInputs(4, 100, DType::F32, 1);
  std::vector<float> g(4, 1.f), g3(3, 1.f);
  EXPECT_THROW(runCeTvdCpu(in, g3, g, {}), Error);
  in.teacher.resize(10);
  EXPECT_THROW(runCeTvdCpu(in, g, g, {}), Error);
  // BT = 0 is an empty batch (BadInputTest.cpp), but not with 4 rows of
  // buffers.
  ref::CeTvdInputs empty = in;
  empty.BT = 0;
  EXPECT_THROW(runCeTvdCpu(empty, {}, {}, {}), Error);
  empty.BT = -1;
  EXPECT_THROW(runCeTvdCpu(empty, {}, {}, {}), Error);
  // The forward takes BT as an i32 argument.
  ref::CeTvdInputs tall = in;
  tall.BT = int64_t(1) << 31;
  try {
    runCeTvdCpu(tall, {}, {}, {});
    FAIL() << "BT = 2^31 ran";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("must be in [0, 2^31)"),
              std::string::npos)
        << e.what();
  }
}

TEST(CeTvdForward, AutoPicksTheClusterKernelFromSm90) {
  EXPECT_EQ(forwardKernelFor("auto"), "");
  EXPECT_EQ(resolveForwardKernel("", "sm_90"), "fused_ce_tvd_fwd_cluster");
  EXPECT_EQ(resolveForwardKernel("", "sm_90a"), "fused_ce_tvd_fwd_cluster");
  EXPECT_EQ(resolveForwardKernel("", "sm_100"), "fused_ce_tvd_fwd_cluster");
  EXPECT_EQ(resolveForwardKernel("", "sm_80"), "fused_ce_tvd_fwd");
  EXPECT_EQ(resolveForwardKernel("", ""), "fused_ce_tvd_fwd"); // the CPU
  EXPECT_EQ(resolveForwardKernel("fused_ce_tvd_fwd", "sm_90"),
            "fused_ce_tvd_fwd");
  // A --set of the other forward kernel is an error, not ignored.
  ref::CeTvdInputs in = ref::makeCeTvdInputs(2, 100, DType::F32, 1);
  std::vector<float> gCe, gTvd;
  defaultUpstream(in.BT, gCe, gTvd);
  CeTvdRunOptions o;
  o.overrides = {"CLUSTER_SIZE=2"};
  EXPECT_THROW(runCeTvdCpu(in, gCe, gTvd, o), Error);
}

// Pass 1 per thread group (the cluster kernels' form, fused_ce_tvd_fwd's
// default LANE_STATS=2) keeps each thread's softmax state in registers: its
// row reductions must not fall back to shared memory (tj_reduce_rows).
TEST(CeTvdCompile, ThreadGroupStatsStayInRegisters) {
  for (const char *name : {"fused_ce_tvd_fwd", "fused_ce_tvd_fwd_cluster",
                           "fused_ce_tvd_loss_grad"})
    for (DType dt : {DType::BF16, DType::F32})
      for (const char *warps : {"num_warps=4", "num_warps=16"}) {
        SCOPED_TRACE(std::string(name) + " " + dtypeName(dt) + " " + warps);
        const KernelSpec &spec = findKernel(name);
        TileModule m = spec.build(spec.config(dt, {"BLOCK_SIZE=2048", warps},
                                              {{"BT", 8}, {"V", 5000}}));
        CompileOptions upToCuda;
        upToCuda.upTo = Stage::Cuda;
        CompiledKernel k = compile(m, upToCuda);
        EXPECT_NE(k.tileIR.find("tile.reduce_rows"), std::string::npos);
        EXPECT_EQ(k.cuda.find("tj_reduce_rows<"), std::string::npos);
        EXPECT_EQ(k.cuda.find("tj_broadcast_rows<"), std::string::npos);
      }
}

TEST(CeTvdErrors, UnknownParameterIsReported) {
  const KernelSpec &spec = findKernel("fused_ce_tvd_fwd");
  EXPECT_THROW(spec.config(DType::BF16, {"BLOK_SIZE=1024"}), Error);
  EXPECT_THROW(spec.config(DType::BF16, {"BLOCK_SIZE=abc"}), Error);
  // A parameter with 0 among its candidates is a switch or a mode.
  EXPECT_THROW(spec.config(DType::BF16, {"LANE_STATS=3"}), Error);
  EXPECT_NO_THROW(spec.config(DType::BF16, {"LANE_STATS=2"}));
  // Sizes start at 1 (0 would divide by zero); clusters stop at 16; a tile
  // too large for the registers is refused while building.
  const KernelSpec &cluster = findKernel("fused_ce_tvd_loss_grad");
  EXPECT_THROW(cluster.config(DType::BF16, {"CLUSTER_SIZE=0"}), Error);
  EXPECT_THROW(cluster.config(DType::BF16, {"BLOCK_SIZE=0"}), Error);
  EXPECT_THROW(cluster.config(DType::BF16, {"CLUSTER_SIZE=32"}), Error);
  EXPECT_THROW(spec.build(spec.config(DType::BF16, {"BLOCK_SIZE=1048576"})),
               Error);
  EXPECT_THROW(findKernel("no_such_kernel"), Error);
  ref::CeTvdInputs in = ref::makeCeTvdInputs(2, 100, DType::F32, 1);
  std::vector<float> g(2, 1.f);
  EXPECT_THROW(runCeTvdCpu(in, g, g, {{"BLOK_SIZE=1024"}}), Error);
}

// The tuner tries every combination of the tuned parameters' candidates and
// leaves the untuned ones (UNROLL, PREFETCH_L2, FAST_LOG2) out,
// so that they take their defaults.
TEST(CeTvdTuning, UntunedParametersKeepTheirDefaults) {
  const KernelSpec &spec = findKernel("fused_ce_tvd_loss_grad");
  auto configs = spec.candidateConfigs();
  EXPECT_EQ(configs.size(), 4u * 2 * 2 * 3 * 2 * 2);
  std::set<int64_t> copyAhead;
  for (const auto &c : configs) {
    for (const char *untuned : {"UNROLL", "PREFETCH_L2", "FAST_LOG2"})
      EXPECT_EQ(c.count(untuned), 0u) << untuned;
    copyAhead.insert(c.at("COPY_AHEAD"));
  }
  EXPECT_EQ(copyAhead, (std::set<int64_t>{0, 1, 2}));
  auto tried = [&](DType dt, const char *name) {
    return spec
        .config(dt, paramOverrides(configs.front()), {{"BT", 64}, {"V", 4096}})
        .get(name);
  };
  EXPECT_EQ(tried(DType::BF16, "PREFETCH_L2"), 1);
  EXPECT_EQ(tried(DType::BF16, "FAST_LOG2"), 1);
  EXPECT_EQ(tried(DType::F16, "FAST_LOG2"), 1);
  EXPECT_EQ(tried(DType::F32, "FAST_LOG2"), 1);
  EXPECT_EQ(
      spec.config(DType::F32, {"FAST_LOG2=0"}, {{"V", 4096}}).get("FAST_LOG2"),
      0);
  // --set still takes an untuned candidate.
  EXPECT_EQ(spec.config(DType::BF16, {"UNROLL=1"}).get("UNROLL"), 1);
}

// A sample of the configurations the autotuner tries (ConfigSample.h: every
// candidate of every parameter, and combinations of them) compiles with
// NVRTC and its PTX passes ptxas for sm_90 (no GPU needed). One test per
// (kernel, dtype) so that ctest runs them in parallel.
class CeTvdCompile
    : public ::testing::TestWithParam<std::tuple<std::string, DType>> {};

TEST_P(CeTvdCompile, SampledConfigsCompileForSm90) {
  const KernelSpec &spec = findKernel(std::get<0>(GetParam()));
  DType dt = std::get<1>(GetParam());
  size_t compiled = 0, refused = 0;
  auto configs = sampleConfigs(spec, 12);
  for (const auto &overrides : configs) {
    dsl::Config c;
    try {
      c = spec.config(dt, overrides, {{"BT", 64}, {"V", 151936}});
    } catch (const Error &e) {
      // Only a KEEP array too large for V = 151936 is refused: 2 programs
      // per row with f32 elements (the array has the logits' type).
      EXPECT_NE(std::string(e.what()).find("bytes of shared memory"),
                std::string::npos)
          << e.what();
      EXPECT_EQ(dt, DType::F32) << e.what();
      EXPECT_FALSE(llvm::is_contained(overrides, "KEEP=0")) << e.what();
      ++refused;
      continue;
    }
    CompiledKernel k = compile(spec.build(c), {"sm_90", Stage::Cubin, {}});
    // A CUBIN means NVRTC's own ptxas accepted the PTX.
    ASSERT_FALSE(k.cubin.empty()) << spec.name << " " << c.str();
    EXPECT_EQ(k.threads, 32 * c.get("num_warps"));
    ++compiled;
  }
  EXPECT_EQ(compiled + refused, configs.size());
  EXPECT_GE(compiled, 12u);
}

INSTANTIATE_TEST_SUITE_P(
    Kernels, CeTvdCompile,
    ::testing::Combine(::testing::Values("fused_ce_tvd_fwd", "fused_ce_tvd_bwd",
                                         "fused_ce_tvd_fwd_cluster",
                                         "fused_ce_tvd_loss_grad"),
                       ::testing::Values(DType::BF16, DType::F16, DType::F32)),
    [](const auto &info) {
      return std::get<0>(info.param) + "_" + dtypeName(std::get<1>(info.param));
    });

// On the GPU: the same checks through NVRTC and the driver.
class CeTvdGpu : public ::testing::TestWithParam<Shape> {
protected:
  void SetUp() override { TILEJIT_SKIP_WITHOUT_GPU(); }
};

// Both forward kernels: auto picks the cluster one on sm_90 and newer. A
// parameter only one of them has (LANE_STATS: the loop kernel's) is pinned
// for that one.
TEST_P(CeTvdGpu, MatchesReference) {
  for (const char *forward : {"loop", "cluster"}) {
    SCOPED_TRACE(forward);
    Shape s = GetParam();
    const KernelSpec &fwd = findKernel(resolveForwardKernel(
        forwardKernelFor(forward), /*arch=*/""));
    std::vector<std::string> own;
    for (const std::string &o : s.overrides)
      if (!fwd.ownOverrides({o}).empty() ||
          !findKernel("fused_ce_tvd_bwd").ownOverrides({o}).empty())
        own.push_back(o);
    s.overrides = own;
    expectMatchesReference(s, 11, runCeTvdGpu, forward);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, CeTvdGpu,
    ::testing::Values(Shape{7, 1, DType::F32, {}},
                      Shape{14, 1000, DType::F32, {"BLOCK_SIZE=1024"}},
                      Shape{32, 151937, DType::BF16, {}},
                      Shape{16, 30001, DType::F16, {"num_warps=16"}},
                      Shape{64, 32000, DType::BF16, {"BLOCK_SIZE=8192"}},
                      Shape{32, 151936, DType::BF16, {"LANE_STATS=2"}},
                      Shape{16, 32001, DType::F32, {"LANE_STATS=2"}}),
    [](const auto &info) { return shapeName(info.param); });

} // namespace

namespace {

TEST(CeTvdCheck, NaNOutputsFailTheCheck) {
  ref::CeTvdInputs in = ref::makeCeTvdInputs(4, 300, DType::F32, 5);
  std::vector<float> gCe, gTvd;
  defaultUpstream(in.BT, gCe, gTvd);
  CeTvdOutputs out = runCeTvdCpu(in, gCe, gTvd, {{"BLOCK_SIZE=1024"}});
  ASSERT_TRUE(checkCeTvd(in, gCe, gTvd, out).passed);
  auto fails = [&](const std::function<void(CeTvdOutputs &)> &spoil) {
    CeTvdOutputs bad = out;
    spoil(bad);
    return !checkCeTvd(in, gCe, gTvd, bad).passed;
  };
  EXPECT_TRUE(fails([](CeTvdOutputs &o) { o.ce[0] = NAN; }));
  EXPECT_TRUE(fails([](CeTvdOutputs &o) { o.tvd[1] = NAN; }));
  EXPECT_TRUE(fails([](CeTvdOutputs &o) { o.sigma[2] = NAN; }));
  EXPECT_TRUE(fails([](CeTvdOutputs &o) { o.lseT[0] = NAN; }));
  EXPECT_TRUE(fails([](CeTvdOutputs &o) {
    storeFromDouble(o.grad.data(), DType::F32, 3, NAN);
  }));
}

} // namespace
