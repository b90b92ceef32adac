//===- CrossEntropyTest.cpp - kernels_spec/CrossEntropy.cpp ---------------===//
//
// The cross_entropy kernel in the interpreter against its fp64 reference
// (crossEntropyRow, the linear CE's): every feature on and off, V = 1 and V
// no multiple of the tile, both upstream forms; then rows that are all
// ignored or out of range (loss 0, gradient 0) and the gradient written
// over the logits, on host buffers of the test's own.
//
//===----------------------------------------------------------------------===//
#include "ops/SpecRun.h"
#include "tilejit/Kernel.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

using namespace tilejit;

namespace {

void expectPass(DType dtype, int64_t BT, int64_t V,
                std::vector<std::string> set) {
  SpecRunOptions o;
  o.dtype = dtype;
  o.sizes = {{"BT", BT}, {"V", V}};
  o.set = set;
  SpecRun run(findKernel("cross_entropy"), o);
  run.runOnCpu();
  bool passed = false;
  std::string report = describeChecks(run.check(), &passed);
  EXPECT_TRUE(passed) << dtypeName(dtype) << " BT=" << BT << " V=" << V
                      << " " << ::testing::PrintToString(set) << "\n"
                      << report;
}

TEST(CrossEntropy, MatchesTheReferenceWithEachFeature) {
  const std::vector<std::vector<std::string>> features = {
      {},                                              // smoothing, z, weights
      {"softcap=30"},                                  // and the softcap
      {"HAS_WEIGHT=0", "label_smoothing=0", "lse_square_scale=0"}, // plain
      {"label_smoothing=1", "softcap=4"},              // smoothing only
      {"per_row_upstream=0", "lse_square_scale=0.01"}, // one factor each
      {"BLOCK_SIZE=1024", "ignore_index=2"},
      {"grad_scale=64"}};                              // stored 64x
  for (DType dtype : {DType::F32, DType::BF16})
    for (const auto &set : features)
      for (int64_t V : {int64_t(1), int64_t(3001)})
        expectPass(dtype, 9, V, set);
}

/// Runs cross_entropy on the CPU over `logits` (BT x V, f32) with
/// per-row upstream 1, writing the gradient to `grad` (may be `logits`).
void run(std::vector<float> &logits, std::vector<float> &grad,
         std::vector<int64_t> target, int64_t V, std::vector<float> &loss) {
  int64_t BT = int64_t(target.size());
  Kernel k = Kernel::compile("cross_entropy", {DType::F32, {}, {}});
  std::vector<float> weight(V, 1.f), upstream(BT, 1.f), zLoss(BT, -1.f);
  loss.assign(BT, -1.f);
  k.runOnCpu({BT}, {KernelArg::pointer(logits.data(), DType::F32, BT * V),
                    KernelArg::pointer(grad.data(), DType::F32, BT * V),
                    KernelArg::pointer(target.data(), DType::I64, BT),
                    KernelArg::pointer(weight.data(), DType::F32, V),
                    KernelArg::pointer(upstream.data(), DType::F32, BT),
                    KernelArg::pointer(loss.data(), DType::F32, BT),
                    KernelArg::pointer(zLoss.data(), DType::F32, BT),
                    KernelArg::i32(int32_t(V)), KernelArg::i64(-100),
                    KernelArg::f32(0.1f), KernelArg::f32(1e-3f),
                    KernelArg::f32(0.f), KernelArg::i32(1),
                    KernelArg::f32(1.f)});
  for (int64_t r = 0; r < BT; ++r)
    EXPECT_EQ(loss[r] == 0.f, zLoss[r] == 0.f) << r;
}

TEST(CrossEntropy, IgnoredAndOutOfRangeRowsGiveZeros) {
  const int64_t V = 700;
  std::vector<float> logits(4 * V), grad(4 * V, 7.f), loss;
  std::mt19937 gen(3);
  std::normal_distribution<float> normal(0.f, 2.f);
  for (float &x : logits)
    x = normal(gen);
  run(logits, grad, {-100, V, -5, -100}, V, loss);
  for (int64_t i = 0; i < 4 * V; ++i)
    ASSERT_EQ(grad[i], 0.f) << i;
  for (float l : loss)
    EXPECT_EQ(l, 0.f);
}

TEST(CrossEntropy, InPlaceGivesTheSameGradient) {
  const int64_t V = 2500;
  std::vector<float> logits(3 * V), grad(3 * V), loss, lossInPlace;
  std::mt19937 gen(5);
  std::normal_distribution<float> normal(0.f, 3.f);
  for (float &x : logits)
    x = normal(gen);
  std::vector<int64_t> target = {17, -100, V - 1};
  std::vector<float> inPlace = logits;
  run(logits, grad, target, V, loss);
  run(inPlace, inPlace, target, V, lossInPlace);
  EXPECT_EQ(inPlace, grad);
  EXPECT_EQ(lossInPlace, loss);
  EXPECT_GT(loss[0], 0.f);
}

} // namespace
