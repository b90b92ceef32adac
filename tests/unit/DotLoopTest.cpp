//===- DotLoopTest.cpp - K loops of dots over block loads (lce_gemm) ------===//
//
// lce_gemm is the DSL GEMM a user writes: a K loop of dot over loadBlock.
// tile-pipeline-dot turns it into one tile.dot_loop; these tests run it in
// the interpreter and (where there is one) on the GPU against an fp64
// product, in every transpose, with M, N and K that no block divides, with
// leading dimensions that rule out 16-byte copies, and with beta != 0.
//
//===----------------------------------------------------------------------===//
#include "codegen/Nvrtc.h"
#include "runtime/CudaDriver.h"
#include "tilejit/Compiler.h"
#include "tilejit/DSL.h"
#include "tilejit/HostFloat.h"
#include "tilejit/Kernel.h"
#include "tilejit/KernelSpec.h"

#include "GpuTest.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace tilejit;

namespace {

struct Problem {
  int64_t m, n, k;
  bool transA, transB;
  int64_t pad = 0; // extra elements per row of A, B and C (leading dimensions)
};

/// Inputs and the fp64 result of C = alpha op(A) op(B) + beta C.
struct Gemm {
  Problem p;
  DType dtype;
  int64_t lda, ldb, ldc;
  std::vector<uint8_t> a, b;
  std::vector<float> c; // f32 C before the product
  std::vector<double> want;
  float alpha, beta;

  Gemm(const Problem &p, DType dtype, float alpha = 1.5f, float beta = 0.5f)
      : p(p), dtype(dtype), alpha(alpha), beta(beta) {
    // A is m x k (k x m when transposed), B is k x n (n x k), row-major.
    int64_t aRows = p.transA ? p.k : p.m, aCols = p.transA ? p.m : p.k;
    int64_t bRows = p.transB ? p.n : p.k, bCols = p.transB ? p.k : p.n;
    lda = aCols + p.pad;
    ldb = bCols + p.pad;
    ldc = p.n + p.pad;
    std::mt19937 rng(11);
    std::normal_distribution<float> dist(0.f, 1.f);
    // At least one element each, so that K = 0 still has host buffers.
    a.resize(std::max<int64_t>(1, aRows * lda) * 2);
    b.resize(std::max<int64_t>(1, bRows * ldb) * 2);
    for (int64_t i = 0; i < int64_t(a.size() / 2); ++i)
      storeFromDouble(a.data(), dtype, i, dist(rng));
    for (int64_t i = 0; i < int64_t(b.size() / 2); ++i)
      storeFromDouble(b.data(), dtype, i, dist(rng));
    c.resize(p.m * ldc);
    for (float &x : c)
      x = dist(rng);
    want.assign(p.m * p.n, 0.0);
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t j = 0; j < p.n; ++j) {
        double s = 0;
        for (int64_t x = 0; x < p.k; ++x)
          s += loadAsDouble(a.data(), dtype,
                            p.transA ? x * lda + i : i * lda + x) *
               loadAsDouble(b.data(), dtype,
                            p.transB ? j * ldb + x : x * ldb + j);
        want[i * p.n + j] = alpha * s + beta * c[i * ldc + j];
      }
  }

  std::vector<std::string> params(std::vector<std::string> set) const {
    set.insert(set.end(), {"TRANS_A=" + std::to_string(p.transA),
                           "TRANS_B=" + std::to_string(p.transB), "C_F32=1"});
    return set;
  }

  std::vector<KernelArg> args(void *da, void *db, void *dc, bool cpu) const {
    auto n = [&](int64_t v) { return cpu ? v : int64_t(-1); };
    return {KernelArg::pointer(da, dtype, n(int64_t(a.size() / 2))),
            KernelArg::pointer(db, dtype, n(int64_t(b.size() / 2))),
            KernelArg::pointer(dc, DType::F32, n(p.m * ldc)),
            KernelArg::i32(int32_t(p.m)),
            KernelArg::i32(int32_t(p.n)),
            KernelArg::i32(int32_t(p.k)),
            KernelArg::i64(lda),
            KernelArg::i64(ldb),
            KernelArg::i64(ldc),
            KernelArg::f32(alpha),
            KernelArg::f32(beta)};
  }

  /// Products of k terms of size ~1 in f32: within 1e-5 of sqrt(k) scale.
  void expectMatches(const std::vector<float> &got) const {
    double tol = 1e-5 * std::sqrt(double(p.k)) * 4;
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t j = 0; j < p.n; ++j)
        ASSERT_NEAR(got[i * ldc + j], want[i * p.n + j],
                    tol * (1 + std::fabs(want[i * p.n + j])))
            << "C[" << i << ", " << j << "]";
  }
};

/// lce_gemm for `g` with the overrides `set`, and its grid.
std::pair<Kernel, Grid> gemmKernel(const Gemm &g,
                                   const std::vector<std::string> &set) {
  dsl::Config cfg = findKernel("lce_gemm").config(g.dtype, g.params(set));
  int64_t bm = cfg.get("BLOCK_M"), bn = cfg.get("BLOCK_N");
  return {Kernel(findKernel("lce_gemm").build(cfg)),
          Grid{(g.p.m + bm - 1) / bm, (g.p.n + bn - 1) / bn}};
}

std::vector<Problem> problems() {
  std::vector<Problem> out;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      out.push_back({100, 72, 88, ta, tb});    // no block divides M, N, K
      out.push_back({64, 128, 64, ta, tb, 3}); // rows not 16-byte aligned
    }
  return out;
}

/// Runs lce_gemm with `set` on the GPU and compares with g's fp64 result.
void runOnGpuAndCheck(const Gemm &g, const std::vector<std::string> &set) {
  auto [k, grid] = gemmKernel(g, set);
  cuda::DeviceBuffer da(g.a.size()), db(g.b.size()), dc(g.c.size() * 4);
  da.copyFromHost(g.a.data(), g.a.size());
  db.copyFromHost(g.b.data(), g.b.size());
  dc.copyFromHost(g.c.data(), g.c.size() * 4);
  k.launch(grid,
           g.args(reinterpret_cast<void *>(da.ptr()),
                  reinterpret_cast<void *>(db.ptr()),
                  reinterpret_cast<void *>(dc.ptr()), false),
           nullptr);
  cuda::synchronize();
  std::vector<float> c(g.c.size());
  dc.copyToHost(c.data(), c.size() * 4);
  g.expectMatches(c);
}

TEST(DotLoop, LceGemmIsOneDotLoop) {
  dsl::Config cfg = findKernel("lce_gemm").config(DType::BF16, {"TRANS_B=1"});
  CompiledKernel k =
      compile(findKernel("lce_gemm").build(cfg), {"sm_90", Stage::Tile, {}});
  EXPECT_NE(k.tileIR.find("tile.dot_loop"), std::string::npos) << k.tileIR;
  EXPECT_EQ(k.tileIR.find("scf.for"), std::string::npos) << k.tileIR;
  EXPECT_EQ(k.tileIR.find("tile.load_block"), std::string::npos) << k.tileIR;
}

TEST(DotLoop, InterpreterMatchesFp64) {
  for (DType dt : {DType::BF16, DType::F16})
    for (const Problem &p : problems()) {
      SCOPED_TRACE(::testing::Message()
                   << "M " << p.m << " N " << p.n << " K " << p.k << " transA "
                   << p.transA << " transB " << p.transB << " pad " << p.pad);
      Gemm g(p, dt);
      auto [k, grid] = gemmKernel(g, {"BLOCK_M=64", "num_warps=4"});
      std::vector<float> c = g.c;
      k.runOnCpu(grid, g.args(g.a.data(), g.b.data(), c.data(), true));
      g.expectMatches(c);
    }
}

// sm_80 runs mma.sync over ldmatrix fragments; sm_90 (through sm_90a)
// runs wgmma, transposing MN-major operands in the instruction (A^T's
// rows, B's rows contiguous).
TEST(DotLoop, PtxHasPipelinedTensorCoreLoop) {
  const KernelSpec &spec = findKernel("lce_gemm");
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (std::string arch : {"sm_80", "sm_90"}) {
        SCOPED_TRACE(arch + " transA " + std::to_string(ta) + " transB " +
                     std::to_string(tb));
        dsl::Config cfg =
            spec.config(DType::BF16, {"TRANS_A=" + std::to_string(ta),
                                      "TRANS_B=" + std::to_string(tb)});
        CompiledKernel k = compile(spec.build(cfg), {arch, Stage::Ptx, {}});
        EXPECT_NE(k.cuda.find("tj_dot_loop<"), std::string::npos);
        EXPECT_NE(k.ptx.find("cp.async.cg.shared.global"), std::string::npos);
        std::vector<std::string> instrs;
        if (arch == "sm_90")
          instrs = {"wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16",
                    "p, 1, 1, " + std::to_string(ta) + ", " +
                        std::to_string(!tb) + ";"};
        else
          instrs = {"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32",
                    "ldmatrix.sync.aligned.m8n8.x4"};
        for (const std::string &instr : instrs)
          EXPECT_NE(k.ptx.find(instr), std::string::npos) << instr;
        // Both views are kernel parameters with a stride of 1: the launch
        // passes their tensor maps, and sm_90a copies through them.
        ASSERT_EQ(k.tensorMaps.size(), 2u);
        EXPECT_EQ(k.tensorMaps[0].pointer, 0);
        EXPECT_EQ(k.tensorMaps[1].pointer, 1);
        EXPECT_EQ(k.ptx.find("cp.async.bulk.tensor.2d") != std::string::npos,
                  arch == "sm_90");
        // The producer and consumer warpgroups meet on mbarriers.
        cfg.params["DOT_SPECIALIZE"] = 1;
        CompiledKernel ws = compile(spec.build(cfg), {arch, Stage::Ptx, {}});
        EXPECT_EQ(ws.ptx.find("mbarrier.try_wait") != std::string::npos,
                  arch == "sm_90");
        std::string log;
        EXPECT_TRUE(
            nvrtc::ptxasAccepts(k.ptx, arch == "sm_90" ? "sm_90a" : arch, &log))
            << log;
      }
}

// Every config kind: wgmma with 32-, 64- and 128-byte swizzles (BLOCK_K 16,
// 32, 64), N = 64, 128 and 256, M up to 256, 4 and 8 warps; blocks copied by
// the tensor memory accelerator (views with 16-byte strides), else with and
// without a producer warpgroup; mma.sync (BLOCK_M = 64 over 8 warps); 2 to
// 4 stages.
TEST(DotLoopGpu, MatchesFp64) {
  TILEJIT_SKIP_WITHOUT_GPU();
  cuda::Device device = cuda::Device::open();
  std::vector<Problem> all = problems();
  all.push_back({300, 200, 264, false, true});
  all.push_back({257, 130, 1000, true, false, 5});
  all.push_back({512, 384, 2048, false, true});
  // Transposed views whose strides the copy engine can read (A^T's rows of
  // 256 and 136 elements).
  all.push_back({256, 136, 200, true, true});
  all.push_back({136, 264, 72, true, false});
  const std::vector<std::vector<std::string>> configs = {
      {},
      {"BLOCK_N=256"},
      {"BLOCK_M=256", "BLOCK_N=128", "DOT_STAGES=3"},
      {"BLOCK_N=64", "BLOCK_K=16"},
      {"BLOCK_K=64", "DOT_STAGES=3"},
      {"BLOCK_N=64", "BLOCK_K=64", "num_warps=4", "DOT_STAGES=2"},
      {"BLOCK_M=64"},
      {"BLOCK_M=64", "num_warps=4", "BLOCK_K=64"},
      {"DOT_SPECIALIZE=1"},
      {"DOT_SPECIALIZE=1", "BLOCK_K=32", "DOT_STAGES=2"},
      {"DOT_SPECIALIZE=1", "BLOCK_M=64", "BLOCK_N=256", "DOT_STAGES=3"}};
  for (DType dt : {DType::BF16, DType::F16})
    for (const Problem &p : all)
      for (const std::vector<std::string> &set : configs) {
        std::string named;
        for (const std::string &s : set)
          named += s + " ";
        SCOPED_TRACE(::testing::Message()
                     << named << "M " << p.m << " N " << p.n << " K " << p.k
                     << " transA " << p.transA << " transB " << p.transB
                     << " pad " << p.pad);
        runOnGpuAndCheck(Gemm(p, dt), set);
      }
}

// Resident programs (RESIDENT=1: each block runs programs blockIdx.x,
// blockIdx.x + gridDim.x, ... and fills the next one's first blocks during
// the epilogue): grids of more programs than an H100 or H200 has SMs, so
// that blocks run two or three programs each, in every transpose, with
// ragged M, N and K, and views the copy engine cannot read (the per-program
// fallback).
TEST(DotLoopGpu, ResidentProgramsMatchFp64) {
  TILEJIT_SKIP_WITHOUT_GPU();
  cuda::Device device = cuda::Device::open();
  const std::vector<std::string> small = {"RESIDENT=1", "BLOCK_M=64",
                                          "BLOCK_N=64", "num_warps=4"};
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "transA " << ta << " transB " << tb);
      runOnGpuAndCheck(Gemm({1000, 1100, 200, ta, tb}, DType::BF16), small);
    }
  runOnGpuAndCheck(Gemm({2048, 2600, 72, false, true}, DType::BF16),
                   {"RESIDENT=1"});
  runOnGpuAndCheck(Gemm({1000, 1100, 72, false, false, 3}, DType::F16), small);
}

/// C += op(A) op(B) with the accumulator loaded from C (a block of an f32
/// view, written out as a masked load): the dot loop starts from a tile
/// that is not zero. Blocks BM x BN x BK, `params` as for lce_gemm.
TileModule accumulateKernel(DType dt, bool ta, bool tb,
                            std::map<std::string, int64_t> params) {
  dsl::Config c;
  c.dtype = dt;
  c.params = std::move(params);
  const int64_t BM = c.get("BM"), BN = c.get("BN"), BK = c.get("BK");
  dsl::KernelBuilder k("dot_accumulate", c);
  using dsl::Value;
  Value A = k.pointerArg("A", dt), B = k.pointerArg("B", dt);
  Value C = k.pointerArg("C", DType::F32);
  Value M = k.scalarArg("M", DType::I32), N = k.scalarArg("N", DType::I32);
  Value K = k.scalarArg("K", DType::I32);
  Value lda = k.scalarArg("lda", DType::I64);
  Value ldb = k.scalarArg("ldb", DType::I64);
  Value ldc = k.scalarArg("ldc", DType::I64);
  Value one = k.constant(1, DType::I64);
  dsl::TensorDescriptor opA = ta ? dsl::TensorDescriptor{A, M, K, one, lda}
                                 : dsl::TensorDescriptor{A, M, K, lda, one};
  dsl::TensorDescriptor opB = tb ? dsl::TensorDescriptor{B, K, N, one, ldb}
                                 : dsl::TensorDescriptor{B, K, N, ldb, one};
  Value m0 = k.programId(0) * double(BM), n0 = k.programId(1) * double(BN);
  dsl::Var acc = k.loadBlock({C, M, N, ldc, one}, m0, n0, BM, BN);
  k.forRange(0, K, BK, [&](Value k0) {
    acc = k.dot(k.loadBlock(opA, m0, k0, BM, BK),
                k.loadBlock(opB, k0, n0, BK, BN), acc, BM, BN, BK);
  });
  Value e = k.arange(BM * BN);
  Value row = m0 + e / double(BN), col = n0 + e % k.constant(BN, DType::I32);
  k.store(C, row.to(DType::I64) * ldc + col.to(DType::I64), acc,
          row < M && col < N);
  return k.finish();
}

std::vector<Problem> accumulateProblems() {
  std::vector<Problem> out = {{70, 50, 0, false, true}}; // K = 0: C stays
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      out.push_back({100, 72, 88, ta, tb});
  return out;
}

void runAccumulate(const Problem &p, DType dt,
                   const std::map<std::string, int64_t> &params, bool gpu) {
  Gemm g(p, dt, 1.0f, 1.0f);
  TileModule m = accumulateKernel(dt, p.transA, p.transB, params);
  Grid grid{(p.m + params.at("BM") - 1) / params.at("BM"),
            (p.n + params.at("BN") - 1) / params.at("BN")};
  std::vector<float> c = g.c;
  if (!gpu) {
    std::vector<KernelArg> args =
        g.args(g.a.data(), g.b.data(), c.data(), true);
    args.resize(9); // no alpha, beta
    Kernel(std::move(m)).runOnCpu(grid, args);
  } else {
    cuda::DeviceBuffer da(g.a.size()), db(g.b.size()), dc(c.size() * 4);
    da.copyFromHost(g.a.data(), g.a.size());
    db.copyFromHost(g.b.data(), g.b.size());
    dc.copyFromHost(c.data(), c.size() * 4);
    std::vector<KernelArg> args = g.args(
        reinterpret_cast<void *>(da.ptr()), reinterpret_cast<void *>(db.ptr()),
        reinterpret_cast<void *>(dc.ptr()), false);
    args.resize(9);
    Kernel(std::move(m)).launch(grid, args, nullptr);
    cuda::synchronize();
    dc.copyToHost(c.data(), c.size() * 4);
  }
  g.expectMatches(c);
}

TEST(DotLoop, AccumulatorFromMemoryInterpreter) {
  for (const Problem &p : accumulateProblems()) {
    SCOPED_TRACE(::testing::Message() << "K " << p.k << " transA " << p.transA
                                      << " transB " << p.transB);
    runAccumulate(p, DType::BF16,
                  {{"BM", 64}, {"BN", 64}, {"BK", 32}, {"num_warps", 4}},
                  false);
  }
}

// A dot loop that starts from a loaded tile, and one of no iterations, on
// every GPU path: wgmma (BK 16, 32, 64; with and without a producer
// warpgroup) and mma.sync (64 rows over 8 warps).
TEST(DotLoopGpu, AccumulatorFromMemory) {
  TILEJIT_SKIP_WITHOUT_GPU();
  cuda::Device device = cuda::Device::open();
  const std::vector<std::map<std::string, int64_t>> configs = {
      {{"BM", 128}, {"BN", 128}, {"BK", 64}, {"num_warps", 8}},
      {{"BM", 128},
       {"BN", 128},
       {"BK", 64},
       {"num_warps", 8},
       {"DOT_SPECIALIZE", 1}},
      {{"BM", 128},
       {"BN", 64},
       {"BK", 16},
       {"num_warps", 8},
       {"DOT_SPECIALIZE", 1},
       {"DOT_STAGES", 3}},
      {{"BM", 64}, {"BN", 64}, {"BK", 32}, {"num_warps", 4}},
      {{"BM", 64}, {"BN", 128}, {"BK", 32}, {"num_warps", 8}}};
  for (const auto &params : configs)
    for (const Problem &p : accumulateProblems()) {
      SCOPED_TRACE(::testing::Message()
                   << "BM " << params.at("BM") << " BN " << params.at("BN")
                   << " BK " << params.at("BK") << " warps "
                   << params.at("num_warps") << " K " << p.k << " transA "
                   << p.transA << " transB " << p.transB);
      runAccumulate(p, DType::BF16, params, true);
    }
}

TEST(DotLoop, OnlyLoopsOverGlobalMemoryAreFused) {
  dsl::Config c;
  c.dtype = DType::BF16;
  c.params = {{"num_warps", 4}};
  dsl::KernelBuilder k("shared_views", c);
  using dsl::Value;
  Value A = k.sharedArray(64 * 64, DType::BF16);
  Value out = k.pointerArg("out", DType::F32);
  Value K = k.scalarArg("K", DType::I32);
  Value n64 = k.constant(64, DType::I64), one = k.constant(1, DType::I64);
  dsl::TensorDescriptor view{A, n64, n64, n64, one};
  Value zero = k.constant(0, DType::I32);
  dsl::Var acc = k.full(32 * 32, k.constant(0, DType::F32));
  k.forRange(0, K, 16, [&](Value k0) {
    acc = k.dot(k.loadBlock(view, zero, k0, 32, 16),
                k.loadBlock(view, k0, zero, 16, 32), acc, 32, 32, 16);
  });
  k.store(out, k.arange(32 * 32), acc);
  CompiledKernel ck = compile(k.finish(), {"sm_90", Stage::Tile, {}});
  EXPECT_EQ(ck.tileIR.find("tile.dot_loop"), std::string::npos) << ck.tileIR;
  EXPECT_NE(ck.tileIR.find("tile.dot "), std::string::npos) << ck.tileIR;
}

TEST(DotLoop, LoadBlockErrors) {
  dsl::Config c;
  c.params = {{"num_warps", 1}};
  dsl::KernelBuilder k("bad_blocks", c);
  using dsl::Value;
  Value p = k.pointerArg("p", DType::F32);
  Value n = k.scalarArg("n", DType::I32);
  Value f = k.constant(1.0, DType::F32);
  dsl::TensorDescriptor view{p, n, n, n, k.constant(1, DType::I32)};
  EXPECT_NO_THROW(k.loadBlock(view, n, n, 4, 8));
  EXPECT_THROW(k.loadBlock(view, n, n, 0, 8), Error);            // empty block
  EXPECT_THROW(k.loadBlock(view, f, n, 4, 8), Error);            // float origin
  EXPECT_THROW(k.loadBlock({n, n, n, n, n}, n, n, 4, 8), Error); // no pointer
  EXPECT_THROW(k.loadBlock(view, k.arange(32), n, 4, 8), Error); // tile origin
}

} // namespace
