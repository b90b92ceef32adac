//===- KlDivTest.cpp - kernels_spec/KlDiv.cpp -----------------------------===//
//
// The kl_div kernel in the interpreter against its fp64 reference, forward
// and reverse, at several temperatures, V = 1 and V no multiple of the
// tile; and the reference itself on rows whose divergence is known.
//
//===----------------------------------------------------------------------===//
#include "kernels_spec/reference/KlDivReference.h"
#include "ops/SpecRun.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

using namespace tilejit;

namespace {

TEST(KlDiv, MatchesTheReference) {
  for (DType dtype : {DType::F32, DType::BF16})
    for (const char *reverse : {"reverse=0", "reverse=1"})
      for (const char *temperature : {"temperature=0.5", "temperature=2"})
        for (int64_t V : {int64_t(1), int64_t(3001)}) {
          SpecRunOptions o;
          o.dtype = dtype;
          o.sizes = {{"BT", 8}, {"V", V}};
          o.set = {reverse, temperature};
          SpecRun run(findKernel("kl_div"), o);
          run.runOnCpu();
          bool passed = false;
          std::string report = describeChecks(run.check(), &passed);
          EXPECT_TRUE(passed) << dtypeName(dtype) << " " << reverse << " "
                              << temperature << " V=" << V << "\n"
                              << report;
        }
}

TEST(KlDivReference, KnownValues) {
  // Identical rows: no divergence, no gradient, both ways.
  std::vector<double> s = {1, -2, 0.5}, grad(3, 9);
  for (bool reverse : {false, true}) {
    EXPECT_NEAR(ref::klDivRow(s.data(), s.data(), 3, 1.5, reverse,
                              grad.data()),
                0, 1e-15);
    for (double g : grad)
      EXPECT_NEAR(g, 0, 1e-15);
  }
  // Two classes: q = (1/2, 1/2), p = softmax(0, log 3) = (1/4, 3/4).
  std::vector<double> q = {0, 0}, p = {0, std::log(3.0)};
  double forward = ref::klDivRow(q.data(), p.data(), 2, 1, false, grad.data());
  EXPECT_NEAR(forward, 0.25 * std::log(0.5) + 0.75 * std::log(1.5), 1e-15);
  EXPECT_NEAR(grad[0], 0.25, 1e-15); // q - p
  double backward = ref::klDivRow(q.data(), p.data(), 2, 1, true, nullptr);
  EXPECT_NEAR(backward, 0.5 * std::log(2.0) + 0.5 * std::log(2.0 / 3), 1e-15);
}

} // namespace
