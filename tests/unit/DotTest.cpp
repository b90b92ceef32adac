//===- DotTest.cpp - tile.dot: DSL, interpreter, CUDA, GPU ----------------===//
#include "codegen/Nvrtc.h"
#include "runtime/CudaDriver.h"
#include "tilejit/Compiler.h"
#include "tilejit/DSL.h"
#include "tilejit/HostFloat.h"
#include "tilejit/Interpreter.h"

#include "GpuTest.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace tilejit;
using namespace tilejit::dsl;

namespace {

constexpr int64_t M = 32, N = 16, K = 64, BK = 32;

/// C (M x N, f32) = A (M x K) B (K x N), row-major bf16 inputs, one program,
/// the K dimension walked in BK-wide steps with a loop-carried accumulator.
TileModule matmulKernel(DType dtype = DType::BF16, int64_t warps = 4) {
  Config c;
  c.params = {{"num_warps", warps}};
  KernelBuilder k("matmul", c);
  Value a = k.pointerArg("a", dtype), b = k.pointerArg("b", dtype);
  Value out = k.pointerArg("c", DType::F32);
  Var acc = k.full(M * N, k.constant(0, DType::F32));
  Value ia = k.arange(M * BK), ib = k.arange(BK * N);
  k.forRange(0, k.constant(K, DType::I32), BK, [&](Value k0) {
    // Element (i, j) of the M x BK block of A is A[i, k0 + j].
    Value aOffs =
        (ia / double(BK)) * double(K) + (ia % k.constant(BK, DType::I32)) + k0;
    Value bOffs =
        (ib / double(N) + k0) * double(N) + (ib % k.constant(N, DType::I32));
    acc = k.dot(k.load(a, aOffs), k.load(b, bOffs), acc, M, N, BK);
  });
  k.store(out, k.arange(M * N), acc);
  return k.finish();
}

struct Matrices {
  std::vector<uint8_t> a, b;
  std::vector<double> want; // fp64 product of the rounded inputs
};

Matrices makeMatrices(DType dtype) {
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.f, 1.f);
  Matrices m;
  m.a.resize(M * K * 2);
  m.b.resize(K * N * 2);
  for (int64_t i = 0; i < M * K; ++i)
    storeFromDouble(m.a.data(), dtype, i, dist(rng));
  for (int64_t i = 0; i < K * N; ++i)
    storeFromDouble(m.b.data(), dtype, i, dist(rng));
  m.want.assign(M * N, 0.0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j)
      for (int64_t kk = 0; kk < K; ++kk)
        m.want[i * N + j] += loadAsDouble(m.a.data(), dtype, i * K + kk) *
                             loadAsDouble(m.b.data(), dtype, kk * N + j);
  return m;
}

void expectClose(const std::vector<float> &got,
                 const std::vector<double> &want) {
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-5 * (1 + std::fabs(want[i]))) << "at " << i;
}

TEST(Dot, InterpreterMatchesFp64) {
  for (DType dt : {DType::BF16, DType::F16}) {
    Matrices m = makeMatrices(dt);
    TileModule mod = matmulKernel(dt);
    optimizeTile(mod);
    std::vector<float> c(M * N, -1.f);
    interpret(mod.operation(), "matmul", {1, 1, 1},
              {InterpBuffer{m.a.data(), dt, M * K},
               InterpBuffer{m.b.data(), dt, K * N},
               InterpBuffer{c.data(), DType::F32, M * N}});
    expectClose(c, m.want);
  }
}

TEST(Dot, LowersToMmaSyncThatPtxasAccepts) {
  for (DType dt : {DType::BF16, DType::F16}) {
    CompiledKernel k = compile(matmulKernel(dt), {"sm_90", Stage::Ptx, {}});
    EXPECT_NE(k.cuda.find("tj_dot<32, 16, 32, 128"), std::string::npos);
    std::string mma = std::string("mma.sync.aligned.m16n8k16.row.col.f32.") +
                      (dt == DType::BF16 ? "bf16.bf16" : "f16.f16");
    EXPECT_NE(k.ptx.find(mma), std::string::npos) << mma;
    std::string log;
    EXPECT_TRUE(nvrtc::ptxasAccepts(k.ptx, "sm_90", &log)) << log;
    EXPECT_TRUE(nvrtc::ptxasAccepts(
        compile(matmulKernel(dt), {"sm_80", Stage::Ptx, {}}).ptx, "sm_80",
        &log))
        << log;
  }
}

TEST(Dot, BadShapesAndTypesAreErrors) {
  Config c;
  c.params = {{"num_warps", 1}};
  KernelBuilder k("bad", c);
  Value a16 = k.full(256, k.constant(1, DType::BF16));
  Value acc = k.full(128, k.constant(0, DType::F32));
  // K = 16, M = 16, N = 8: a 256, b 128, acc 128 elements.
  Value b16 = k.full(128, k.constant(1, DType::BF16));
  EXPECT_NO_THROW(k.dot(a16, b16, acc, 16, 8, 16));
  EXPECT_THROW(k.dot(a16, b16, acc, 16, 8, 32), Error); // sizes
  Value a32 = k.full(256, k.constant(1, DType::F32));
  EXPECT_THROW(k.dot(a32, b16, acc, 16, 8, 16), Error); // f32 operand
  Value a12 = k.full(12 * 16, k.constant(1, DType::BF16));
  Value acc12 = k.full(12 * 8, k.constant(0, DType::F32));
  EXPECT_THROW(k.dot(a12, b16, acc12, 12, 8, 16), Error); // M % 16
}

TEST(DotGpu, MatchesFp64) {
  TILEJIT_SKIP_WITHOUT_GPU();
  cuda::Device device = cuda::Device::open();
  for (DType dt : {DType::BF16, DType::F16}) {
    Matrices m = makeMatrices(dt);
    cuda::DeviceBuffer da(m.a.size()), db(m.b.size()), dc(M * N * 4);
    da.copyFromHost(m.a.data(), m.a.size());
    db.copyFromHost(m.b.data(), m.b.size());
    runOnGpu(device, matmulKernel(dt), 1, {&da, &db, &dc});
    std::vector<float> c(M * N);
    dc.copyToHost(c.data(), c.size() * 4);
    expectClose(c, m.want);
  }
}

} // namespace
