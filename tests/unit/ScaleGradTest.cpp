//===- ScaleGradTest.cpp - kernels_spec/ScaleGrad.cpp ---------------------===//
//
// scale_grad against x * g in fp64, rounded once to the tensor's dtype: a
// size that is no multiple of the tile, walked by fewer programs than it has
// tiles; g == 1 leaves every bit as it was (a signalling NaN, which any
// multiply would turn quiet, included).
//
//===----------------------------------------------------------------------===//
#include "tilejit/HostFloat.h"
#include "tilejit/Kernel.h"

#include "GpuTest.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

using namespace tilejit;

namespace {

constexpr int64_t kN = 10000; // 2 full 4096-tiles and a partial one

std::vector<uint16_t> bf16Values() {
  std::mt19937 gen(7);
  std::normal_distribution<float> normal(0.f, 3.f);
  std::vector<uint16_t> x(kN);
  for (uint16_t &v : x)
    v = floatToBf16(normal(gen));
  x[5] = 0x8000;             // -0
  x[kN - 1] = 0x7f81;        // a signalling NaN: a product would quieten it
  x[kN - 2] = floatToBf16(1e38f);
  return x;
}

/// Runs scale_grad on `x` with g on `programs` programs (CPU or GPU).
void scale(std::vector<uint16_t> &x, float g, int64_t programs, bool gpu) {
  Kernel k = Kernel::compile("scale_grad", {DType::BF16, {}, {}});
  if (!gpu) {
    k.runOnCpu({programs}, {KernelArg::pointer(x.data(), DType::BF16, kN),
                            KernelArg::pointer(&g, DType::F32, 1),
                            KernelArg::i64(kN)});
    return;
  }
  cuda::Device device = cuda::Device::open();
  cuda::DeviceBuffer dx(kN * 2), dg(4);
  dx.copyFromHost(x.data(), kN * 2);
  dg.copyFromHost(&g, 4);
  k.launch({programs},
           {KernelArg::pointer(reinterpret_cast<void *>(dx.ptr()), DType::BF16,
                               kN),
            KernelArg::pointer(reinterpret_cast<void *>(dg.ptr()), DType::F32,
                               1),
            KernelArg::i64(kN)});
  dx.copyToHost(x.data(), kN * 2);
}

void expectScaled(bool gpu) {
  const std::vector<uint16_t> x0 = bf16Values();
  std::vector<uint16_t> x = x0;
  scale(x, 1.f, 2, gpu);
  EXPECT_EQ(std::memcmp(x.data(), x0.data(), kN * 2), 0) << "g == 1 wrote";
  const float g = -0.375f;
  scale(x, g, 2, gpu);
  for (int64_t i = 0; i < kN; ++i) {
    double want = double(bf16ToFloat(x0[i])) * g;
    float got = bf16ToFloat(x[i]);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << i;
      continue;
    }
    // One rounding of the f32 product to bf16: half an ulp, <= 2^-8 of it.
    ASSERT_LE(std::fabs(got - want), std::ldexp(std::fabs(want), -8)) << i;
  }
  EXPECT_EQ(x[5], 0x0000) << "-0 * -0.375 is +0";
}

TEST(ScaleGrad, MatchesTheProductOnTheCpu) { expectScaled(false); }

TEST(ScaleGrad, MatchesTheProductOnTheGpu) {
  TILEJIT_SKIP_WITHOUT_GPU();
  expectScaled(true);
}

TEST(ScaleGrad, AnEmptyTensorIsNoWork) {
  Kernel k = Kernel::compile("scale_grad", {DType::F32, {}, {}});
  float g = 2.f, x = 3.f;
  k.runOnCpu({4}, {KernelArg::pointer(&x, DType::F32, 1),
                   KernelArg::pointer(&g, DType::F32, 1), KernelArg::i64(0)});
  EXPECT_EQ(x, 3.f);
}

} // namespace
