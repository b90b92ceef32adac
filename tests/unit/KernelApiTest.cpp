//===- KernelApiTest.cpp - tilejit/Kernel.h -------------------------------===//
//
// Any kernel, registered or built by the caller, compiled for a config (its
// defaults, the caller's, or the one `tilejit tune` stored) and run with
// arguments checked against its declared parameters: on the CPU in CI, on
// the GPU (with a caller's stream, and the loaded binary's resources) where
// there is one. The C ABI over
// it is tested through libtilejit.so (tests/capi/).
//
//===----------------------------------------------------------------------===//
#include "tilejit/Kernel.h"

#include "ops/TunedConfig.h"
#include "runtime/CudaDriver.h"
#include "runtime/TuningDatabase.h"
#include "tilejit/Error.h"
#include "tilejit/KernelSpec.h"

#include "ExpectError.h"
#include "GpuTest.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <numeric>
#include <thread>
#include <unistd.h>

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

/// TILEJIT_CACHE_DIR at a directory of its own for one test, so that no
/// stored tuning entry of the machine takes part.
class ScratchCache {
public:
  explicit ScratchCache(const char *name)
      : Dir(std::filesystem::temp_directory_path() /
            (std::string(name) + "-" + std::to_string(getpid()))) {
    std::filesystem::remove_all(Dir);
    setenv("TILEJIT_CACHE_DIR", Dir.c_str(), 1);
  }
  ~ScratchCache() {
    unsetenv("TILEJIT_CACHE_DIR");
    std::filesystem::remove_all(Dir);
  }

private:
  std::filesystem::path Dir;
};

const std::map<std::string, int64_t> kJsdShape = {{"BT", 100}, {"V", 1000}};

/// A stored entry for jsd at kJsdShape, bf16, on `device`.
TuningKey storeJsdEntry(const DeviceIdentity &device) {
  TuningKey key =
      kernelTuningKey(findKernel("jsd"), DType::BF16, kJsdShape, device);
  TuningEntry e;
  e.best = {{"BLOCK_SIZE", 4096}, {"num_warps", 4}};
  Trial t{e.best};
  t.ms = 0.5;
  e.trials = {t};
  EXPECT_TRUE(TuningDatabase::fromEnvironment().store(key, e));
  return key;
}

TEST(KernelApi, ConfigSourceSaysWhereTheConfigCameFrom) {
  ScratchCache cache("tilejit-kernel-source");
  KernelOptions o{DType::BF16, {}, kJsdShape};
  Kernel defaults = Kernel::compile("jsd", o);
  EXPECT_EQ(defaults.configSource(), "default");
  o.tuned = true;
  o.set = {"BLOCK_SIZE=1024"}; // the caller's parameters win over a lookup
  Kernel set = Kernel::compile("jsd", o);
  EXPECT_EQ(set.configSource(), "set");
  EXPECT_NE(set.config().find("BLOCK_SIZE=1024"), std::string::npos);
  EXPECT_EQ(Kernel(axpb(256)).configSource(), "");

  o.set.clear();
  Kernel tuned = Kernel::compile("jsd", o);
  EXPECT_EQ(tuned.config(), defaults.config());
  const std::string &why = tuned.configSource();
  EXPECT_EQ(why.rfind("default; ", 0), 0u) << why;
  if (cuda::driverAvailable(nullptr))
    EXPECT_NE(why.find("not tuned for BT=128,V=1000 bf16"), std::string::npos)
        << why;
  else
    EXPECT_NE(why.find("no usable GPU"), std::string::npos) << why;

  // The tuning sizes are needed with or without a GPU.
  o.shape.erase("BT");
  expectError([&] { Kernel::compile("jsd", o); },
              {"kernel 'jsd'", "tuning key needs shape 'BT'"});
}

// A tuned compile looks up kernelTuningKey for the current GPU; for any
// identity the lookup is this.
TEST(KernelApi, TunedLookupFindsTheEntryOfItsGpuDtypeAndShapeBucket) {
  ScratchCache cache("tilejit-kernel-lookup");
  DeviceIdentity gpu{"Fake GPU", 132, 9, 0, 12080};
  TuningKey key = storeJsdEntry(gpu);
  EXPECT_EQ(key.shape, "BT=128,V=1000"); // BT is bucketed to a power of 2
  const KernelSpec &jsd = findKernel("jsd");
  std::string source;
  std::vector<std::string> set = tunedOverrides(
      jsd, DType::BF16, {{"BT", 120}, {"V", 1000}}, gpu, &source);
  EXPECT_EQ(set, (std::vector<std::string>{"BLOCK_SIZE=4096", "num_warps=4"}));
  EXPECT_EQ(source, "tuned, " +
                        TuningDatabase::fromEnvironment().pathFor(key).string());

  DeviceIdentity other = gpu;
  other.name = "Other GPU";
  EXPECT_TRUE(tunedOverrides(jsd, DType::BF16, kJsdShape, other, &source)
                  .empty());
  EXPECT_NE(source.find("not tuned for BT=128,V=1000 bf16"), std::string::npos)
      << source;
  EXPECT_TRUE(
      tunedOverrides(jsd, DType::F32, kJsdShape, gpu, &source).empty());
  EXPECT_TRUE(tunedOverrides(jsd, DType::BF16, {{"BT", 100}, {"V", 1024}}, gpu,
                             &source)
                  .empty());
}

TEST(KernelApi, TuningKeysFollowTheSpecsOwnVersion) {
  const KernelSpec &spec = findKernel("fused_ce_tvd_bwd");
  DeviceIdentity gpu{"Some GPU", 132, 9, 0, 13000};
  auto key = [&](const KernelSpec &s, int64_t BT) {
    return kernelTuningKey(s, DType::BF16, {{"BT", BT}, {"V", 32000}}, gpu)
        .kernelVersion;
  };
  // BT buckets by powers of two: shapes of one bucket share the entry.
  EXPECT_EQ(key(spec, 3000), key(spec, 4096));
  // The same spec building other IR (an edited kernel) gets keys of its own.
  KernelSpec edited = spec;
  edited.build = [&](const dsl::Config &c) {
    dsl::Config other = c;
    other.params["BLOCK_SIZE"] = c.get("BLOCK_SIZE") / 2;
    return spec.build(other);
  };
  EXPECT_NE(key(edited, 4096), key(spec, 4096));
}

TEST(KernelApi, ResourcesNeedTheLoadedKernel) {
  expectError([] { rowWeights().resources(); },
              {"kernel 'ce_tvd_row_weights'", "compileForGpu()"});
}

TEST(KernelApiGpu, TunedCompileUsesTheEntryForThisGpu) {
  TILEJIT_SKIP_WITHOUT_GPU();
  ScratchCache cache("tilejit-kernel-tuned");
  TuningKey key = storeJsdEntry(currentGpuIdentity());
  Kernel k = Kernel::compile("jsd", {DType::BF16, {}, kJsdShape, "", true});
  EXPECT_EQ(k.configSource(),
            "tuned, " +
                TuningDatabase::fromEnvironment().pathFor(key).string());
  EXPECT_NE(k.config().find("BLOCK_SIZE=4096"), std::string::npos)
      << k.config();
  EXPECT_NE(k.config().find("num_warps=4"), std::string::npos) << k.config();
}

TEST(KernelApiGpu, ResourcesAreTheLoadedBinarys) {
  TILEJIT_SKIP_WITHOUT_GPU();
  Kernel k = Kernel::compile("jsd", {DType::BF16, {"num_warps=4"}, kJsdShape});
  const CompiledKernel &c = k.compileForGpu();
  KernelUsage u = k.resources();
  EXPECT_EQ(u.threads, 128);
  EXPECT_EQ(u.threads, c.threads);
  EXPECT_GT(u.registers, 0);
  EXPECT_EQ(u.dynamicSharedBytes, c.dynamicSharedBytes);
  KernelResources r = tuningResources(k);
  EXPECT_EQ(r.threads, u.threads);
  EXPECT_EQ(r.registers, u.registers);
  EXPECT_EQ(r.sharedBytes, u.staticSharedBytes + u.dynamicSharedBytes);
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

TEST(KernelApiGpu, LaunchesFromAThreadWithNoCurrentContext) {
  // PyTorch runs backward for GPU 0 on a thread of its own, where the
  // driver API sees no current context: the launch uses GPU 0's primary
  // context, the one the caller's buffers live in.
  TILEJIT_SKIP_WITHOUT_GPU();
  cuda::Device device = cuda::Device::open(0);
  Kernel k(axpb(256));
  const int n = 300;
  std::vector<float> x(n, 2.f), b = {1, 1, 1, 1}, y(n);
  cuda::DeviceBuffer dx(n * 4), db(16), dy(n * 4);
  dx.copyFromHost(x.data(), n * 4);
  db.copyFromHost(b.data(), 16);
  k.compileForGpu(); // loaded here: the worker only launches
  std::string error;
  std::thread worker([&] {
    try {
      k.launch({2}, {KernelArg::pointer(reinterpret_cast<void *>(dx.ptr()),
                                        DType::F32, n),
                     KernelArg::pointer(reinterpret_cast<void *>(db.ptr()),
                                        DType::F32, 4),
                     KernelArg::pointer(reinterpret_cast<void *>(dy.ptr()),
                                        DType::F32, n),
                     KernelArg::i32(n), KernelArg::f32(0.5f)});
    } catch (const std::exception &e) {
      error = e.what();
    }
  });
  worker.join();
  ASSERT_EQ(error, "");
  dy.copyToHost(y.data(), n * 4);
  for (int i = 0; i < n; ++i)
    ASSERT_EQ(y[i], 2.f) << i;
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
