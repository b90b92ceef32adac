//===- SpecKernelsCompileTest.cpp - the plain losses through NVRTC --------===//
//
// The losses written plainly (cross_entropy, kl_div, jsd) and scale_grad
// compile to a CUBIN for sm_90 (NVRTC and its ptxas, no GPU needed) in
// their default config and with each parameter moved to each of its other
// candidates, one at a time: a sample of the tuning space that touches every
// value, for every dtype.
//
//===----------------------------------------------------------------------===//
#include "tilejit/Compiler.h"
#include "tilejit/KernelSpec.h"

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

using namespace tilejit;

namespace {

class SpecKernelCompile
    : public ::testing::TestWithParam<std::tuple<std::string, DType>> {};

TEST_P(SpecKernelCompile, EachCandidateCompilesForSm90) {
  const KernelSpec &spec = findKernel(std::get<0>(GetParam()));
  DType dt = std::get<1>(GetParam());
  std::vector<std::vector<std::string>> configs = {{}};
  for (const ParamSpec &p : spec.params)
    for (int64_t v : p.candidates)
      if (v != p.defaultValue) {
        configs.push_back({p.name + "=" + std::to_string(v)});
        // Copies ahead fill a kept row only.
        if (p.name == "KEEP_COPY_AHEAD")
          configs.back().push_back("KEEP_ROW=1");
      }
  for (const auto &overrides : configs) {
    dsl::Config c = spec.config(dt, overrides);
    CompiledKernel k = compile(spec.build(c), {"sm_90", Stage::Cubin, {}});
    ASSERT_FALSE(k.cubin.empty()) << spec.name << " " << c.str();
    EXPECT_EQ(k.threads, 32 * c.get("num_warps")) << c.str();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Losses, SpecKernelCompile,
    ::testing::Combine(::testing::Values("cross_entropy", "kl_div", "jsd",
                                         "scale_grad"),
                       ::testing::Values(DType::BF16, DType::F16, DType::F32)),
    [](const auto &info) {
      return std::get<0>(info.param) + "_" + dtypeName(std::get<1>(info.param));
    });

} // namespace
