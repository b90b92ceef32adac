// Spec-declared kernels: the declarations, .npy files, the generalized JSD
// reference and the interpreter against it, and bad input.
#include "ExpectError.h"
#include "GpuTest.h"

#include "kernels_spec/reference/JsdReference.h"
#include "ops/SpecRun.h"
#include "runtime/Npy.h"
#include "tilejit/HostFloat.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <unistd.h>

using namespace tilejit;

namespace {

SpecRunOptions jsdOptions(DType dtype, int64_t BT, int64_t V,
                          std::vector<std::string> set = {}) {
  SpecRunOptions o;
  o.dtype = dtype;
  o.sizes = {{"BT", BT}, {"V", V}};
  o.set = std::move(set);
  return o;
}

std::string tempPath(const char *name) {
  return (std::string(::testing::TempDir()) + "/" + name);
}

TEST(SpecRun, JsdDeclarationMatchesTheKernel) {
  const KernelSpec &spec = findKernel("jsd");
  ASSERT_TRUE(spec.run.declared());
  Kernel k = Kernel::compile(spec, {DType::BF16, {}, {{"BT", 4}, {"V", 8}}});
  EXPECT_NO_THROW(checkRunSpec(spec, k.params()));
  KernelSpec broken = spec;
  broken.run.args.pop_back(); // V
  expectError([&] { checkRunSpec(broken, k.params()); },
              {"parameter 'V' has no declaration"});
  broken = spec;
  broken.run.grid = {"T"};
  expectError([&] { checkRunSpec(broken, k.params()); },
              {"the grid names size 'T'"});
}

TEST(Npy, RoundTripsEveryDType) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64}) {
    std::vector<uint8_t> data(6 * dtypeSize(t));
    for (size_t i = 0; i < data.size(); ++i)
      data[i] = uint8_t(i * 37 + 1);
    std::string path = tempPath("roundtrip.npy");
    writeNpy(path, t, {2, 3}, data.data());
    NpyArray a = readNpy(path, t);
    EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3})) << dtypeName(t);
    EXPECT_EQ(a.data, data) << dtypeName(t);
  }
}

TEST(Npy, ReadsWhatNumPyWrites) {
  // np.save of np.arange(3, dtype="<f4"): format 1.0, the header padded
  // with spaces and a newline to a multiple of 64 bytes with the prefix.
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }";
  header.resize(128 - 10 - 1, ' ');
  header += '\n';
  std::string file = std::string("\x93NUMPY\x01\x00", 8) +
                     char(header.size()) + '\0' + header;
  float values[3] = {0, 1, 2};
  file.append(reinterpret_cast<const char *>(values), sizeof(values));
  std::string path = tempPath("numpy.npy");
  std::ofstream(path, std::ios::binary) << file;
  NpyArray a = readNpy(path, DType::F32);
  ASSERT_EQ(a.shape, std::vector<int64_t>{3});
  EXPECT_EQ(loadAsDouble(a.data.data(), DType::F32, 2), 2.0);
  expectError([&] { readNpy(path, DType::I64); }, {"holds '<f4' elements"});
  expectError([&] { readNpy(tempPath("absent.npy"), DType::F32); },
              {"cannot open"});
}

TEST(JsdReference, KnownValuesAndLimits) {
  // P = Q: every divergence is 0, and so is the gradient.
  double x[2] = {std::log(0.25), std::log(0.75)}, g[2];
  for (double beta : {0.0, 0.3, 1.0}) {
    EXPECT_NEAR(ref::jsdRow(x, x, 2, beta, g), 0, 1e-15) << beta;
    EXPECT_NEAR(g[0] + (beta == 0 ? 0.25 : 0) - (beta == 1 ? 0.25 : 0), 0,
                1e-15);
  }
  // beta = 0: KL(P || Q) = sum P log(P / Q), by hand.
  double y[2] = {std::log(0.5), std::log(0.5)};
  EXPECT_NEAR(ref::jsdRow(x, y, 2, 0, nullptr),
              0.5 * std::log(0.5 / 0.25) + 0.5 * std::log(0.5 / 0.75), 1e-15);
  // beta = 0.5 is symmetric in P and Q and bounded by log 2.
  double a = ref::jsdRow(x, y, 2, 0.5, nullptr);
  EXPECT_NEAR(a, ref::jsdRow(y, x, 2, 0.5, nullptr), 1e-15);
  EXPECT_GT(a, 0);
  EXPECT_LT(a, std::log(2.0));
  expectError([&] { ref::jsdRow(x, y, 2, 1.5, nullptr); }, {"beta in [0, 1]"});
}

TEST(JsdReference, GradientIsTheLossDerivative) {
  const int V = 5;
  double x[V] = {-1.2, -2.0, -0.7, -3.1, -1.9}, y[V] = {-2.2, -0.4, -1.6, -2.5,
                                                        -3.0};
  for (double beta : {0.0, 0.4, 1.0}) {
    double g[V];
    ref::jsdRow(x, y, V, beta, g);
    for (int v = 0; v < V; ++v) {
      double h = 1e-6, xp[V], xm[V];
      std::copy(x, x + V, xp);
      std::copy(x, x + V, xm);
      xp[v] += h;
      xm[v] -= h;
      double fd = (ref::jsdRow(xp, y, V, beta, nullptr) -
                   ref::jsdRow(xm, y, V, beta, nullptr)) /
                  (2 * h);
      EXPECT_NEAR(g[v], fd, 1e-8) << "beta " << beta << " v " << v;
    }
  }
}

TEST(SpecRun, JsdInterpreterMatchesTheReference) {
  // Tolerances: the spec's (loss 1e-6 + 1e-4 rel, grad 1e-7 + 1e-4 rel)
  // plus the output dtype's rounding. V = 300 with BLOCK_SIZE 1024 and 4096:
  // one masked tile; rows 6 and 13 are ignore_index.
  for (DType t : {DType::F32, DType::BF16})
    for (const char *beta : {"beta=0", "beta=0.5", "beta=1"}) {
      SpecRun r(findKernel("jsd"),
                jsdOptions(t, 14, 300, {beta, "BLOCK_SIZE=1024"}));
      r.runOnCpu();
      for (const OutputCheck &c : r.check())
        EXPECT_TRUE(c.passed) << dtypeName(t) << " " << beta << " " << c.name
                              << " " << c.worstRatio;
      const SpecRun::Buffer &loss = r.buffer("loss");
      EXPECT_EQ(loadAsDouble(loss.host.data(), DType::F32, 6), 0.0);
      EXPECT_GT(loadAsDouble(loss.host.data(), DType::F32, 5), 0.0);
    }
}

TEST(SpecRun, CheckFailsOnAWrongOutput) {
  SpecRun r(findKernel("jsd"), jsdOptions(DType::F32, 2, 50));
  r.runOnCpu();
  auto &grad = const_cast<SpecRun::Buffer &>(r.buffer("grad"));
  storeFromDouble(grad.host.data(), DType::F32, 3,
                  loadAsDouble(grad.host.data(), DType::F32, 3) * 1.001);
  bool passed = true;
  std::string table = describeChecks(r.check(), &passed);
  EXPECT_FALSE(passed);
  EXPECT_NE(table.find("grad: max |error|"), std::string::npos) << table;
  EXPECT_NE(table.find("element 3"), std::string::npos) << table;
}

TEST(SpecRun, BadInputNamesTheThing) {
  const KernelSpec &jsd = findKernel("jsd");
  SpecRunOptions o = jsdOptions(DType::BF16, 4, 8);
  o.sizes.erase("V");
  expectError([&] { SpecRun(jsd, o); }, {"missing size V"});
  o = jsdOptions(DType::BF16, 4, 8);
  o.sizes["T"] = 2;
  expectError([&] { SpecRun(jsd, o); }, {"unknown size 'T'"});
  expectError([&] { SpecRun(jsd, jsdOptions(DType::BF16, 4, 0)); },
              {"size V = 0 must be >= 1"});
  expectError([&] { SpecRun(jsd, jsdOptions(DType::BF16, 4, 8, {"beta=x"})); },
              {"'beta=x' has no numeric value"});
  expectError([&] { SpecRun(jsd, jsdOptions(DType::BF16, 4, 8, {"NOPE=1"})); },
              {"no parameter or scalar argument 'NOPE'",
               "its parameters: BLOCK_SIZE num_warps HAS_LABEL",
               "its scalar arguments: beta ignore_index"});
  for (const char *big :
       {"ignore_index=1e40", "ignore_index=9223372036854775808",
        "ignore_index=inf", "ignore_index=1.5"})
    expectError([&] { SpecRun(jsd, jsdOptions(DType::BF16, 4, 8, {big})); },
                {"scalar ignore_index = ", "is not an i64"});
  EXPECT_NO_THROW(
      SpecRun(jsd, jsdOptions(DType::BF16, 4, 8,
                              {"ignore_index=-9223372036854775808"})));
  expectError([&] { SpecRun(jsd, jsdOptions(DType::I32, 4, 8)); },
              {"does not support dtype i32"});
  o = jsdOptions(DType::BF16, 4, 8);
  o.inputFiles["loss"] = tempPath("loss.npy");
  expectError([&] { SpecRun(jsd, o); }, {"'loss' is an output"});
  expectError([&] { SpecRun(findKernel("fused_ce_tvd_fwd"), o); },
              {"declares no arguments"});
}

TEST(SpecRun, NpyDTypeErrorNamesTheArgument) {
  std::string path = tempPath("f32.npy");
  std::vector<float> data(4 * 8);
  writeNpy(path, DType::F32, {4, 8}, data.data());
  SpecRunOptions o = jsdOptions(DType::BF16, 4, 8);
  o.inputFiles["student_logp"] = path;
  std::string named = "--input student_logp=" + path + ": ";
  expectError([&] { SpecRun(findKernel("jsd"), o); },
              {named.c_str(), "holds '<f4' elements"});
}

TEST(SpecRun, ScalarValuesInParameterOrder) {
  SpecRun r(findKernel("jsd"), jsdOptions(DType::F32, 2, 8, {"beta=0.25"}));
  using Values = std::vector<std::pair<std::string, double>>;
  EXPECT_EQ(r.scalarArgs(),
            (Values{{"beta", 0.25},
                    {"ignore_index", -100},
                    {"per_row_upstream", 1},
                    {"V", 8}}));
}

TEST(SpecRun, ZeroRowsLaunchNothing) {
  SpecRun r(findKernel("jsd"), jsdOptions(DType::F32, 0, 8));
  EXPECT_EQ(r.grid().x, 0);
  r.runOnCpu();
  EXPECT_TRUE(r.buffer("grad").host.empty());
  bool passed = false;
  std::string table = describeChecks(r.check(), &passed);
  EXPECT_TRUE(passed) << table;
  EXPECT_NE(table.find("loss: empty: ok"), std::string::npos) << table;
}

/// y = x, one program per row of N: NaN in x is NaN in y and the reference.
KernelSpec copySpec() {
  KernelSpec s;
  s.name = "test_copy";
  s.params = {{"BLOCK_SIZE", {128}, 128, "elements per tile"},
              {"num_warps", {4}, 4, "warps per program"}};
  s.dtypes = {DType::F32};
  s.build = [](const dsl::Config &c) {
    dsl::KernelBuilder k("test_copy", c);
    dsl::Value x = k.pointerArg("x", c.dtype), y = k.pointerArg("y", c.dtype);
    dsl::Value N = k.scalarArg("N", DType::I32);
    const int64_t BLOCK = k.param("BLOCK_SIZE");
    dsl::Value row = k.programId(0).to(DType::I64) * N.to(DType::I64);
    k.forRange(0, N, BLOCK, [&](dsl::Value i) {
      dsl::Value offs = i + k.arange(BLOCK);
      k.store(y + row, offs, k.load(x + row, offs, offs < N, 0), offs < N);
    });
    return k.finish();
  };
  s.run.sizes = {{"M", "rows"}, {"N", "columns"}};
  s.run.grid = {"M"};
  s.run.args = {ArgSpec::input("x", {"M", "N"}, ArgFill::normal()),
                ArgSpec::output("y", {"M", "N"}),
                ArgSpec::sizeScalar("N", "N")};
  s.run.reference = [](ReferenceArgs &r) {
    for (int64_t i = 0; i < r.in("x").numElements(); ++i)
      r.out("y")[i] = r.in("x")[i];
  };
  return s;
}

TEST(SpecRun, NanInBothMatchesNanInOneFails) {
  KernelSpec spec = copySpec();
  SpecRunOptions o;
  o.dtype = DType::F32;
  o.sizes = {{"M", 2}, {"N", 5}};
  SpecRun r(spec, o);
  auto &x = const_cast<SpecRun::Buffer &>(r.buffer("x"));
  storeFromDouble(x.host.data(), DType::F32, 1, NAN);
  storeFromDouble(x.host.data(), DType::F32, 7, NAN);
  r.runOnCpu();
  bool passed = false;
  std::string table = describeChecks(r.check(), &passed);
  EXPECT_TRUE(passed) << table;
  EXPECT_NE(table.find("; 2 NaN in both, matched: ok"), std::string::npos)
      << table;
  auto &y = const_cast<SpecRun::Buffer &>(r.buffer("y"));
  storeFromDouble(y.host.data(), DType::F32, 4, NAN);
  table = describeChecks(r.check(), &passed);
  EXPECT_FALSE(passed) << table;
  EXPECT_NE(table.find("element 4"), std::string::npos) << table;
}

// The tuner sees each candidate's registers (Kernel::resources), so one over
// the device's limits is skipped for them rather than failing to launch.
TEST(SpecRunGpu, TunerTrialsCarryTheLoadedResources) {
  TILEJIT_SKIP_WITHOUT_GPU();
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      ("tilejit-spec-tune-" + std::to_string(getpid()));
  setenv("TILEJIT_CACHE_DIR", dir.c_str(), 1);
  SpecRunOptions o = jsdOptions(DType::BF16, 64, 3000);
  o.gpu = true;
  SpecRun run(findKernel("jsd"), o);
  SpecTuneReport r = tuneSpecGpu(run, 2, /*retune=*/true, nullptr);
  ASSERT_FALSE(r.entry.trials.empty());
  for (const Trial &t : r.entry.trials)
    if (t.status == TrialStatus::Ok) {
      EXPECT_GT(t.resources.registers, 0) << formatParams(t.params);
      EXPECT_EQ(t.resources.threads, 32 * t.params.at("num_warps"));
    }
  unsetenv("TILEJIT_CACHE_DIR");
  std::filesystem::remove_all(dir);
}

} // namespace
