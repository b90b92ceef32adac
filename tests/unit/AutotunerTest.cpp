//===- AutotunerTest.cpp - tuner selection logic and tuning database ------===//
//
// The tuner's decisions (skip what does not compile or fit, never let a wrong
// candidate win, restore in-place inputs and poison outputs before every
// launch) are driven here through a fake TuningTarget whose "kernels" are
// host functions, so all of it runs in CI without a GPU. The database tests
// use a temporary directory. One GPU test at the end tunes the real CE+TVD
// kernels at a small shape; it skips itself without a GPU.
//
//===----------------------------------------------------------------------===//
#include "runtime/Autotuner.h"
#include "ops/harness/FusedCeTvdOp.h"
#include "ops/harness/FusedCeTvdReducedOp.h"
#include "ops/harness/FusedCeTvdTune.h"
#include "runtime/CudaDriver.h"
#include "runtime/TuningDatabase.h"
#include "tilejit/Error.h"
#include "tilejit/KernelSpec.h"

#include "GpuTest.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>
#include <unistd.h>

using namespace tilejit;
namespace fs = std::filesystem;

namespace {

struct FakeKernel : TuneCandidate {
  int64_t id;
  explicit FakeKernel(int64_t id) : id(id) {}
};

/// A pretend GPU: candidate `id` runs Kernels[id] (default: out = 2 * in) on
/// host vectors and "takes" Times[id] ms. The check wants out == 2 * in and
/// the input unchanged, unless Check is replaced.
class FakeTarget : public TuningTarget {
public:
  using KernelFn =
      std::function<void(std::vector<float> &in, std::vector<float> &out)>;
  std::map<int64_t, std::string> CompileErrors;
  std::map<int64_t, KernelResources> Resources;
  std::map<int64_t, KernelFn> Kernels;
  std::map<int64_t, double> Times;
  std::function<std::string(const FakeTarget &)> Check;
  std::vector<float> Pristine{1, 2, 3, 4, 5, 6, 7, 8}, In = Pristine, Out;
  std::map<int64_t, int> Launches;
  std::set<std::thread::id> CompileThreads;
  std::mutex M;
  bool SawDirtyInput = false, SawStaleOutput = false;
  std::chrono::milliseconds CompileDelay{0};

  FakeTarget() : Out(Pristine.size(), 0.f) {}

  std::unique_ptr<TuneCandidate> compile(const TuneParams &p) override {
    int64_t id = p.at("id");
    {
      std::lock_guard<std::mutex> lock(M);
      CompileThreads.insert(std::this_thread::get_id());
    }
    std::this_thread::sleep_for(CompileDelay);
    if (CompileErrors.count(id))
      throw Error(CompileErrors.at(id));
    return std::make_unique<FakeKernel>(id);
  }
  KernelResources load(TuneCandidate &c) override {
    auto it = Resources.find(id(c));
    return it != Resources.end() ? it->second : KernelResources{256, 32, 0};
  }
  void resetBuffers() override {
    In = Pristine;
    std::fill(Out.begin(), Out.end(), NAN);
  }
  void launch(TuneCandidate &c) override {
    SawDirtyInput |= In != Pristine;
    for (float v : Out)
      SawStaleOutput |= !std::isnan(v);
    ++Launches[id(c)];
    auto it = Kernels.find(id(c));
    if (it != Kernels.end())
      it->second(In, Out);
    else
      for (size_t i = 0; i < In.size(); ++i)
        Out[i] = 2 * In[i];
  }
  double timeLaunch(TuneCandidate &c) override {
    launch(c);
    return Times.count(id(c)) ? Times.at(id(c)) : 1.0;
  }
  std::string checkOutputs() override {
    if (Check)
      return Check(*this);
    for (size_t i = 0; i < Out.size(); ++i)
      if (!(Out[i] == 2 * Pristine[i]) || In[i] != Pristine[i])
        return "element " + std::to_string(i) + " wrong";
    return {};
  }

private:
  static int64_t id(TuneCandidate &c) {
    return static_cast<FakeKernel &>(c).id;
  }
};

std::vector<TuneParams> ids(int n) {
  std::vector<TuneParams> c;
  for (int i = 0; i < n; ++i)
    c.push_back({{"id", i}});
  return c;
}

TuneResult tune(FakeTarget &t, int n, TuneOptions o = {}) {
  o.repetitions = 3;
  return autotune(t, ids(n), DeviceLimits{}, o);
}

TEST(Autotuner, FailedCompilesAreSkippedWithTheirReason) {
  FakeTarget t;
  t.CompileErrors[1] = "fused_ce_tvd_fwd.cu(12): error: identifier \"x\" is "
                       "undefined\n  int y = x;\n          ^";
  t.Times = {{0, 3.0}, {1, 0.1}, {2, 2.0}};
  TuneResult r = tune(t, 3);
  EXPECT_EQ(r.trials[1].status, TrialStatus::CompileError);
  EXPECT_EQ(r.trials[1].statusText(),
            "compile error: fused_ce_tvd_fwd.cu(12): error: identifier \"x\" "
            "is undefined");
  EXPECT_EQ(t.Launches[1], 0);
  EXPECT_EQ(r.winner, 2);
  EXPECT_EQ(r.trials[0].status, TrialStatus::Ok);
  EXPECT_DOUBLE_EQ(r.trials[0].ms, 3.0);
}

TEST(Autotuner, CandidatesOverTheDeviceLimitsAreSkipped) {
  FakeTarget t;
  t.Resources[0] = {2048, 16, 0};
  t.Resources[1] = {1024, 128, 0};
  t.Resources[2] = {256, 32, 300 * 1024};
  t.Resources[3] = {1024, 64, 48 * 1024}; // exactly at the register limit
  for (int i = 0; i < 3; ++i)
    t.Times[i] = 0.1;
  TuneResult r = tune(t, 4);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(r.trials[i].status, TrialStatus::ExceedsLimits) << i;
    EXPECT_EQ(t.Launches[i], 0) << i;
  }
  EXPECT_EQ(r.trials[0].statusText(), "exceeds threads per block: 2048 > 1024");
  EXPECT_EQ(r.trials[1].statusText(),
            "exceeds registers: 128 x 1024 threads = 131072 > 65536");
  EXPECT_EQ(r.trials[2].statusText(),
            "exceeds shared memory: 307200 > 232448 bytes");
  EXPECT_EQ(r.winner, 3);
}

TEST(Autotuner, AWrongCandidateCannotWinEvenIfFastest) {
  FakeTarget t;
  t.Kernels[1] = [](std::vector<float> &in, std::vector<float> &out) {
    for (size_t i = 0; i < in.size(); ++i)
      out[i] = 3 * in[i];
  };
  t.Times = {{0, 2.0}, {1, 0.5}, {2, 1.5}};
  TuneResult r = tune(t, 3);
  EXPECT_EQ(r.trials[1].status, TrialStatus::WrongResult);
  EXPECT_EQ(r.trials[1].statusText(), "wrong result: element 0 wrong");
  EXPECT_EQ(r.winner, 2);
}

TEST(Autotuner, LaunchErrorsAreRecordedNotFatal) {
  FakeTarget t;
  t.Kernels[0] = [](std::vector<float> &, std::vector<float> &) {
    throw Error("cuLaunchKernel failed: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES");
  };
  t.Times = {{0, 0.1}, {1, 1.0}};
  TuneResult r = tune(t, 2);
  EXPECT_EQ(r.trials[0].status, TrialStatus::LaunchError);
  EXPECT_EQ(r.winner, 1);
}

// An in-place kernel (increments its input) tuned over several candidates
// leaves exactly one run's result.
TEST(Autotuner, InPlaceInputsAreRestoredBeforeEveryLaunch) {
  auto increment = [](std::vector<float> &in, std::vector<float> &out) {
    for (size_t i = 0; i < in.size(); ++i)
      out[i] = in[i] += 1;
  };
  auto oneRunLater = [](const FakeTarget &t) -> std::string {
    for (size_t i = 0; i < t.In.size(); ++i)
      if (t.In[i] != t.Pristine[i] + 1 || t.Out[i] != t.Pristine[i] + 1)
        return "element " + std::to_string(i) + " wrong";
    return {};
  };
  FakeTarget t;
  t.Check = oneRunLater;
  for (int i = 0; i < 4; ++i)
    t.Kernels[i] = increment;
  t.Times = {{0, 4.0}, {1, 3.0}, {2, 1.0}, {3, 2.0}};
  TuneResult r = tune(t, 4);
  ASSERT_EQ(r.winner, 2);
  for (const Trial &trial : r.trials)
    EXPECT_EQ(trial.status, TrialStatus::Ok) << trial.statusText();
  EXPECT_FALSE(t.SawDirtyInput);

  FakeTarget single;
  single.Kernels[2] = increment;
  single.resetBuffers();
  FakeKernel winner(2);
  single.launch(winner);
  EXPECT_EQ(t.In, single.In); // bit-identical to one run of the winner
  EXPECT_EQ(t.Out, single.Out);
}

TEST(Autotuner, OutputsArePoisonedSoAPartialWriteFails) {
  FakeTarget t;
  // Candidate 1 writes only the first half; candidate 0 ran before it and
  // left the right values in the second half.
  t.Kernels[1] = [](std::vector<float> &in, std::vector<float> &out) {
    for (size_t i = 0; i < in.size() / 2; ++i)
      out[i] = 2 * in[i];
  };
  t.Times = {{0, 2.0}, {1, 1.0}};
  TuneResult r = tune(t, 2);
  EXPECT_FALSE(t.SawStaleOutput);
  EXPECT_EQ(r.trials[1].status, TrialStatus::WrongResult);
  EXPECT_EQ(r.winner, 0);
}

TEST(Autotuner, NoPassingCandidateMeansNoWinner) {
  FakeTarget t;
  t.CompileErrors = {{0, "boom"}, {1, "bang"}};
  TuneResult r = tune(t, 2);
  EXPECT_EQ(r.winner, -1);
  EXPECT_EQ(r.best(), nullptr);
}

TEST(Autotuner, CompilesRunInParallel) {
  FakeTarget t;
  t.CompileDelay = std::chrono::milliseconds(50);
  TuneOptions o;
  o.threads = 4;
  TuneResult r = tune(t, 8, o);
  EXPECT_GE(t.CompileThreads.size(), 2u);
  EXPECT_EQ(r.trials.size(), 8u);
}

TEST(KernelSpecTuning, CandidatesAndShapeBuckets) {
  const KernelSpec &fwd = findKernel("fused_ce_tvd_fwd");
  auto configs = fwd.candidateConfigs();
  size_t expected = 1;
  for (const ParamSpec &p : fwd.params)
    expected *= p.tuned ? p.candidates.size() : 1;
  EXPECT_EQ(configs.size(), expected);
  EXPECT_EQ(std::set<TuneParams>(configs.begin(), configs.end()).size(),
            expected);
  auto key = [&](int64_t bt, int64_t v) {
    return fwd.tuningShapeKey({{"BT", bt}, {"V", v}});
  };
  EXPECT_EQ(key(4096, 151936), "BT=4096,V=151936");
  EXPECT_EQ(key(3000, 151936), key(4096, 151936)); // BT: next power of two
  EXPECT_NE(key(4097, 151936), key(4096, 151936));
  EXPECT_NE(key(4096, 151937), key(4096, 151936)); // V: exact
  EXPECT_THROW(fwd.tuningShapeKey({{"BT", 1}}), Error);
}

//===----------------------------------------------------------------------===//
// Tuning database
//===----------------------------------------------------------------------===//

class TuningDatabaseTest : public ::testing::Test {
protected:
  void SetUp() override {
    Dir = fs::temp_directory_path() /
          ("tilejit-tuning-test-" + std::to_string(getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(Dir);
  }
  void TearDown() override { fs::remove_all(Dir); }

  static TuningKey key() {
    TuningKey k;
    k.kernel = "fused_ce_tvd_fwd";
    k.shape = "BT=4096,V=151936";
    k.dtype = "bf16";
    k.device = {"NVIDIA H200", 132, 9, 0, 13000};
    return k;
  }
  static TuningEntry entry() {
    TuningEntry e;
    e.best = {{"BLOCK_SIZE", 4096}, {"num_warps", 8}};
    Trial ok{e.best};
    ok.ms = 2.5;
    ok.resources = {256, 40, 0};
    Trial bad{{{"BLOCK_SIZE", 8192}, {"num_warps", 4}},
              TrialStatus::CompileError,
              "error: \"quoted\"\tand tabbed"};
    e.trials = {ok, bad};
    return e;
  }
  void write(const fs::path &p, const std::string &text) {
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
  }
  fs::path Dir;
};

// A kernel whose parameters are all untuned has one candidate, the empty
// config (KernelSpec::candidateConfigs): its entry stores and loads too.
TEST_F(TuningDatabaseTest, EmptyBestConfigRoundTrips) {
  TuningDatabase db(Dir);
  TuningEntry stored;
  Trial only{TuneParams{}};
  only.ms = 1.5;
  stored.trials = {only};
  ASSERT_TRUE(db.store(key(), stored));
  std::optional<TuningEntry> e = db.lookup(key());
  ASSERT_TRUE(e.has_value());
  EXPECT_TRUE(e->best.empty());
  ASSERT_EQ(e->trials.size(), 1u);
  EXPECT_DOUBLE_EQ(e->trials[0].ms, 1.5);
}

TEST_F(TuningDatabaseTest, RoundTrip) {
  TuningDatabase db(Dir);
  ASSERT_TRUE(db.store(key(), entry()));
  std::optional<TuningEntry> e = db.lookup(key());
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->best, entry().best);
  ASSERT_EQ(e->trials.size(), 2u);
  EXPECT_EQ(e->trials[0].params, entry().trials[0].params);
  EXPECT_DOUBLE_EQ(e->trials[0].ms, 2.5);
  EXPECT_EQ(e->trials[0].resources.registers, 40);
  EXPECT_EQ(e->trials[1].status, TrialStatus::CompileError);
  EXPECT_EQ(e->trials[1].detail, entry().trials[1].detail);
  // Published by rename: no temp files remain.
  int files = 0;
  for (const auto &f : fs::directory_iterator(Dir)) {
    EXPECT_EQ(f.path().extension(), ".json") << f.path();
    ++files;
  }
  EXPECT_EQ(files, 1);
}

TEST_F(TuningDatabaseTest, EveryKeyComponentSelectsItsOwnEntry) {
  TuningDatabase db(Dir);
  ASSERT_TRUE(db.store(key(), entry()));
  std::vector<std::pair<const char *, std::function<void(TuningKey &)>>>
      changes = {
          {"kernel", [](TuningKey &k) { k.kernel = "fused_ce_tvd_bwd"; }},
          {"shape", [](TuningKey &k) { k.shape = "BT=8192,V=151936"; }},
          {"dtype", [](TuningKey &k) { k.dtype = "f16"; }},
          {"gpu name", [](TuningKey &k) { k.device.name = "NVIDIA H100"; }},
          {"sm count", [](TuningKey &k) { k.device.smCount = 114; }},
          {"cc major", [](TuningKey &k) { k.device.ccMajor = 8; }},
          {"cc minor", [](TuningKey &k) { k.device.ccMinor = 9; }},
          {"driver", [](TuningKey &k) { k.device.driverVersion = 12080; }},
          {"tilejit", [](TuningKey &k) { k.tilejitVersion = "0.0.0-other"; }},
          {"kernel version",
           [](TuningKey &k) { k.kernelVersion = "other-hash"; }},
      };
  for (auto &[what, change] : changes) {
    TuningKey k = key();
    change(k);
    EXPECT_NE(db.pathFor(k), db.pathFor(key())) << what;
    EXPECT_FALSE(db.lookup(k).has_value()) << what;
  }
  EXPECT_TRUE(db.lookup(key()).has_value());
}

TEST_F(TuningDatabaseTest, AnExistingEntryIsUsedWithoutTuning) {
  TuningDatabase db(Dir);
  ASSERT_TRUE(db.store(key(), entry()));
  bool fromDb = false;
  TuningEntry e = lookupOrTune(
      db, key(),
      [] {
        ADD_FAILURE() << "tuned although an entry exists";
        return TuneResult{};
      },
      /*retune=*/false, &fromDb);
  EXPECT_TRUE(fromDb);
  EXPECT_EQ(e.best, entry().best);
}

TEST_F(TuningDatabaseTest, AMissIsTunedAndStored) {
  TuningDatabase db(Dir);
  FakeTarget t;
  t.Times = {{0, 2.0}, {1, 1.0}};
  int tunes = 0;
  auto run = [&] {
    ++tunes;
    return tune(t, 2);
  };
  bool fromDb = true;
  TuningEntry e = lookupOrTune(db, key(), run, false, &fromDb);
  EXPECT_FALSE(fromDb);
  EXPECT_EQ(e.best, (TuneParams{{"id", 1}}));
  e = lookupOrTune(db, key(), run, false, &fromDb);
  EXPECT_TRUE(fromDb);
  EXPECT_EQ(tunes, 1);
  lookupOrTune(db, key(), run, /*retune=*/true, &fromDb);
  EXPECT_FALSE(fromDb);
  EXPECT_EQ(tunes, 2);
}

TEST_F(TuningDatabaseTest, NoPassingCandidateThrowsAndStoresNothing) {
  TuningDatabase db(Dir);
  FakeTarget t;
  t.CompileErrors = {{0, "boom"}};
  try {
    lookupOrTune(db, key(), [&] { return tune(t, 1); });
    ADD_FAILURE() << "no error";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("id=0: compile error: boom"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(db.lookup(key()).has_value());
}

TEST_F(TuningDatabaseTest, CorruptFilesAreIgnoredAndReTuned) {
  TuningDatabase db(Dir);
  ASSERT_TRUE(db.store(key(), entry()));
  std::ifstream in(db.pathFor(key()));
  std::string good((std::istreambuf_iterator<char>(in)), {});
  TuningKey other = key();
  other.device.name = "NVIDIA H100";
  std::string fixed = good;
  fixed.replace(fixed.find("\"best\""), 6, "\"worst\"");
  std::vector<std::pair<const char *, std::string>> corruptions = {
      {"empty", ""},
      {"garbage", "\x7f"
                  "ELF\x01\x02"},
      {"truncated", good.substr(0, good.size() / 2)},
      {"not an object", "[1, 2, 3]"},
      {"wrong format", "{\"format\": 99}"},
      {"no best", fixed},
      {"best not integers",
       std::string(good).replace(good.find("4096", good.find("\"best\"")), 4,
                                 "\"fast\"")},
  };
  for (auto &[what, text] : corruptions) {
    write(db.pathFor(key()), text);
    EXPECT_FALSE(db.lookup(key()).has_value()) << what;
    FakeTarget t;
    bool fromDb = true;
    TuningEntry e = lookupOrTune(
        db, key(), [&] { return tune(t, 1); }, false, &fromDb);
    EXPECT_FALSE(fromDb) << what;
    EXPECT_TRUE(db.lookup(key()).has_value()) << what << ": re-tuned entry";
  }
  // An entry written for another key (a hash collision, a copied file).
  ASSERT_TRUE(db.store(other, entry()));
  fs::copy_file(db.pathFor(other), db.pathFor(key()),
                fs::copy_options::overwrite_existing);
  EXPECT_FALSE(db.lookup(key()).has_value());
}

TEST_F(TuningDatabaseTest, UnwritableOrDisabledNeverThrows) {
  write(Dir / "file", "x");
  TuningDatabase blocked(Dir / "file" / "tuning");
  EXPECT_FALSE(blocked.store(key(), entry()));
  EXPECT_FALSE(blocked.lookup(key()).has_value());
  TuningDatabase off{fs::path()};
  EXPECT_FALSE(off.enabled());
  EXPECT_FALSE(off.store(key(), entry()));
  EXPECT_FALSE(off.lookup(key()).has_value());
}

//===----------------------------------------------------------------------===//
// On a GPU: the real CE+TVD targets at a small shape
//===----------------------------------------------------------------------===//

TEST(AutotunerGpu, TunesCeTvdAndThenUsesTheEntry) {
  TILEJIT_SKIP_WITHOUT_GPU();
  fs::path dir = fs::temp_directory_path() /
                 ("tilejit-tune-gpu-" + std::to_string(getpid()));
  fs::remove_all(dir);
  setenv("TILEJIT_CACHE_DIR", dir.c_str(), 1);
  ref::CeTvdInputs in = ref::makeCeTvdInputs(64, 5000, DType::BF16, 7);
  std::vector<float> gCe, gTvd;
  defaultUpstream(in.BT, gCe, gTvd);
  CeTvdTuneOptions o;
  o.repetitions = 3;
  CeTvdTuneReport first = tuneCeTvdGpu(in, gCe, gTvd, o);
  EXPECT_FALSE(first.forward.fromDatabase);
  EXPECT_FALSE(first.backward.fromDatabase);
  for (const CeTvdTunedKernel *k : {&first.forward, &first.backward}) {
    int ok = 0;
    for (const Trial &t : k->entry.trials)
      ok += t.status == TrialStatus::Ok;
    EXPECT_GT(ok, 0) << k->key.kernel;
  }
  CeTvdTuneReport second = tuneCeTvdGpu(in, gCe, gTvd, o);
  EXPECT_TRUE(second.forward.fromDatabase);
  EXPECT_TRUE(second.backward.fromDatabase);
  EXPECT_EQ(second.forward.entry.best, first.forward.entry.best);

  CeTvdRunOptions run;
  run.useTuned = true;
  CeTvdOutputs out = runCeTvdGpu(in, gCe, gTvd, run);
  EXPECT_NE(out.forwardConfig.find("(tuned"), std::string::npos)
      << out.forwardConfig;
  EXPECT_TRUE(checkCeTvd(in, gCe, gTvd, out).passed);
  unsetenv("TILEJIT_CACHE_DIR");
  fs::remove_all(dir);
}

// The in-place loss + gradient kernel is tuned as an entry of its own, with
// the student restored before every candidate: a run that uses the entry
// gives the bits a run pinned to the winner gives.
TEST(AutotunerGpu, TunesTheInPlaceReducedKernel) {
  TILEJIT_SKIP_WITHOUT_GPU();
  fs::path dir = fs::temp_directory_path() /
                 ("tilejit-tune-inplace-" + std::to_string(getpid()));
  fs::remove_all(dir);
  setenv("TILEJIT_CACHE_DIR", dir.c_str(), 1);
  ref::CeTvdInputs in = ref::makeCeTvdInputs(64, 5000, DType::BF16, 7);
  CeTvdReducedOptions o;
  o.inPlace = true;
  o.iterations = 3;
  std::vector<std::string> best = tuneCeTvdReducedGpu(in, o, false);
  ASSERT_FALSE(best.empty());

  o.useTuned = true;
  CeTvdReducedOutputs tuned = runCeTvdReducedGpu(in, o);
  EXPECT_NE(tuned.config.find("(tuned"), std::string::npos) << tuned.config;
  o.useTuned = false;
  o.overrides = best;
  CeTvdReducedOutputs pinned = runCeTvdReducedGpu(in, o);
  EXPECT_EQ(tuned.grad, pinned.grad);
  EXPECT_EQ(tuned.loss, pinned.loss);
  EXPECT_TRUE(checkCeTvdReduced(in, o, pinned).passed);

  // The out-of-place kernel has no entry yet.
  CeTvdReducedOptions separate;
  separate.useTuned = true;
  separate.iterations = 1;
  EXPECT_NE(runCeTvdReducedGpu(in, separate).config.find("not tuned"),
            std::string::npos);
  unsetenv("TILEJIT_CACHE_DIR");
  fs::remove_all(dir);
}

} // namespace
