//===- DslTest.cpp - the C++ DSL: building, errors, running ---------------===//
#include "tilejit/DSL.h"
#include "tilejit/Compiler.h"
#include "tilejit/Interpreter.h"

#include "ExpectError.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>

using namespace tilejit;
using namespace tilejit::dsl;

namespace {

Config config(int64_t block = 256, int64_t warps = 4) {
  Config c;
  c.params = {{"BLOCK_SIZE", block}, {"num_warps", warps}};
  return c;
}

/// out[row] = sum of x[row, :V] (f32), the DSL's loop-carried Var at work.
TileModule rowSum(const Config &c) {
  KernelBuilder k("row_sum", c);
  Value x = k.pointerArg("x", DType::F32);
  Value out = k.pointerArg("out", DType::F32);
  Value V = k.scalarArg("V", DType::I32);
  int64_t BLOCK = k.param("BLOCK_SIZE");
  Value row = k.programId(0);
  Value xRow = x + row.to(DType::I64) * V.to(DType::I64);
  Var acc = k.constant(0, DType::F32);
  k.forRange(0, V, BLOCK, [&](Value i) {
    Value offs = i + k.arange(BLOCK);
    acc = acc + k.load(xRow, offs, offs < V, 0.0).sum();
  });
  k.store(out, row, acc);
  return k.finish();
}

TEST(Dsl, BuildsALoopWithACarriedVar) {
  TileModule m = rowSum(config());
  std::string ir = m.str();
  EXPECT_NE(ir.find("scf.for"), std::string::npos) << ir;
  EXPECT_NE(ir.find("tile.reduce sum"), std::string::npos) << ir;
  EXPECT_NE(ir.find("iter_args"), std::string::npos) << ir;
}

// min_programs_per_sm becomes the kernel's minimum programs per SM (launch
// bounds' second argument); a negative value is refused.
TEST(Dsl, MinProgramsPerSmReachesTheKernel) {
  Config c = config();
  c.params["min_programs_per_sm"] = 3;
  EXPECT_NE(rowSum(c).str().find("tile.min_programs_per_sm = 3"),
            std::string::npos);
  EXPECT_EQ(rowSum(config()).str().find("tile.min_programs_per_sm"),
            std::string::npos);
  c.params["min_programs_per_sm"] = -1;
  expectError([&] { rowSum(c); }, {"row_sum", "min_programs_per_sm", "-1"});
}

TEST(Dsl, RowSumRunsInTheInterpreter) {
  const int64_t rows = 5, V = 1000; // V not a multiple of BLOCK_SIZE
  std::vector<float> x(rows * V), out(rows, -1.f);
  std::iota(x.begin(), x.end(), 0.f);
  TileModule m = rowSum(config());
  optimizeTile(m);
  interpret(m.operation(), "row_sum", {rows, 1, 1},
            {InterpBuffer{x.data(), DType::F32, rows * V},
             InterpBuffer{out.data(), DType::F32, rows}, int32_t(V)});
  for (int64_t r = 0; r < rows; ++r) {
    double want = 0;
    for (int64_t v = 0; v < V; ++v)
      want += x[r * V + v];
    EXPECT_NEAR(out[r], want, 1e-6 * want) << "row " << r;
  }
}

/// y[offs] = 2 x[offs] for one tile, through the masked overloads with no
/// mask (std::nullopt), or through the unmasked ones.
TileModule doubleTile(bool viaMaskedOverloads, int64_t n = 256) {
  KernelBuilder k("double_tile", config(n));
  Value x = k.pointerArg("x", DType::F32), y = k.pointerArg("y", DType::F32);
  Value offs = k.arange(n);
  if (viaMaskedOverloads)
    k.store(y, offs, 2.0 * k.load(x, offs, std::nullopt, 0.0), std::nullopt);
  else
    k.store(y, offs, 2.0 * k.load(x, offs));
  return k.finish();
}

TEST(Dsl, NoMaskMasksNothing) {
  TileModule masked = doubleTile(true), plain = doubleTile(false);
  EXPECT_EQ(masked.str(), plain.str());
  std::vector<float> x(256), y(256, -1.f);
  std::iota(x.begin(), x.end(), 1.f);
  interpret(masked.operation(), "double_tile", {1, 1, 1},
            {InterpBuffer{x.data(), DType::F32, 256},
             InterpBuffer{y.data(), DType::F32, 256}});
  for (int i = 0; i < 256; ++i)
    EXPECT_EQ(y[i], 2 * x[i]) << i;
}

/// out[0] = sum of x[lo, hi) walked by forTiles (2 tiles of 128 per step),
/// out[1] = the number of masked (partial) tiles walked, out[2] = the
/// number of calls with one unmasked tile (the whole tile of the tail).
TileModule tileSum() {
  KernelBuilder k("tile_sum", config(128));
  Value x = k.pointerArg("x", DType::F32),
        out = k.pointerArg("out", DType::F32);
  Value lo = k.scalarArg("lo", DType::I32), hi = k.scalarArg("hi", DType::I32);
  Value zero = k.constant(0, DType::F32);
  Var acc = zero, partial = zero, single = zero;
  k.forTiles(
      lo, hi, 128, 2,
      [&](const std::vector<Value> &offs, const std::vector<Mask> &masks) {
        for (size_t u = 0; u < offs.size(); ++u) {
          acc = acc + k.load(x, offs[u], masks[u], 0.0).sum();
          if (masks[u])
            partial = partial + 1.0;
        }
        if (offs.size() == 1 && !masks[0])
          single = single + 1.0;
      });
  k.store(out, k.constant(0, DType::I32), acc);
  k.store(out, k.constant(1, DType::I32), partial);
  k.store(out, k.constant(2, DType::I32), single);
  return k.finish();
}

TEST(Dsl, ForTilesWalksWholeStepsThenWholeTilesUnmaskedThenThePartialOne) {
  std::vector<float> x(1000);
  std::iota(x.begin(), x.end(), 1.f);
  TileModule m = tileSum();
  optimizeTile(m);
  // (lo, hi): a whole tile and a partial one after the steps, a partial
  // tile only after them, whole steps only, a whole tile only, an empty and
  // a reversed range (a cluster's slice past the end of a row).
  const std::vector<std::pair<int32_t, int32_t>> ranges = {
      {0, 1000},  {0, 800},   {100, 612}, {100, 228},
      {300, 300}, {900, 700}, {900, 300}};
  for (auto [lo, hi] : ranges) {
    std::vector<float> out(3, -1.f);
    interpret(m.operation(), "tile_sum", {1, 1, 1},
              {InterpBuffer{x.data(), DType::F32, 1000},
               InterpBuffer{out.data(), DType::F32, 3}, lo, hi});
    double want = 0;
    for (int32_t i = lo; i < hi; ++i)
      want += x[i];
    int32_t span = std::max(hi - lo, 0);
    EXPECT_EQ(out[0], float(want)) << lo << ".." << hi;
    EXPECT_EQ(out[1], span % 128 ? 1.f : 0.f) << lo << ".." << hi;
    EXPECT_EQ(out[2], span % 256 >= 128 ? 1.f : 0.f) << lo << ".." << hi;
  }
}

/// out[v] = the step (0, 1, ...) in which forTiles or forTilesBackward
/// visited element v of [lo, hi), tiles of 128, 2 per step.
TileModule tileOrder(bool backward) {
  KernelBuilder k("tile_order", config(128));
  Value out = k.pointerArg("out", DType::F32);
  Value lo = k.scalarArg("lo", DType::I32), hi = k.scalarArg("hi", DType::I32);
  Var step = k.constant(0, DType::F32);
  auto body = [&](const std::vector<Value> &offs,
                  const std::vector<Mask> &masks) {
    for (size_t u = 0; u < offs.size(); ++u) {
      Value visit = k.full(128, step);
      if (masks[u])
        k.store(out, offs[u], visit, masks[u]);
      else
        k.store(out, offs[u], visit);
    }
    step = step + 1.0;
  };
  if (backward)
    k.forTilesBackward(lo, hi, 128, 2, body);
  else
    k.forTiles(lo, hi, 128, 2, body);
  return k.finish();
}

TEST(Dsl, ForTilesBackwardWalksWholeStepsFromTheEnd) {
  TileModule forward = tileOrder(false), backward = tileOrder(true);
  optimizeTile(forward);
  optimizeTile(backward);
  // (lo, hi): whole steps and a partial tile, whole steps then a whole
  // tile and a partial one, whole steps only, a partial tile only, a whole
  // and a partial tile, an empty and a reversed range.
  const std::vector<std::pair<int32_t, int32_t>> ranges = {
      {100, 900}, {0, 1000},  {100, 612}, {100, 200},
      {100, 350}, {300, 300}, {900, 700}};
  for (auto [lo, hi] : ranges) {
    int32_t wholeSteps = std::max(hi - lo, 0) / 256;
    for (bool back : {false, true}) {
      std::vector<float> out(1000, -1.f);
      interpret((back ? backward : forward).operation(), "tile_order",
                {1, 1, 1},
                {InterpBuffer{out.data(), DType::F32, 1000}, lo, hi});
      for (int32_t v = 0; v < 1000; ++v) {
        int32_t step = (v - lo) / 256;
        // The tail's tiles come last, one per call.
        float want = v < lo || v >= hi ? -1.f
                     : step == wholeSteps
                         ? float(wholeSteps + (v - lo) % 256 / 128)
                     : back ? float(wholeSteps - 1 - step)
                            : float(step);
        ASSERT_EQ(out[v], want)
            << "v " << v << " in " << lo << ".." << hi << " backward " << back;
      }
    }
  }
}

TEST(Dsl, ForTilesNeedsI32Bounds) {
  KernelBuilder k("i64_bounds", config());
  Value hi = k.scalarArg("hi", DType::I64);
  EXPECT_THROW(
      k.forTiles(k.constant(0, DType::I64), hi, 256, 1,
                 [](const std::vector<Value> &, const std::vector<Mask> &) {}),
      Error);
}

TEST(Dsl, AnEmptyValueAsAMaskIsAnError) {
  KernelBuilder k("empty_mask", config());
  Value x = k.pointerArg("x", DType::F32);
  Value forgotten;
  EXPECT_THROW(k.load(x, k.arange(256), forgotten, 0.0), Error);
}

TEST(Dsl, TileSizeMismatchNamesKernelAndLine) {
  KernelBuilder k("bad_shapes", config());
  expectError([&] { k.arange(128) + k.arange(256); },
              {"kernel 'bad_shapes'", "DslTest.cpp", "tile sizes 128 and 256"});
}

TEST(Dsl, MixingIntegersAndFloatsNeedsAConversion) {
  KernelBuilder k("mixed", config());
  Value x = k.scalarArg("x", DType::F32);
  expectError([&] { k.arange(256) + x; },
              {"kernel 'mixed'", "mix i32 and f32"});
}

TEST(Dsl, ValueEscapingItsLoopIsAnError) {
  KernelBuilder k("escape", config());
  Value V = k.scalarArg("V", DType::I32);
  Value inside;
  k.forRange(0, V, 256, [&](Value i) { inside = i + 1.0; });
  expectError([&] { inside + 1.0; }, {"kernel 'escape'", "outside"});
}

TEST(Dsl, VarMustKeepItsType) {
  KernelBuilder k("retype", config());
  Var acc = k.constant(0, DType::F32);
  expectError([&] { acc = k.constant(0, DType::I32); },
              {"kernel 'retype'", "Var of type f32"});
}

TEST(Dsl, LoadChecksItsOperands) {
  KernelBuilder k("bad_load", config());
  Value p = k.pointerArg("p", DType::F32);
  Value f = k.scalarArg("f", DType::F32);
  expectError([&] { k.load(p, f); },
              {"kernel 'bad_load'", "offsets must be i32 or i64"});
  expectError([&] { k.load(f, k.arange(256)); }, {"load() needs a pointer"});
  expectError([&] { k.load(p, k.arange(256), k.arange(256), 0.0); },
              {"mask must be i1"});
}

TEST(Dsl, UnknownParameterIsAnError) {
  KernelBuilder k("params", config());
  expectError([&] { k.param("CHUNK"); }, {"kernel 'params'", "'CHUNK'"});
}

TEST(Dsl, TileTooSmallForTheWarpsFailsVerification) {
  KernelBuilder k("tiny_tile", config(64, 4));
  Value out = k.pointerArg("out", DType::I32);
  Value r = k.arange(64);
  k.store(out, r, r);
  TileModule m = k.finish();
  expectError([&] { optimizeTile(m); }, {"kernel 'tiny_tile'", "tile-verify",
                                         "multiple of 32 * num_warps"});
}

// The per-thread count in the message is computed without overflow, even
// for a size near 2^63.
TEST(Dsl, TileTooLargeForRegistersSaysHowManyPerThread) {
  KernelBuilder k("huge_tile", config(256, 4));
  expectError([&] { k.arange(int64_t(1) << 20); },
              {"kernel 'huge_tile'", "8192 elements per thread over 128",
               "at most 256"});
  int64_t most = std::numeric_limits<int64_t>::max();
  expectError([&] { k.arange(most); },
              {"72057594037927936 elements per thread over 128"});
}

/// y = x reversed within each program's tile of 256, through a shared array:
/// each lane writes its own elements, and after the barrier reads others'.
/// Two programs, so each must have its own array.
TileModule reverseThroughShared() {
  KernelBuilder k("reverse", config());
  Value x = k.pointerArg("x", DType::F32), y = k.pointerArg("y", DType::F32);
  Value buf = k.sharedArray(256, DType::F32);
  Value base = k.programId(0) * 256.0;
  Value r = k.arange(256);
  k.store(buf, r, k.load(x, base + r));
  k.barrier();
  k.store(y, base + r, k.load(buf, 255.0 - r));
  return k.finish();
}

TEST(Dsl, SharedArraysArePerProgramAndSeenAfterABarrier) {
  TileModule m = reverseThroughShared();
  optimizeTile(m);
  std::vector<float> x(512), y(512, -1.f);
  std::iota(x.begin(), x.end(), 0.f);
  interpret(m.operation(), "reverse", {2, 1, 1},
            {InterpBuffer{x.data(), DType::F32, 512},
             InterpBuffer{y.data(), DType::F32, 512}});
  for (int i = 0; i < 512; ++i)
    EXPECT_EQ(y[i], x[i / 256 * 256 + 255 - i % 256]) << i;
  // The CUDA code takes the array from dynamic shared memory, whose size
  // the launch must pass, and the barrier is __syncthreads().
  CompiledKernel c =
      compile(reverseThroughShared(), {"sm_90", Stage::Cubin, {}});
  EXPECT_EQ(c.dynamicSharedBytes, 1024);
  EXPECT_NE(c.cuda.find("extern __shared__ __align__(16) unsigned char "
                        "tj_smem[];"),
            std::string::npos);
  EXPECT_NE(c.cuda.find("__syncthreads();"), std::string::npos);
  EXPECT_FALSE(c.cubin.empty());
}

/// y[0, 256) = the shared array read before the copy's wait, y[256, 512) =
/// read after it; x copied in with copyAsync. Each lane reads back what it
/// copied, so the wait may be waitOwnCopies (`ownWait`).
TileModule copyThenWait(bool ownWait = false) {
  KernelBuilder k("copy_wait", config());
  Value x = k.pointerArg("x", DType::F32), y = k.pointerArg("y", DType::F32);
  Value buf = k.sharedArray(256, DType::F32);
  Value r = k.arange(256);
  k.copyAsync(buf, r, x, r);
  k.commitCopies();
  k.store(y, r, k.load(buf, r)); // too early: a race on the GPU
  if (ownWait)
    k.waitOwnCopies(0);
  else
    k.waitCopies(0);
  k.store(y, 256.0 + r, k.load(buf, r));
  return k.finish();
}

/// copyThenWait(ownWait) in the interpreter: the data is there only after
/// the wait.
void expectCopiesLandAtTheWait(bool ownWait) {
  TileModule m = copyThenWait(ownWait);
  optimizeTile(m);
  std::vector<float> x(256), y(512, -1.f);
  std::iota(x.begin(), x.end(), 1.f);
  interpret(m.operation(), "copy_wait", {1, 1, 1},
            {InterpBuffer{x.data(), DType::F32, 256},
             InterpBuffer{y.data(), DType::F32, 512}});
  for (int i = 0; i < 256; ++i) {
    EXPECT_TRUE(std::isnan(y[i])) << "read before the wait, " << i;
    EXPECT_EQ(y[256 + i], x[i]) << i;
  }
}

TEST(Dsl, AsyncCopiesLandAtTheirWait) {
  expectCopiesLandAtTheWait(/*ownWait=*/false);
  // Each thread's group of 2 adjacent f32 becomes one 8-byte cp.async;
  // commit and wait are the group ops.
  CompiledKernel c = compile(copyThenWait(), {"sm_90", Stage::Ptx, {}});
  for (const char *ptx : {"cp.async.ca.shared.global", "cp.async.commit_group",
                          "cp.async.wait_group 0"})
    EXPECT_NE(c.ptx.find(ptx), std::string::npos) << ptx;
}

// waitCopies(n) retires all but the newest n committed groups.
TEST(Dsl, WaitCopiesLeavesTheNewestGroupsInFlight) {
  KernelBuilder k("two_groups", config());
  Value x = k.pointerArg("x", DType::F32), y = k.pointerArg("y", DType::F32);
  Value a = k.sharedArray(256, DType::F32), b = k.sharedArray(256, DType::F32);
  Value r = k.arange(256);
  k.copyAsync(a, r, x, r);
  k.commitCopies();
  k.copyAsync(b, r, x, r);
  k.commitCopies();
  k.waitCopies(1); // a has landed, b may not have
  k.store(y, r, k.load(a, r));
  k.store(y, 256.0 + r, k.load(b, r));
  k.waitCopies(0);
  TileModule m = k.finish();
  optimizeTile(m);
  std::vector<float> in(256, 3.f), out(512, -1.f);
  interpret(m.operation(), "two_groups", {1, 1, 1},
            {InterpBuffer{in.data(), DType::F32, 256},
             InterpBuffer{out.data(), DType::F32, 512}});
  EXPECT_EQ(out[0], 3.f);
  EXPECT_TRUE(std::isnan(out[256]));
}

// waitOwnCopies retires groups as waitCopies does, without the barrier
// (each lane reads back only what it copied).
TEST(Dsl, WaitOwnCopiesHasNoBarrier) {
  expectCopiesLandAtTheWait(/*ownWait=*/true);
  CompileOptions upToCuda;
  upToCuda.upTo = Stage::Cuda;
  const std::string wait = "tj_copy_wait<0>();";
  for (bool own : {true, false}) {
    std::string cuda = compile(copyThenWait(own), upToCuda).cuda;
    size_t at = cuda.find(wait);
    ASSERT_NE(at, std::string::npos);
    size_t next = cuda.find_first_not_of(" \n", at + wait.size());
    EXPECT_EQ(cuda.compare(next, 16, "__syncthreads();") == 0, !own) << own;
  }
}

TEST(Dsl, AsyncCopyMisuseIsAnError) {
  auto run = [](bool commit, bool wait) {
    KernelBuilder k("copy_misuse", config());
    Value x = k.pointerArg("x", DType::F32);
    Value buf = k.sharedArray(256, DType::F32);
    k.copyAsync(buf, k.arange(256), x, k.arange(256));
    if (commit)
      k.commitCopies();
    if (wait)
      k.waitCopies(0);
    TileModule m = k.finish();
    optimizeTile(m);
    std::vector<float> in(256, 1.f);
    interpret(m.operation(), "copy_misuse", {1, 1, 1},
              {InterpBuffer{in.data(), DType::F32, 256}});
  };
  expectError([&] { run(false, true); }, {"call commitCopies()"});
  expectError([&] { run(true, false); }, {"ends with copies in flight"});
  run(true, true);
  // cp.async writes shared memory only.
  KernelBuilder k("copy_to_global", config());
  Value x = k.pointerArg("x", DType::F32), y = k.pointerArg("y", DType::F32);
  k.copyAsync(y, k.arange(256), x, k.arange(256));
  expectError([&] { k.finish(); }, {"must point into a tile.shared_alloc"});
  KernelBuilder w("wait_range", config());
  expectError([&] { w.waitCopies(8); }, {"pending must be 0 to 7"});
}

/// y = x, with an L2 prefetch of x[offset, offset + count) first.
TileModule prefetchThenCopy(int64_t offset, int64_t count) {
  KernelBuilder k("prefetch_copy", config());
  Value x = k.pointerArg("x", DType::F32), y = k.pointerArg("y", DType::F32);
  k.prefetchL2(x, k.constant(offset, DType::I32),
               k.constant(count, DType::I32));
  Value r = k.arange(256);
  k.store(y, r, k.load(x, r));
  return k.finish();
}

// prefetchL2 is a hint: nothing changes in the interpreter, which checks
// its range like a load's; on sm_90 it is one cp.async.bulk.prefetch from
// one lane.
TEST(Dsl, PrefetchL2IsAHintInsideTheBuffer) {
  auto run = [](int64_t offset, int64_t count) {
    TileModule m = prefetchThenCopy(offset, count);
    optimizeTile(m);
    std::vector<float> x(256), y(256, -1.f);
    std::iota(x.begin(), x.end(), 1.f);
    interpret(m.operation(), "prefetch_copy", {1, 1, 1},
              {InterpBuffer{x.data(), DType::F32, 256},
               InterpBuffer{y.data(), DType::F32, 256}});
    EXPECT_EQ(y, x);
  };
  run(0, 256);
  run(200, 0); // fetches nothing
  run(300, -5);
  expectError([&] { run(200, 57); }, {"out-of-bounds", "prefetchL2"});
  expectError([&] { run(-1, 4); }, {"out-of-bounds", "prefetchL2"});
  CompiledKernel c =
      compile(prefetchThenCopy(0, 256), {"sm_90", Stage::Ptx, {}});
  EXPECT_NE(c.ptx.find("cp.async.bulk.prefetch.L2.global"), std::string::npos);
  KernelBuilder k("prefetch_tile", config());
  Value x = k.pointerArg("x", DType::F32);
  expectError(
      [&] { k.prefetchL2(x, k.arange(256), k.constant(4, DType::I32)); },
      {"scalar offset and count"});
  Value shared = k.sharedArray(256, DType::F32);
  expectError(
      [&] {
        k.prefetchL2(shared + k.constant(4, DType::I32),
                     k.constant(0, DType::I32), k.constant(4, DType::I32));
      },
      {"not a shared array"});
}

// fma rounds once: (1 + 2^-12)^2 - 1 keeps its 2^-24 term, which a multiply
// then an add would round away, in the interpreter and on the GPU alike.
TileModule fmaMinusOne() {
  KernelBuilder k("fma_once", config());
  Value x = k.pointerArg("x", DType::F32), y = k.pointerArg("y", DType::F32);
  Value r = k.arange(256);
  Value a = k.load(x, r);
  k.store(y, r, fma(a, a, k.constant(-1, DType::F32)));
  return k.finish();
}

TEST(Dsl, FmaRoundsOnce) {
  TileModule m = fmaMinusOne();
  optimizeTile(m);
  const float a0 = 1.f + std::ldexp(1.f, -12);
  std::vector<float> in(256, a0), out(256, 0.f);
  interpret(m.operation(), "fma_once", {1, 1, 1},
            {InterpBuffer{in.data(), DType::F32, 256},
             InterpBuffer{out.data(), DType::F32, 256}});
  EXPECT_EQ(out[0], std::ldexp(1.f, -11) + std::ldexp(1.f, -24));
  CompileOptions upToCuda;
  upToCuda.upTo = Stage::Cuda;
  EXPECT_NE(compile(fmaMinusOne(), upToCuda).cuda.find("fmaf("),
            std::string::npos);
}

TEST(Dsl, SharedArrayMisuseIsAnError) {
  KernelBuilder k("bad_shared", config());
  Value n = k.scalarArg("n", DType::I32);
  expectError([&] { k.sharedArray(64, DType::I1); }, {"i1"});
  expectError([&] { k.sharedArray(0, DType::F32); }, {"positive size"});
  expectError([&] { k.sharedArray(60 * 1024, DType::F32); },
              {"more than the 232448"});
  k.forRange(0, n, 1, [&](Value) {
    expectError([&] { k.sharedArray(64, DType::F32); },
                {"outside loops and branches"});
  });
  // Reading past the array's end is caught like any out-of-bounds access.
  Value buf = k.sharedArray(64, DType::F32);
  k.store(buf, k.arange(256), k.constant(0, DType::F32));
  TileModule m = k.finish();
  optimizeTile(m);
  expectError(
      [&] {
        interpret(m.operation(), "bad_shared", {1, 1, 1}, {int32_t(0)});
      },
      {"out-of-bounds unmasked store", "shared array #0", "64 f32"});
}

TEST(Dsl, FinishedBuilderRejectsMoreOps) {
  KernelBuilder k("done", config());
  k.finish();
  expectError([&] { k.arange(256); }, {"already finished"});
}

} // namespace
