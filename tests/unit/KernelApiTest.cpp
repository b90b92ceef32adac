//===- KernelApiTest.cpp - tilejit/Kernel.h -------------------------------===//
//
// Any kernel, registered or built by the caller, compiled for a config and
// run with arguments checked against its declared parameters: on the CPU in
// CI, on the GPU (with a caller's stream) where there is one. The C ABI over
// it is tested through libtilejit.so (tests/capi/).
//
//===----------------------------------------------------------------------===//
#include "tilejit/Kernel.h"

#include "runtime/CudaDriver.h"
#include "tilejit/Error.h"
#include "tilejit/KernelSpec.h"

#include "ExpectError.h"
#include "GpuTest.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <numeric>

using namespace tilejit;
using namespace tilejit::dsl;

namespace {

/// The registered ce_tvd_row_weights: (target i64*, weights f32*, BT i32,
/// ignore_index i64, alpha f32, beta f32, mean i32); one program writes
/// alpha / n_valid and beta / n_valid (or alpha, beta for a sum), then
/// n_valid.
Kernel rowWeights() {
  return Kernel::compile("ce_tvd_row_weights", {DType::F32, {}, {}});
}

/// A kernel a user writes: y[i] = a * x[i] + b[i % 4] over n elements.
TileModule axpb(int64_t block) {
  Config c;
  c.params = {{"BLOCK_SIZE", block}, {"num_warps", 4}};
  KernelBuilder k("axpb", c);
  Value x = k.pointerArg("x", DType::F32);
  Value b = k.pointerArg("b", DType::F32);
  Value y = k.pointerArg("y", DType::F32);
  Value n = k.scalarArg("n", DType::I32);
  Value a = k.scalarArg("a", DType::F32);
  Value offs = k.programId(0) * double(block) + k.arange(block);
  Value in = offs < n;
  k.store(y, offs, a * k.load(x, offs, in, 0) + k.load(b, offs % k.constant(4, DType::I32), in, 0),
          in);
  return k.finish();
}

TEST(KernelApi, ParametersAreTheDeclaredOnes) {
  Kernel k = rowWeights();
  EXPECT_EQ(k.name(), "ce_tvd_row_weights");
  EXPECT_NE(k.config().find("BLOCK_SIZE="), std::string::npos) << k.config();
  const std::vector<KernelParam> &p = k.params();
  ASSERT_EQ(p.size(), 7u);
  EXPECT_EQ(p[0].name, "target");
  EXPECT_TRUE(p[0].pointer);
  EXPECT_EQ(p[0].dtype, DType::I64);
  EXPECT_EQ(p[2].name, "BT");
  EXPECT_FALSE(p[2].pointer);
  EXPECT_EQ(p[2].dtype, DType::I32);
  EXPECT_EQ(p[4].name, "alpha");
  EXPECT_EQ(p[4].dtype, DType::F32);
}

TEST(KernelApi, RegisteredKernelRunsOnTheCpu) {
  Kernel k = rowWeights();
  std::vector<int64_t> target = {3, -100, 7, 1, -100};
  std::vector<float> weights(3, -1.f);
  auto run = [&](int32_t mean) {
    k.runOnCpu({1},
               {KernelArg::pointer(target.data(), DType::I64, 5),
                KernelArg::pointer(weights.data(), DType::F32, 3),
                KernelArg::i32(5), KernelArg::i64(-100), KernelArg::f32(0.5f),
                KernelArg::f32(2.f), KernelArg::i32(mean)});
  };
  run(1);
  EXPECT_FLOAT_EQ(weights[0], 0.5f / 3);
  EXPECT_FLOAT_EQ(weights[1], 2.f / 3);
  EXPECT_EQ(weights[2], 3.f);
  run(0);
  EXPECT_EQ(weights[0], 0.5f);
  EXPECT_EQ(weights[1], 2.f);
}

TEST(KernelApi, ArgumentsAreCheckedByName) {
  Kernel k = rowWeights();
  std::vector<int64_t> target(4);
  std::vector<float> weights(3);
  auto good = [&] {
    return std::vector<KernelArg>{
        KernelArg::pointer(target.data(), DType::I64, 4),
        KernelArg::pointer(weights.data(), DType::F32, 3),
        KernelArg::i32(4),
        KernelArg::i64(-100),
        KernelArg::f32(1),
        KernelArg::f32(1),
        KernelArg::i32(1)};
  };
  std::vector<KernelArg> args = good();
  args.pop_back();
  expectError([&] { k.runOnCpu({1}, args); },
              {"kernel 'ce_tvd_row_weights'", "7 arguments expected",
               "target, weights, BT, ignore_index, alpha, beta, mean", "got 6"});
  args = good();
  args[1] = KernelArg::pointer(weights.data(), DType::BF16, 3);
  expectError([&] { k.runOnCpu({1}, args); },
              {"argument 1 'weights' is a pointer to f32",
               "got a pointer to bf16"});
  args = good();
  args[2] = KernelArg::i64(4);
  expectError([&] { k.runOnCpu({1}, args); },
              {"argument 2 'BT' is an i32 scalar", "got an i64"});
  args = good();
  args[4] = KernelArg::pointer(weights.data(), DType::F32, 3);
  expectError([&] { k.runOnCpu({1}, args); },
              {"argument 4 'alpha' is an f32 scalar", "got a pointer"});
  args = good();
  args[0] = KernelArg::pointer(target.data(), DType::I64);
  expectError([&] { k.runOnCpu({1}, args); },
              {"argument 0 'target'", "number of elements"});
  args = good();
  args[6].i = int64_t(1) << 40;
  expectError([&] { k.checkArgs(args, false); },
              {"argument 6 'mean'", "does not fit in i32"});
  // An access beyond a buffer's declared size is caught by the interpreter.
  args = good();
  args[1] = KernelArg::pointer(weights.data(), DType::F32, 2);
  expectError([&] { k.runOnCpu({1}, args); }, {"out-of-bounds"});
  // A good call after all these runs.
  k.runOnCpu({1}, good());
}

TEST(KernelApi, UnknownKernelsParametersAndDtypesAreErrors) {
  expectError([] { Kernel::compile("no_such_kernel", {}); },
              {"unknown kernel 'no_such_kernel'", "ce_tvd_row_weights"});
  expectError([] {
    Kernel::compile("ce_tvd_row_weights", {DType::F32, {"NO_SUCH=1"}, {}});
  },
              {"NO_SUCH"});
  EXPECT_THROW(Kernel::compile("ce_tvd_row_weights", {DType::I1, {}, {}}),
               Error);
}

TEST(KernelApi, UserKernelRunsOnTheCpu) {
  Kernel k(axpb(256));
  ASSERT_EQ(k.params().size(), 5u);
  EXPECT_EQ(k.params()[3].name, "n");
  const int n = 1000;
  std::vector<float> x(n), b = {1, 2, 3, 4}, y(n, -7.f);
  std::iota(x.begin(), x.end(), 0.f);
  k.runOnCpu({(n + 255) / 256},
             {KernelArg::pointer(x.data(), DType::F32, n),
              KernelArg::pointer(b.data(), DType::F32, 4),
              KernelArg::pointer(y.data(), DType::F32, n), KernelArg::i32(n),
              KernelArg::f32(0.5f)});
  for (int i = 0; i < n; ++i)
    ASSERT_EQ(y[i], 0.5f * x[i] + b[i % 4]) << i;
}

TEST(KernelApi, RegisteredUserKernelIsFoundByName) {
  KernelSpec spec{"user_axpb",
                  "y = a x + b[i % 4]",
                  {{"BLOCK_SIZE", {256, 512}, 256, "elements per program"},
                   {"num_warps", {4}, 4, "warps per program"}},
                  {DType::F32},
                  [](const Config &c) { return axpb(c.get("BLOCK_SIZE")); },
                  {}};
  registerKernel(spec);
  expectError([&] { registerKernel(spec); }, {"'user_axpb' is already"});
  Kernel k = Kernel::compile("user_axpb", {DType::F32, {"BLOCK_SIZE=512"}, {}});
  EXPECT_NE(k.config().find("BLOCK_SIZE=512"), std::string::npos);
  std::vector<float> x(600, 1.f), b = {0, 1, 2, 3}, y(600);
  k.runOnCpu({2}, {KernelArg::pointer(x.data(), DType::F32, 600),
                   KernelArg::pointer(b.data(), DType::F32, 4),
                   KernelArg::pointer(y.data(), DType::F32, 600),
                   KernelArg::i32(600), KernelArg::f32(2.f)});
  EXPECT_EQ(y[599], 2.f + 3.f);
}

TEST(KernelApiGpu, LaunchOnACallersStreamMatchesTheCpu) {
  TILEJIT_SKIP_WITHOUT_GPU();
  cuda::Device device = cuda::Device::open();
  Kernel k(axpb(512));
  const int n = 5000;
  std::vector<float> x(n), b = {1, -2, 3, -4}, y(n), want(n, 0.f);
  for (int i = 0; i < n; ++i)
    x[i] = std::sin(0.01f * i);
  cuda::DeviceBuffer dx(n * 4), db(16), dy(n * 4);
  dx.copyFromHost(x.data(), n * 4);
  db.copyFromHost(b.data(), 16);
  auto args = [&](void *px, void *pb, void *py) {
    return std::vector<KernelArg>{KernelArg::pointer(px, DType::F32, n),
                                  KernelArg::pointer(pb, DType::F32, 4),
                                  KernelArg::pointer(py, DType::F32, n),
                                  KernelArg::i32(n), KernelArg::f32(3.f)};
  };
  cuda::Stream stream;
  k.launch({(n + 511) / 512},
           args(reinterpret_cast<void *>(dx.ptr()),
                reinterpret_cast<void *>(db.ptr()),
                reinterpret_cast<void *>(dy.ptr())),
           stream.get());
  stream.synchronize();
  dy.copyToHost(y.data(), n * 4);
  k.runOnCpu({(n + 511) / 512}, args(x.data(), b.data(), want.data()));
  // The GPU may contract a * x + b into one fma (rounded once): the two
  // differ by a rounding of a * x and of the sum.
  for (int i = 0; i < n; ++i)
    ASSERT_NEAR(y[i], want[i],
                2.5e-7f * (3.f * std::fabs(x[i]) + std::fabs(b[i % 4])))
        << i;
  expectError([&] { k.launch({1}, {}, stream.get()); },
              {"5 arguments expected"});
}

TEST(KernelApiGpu, SeveralKernelsCompileTogetherAndLaunch) {
  TILEJIT_SKIP_WITHOUT_GPU();
  cuda::Device device = cuda::Device::open();
  Kernel a(axpb(256)), b(axpb(1024));
  Kernel again = a; // the same kernel twice is compiled once
  Kernel::compileForGpu({&a, &b, &again});
  EXPECT_FALSE(a.compileForGpu().cacheKey.empty());
  EXPECT_NE(a.compileForGpu().cacheKey, b.compileForGpu().cacheKey);
  const int n = 3000;
  std::vector<float> x(n, 1.f), bias = {1, 2, 3, 4}, y(n);
  cuda::DeviceBuffer dx(n * 4), db(16), dy(n * 4);
  dx.copyFromHost(x.data(), n * 4);
  db.copyFromHost(bias.data(), 16);
  for (const Kernel *k : {&a, &b}) {
    int64_t block = k == &a ? 256 : 1024;
    k->launch({(n + block - 1) / block},
              {KernelArg::pointer(reinterpret_cast<void *>(dx.ptr()),
                                  DType::F32),
               KernelArg::pointer(reinterpret_cast<void *>(db.ptr()),
                                  DType::F32),
               KernelArg::pointer(reinterpret_cast<void *>(dy.ptr()),
                                  DType::F32),
               KernelArg::i32(n), KernelArg::f32(2.f)});
    cuda::synchronize();
    dy.copyToHost(y.data(), n * 4);
    for (int i = 0; i < n; ++i)
      ASSERT_EQ(y[i], 2.f + bias[i % 4]) << block << " " << i;
  }
}

} // namespace
