//===- TensorMapTest.cpp - which views a launch gives the copy engine -----===//
//
// A launch encodes a dot loop's tensor maps from its arguments
// (tilejit/TensorMap.h); views the copy engine cannot read fall back to
// cp.async. These are the checks made before the driver sees them, and the
// round trip through the IR's and the cache's integers.
//
//===----------------------------------------------------------------------===//
#include "tilejit/TensorMap.h"

#include <gtest/gtest.h>

using namespace tilejit;

namespace {

TensorMapParam blockOf128x64() {
  TensorMapParam p;
  p.pointer = 0;
  p.boxInner = 64;
  p.boxOuter = 128;
  p.swizzleBytes = 128;
  return p;
}

TEST(TensorMap, ResolvesAReadableView) {
  TensorMapShape s;
  std::string why;
  // 300 rows of 1000 bf16, 1008 apart (2016 bytes).
  ASSERT_TRUE(resolveTensorMap(blockOf128x64(), 4096, 1000, 300, 1008, s, why))
      << why;
  EXPECT_EQ(s.address, 4096u);
  EXPECT_EQ(s.dims[0], 1000u);
  EXPECT_EQ(s.dims[1], 300u);
  EXPECT_EQ(s.strideBytes, 2016u);
  EXPECT_EQ(s.box[0], 64u);
  EXPECT_EQ(s.box[1], 128u);
  EXPECT_EQ(s.swizzleBytes, 128);
  // A view smaller than the box: the copy engine fills the rest with zeros.
  EXPECT_TRUE(resolveTensorMap(blockOf128x64(), 0, 8, 1, 8, s, why)) << why;
}

TEST(TensorMap, RefusesWhatTheCopyEngineCannotRead) {
  TensorMapShape s;
  std::string why;
  const TensorMapParam p = blockOf128x64();
  EXPECT_FALSE(resolveTensorMap(p, 4098, 1000, 300, 1008, s, why));
  EXPECT_NE(why.find("address"), std::string::npos) << why;
  // 1005 bf16 = 2010 bytes between rows.
  EXPECT_FALSE(resolveTensorMap(p, 4096, 1000, 300, 1005, s, why));
  EXPECT_NE(why.find("stride"), std::string::npos) << why;
  // Rows that overlap the next one.
  EXPECT_FALSE(resolveTensorMap(p, 4096, 1000, 300, 504, s, why));
  EXPECT_FALSE(resolveTensorMap(p, 4096, 0, 300, 1008, s, why));
  EXPECT_NE(why.find("extent"), std::string::npos) << why;
  EXPECT_FALSE(resolveTensorMap(p, 4096, 1000, -1, 1008, s, why));
  EXPECT_FALSE(
      resolveTensorMap(p, 4096, int64_t(1) << 31, 1, int64_t(1) << 31, s, why));
  EXPECT_FALSE(resolveTensorMap(p, 4096, 8, 2, int64_t(1) << 40, s, why));
  TensorMapParam wide = p;
  wide.boxInner = 128; // 256 bytes: more than one swizzle span
  EXPECT_FALSE(resolveTensorMap(wide, 4096, 1000, 300, 1008, s, why));
}

TEST(TensorMap, FlattensAndBack) {
  TensorMapParam p = blockOf128x64();
  p.pointer = 3;
  p.inner = {5, 0};
  p.outer = {-1, 4096};
  p.outerStride = {7, 0};
  std::vector<int64_t> f = flattenTensorMap(p);
  EXPECT_EQ(f, (std::vector<int64_t>{3, 2, 5, 0, -1, 4096, 7, 0, 64, 128, 128}));
  TensorMapParam q;
  ASSERT_TRUE(unflattenTensorMap(f, q));
  EXPECT_EQ(flattenTensorMap(q), f);
  std::vector<int64_t> wide = f;
  wide[1] = 4; // 32-bit elements: not what the dot loops copy
  EXPECT_FALSE(unflattenTensorMap(wide, q));
  std::vector<int64_t> swizzle = f;
  swizzle[10] = 16;
  EXPECT_FALSE(unflattenTensorMap(swizzle, q));
  f.pop_back();
  EXPECT_FALSE(unflattenTensorMap(f, q));
}

} // namespace
