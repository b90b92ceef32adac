//===- MinMaxTest.cpp - float max/min: IEEE maximum/minimum everywhere ----===//
//
// The DSL's max/min are arith.maximumf/minimumf (IEEE 754-2019 maximum and
// minimum: NaN propagates, -0 < +0). The interpreter implements them in C++;
// the GPU uses one max.NaN/min.NaN instruction (sm_80 and newer). Both must
// give the same values, signed zeros included, on the cases that tell the
// definitions apart (a NaN matches any NaN: payloads are not compared).
// The pre-sm_80 fallback in the prelude is not run by these tests. minNum
// (fminf: NaN loses) and copysign go through the same kernel.
//
//===----------------------------------------------------------------------===//
#include "runtime/CudaDriver.h"
#include "tilejit/Compiler.h"
#include "tilejit/DSL.h"
#include "tilejit/Interpreter.h"

#include "GpuTest.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

using namespace tilejit;
using namespace tilejit::dsl;

namespace {

constexpr int64_t kLanes = 32;

/// out[0..n) = max(a, b), out[n..2n) = min(a, b), out[2n..3n) = minNum(a,
/// b), out[3n..4n) = copysign(a, b), one program of 32 lanes.
TileModule minMaxKernel() {
  Config c;
  c.params = {{"num_warps", 1}};
  KernelBuilder k("min_max", c);
  Value a = k.pointerArg("a", DType::F32), b = k.pointerArg("b", DType::F32);
  Value out = k.pointerArg("out", DType::F32);
  Value i = k.arange(kLanes);
  Value x = k.load(a, i), y = k.load(b, i);
  k.store(out, i, max(x, y));
  k.store(out, i + double(kLanes), min(x, y));
  k.store(out, i + double(2 * kLanes), minNum(x, y));
  k.store(out, i + double(3 * kLanes), copysign(x, y));
  return k.finish();
}

/// Pairs that separate maximum from maxNum, fmax and a > b ? a : b: signed
/// zeros both ways round, NaN on either side, infinities, equal values.
void specialPairs(std::vector<float> &a, std::vector<float> &b) {
  const float nan = std::numeric_limits<float>::quiet_NaN(),
              inf = std::numeric_limits<float>::infinity();
  a = {0.f, -0.f, -0.f, 0.f, nan, 1.f, nan, -inf, inf, 2.f, -3.f, 5.f};
  b = {-0.f, 0.f, -0.f, 0.f, 1.f, nan, nan, 3.f, -inf, -5.f, -3.f, 5.f};
  for (size_t j = a.size(); j < size_t(kLanes); ++j) {
    a.push_back(float(j) * 0.5f - 7.f);
    b.push_back(7.f - float(j) * 0.25f);
  }
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

/// Same value, with the sign of zero (except where `anyZeroSign`); any NaN
/// matches any NaN.
void expectSameBits(const std::vector<float> &got,
                    const std::vector<float> &want,
                    const std::vector<bool> &anyZeroSign = {}) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t j = 0; j < got.size(); ++j) {
    if (std::isnan(want[j]))
      EXPECT_TRUE(std::isnan(got[j])) << j;
    else if (j < anyZeroSign.size() && anyZeroSign[j])
      EXPECT_EQ(got[j], want[j]) << j;
    else
      EXPECT_EQ(bits(got[j]), bits(want[j])) << j << ": " << got[j];
  }
}

std::vector<float> onInterpreter(std::vector<float> a, std::vector<float> b) {
  TileModule m = minMaxKernel();
  std::vector<float> out(4 * kLanes, 1.f);
  interpret(m.operation(), m.kernelName(), {1, 1, 1},
            {InterpBuffer{a.data(), DType::F32, kLanes},
             InterpBuffer{b.data(), DType::F32, kLanes},
             InterpBuffer{out.data(), DType::F32, 4 * kLanes}});
  return out;
}

TEST(MinMax, InterpreterFollowsIeeeMaximumMinimumMinNumAndCopysign) {
  std::vector<float> a, b;
  specialPairs(a, b);
  std::vector<float> want(4 * kLanes);
  // minNum leaves the sign of a zero result open (IEEE 754-2008 minNum).
  std::vector<bool> anyZeroSign(4 * kLanes, false);
  for (int64_t j = 0; j < kLanes; ++j) {
    want[2 * kLanes + j] = std::fmin(a[j], b[j]);
    anyZeroSign[2 * kLanes + j] = true;
    want[3 * kLanes + j] = std::copysign(a[j], b[j]);
    bool nan = std::isnan(a[j]) || std::isnan(b[j]);
    bool bothZero = a[j] == 0.f && b[j] == 0.f;
    float qnan = std::numeric_limits<float>::quiet_NaN();
    want[j] = nan ? qnan
              : bothZero
                  ? (std::signbit(a[j]) && std::signbit(b[j]) ? -0.f : 0.f)
                  : std::max(a[j], b[j]);
    want[kLanes + j] =
        nan        ? qnan
        : bothZero ? (std::signbit(a[j]) || std::signbit(b[j]) ? -0.f : 0.f)
                   : std::min(a[j], b[j]);
  }
  expectSameBits(onInterpreter(a, b), want, anyZeroSign);
}

TEST(MinMaxGpu, MatchesTheInterpreter) {
  TILEJIT_SKIP_WITHOUT_GPU();
  std::vector<float> a, b;
  specialPairs(a, b);
  cuda::Device device = cuda::Device::open();
  cuda::DeviceBuffer da(kLanes * 4), db(kLanes * 4), dout(4 * kLanes * 4);
  da.copyFromHost(a.data(), kLanes * 4);
  db.copyFromHost(b.data(), kLanes * 4);
  dout.memset(0);
  runOnGpu(device, minMaxKernel(), 1, {&da, &db, &dout});
  std::vector<float> got(4 * kLanes);
  dout.copyToHost(got.data(), got.size() * 4);
  std::vector<bool> anyZeroSign(4 * kLanes, false);
  std::fill(anyZeroSign.begin() + 2 * kLanes, anyZeroSign.begin() + 3 * kLanes,
            true);
  expectSameBits(got, onInterpreter(a, b), anyZeroSign);
}

} // namespace
