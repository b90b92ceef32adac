//===- SimtInterpreterTest.cpp - the interpreter on thread-level code -----===//
//
// Each kernel's SIMT code (after lowerToSimt: the layout, the lowering and
// the SIMT passes) against its tile-level program, both in the CPU
// interpreter on the same inputs: the spec-declared kernels through their
// run specs, the others through the operations that launch them. Then the
// interpreter's own rules for thread-level code. The CPU tests run again on
// SIMT code in the `simt-interpreter` ctest entry (TILEJIT_INTERPRET=simt),
// against their fp64 references.
//
//===----------------------------------------------------------------------===//
#include "kernels_spec/reference/Inputs.h"
#include "ops/SpecRun.h"
#include "ops/harness/FusedCeTvdOp.h"
#include "ops/harness/FusedCeTvdReducedOp.h"
#include "ops/harness/LinearCeOp.h"
#include "tilejit/Error.h"
#include "tilejit/Interpreter.h"
#include "tilejit/TileModule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

using namespace tilejit;

namespace {

/// The largest difference between the outputs of the same launch run at
/// the tile and at the SIMT level, as a fraction of 2 units in the last
/// place of the output's dtype at the tile level's value plus 1e-5 of the
/// output's largest magnitude. The levels differ only where a float sum
/// runs in another order (a thread's elements, then the GPU's combine
/// across threads, against the tile interpreter's consecutive split), so
/// values that cancel (a gradient p - 1) can differ by more ulps than their
/// size suggests, never by more than the sums' rounding.
struct LevelDiff {
  std::string worst;
  double ratio = 0; ///< <= 1: within the bound
};

double ulpAt(double v, DType t) {
  int mantissa = t == DType::BF16 ? 8 : t == DType::F16 ? 11 : 24;
  double a = std::max(std::fabs(v), t == DType::F32 ? 1e-30 : 6.1e-5);
  return std::ldexp(1.0, std::ilogb(a) - mantissa + 1);
}

LevelDiff compareLevels(const std::string &kernel, SpecRunOptions o) {
  const KernelSpec &spec = findKernel(kernel);
  SpecRun tileRun(spec, o), simtRun(spec, o);
  tileRun.runOnCpu(InterpretLevel::Tile);
  simtRun.runOnCpu(InterpretLevel::Simt);
  LevelDiff d;
  for (const ArgSpec &a : spec.run.args) {
    if (a.role != ArgSpec::Role::Output)
      continue;
    const SpecRun::Buffer &x = tileRun.buffer(a.name);
    const SpecRun::Buffer &y = simtRun.buffer(a.name);
    HostTensor tx{x.host.data(), x.dtype, x.shape};
    HostTensor ty{y.host.data(), y.dtype, y.shape};
    double largest = 0;
    for (int64_t i = 0; i < tx.numElements(); ++i)
      if (std::isfinite(tx[i]))
        largest = std::max(largest, std::fabs(tx[i]));
    for (int64_t i = 0; i < tx.numElements(); ++i) {
      double want = tx[i], got = ty[i];
      if (want == got || (std::isnan(want) && std::isnan(got)))
        continue;
      double bound = 2 * ulpAt(want, x.dtype) + 1e-5 * largest;
      double ratio =
          std::isfinite(got - want) ? std::fabs(got - want) / bound : HUGE_VAL;
      if (ratio > d.ratio) {
        d.ratio = ratio;
        d.worst = a.name + "[" + std::to_string(i) + "]: tile " +
                  std::to_string(want) + ", simt " + std::to_string(got);
      }
    }
  }
  return d;
}

SpecRunOptions options(DType dtype, std::map<std::string, int64_t> sizes,
                       std::vector<std::string> set = {}) {
  SpecRunOptions o;
  o.dtype = dtype;
  o.sizes = std::move(sizes);
  o.set = std::move(set);
  return o;
}

// The row losses with each of the compiler's row schedules, at a V that is
// not a multiple of the tile, and rows longer than the kept budget.
TEST(SimtInterpreter, RowLossesMatchTheirTilePrograms) {
  const std::vector<std::vector<std::string>> schedules = {
      {},
      {"LOAD_AHEAD=0"},
      {"SPLIT_ROWS=2"},
      {"SPLIT_ROWS=4", "KEEP_ROW=1"},
      {"SPLIT_ROWS=2", "KEEP_ROW=1", "KEEP_COPY_AHEAD=2"},
      {"BLOCK_SIZE=1024", "num_warps=4"}};
  for (const char *kernel : {"cross_entropy", "jsd", "kl_div"})
    for (DType dtype : {DType::BF16, DType::F32})
      for (const auto &set : schedules) {
        std::string what = std::string(kernel) + " " + dtypeName(dtype);
        for (const std::string &s : set)
          what += " " + s;
        LevelDiff d = compareLevels(
            kernel, options(dtype, {{"BT", 5}, {"V", 5001}}, set));
        EXPECT_LE(d.ratio, 1.0) << what << ": " << d.worst;
      }
}

// The DSL GEMM: its dot loop's accumulator leaves in the kernel's layout,
// in every transpose and at sizes that are not multiples of a block.
TEST(SimtInterpreter, DotLoopGemmMatchesItsTileProgram) {
  for (const char *ta : {"TRANS_A=0", "TRANS_A=1"})
    for (const char *tb : {"TRANS_B=0", "TRANS_B=1"}) {
      LevelDiff d = compareLevels(
          "lce_gemm", options(DType::BF16, {{"M", 72}, {"N", 136}, {"K", 80}},
                              {ta, tb, "BLOCK_M=64", "BLOCK_N=64", "BLOCK_K=32",
                               "num_warps=4"}));
      EXPECT_LE(d.ratio, 1.0) << ta << " " << tb << ": " << d.worst;
    }
}

/// The largest difference between `tile` and `simt` (floats, or raw
/// bf16/f16/f32 bytes of `dtype`), as compareLevels measures it.
double levelRatio(const std::vector<double> &tile,
                  const std::vector<double> &simt, DType dtype) {
  double largest = 0, worst = 0;
  for (double v : tile)
    if (std::isfinite(v))
      largest = std::max(largest, std::fabs(v));
  EXPECT_EQ(tile.size(), simt.size());
  for (size_t i = 0; i < tile.size() && i < simt.size(); ++i) {
    if (tile[i] == simt[i] || (std::isnan(tile[i]) && std::isnan(simt[i])))
      continue;
    double bound = 2 * ulpAt(tile[i], dtype) + 1e-5 * largest;
    double d = std::fabs(simt[i] - tile[i]);
    worst = std::max(worst, std::isfinite(d) ? d / bound : HUGE_VAL);
  }
  return worst;
}

std::vector<double> widen(const std::vector<float> &v) {
  return std::vector<double>(v.begin(), v.end());
}

std::vector<double> widen(const std::vector<uint8_t> &bytes, DType t) {
  HostTensor h{bytes.data(), t, {int64_t(bytes.size() / dtypeSize(t))}};
  std::vector<double> out(h.numElements());
  for (int64_t i = 0; i < h.numElements(); ++i)
    out[i] = h[i];
  return out;
}

/// Runs `fn` with every CPU run at `level`, then back at the tile level.
template <typename Fn> auto atLevel(InterpretLevel level, Fn fn) {
  setDefaultInterpretLevel(level);
  struct Restore {
    ~Restore() { setDefaultInterpretLevel(InterpretLevel::Tile); }
  } restore;
  return fn();
}

// The kernels the operations launch: CE+TVD's forward (both forms) and
// backward, its reduced loss + gradient with its row weights and sum, and
// the linear CE's row weights, logits gradient, loss sum and DSL GEMMs.
TEST(SimtInterpreter, OperationsMatchTheirTilePrograms) {
  for (DType dtype : {DType::BF16, DType::F32}) {
    ref::CeTvdInputs in = ref::makeCeTvdInputs(6, 5001, dtype, 7);
    std::vector<float> gCe, gTvd;
    defaultUpstream(in.BT, gCe, gTvd);
    for (const char *forward :
         {"fused_ce_tvd_fwd", "fused_ce_tvd_fwd_cluster"}) {
      CeTvdRunOptions o;
      o.forwardKernel = forward;
      auto run = [&] { return runCeTvdCpu(in, gCe, gTvd, o); };
      CeTvdOutputs t = atLevel(InterpretLevel::Tile, run);
      CeTvdOutputs s = atLevel(InterpretLevel::Simt, run);
      for (auto [name, x, y] : {std::tuple{"ce", &t.ce, &s.ce},
                                {"tvd", &t.tvd, &s.tvd},
                                {"lse_s", &t.lseS, &s.lseS},
                                {"sigma", &t.sigma, &s.sigma}})
        EXPECT_LE(levelRatio(widen(*x), widen(*y), DType::F32), 1.0)
            << forward << " " << dtypeName(dtype) << " " << name;
      EXPECT_LE(levelRatio(widen(t.grad, dtype), widen(s.grad, dtype), dtype),
                1.0)
          << forward << " " << dtypeName(dtype) << " grad";
    }
    CeTvdReducedOptions ro;
    auto reduced = [&] { return runCeTvdReducedCpu(in, ro); };
    CeTvdReducedOutputs t = atLevel(InterpretLevel::Tile, reduced);
    CeTvdReducedOutputs s = atLevel(InterpretLevel::Simt, reduced);
    EXPECT_LE(levelRatio({t.loss}, {s.loss}, DType::F32), 1.0) << "loss";
    EXPECT_LE(levelRatio(widen(t.grad, dtype), widen(s.grad, dtype), dtype),
              1.0)
        << dtypeName(dtype) << " reduced grad";
  }
  ref::LinearCeInputs lin =
      makeLinearCeInputs(40, 64, 1000, DType::BF16, true, true, 3);
  LinearCeOptions lo;
  lo.params.labelSmoothing = 0.1;
  lo.params.zLoss = 1e-3;
  lo.params.softcap = 20;
  lo.chunkRows = 16;
  lo.gemmBackend = LinearCeOptions::GemmBackend::Dsl;
  auto linear = [&] { return runLinearCeCpu(lin, lo); };
  LinearCeOutputs t = atLevel(InterpretLevel::Tile, linear);
  LinearCeOutputs s = atLevel(InterpretLevel::Simt, linear);
  EXPECT_LE(levelRatio({t.loss}, {s.loss}, DType::F32), 1.0) << "linear loss";
  for (auto [name, x, y] : {std::tuple{"dh", &t.dh, &s.dh},
                            {"dW", &t.dW, &s.dW},
                            {"db", &t.db, &s.db}})
    EXPECT_LE(levelRatio(widen(*x), widen(*y), DType::BF16), 1.0)
        << "linear " << name;
}

// Every thread adds its id; each stores the block's sum at its own index.
TEST(SimtInterpreter, BlockReduceGivesEveryThreadTheSum) {
  TileModule m = TileModule::parse(R"(
  func.func @sums(%out: !tile.ptr<f32>) attributes {tile.kernel, simt.threads = 96 : i64} {
    %t = simt.thread_id : i32
    %b = simt.block_id 0 : i32
    %c96 = arith.constant 96 : i32
    %base = arith.muli %b, %c96 : i32
    %i = arith.addi %base, %t : i32
    %x = arith.sitofp %t : i32 to f32
    %s = simt.block_reduce sum %x : f32
    %iv = vector.broadcast %i : i32 to vector<1xi32>
    %sv = vector.broadcast %s : f32 to vector<1xf32>
    simt.store %out[%iv], %sv : !tile.ptr<f32>[vector<1xi32>], vector<1xf32>
    return
  })",
                                   "sums");
  std::vector<float> out(2 * 96, -1);
  interpret(m.operation(), "sums", Grid{2},
            {InterpBuffer{out.data(), DType::F32, int64_t(out.size())}});
  for (size_t i = 0; i < out.size(); ++i)
    EXPECT_EQ(out[i], 95 * 96 / 2) << i;
}

// A loop bound that differs between threads is divergent control flow,
// which the lowering never makes: an error, not a silent run of thread 0's.
TEST(SimtInterpreter, LoopBoundThatDiffersBetweenThreadsIsAnError) {
  TileModule m = TileModule::parse(R"(
  func.func @divergent(%out: !tile.ptr<i32>) attributes {tile.kernel, simt.threads = 32 : i64} {
    %t = simt.thread_id : i32
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %n = scf.for %i = %c0 to %t step %c1 iter_args(%a = %c0) -> (i32) : i32 {
      %a2 = arith.addi %a, %c1 : i32
      scf.yield %a2 : i32
    }
    simt.store %out[%t], %n : !tile.ptr<i32>[i32], i32
    return
  })",
                                   "divergent");
  std::vector<int32_t> out(32);
  try {
    interpret(m.operation(), "divergent", Grid{1},
              {InterpBuffer{out.data(), DType::I32, 32}});
    FAIL() << "no error";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find(
                  "scf.for's upper bound differs between the threads"),
              std::string::npos)
        << e.what();
  }
}

// A 128-element tile over 32 threads in groups of 2: thread t holds
// elements 2t, 2t + 1, 64 + 2t and 65 + 2t. Summing rows of 2 gives a
// 64-element tile in groups of 1, thread t holding rows t and 32 + t: the
// row op gathers the tile in the kernel's layout and scatters it back.
TEST(SimtInterpreter, RowOpsGatherTheTileInTheKernelsLayout) {
  TileModule m = TileModule::parse(R"(
  func.func @rows(%x: !tile.ptr<f32>, %out: !tile.ptr<f32>) attributes {tile.kernel, simt.threads = 32 : i64, simt.groups = array<i64: 128, 2, 64, 1>} {
    %t = simt.thread_id : i32
    %c2 = arith.constant 2 : i32
    %base = arith.muli %t, %c2 : i32
    %bv = vector.broadcast %base : i32 to vector<4xi32>
    %iota = arith.constant dense<[0, 1, 64, 65]> : vector<4xi32>
    %offs = arith.addi %bv, %iota : vector<4xi32>
    %v = simt.load %x[%offs] : !tile.ptr<f32>[vector<4xi32>] -> vector<4xf32>
    %r = simt.reduce_rows sum %v {cols = 2 : i64} : vector<4xf32> -> vector<2xf32>
    %tv = vector.broadcast %t : i32 to vector<2xi32>
    %rows = arith.constant dense<[0, 32]> : vector<2xi32>
    %at = arith.addi %tv, %rows : vector<2xi32>
    simt.store %out[%at], %r : !tile.ptr<f32>[vector<2xi32>], vector<2xf32>
    return
  })",
                                   "rows");
  std::vector<float> x(128), out(64, -1);
  for (int i = 0; i < 128; ++i)
    x[i] = float(i);
  interpret(m.operation(), "rows", Grid{1},
            {InterpBuffer{x.data(), DType::F32, 128},
             InterpBuffer{out.data(), DType::F32, 64}});
  for (int r = 0; r < 64; ++r)
    EXPECT_EQ(out[r], float(4 * r + 1)) << "row " << r;
}

// A scalar store is thread 0's alone, as the GPU makes it: the others'
// values never land.
TEST(SimtInterpreter, ScalarStoreIsThreadZeros) {
  TileModule m = TileModule::parse(R"(
  func.func @one(%out: !tile.ptr<i32>) attributes {tile.kernel, simt.threads = 64 : i64} {
    %t = simt.thread_id : i32
    %c0 = arith.constant 0 : i32
    %c5 = arith.constant 5 : i32
    %t5 = arith.addi %t, %c5 : i32
    simt.store %out[%c0], %t5 : !tile.ptr<i32>[i32], i32
    return
  })",
                                   "one");
  int32_t out = -1;
  interpret(m.operation(), "one", Grid{1}, {InterpBuffer{&out, DType::I32, 1}});
  EXPECT_EQ(out, 5);
}

} // namespace
