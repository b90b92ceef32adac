//===- LinearCeTest.cpp - chunked linear CE (interpreter) against fp64 ----===//
#include "codegen/Nvrtc.h"
#include "ops/harness/LinearCeOp.h"
#include "runtime/Autotuner.h"
#include "runtime/TuningDatabase.h"
#include "tilejit/Compiler.h"
#include "tilejit/Error.h"
#include "tilejit/HostFloat.h"
#include "tilejit/KernelSpec.h"

#include "ConfigSample.h"
#include "TestData.h"

#include "GpuTest.h"

#include "llvm/Support/Parallel.h"

#include <gtest/gtest.h>

using namespace tilejit;
using namespace tilejit::testdata;

namespace {

using Reduction = ref::LinearCeParams::Reduction;

struct Case {
  std::string name;
  int64_t N, d, V;
  DType dtype;
  Reduction reduction;
  double eps = 0, zLoss = 0, softcap = 0;
  bool bias = false, weights = false;
  int64_t chunkRows = 0;
  int unroll = 1;
};

void PrintTo(const Case &c, std::ostream *os) { *os << c.name; }

/// Options with every feature on (label smoothing 0.1, z-loss 1e-3, softcap
/// 5), `reduction` (per-row upstream gradients in `in` for none) and chunks
/// of `chunkRows`.
LinearCeOptions everyFeature(ref::LinearCeInputs &in, Reduction reduction,
                             int64_t chunkRows) {
  LinearCeOptions o;
  o.params.reduction = reduction;
  o.params.labelSmoothing = 0.1;
  o.params.zLoss = 1e-3;
  o.params.softcap = 5;
  o.chunkRows = chunkRows;
  if (reduction == Reduction::None)
    for (int64_t i = 0; i < in.N; ++i)
      in.gradOutput.push_back(0.5f + 0.1f * float(i % 3));
  return o;
}

class LinearCeInterpreter : public ::testing::TestWithParam<Case> {};

TEST_P(LinearCeInterpreter, MatchesReference) {
  const Case &c = GetParam();
  ref::LinearCeInputs in =
      makeLinearCeInputs(c.N, c.d, c.V, c.dtype, c.bias, c.weights, 17);
  LinearCeOptions o;
  o.params.reduction = c.reduction;
  o.params.labelSmoothing = c.eps;
  o.params.zLoss = c.zLoss;
  o.params.softcap = c.softcap;
  o.chunkRows = c.chunkRows;
  o.overrides = {"BLOCK_SIZE=1024", "num_warps=4",
                 "UNROLL=" + std::to_string(c.unroll)};
  if (c.reduction == Reduction::None)
    for (int64_t r = 0; r < c.N; ++r)
      in.gradOutput.push_back(0.5f + 0.25f * (r % 4)); // varies by row
  LinearCeOutputs out = runLinearCeCpu(in, o);
  if (c.chunkRows > 0)
    EXPECT_EQ(out.chunks, (c.N + c.chunkRows - 1) / c.chunkRows);
  // fp32 math against fp64: 1e-5 relative (docs/semantics.md §2).
  LinearCeCheck check = checkLinearCe(in, o, out, 1e-5, 1e-5);
  EXPECT_TRUE(check.passed) << check.summary;
}

// V not a multiple of the 1024-wide tile, every feature alone and all at
// once, every reduction, chunks that do not divide N, every dtype.
INSTANTIATE_TEST_SUITE_P(
    Features, LinearCeInterpreter,
    ::testing::Values(
        Case{"plain_mean", 12, 16, 1500, DType::F32, Reduction::Mean},
        Case{"plain_sum", 12, 16, 1500, DType::F32, Reduction::Sum},
        Case{"none_per_row_upstream", 12, 16, 1500, DType::F32,
             Reduction::None},
        Case{"label_smoothing", 12, 16, 1500, DType::F32, Reduction::Mean, 0.1},
        Case{"z_loss", 12, 16, 1500, DType::F32, Reduction::Mean, 0, 1e-3},
        Case{"softcap", 12, 16, 1500, DType::F32, Reduction::Mean, 0, 0, 2.0},
        Case{"bias", 12, 16, 1500, DType::F32, Reduction::Sum, 0, 0, 0, true},
        Case{"class_weights", 12, 16, 1500, DType::F32, Reduction::Mean, 0, 0,
             0, false, true},
        Case{"everything_mean_chunked", 13, 24, 2500, DType::F32,
             Reduction::Mean, 0.1, 1e-3, 3.0, true, true, 5},
        Case{"everything_unrolled", 13, 24, 2500, DType::F32, Reduction::Mean,
             0.1, 1e-3, 3.0, true, true, 5, 2},
        Case{"plain_unrolled_bf16", 9, 16, 3001, DType::BF16, Reduction::Mean,
             0, 0, 0, false, false, 4, 2},
        Case{"plain_whole_steps_only", 5, 8, 4096, DType::F32, Reduction::Mean,
             0, 0, 0, false, false, 0, 2},
        // A step, a whole tail tile, then a partial one.
        Case{"plain_whole_tail_tile_bf16", 9, 16, 3500, DType::BF16,
             Reduction::Mean, 0, 0, 0, false, false, 0, 2},
        Case{"plain_unroll4_bf16", 11, 16, 9001, DType::BF16, Reduction::Mean,
             0, 0, 0, false, false, 0, 4},
        Case{"everything_none_chunked", 13, 24, 2500, DType::F32,
             Reduction::None, 0.05, 1e-3, 3.0, true, true, 4},
        Case{"everything_sum_bf16", 10, 32, 3001, DType::BF16, Reduction::Sum,
             0.1, 1e-4, 5.0, true, true, 3},
        Case{"f16_V1", 6, 8, 1, DType::F16, Reduction::Mean, 0.2}),
    [](const auto &info) { return info.param.name; });

/// A batch whose logits are `rows`: h = the logits, W = the identity (d = V),
/// so z = h W^T is exact and dh is d loss / d logits.
ref::LinearCeInputs fromLogits(const json::Array &rows, const json::Value &y) {
  ref::LinearCeInputs in;
  in.N = rows.size();
  in.V = in.d = rows[0].getAsArray()->size();
  in.dtype = DType::F32;
  in.h.resize(in.N * in.d * 4);
  in.W.assign(in.V * in.d * 4, 0);
  for (int64_t r = 0; r < in.N; ++r)
    for (int64_t v = 0; v < in.V; ++v)
      storeFromDouble(in.h.data(), DType::F32, r * in.d + v,
                      number((*rows[r].getAsArray())[v]));
  for (int64_t v = 0; v < in.V; ++v)
    storeFromDouble(in.W.data(), DType::F32, v * in.d + v, 1.0);
  in.target = integers(y);
  return in;
}

void expectRow(const LinearCeOutputs &out, int64_t row, int64_t V,
               const std::vector<double> &want) {
  for (int64_t v = 0; v < V; ++v)
    EXPECT_NEAR(out.dh[row * V + v], want[v], 1e-6)
        << "row " << row << " v " << v;
}

TEST(LinearCeNumerics, LabelSmoothingWithIgnore) {
  json::Object c = numericsCase("label-smoothing-with-ignore");
  ref::LinearCeInputs in =
      fromLogits(*c.getArray("logits"), field(c, "target"));
  LinearCeOptions o;
  o.params.labelSmoothing = number(field(c, "label_smoothing"));
  o.params.reduction = Reduction::Sum;
  LinearCeOutputs out = runLinearCeCpu(in, o);
  const json::Object &e = *c.getObject("expect");
  EXPECT_NEAR(out.loss, number(field(e, "loss_sum")), 1e-6);
  EXPECT_NEAR(out.rowLoss[0], number(field(e, "loss_per_row_valid")), 1e-6);
  expectRow(out, 0, in.V, numbers(field(e, "grad_row0_sum")));
  expectRow(out, 1, in.V, numbers(field(e, "grad_row1")));
}

TEST(LinearCeNumerics, PerRowUpstreamIsFoldedIntoTheGradient) {
  json::Object c = numericsCase("reduction-none-per-row-upstream");
  ref::LinearCeInputs in =
      fromLogits(*c.getArray("logits"), field(c, "target"));
  for (double g : numbers(field(c, "grad_output")))
    in.gradOutput.push_back(float(g));
  LinearCeOptions o;
  o.params.reduction = Reduction::None;
  LinearCeOutputs out = runLinearCeCpu(in, o);
  const json::Array &want = *c.getObject("expect")->getArray("grad_logits");
  for (int64_t r = 0; r < in.N; ++r)
    expectRow(out, r, in.V, numbers(want[r]));
}

TEST(LinearCeNumerics, LargeCommonOffsetKeepsTheGap) {
  json::Object c = numericsCase("large-common-offset");
  const json::Array &rows = *c.getArray("logits");
  std::vector<double> ce = numbers(field(*c.getObject("expect"), "ce"));
  for (size_t r = 0; r < rows.size(); ++r) {
    json::Array one{rows[r]};
    ref::LinearCeInputs in = fromLogits(one, json::Array{0});
    LinearCeOptions o;
    o.params.reduction = Reduction::Sum;
    LinearCeOutputs out = runLinearCeCpu(in, o);
    EXPECT_NEAR(out.loss, ce[r], 1e-6) << "row " << r;
    if (r == 0)
      expectRow(out, 0, in.V,
                numbers(field(*c.getObject("expect"), "grad_row0")));
  }
}

TEST(LinearCe, AllIgnoredBatchGivesZeroLossAndGradients) {
  ref::LinearCeInputs in =
      makeLinearCeInputs(5, 8, 300, DType::F32, true, true, 3);
  for (int64_t &y : in.target)
    y = -100;
  LinearCeOptions o;
  o.params.labelSmoothing = 0.1;
  o.params.zLoss = 1e-3;
  LinearCeOutputs out = runLinearCeCpu(in, o);
  EXPECT_EQ(out.loss, 0.f);
  for (const auto *g : {&out.dh, &out.dW, &out.db})
    for (float x : *g)
      ASSERT_EQ(x, 0.f);
}

TEST(LinearCe, ChunkingDoesNotChangeTheResult) {
  ref::LinearCeInputs in =
      makeLinearCeInputs(11, 8, 700, DType::F32, false, false, 5);
  LinearCeOptions whole, chunked;
  chunked.chunkRows = 3;
  LinearCeOutputs a = runLinearCeCpu(in, whole),
                  b = runLinearCeCpu(in, chunked);
  EXPECT_EQ(a.rowLoss, b.rowLoss);
  EXPECT_EQ(a.dh, b.dh);
  EXPECT_EQ(b.chunks, 4);
}

TEST(LinearCe, Bf16GradAccumulationOnRequest) {
  ref::LinearCeInputs in =
      makeLinearCeInputs(24, 16, 800, DType::BF16, true, false, 6);
  LinearCeOptions o;
  o.chunkRows = 4;
  LinearCeOutputs f32 = runLinearCeCpu(in, o);
  o.bf16GradAccumulation = true;
  LinearCeOutputs bf16 = runLinearCeCpu(in, o);
  EXPECT_NE(f32.dW, bf16.dW);
  for (float x : bf16.dW)
    ASSERT_EQ(x, bf16ToFloat(floatToBf16(x))); // every value is a bf16
  // Six chunks of bf16 rounding: within a few bf16 ulps of the reference;
  // dh does not change.
  LinearCeCheck c = checkLinearCe(in, o, bf16, 1e-5, 2e-2);
  EXPECT_TRUE(c.passed) << c.summary;
  EXPECT_GT(c.dWErr, 1e-4);
  EXPECT_EQ(f32.dh, bf16.dh);
}

// Logits kept in the input dtype (the GPU's default): the same programs
// with bf16/f16 logits and dz written over them, within the GPU tolerances
// (1e-3 loss, 1e-2 gradients), and not the f32-logits result.
TEST(LinearCe, NarrowLogitsInTheInputDtype) {
  for (DType dt : {DType::BF16, DType::F16}) {
    ref::LinearCeInputs in =
        makeLinearCeInputs(11, 24, 2100, dt, true, true, 5);
    LinearCeOptions o = everyFeature(in, Reduction::Mean, 4);
    LinearCeOutputs wide = runLinearCeCpu(in, o);
    o.narrowLogits = true;
    LinearCeOutputs narrow = runLinearCeCpu(in, o);
    LinearCeCheck c = checkLinearCe(in, o, narrow, 1e-3, 1e-2);
    EXPECT_TRUE(c.passed) << dtypeName(dt) << "\n" << c.summary;
    EXPECT_NE(narrow.dh, wide.dh) << "the narrow path was not taken";
  }
}

// The chunk loop with tilejit's own GEMMs (lce_gemm in the interpreter)
// instead of plain loops: every feature, chunks that do not divide N, V and
// d not multiples of the 64 x 64 x 32 blocks, f32 and narrow logits, against
// the fp64 reference at the tolerances of bf16/f16 operands.
TEST(LinearCe, DslGemmsMatchTheReference) {
  for (DType dt : {DType::BF16, DType::F16})
    for (bool narrow : {false, true})
      for (Reduction r : {Reduction::Mean, Reduction::None}) {
        ref::LinearCeInputs in =
            makeLinearCeInputs(13, 40, 1100, dt, true, true, 21);
        LinearCeOptions o = everyFeature(in, r, 5);
        o.narrowLogits = narrow;
        LinearCeOutputs loops = runLinearCeCpu(in, o);
        o.gemmBackend = LinearCeOptions::GemmBackend::Dsl;
        LinearCeOutputs dsl = runLinearCeCpu(in, o);
        LinearCeCheck c = checkLinearCe(in, o, dsl, 1e-3, 1e-2);
        EXPECT_TRUE(c.passed) << dtypeName(dt) << " narrow " << narrow
                              << " reduction " << int(r) << "\n"
                              << c.summary;
        EXPECT_NE(dsl.dW, loops.dW) << "the DSL GEMMs did not run";
      }
}

// lce_gemm's --set entries leave lce_logits alone (its BLOCK_M must cover
// the program's threads); entries prefixed "lce_logits." pin it.
TEST(LinearCe, DslGemmsTakeTheirOwnBlocks) {
  ref::LinearCeInputs in =
      makeLinearCeInputs(13, 40, 300, DType::BF16, false, false, 9);
  LinearCeOptions o = everyFeature(in, Reduction::Sum, 8);
  o.narrowLogits = true;
  o.gemmBackend = LinearCeOptions::GemmBackend::Dsl;
  o.overrides = {"BLOCK_M=64", "BLOCK_N=64", "lce_logits.BLOCK_N=64"};
  LinearCeCheck c = checkLinearCe(in, o, runLinearCeCpu(in, o), 1e-3, 1e-2);
  EXPECT_TRUE(c.passed) << c.summary;
}

TEST(LinearCe, TheMemoryBudgetSetsTheChunkRows) {
  ref::LinearCeInputs f32 =
      makeLinearCeInputs(100, 8, 1000, DType::F32, false, false, 1);
  ref::LinearCeInputs bf16 =
      makeLinearCeInputs(100, 8, 1000, DType::BF16, false, false, 1);
  LinearCeOptions o;
  const int64_t ws = o.gemmWorkspaceBytes;      // taken first
  EXPECT_EQ(linearCeChunkRows(f32, o), 100);    // no budget: all rows
  o.memoryBudgetBytes = ws + 40 * 1000 * 4 + 3; // 40 f32 rows, and a bit
  EXPECT_EQ(linearCeChunkRows(f32, o), 34);     // 3 equal chunks
  EXPECT_EQ(linearCeChunkRows(bf16, o), 25);    // 26 f32 + bf16 rows: 4 chunks
  o.narrowLogits = true;
  EXPECT_EQ(linearCeChunkRows(bf16, o), 50); // 80 bf16 rows: 2 chunks
  o.narrowLogits = false;
  o.chunkRows = 7; // an explicit chunk wins
  EXPECT_EQ(linearCeChunkRows(f32, o), 7);
  o = {};
  o.memoryBudgetBytes = ws + 30 * 1000 * 4;
  EXPECT_EQ(runLinearCeCpu(f32, o).chunks, 4);
  // The Llama-3-8B head (N 8192, V 128256): 2060 rows of bf16 logits fit in
  // 512 MiB; four equal chunks of 2048 rows.
  ref::LinearCeInputs llama;
  llama.N = 8192;
  llama.V = 128256;
  llama.dtype = DType::BF16;
  o.narrowLogits = true;
  o.memoryBudgetBytes = int64_t(512) << 20;
  EXPECT_EQ(linearCeChunkRows(llama, o), 2048);

  // The chunk sizes the GPU tuner times stay within the budget.
  ref::LinearCeInputs big =
      makeLinearCeInputs(5000, 8, 1000, DType::F32, false, false, 1);
  o.memoryBudgetBytes = ws + 1000 * 1000 * 4; // 1000 f32 rows
  EXPECT_EQ(linearCeChunkCandidates(big, o),
            (std::vector<int64_t>{128, 256, 512, 640, 1000}));
  o.memoryBudgetBytes = ws + 100 * 1000 * 4;
  EXPECT_EQ(linearCeChunkCandidates(big, o), std::vector<int64_t>{100});
}

TEST(LinearCe, BadInputsAreClearErrors) {
  auto fails =
      [](const std::function<void(ref::LinearCeInputs &, LinearCeOptions &)>
             &spoil,
         const std::string &words) {
        ref::LinearCeInputs in =
            makeLinearCeInputs(4, 8, 50, DType::F32, false, false, 1);
        LinearCeOptions o;
        spoil(in, o);
        try {
          runLinearCeCpu(in, o);
          ADD_FAILURE() << "no error for: " << words;
        } catch (const Error &e) {
          EXPECT_NE(std::string(e.what()).find(words), std::string::npos)
              << e.what();
        }
      };
  fails([](auto &in, auto &) { in.target[2] = 50; }, "at row 2");
  fails([](auto &in, auto &) { in.h.pop_back(); }, "h must be (N, d)");
  fails([](auto &in, auto &) { in.classWeight = {1.f}; }, "class weights");
  fails([](auto &, auto &o) { o.params.reduction = Reduction::None; },
        "per-row upstream");
  fails([](auto &, auto &o) { o.params.labelSmoothing = 1.5; },
        "label smoothing");
  fails([](auto &, auto &o) { o.params.softcap = -1; }, "softcap");
  fails([](auto &in, auto &) { in.N = -1; }, "N must be >= 0");
  fails([](auto &, auto &o) { o.bf16GradAccumulation = true; },
        "needs bf16 inputs");
  fails([](auto &, auto &o) { o.memoryBudgetBytes = 1 << 20; },
        "GEMM workspace");
  fails([](auto &, auto &o) { o.gemmCandidates = 0; }, "gemm candidates");
  fails([](auto &, auto &o) { o.overrides = {"UNROLL=0"}; },
        "values must be >= 1");
  fails([](auto &, auto &o) { o.overrides = {"UNROLL=100000"}; },
        "UNROLL must be in 1..16");
  fails([](auto &, auto &o) { o.overrides = {"BLOCK_M=64x"}; },
        "non-integer value");
  fails([](auto &,
           auto &o) { o.gemmBackend = LinearCeOptions::GemmBackend::Dsl; },
        "need bf16 or f16");
  fails([](auto &, auto &o) { o.overrides = {"C_F32=0"}; }, "cannot be pinned");
  fails([](auto &, auto &o) { o.overrides = {"lce_logits.BLOCK_Q=1"}; },
        "no parameter of lce_logits");
  fails([](auto &, auto &o) { o.overrides = {"lce_logits.BLOCK_N=x"}; },
        "non-integer value");
  EXPECT_THROW(parseGemmBackend("cutlass"), Error);
}

// The --gemm names round-trip, and the GEMM report says which path ran,
// why auto fell back, and what was timed.
TEST(LinearCe, GemmBackendNamesAndReport) {
  using Backend = LinearCeOptions::GemmBackend;
  for (Backend b : {Backend::CublasLt, Backend::Dsl, Backend::Auto})
    EXPECT_EQ(parseGemmBackend(gemmBackendName(b)), b);
  LinearCeOutputs out;
  out.gemmBackend = Backend::Dsl;
  out.note = "cuBLASLt unavailable: no libcublasLt";
  EXPECT_EQ(describeGemmPaths(out),
            "    GEMMs: all by tilejit (cuBLASLt unavailable: no "
            "libcublasLt)\n");
  out = {};
  out.gemmBackend = Backend::Auto;
  out.gemmPathProblems = 3;
  out.gemmPathsOnDsl = 1;
  out.gemmPathsFromStore = 2;
  out.gemmPathTimings = {{"p", 1.5, 40.25, 3e12, "cuBLASLt", "lce_gemm"},
                         {"q", 3.0, 2.5, 0, "walk", "fold"}};
  EXPECT_EQ(describeGemmPaths(out),
            "    GEMM paths (auto): 3 problems, 1 on lce_gemm, 2 on cuBLASLt; "
            "2 from the tuning database\n      timed now: p: cuBLASLt 1.500 "
            "ms (2000 TFLOP/s), lce_gemm 40.250 ms (75 TFLOP/s, 0.04 of "
            "cuBLASLt)\n      timed now: q: walk 3.000 ms, fold 2.500 ms "
            "(1.20 of the first)\n");
}

// On the GPU (cuBLASLt GEMMs): the same checks, at the tolerances of GEMMs
// in the input dtype (fp32 accumulation).
TEST(LinearCeGpu, MatchesReference) {
  TILEJIT_SKIP_WITHOUT_GPU();
  for (DType dt : {DType::F32, DType::BF16, DType::F16})
    for (Reduction r : {Reduction::Mean, Reduction::Sum, Reduction::None})
      for (bool narrow : {false, true}) {
        ref::LinearCeInputs in =
            makeLinearCeInputs(37, 64, 3001, dt, true, true, 8);
        LinearCeOptions o = everyFeature(in, r, 16);
        o.narrowLogits = narrow;
        o.bf16GradAccumulation = narrow && dt == DType::BF16;
        LinearCeOutputs out = runLinearCeGpu(in, o);
        double tol = dt == DType::F32 ? 1e-4 : 1e-2;
        LinearCeCheck c = checkLinearCe(in, o, out, tol, tol);
        EXPECT_TRUE(c.passed) << dtypeName(dt) << " reduction " << int(r)
                              << " narrow " << narrow << "\n"
                              << c.summary;
      }
}

// On the GPU, the chunk loop as the bench drives it: the chunk from a
// budget, tuned, GEMM algorithms timed, the step captured into a CUDA graph
// (no host synchronization inside), each step timed, and still the right
// gradients.
TEST(LinearCeGpu, TunedBudgetedAndTimed) {
  TILEJIT_SKIP_WITHOUT_GPU();
  ref::LinearCeInputs in =
      makeLinearCeInputs(300, 64, 5000, DType::BF16, false, false, 9);
  LinearCeOptions o;
  o.narrowLogits = true;
  o.memoryBudgetBytes = o.gemmWorkspaceBytes + 100 * 5000 * 2; // 100 rows
  o.tuneChunkRows = true;
  o.gemmCandidates = 4;
  o.cudaGraph = true;
  o.iterations = 2;
  LinearCeOutputs out = runLinearCeGpu(in, o);
  EXPECT_LE(out.chunkRows, 100);
  EXPECT_GT(out.gemmProblemsTimed, 0);
  EXPECT_TRUE(out.ranAsGraph);
  EXPECT_FALSE(out.chunkStepMs.empty());
  LinearCeCheck c = checkLinearCe(in, o, out, 1e-3, 1e-2);
  EXPECT_TRUE(c.passed) << c.summary;
}

// cuBLASLt's timed algorithm choices are kept (in the process, and in the
// tuning database for the next one): a second run of the same problems
// times none of them and reuses every choice.
TEST(LinearCeGpu, GemmChoicesPersist) {
  TILEJIT_SKIP_WITHOUT_GPU();
  if (!TuningDatabase::fromEnvironment().enabled())
    GTEST_SKIP() << "the tuning database is off (TILEJIT_CACHE=0)";
  ref::LinearCeInputs in =
      makeLinearCeInputs(96, 128, 7001, DType::BF16, false, false, 11);
  LinearCeOptions o;
  o.narrowLogits = true;
  o.chunkRows = 32;
  o.gemmCandidates = 3;
  LinearCeOutputs first = runLinearCeGpu(in, o);
  LinearCeOutputs second = runLinearCeGpu(in, o);
  int chosen = first.gemmProblemsTimed + first.gemmProblemsFromStore;
  EXPECT_GT(chosen, 0);
  EXPECT_EQ(second.gemmProblemsTimed, 0);
  EXPECT_EQ(second.gemmProblemsFromStore, chosen);
  LinearCeCheck c = checkLinearCe(in, o, second, 1e-3, 1e-2);
  EXPECT_TRUE(c.passed) << c.summary;
}

// GEMM paths picked per problem (auto): each problem timed on both paths
// once, the choices kept (a second run times none), and the gradients right
// whichever path each problem took.
TEST(LinearCeGpu, AutoGemmPathsPersist) {
  TILEJIT_SKIP_WITHOUT_GPU();
  ref::LinearCeInputs in =
      makeLinearCeInputs(96, 128, 7001, DType::BF16, true, false, 12);
  LinearCeOptions o;
  o.narrowLogits = true;
  o.chunkRows = 40; // a partial last chunk: more problems
  o.gemmBackend = LinearCeOptions::GemmBackend::Auto;
  LinearCeOutputs first = runLinearCeGpu(in, o);
  ASSERT_EQ(first.gemmBackend, LinearCeOptions::GemmBackend::Auto);
  // logits, dh, dW written and read, db: for the full and the last chunk.
  EXPECT_GE(first.gemmPathProblems, 8);
  EXPECT_EQ(int(first.gemmPathTimings.size()) + first.gemmPathsFromStore,
            first.gemmPathProblems);
  for (const auto &t : first.gemmPathTimings)
    EXPECT_TRUE(t.cublasLtMs > 0 && t.lceGemmMs > 0) << t.problem;
  LinearCeCheck c = checkLinearCe(in, o, first, 1e-3, 1e-2);
  EXPECT_TRUE(c.passed) << c.summary;
  if (!TuningDatabase::fromEnvironment().enabled())
    return; // nothing is kept with TILEJIT_CACHE=0
  LinearCeOutputs second = runLinearCeGpu(in, o);
  EXPECT_TRUE(second.gemmPathTimings.empty());
  EXPECT_EQ(second.gemmPathsFromStore, first.gemmPathProblems);
  EXPECT_EQ(second.gemmPathsOnDsl, first.gemmPathsOnDsl);
}

// On the GPU with tilejit's own GEMMs (lce_gemm, tile dot) in the chunk
// loop: every feature, f32 and narrow logits.
TEST(LinearCeGpu, DslGemms) {
  TILEJIT_SKIP_WITHOUT_GPU();
  for (DType dt : {DType::BF16, DType::F16})
    for (bool narrow : {false, true}) {
      ref::LinearCeInputs in =
          makeLinearCeInputs(37, 64, 3001, dt, true, true, 8);
      LinearCeOptions o = everyFeature(in, Reduction::Mean, 16);
      o.narrowLogits = narrow;
      o.gemmBackend = LinearCeOptions::GemmBackend::Dsl;
      LinearCeOutputs out = runLinearCeGpu(in, o);
      LinearCeCheck c = checkLinearCe(in, o, out, 1e-2, 1e-2);
      EXPECT_TRUE(c.passed) << dtypeName(dt) << " narrow " << narrow << "\n"
                            << c.summary;
    }
}

// A sample of the linear-CE programs' configurations (ConfigSample.h)
// through NVRTC and ptxas
// (lce_logits_grad with every feature compiled in and f32 logits), and the
// plain cross-entropy specialization (no feature) with logits in the input
// dtype, as the GPU runs it by default.
TEST(LinearCe, SampledConfigsCompileForSm90) {
  std::vector<std::pair<const KernelSpec *, dsl::Config>> configs;
  for (const char *name :
       {"lce_logits_grad", "lce_row_weights", "lce_loss_sum", "lce_gemm",
        "lce_logits"}) {
    const KernelSpec &spec = findKernel(name);
    // lce_logits with every feature takes ptxas several seconds a config.
    int samples = spec.name == "lce_logits" ? 3 : 8;
    for (const auto &overrides : sampleConfigs(spec, samples))
      for (DType dt : spec.dtypes)
        configs.push_back({&spec, spec.config(dt, overrides, {{"V", 1000}})});
  }
  const KernelSpec &rows = findKernel("lce_logits_grad");
  for (DType dt : rows.dtypes)
    configs.push_back(
        {&rows, rows.config(dt, {},
                            {{"V", 1000},
                             {"SOFTCAP", 0},
                             {"SMOOTHING", 0},
                             {"Z_LOSS", 0},
                             {"BIAS", 0},
                             {"CLASS_WEIGHT", 0},
                             {"NARROW_LOGITS", dt != DType::F32}})});
  // On every core: each build has its own MLIR context, NVRTC is
  // thread-safe.
  std::vector<std::string> failures(configs.size());
  llvm::parallelFor(0, configs.size(), [&](size_t i) {
    auto &[spec, c] = configs[i];
    try {
      CompiledKernel k = compile(spec->build(c), {"sm_90", Stage::Cubin, {}});
      std::string log;
      if (!nvrtc::ptxasAccepts(k.ptx, "sm_90", &log))
        failures[i] = spec->name + " " + c.str() + ": ptxas: " + log;
    } catch (const std::exception &e) {
      failures[i] = spec->name + " " + c.str() + ": " + e.what();
    }
  });
  for (const std::string &f : failures)
    EXPECT_TRUE(f.empty()) << f;
}

} // namespace
