//===- LinearCeTuning.cpp - choices the linear CE makes by timing ---------===//
#include "ops/LinearCeTuning.h"
#include "ops/TunedConfig.h"
#include "tilejit/KernelSpec.h"

#include "tilejit/Compiler.h"
#include "tilejit/Timing.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <random>

namespace tilejit {

cublaslt::ChoiceStore gemmChoiceStore(const cuda::Device &device, DType dtype) {
  auto keyFor = [id = deviceIdentity(device), dtype,
                 lib = cublaslt::version()](const std::string &problem, int n) {
    TuningKey key;
    key.kernel = "cublaslt_gemm";
    key.shape = problem;
    key.dtype = dtypeName(dtype);
    key.device = id;
    key.kernelVersion = "cublasLt " + lib + ", first " + std::to_string(n) +
                        " heuristic results";
    return key;
  };
  TuningDatabase db = TuningDatabase::fromEnvironment();
  cublaslt::ChoiceStore store;
  store.lookup = [db, keyFor](const std::string &problem, int n) {
    std::optional<TuningEntry> e = db.lookup(keyFor(problem, n));
    auto it = e ? e->best.find("ALGO_INDEX") : TuneParams::const_iterator();
    return e && it != e->best.end() ? int(it->second) : -1;
  };
  store.store = [db, keyFor](const std::string &problem, int n, int best,
                             const std::vector<double> &ms) {
    TuningEntry e;
    e.best = {{"ALGO_INDEX", best}};
    for (size_t i = 0; i < ms.size(); ++i) {
      Trial t;
      t.params = {{"ALGO_INDEX", int64_t(i)}};
      if (std::isfinite(ms[i])) {
        t.ms = ms[i];
      } else {
        t.status = TrialStatus::LaunchError;
        t.detail = "cuBLASLt reported the algorithm unusable for the problem";
      }
      e.trials.push_back(t);
    }
    db.store(keyFor(problem, n), e);
  };
  return store;
}

GemmPaths::GemmPaths(const cuda::Device &device, DType dtype)
    : db_(TuningDatabase::fromEnvironment()) {
  base_.kernel = "fused_linear_ce_gemm_path";
  base_.dtype = dtypeName(dtype);
  base_.device = deviceIdentity(device);
  base_.kernelVersion = std::string(compilerSourceHash()) + ", cublasLt " +
                        cublaslt::version() + ", lce_gemm " +
                        specHash(findKernel("lce_gemm"), dtype, {}) +
                        ", lce_logits " +
                        specHash(findKernel("lce_logits"), dtype, {}) +
                        ", lce_logits_grad " +
                        specHash(findKernel("lce_logits_grad"), dtype, {});
}

bool GemmPaths::useDsl(const std::string &problem, double flop,
                       const std::function<void()> &cublas,
                       const std::function<void()> &dsl, CUstream stream,
                       bool mayTime, std::string cublasName,
                       std::string dslName) {
  used_.insert(problem);
  auto known = chosen_.find(problem);
  if (known != chosen_.end())
    return known->second.dsl;
  TuningKey key = base_;
  key.shape = problem;
  Choice c;
  c.flop = flop;
  c.cublasName = std::move(cublasName);
  c.dslName = std::move(dslName);
  if (std::optional<TuningEntry> e = db_.lookup(key);
      e && e->best.count("DSL_GEMM")) {
    c.dsl = e->best.at("DSL_GEMM") != 0;
    c.stored = true;
  } else if (mayTime) {
    auto time = [&](const std::function<void()> &run) {
      run(); // compiles, or picks cuBLASLt's algorithm
      return medianOf(cuda::timeEachMs(run, 3, stream));
    };
    c.cublasLtMs = time(cublas);
    c.lceGemmMs = time(dsl);
    c.dsl = c.lceGemmMs < 0.95 * c.cublasLtMs;
    TuningEntry e;
    e.best = {{"DSL_GEMM", c.dsl}};
    for (auto [path, ms] : {std::pair{0, c.cublasLtMs}, {1, c.lceGemmMs}}) {
      Trial t;
      t.params = {{"DSL_GEMM", path}};
      t.ms = ms;
      e.trials.push_back(t);
    }
    db_.store(key, e);
    timedNow_.insert(problem);
  }
  // An untimed default is not kept: a later call that may time does.
  if (c.stored || timedNow_.count(problem))
    chosen_.emplace(problem, c);
  return c.dsl;
}

void GemmPaths::report(ops::LinearCePlanInfo &out) const {
  for (const std::string &problem : used_) {
    ++out.gemmPathProblems;
    auto chosen = chosen_.find(problem);
    if (chosen == chosen_.end())
      continue; // not timed yet: cuBLASLt
    const Choice &c = chosen->second;
    out.gemmPathsOnDsl += c.dsl;
    if (timedNow_.count(problem))
      out.gemmPathTimings.push_back(
          {problem, c.cublasLtMs, c.lceGemmMs, c.flop, c.cublasName,
           c.dslName});
    else // from the tuning database, or chosen earlier in this process
      ++out.gemmPathsFromStore;
  }
}

// Rounds time each candidate in turn, in a new order each round, so that
// drift in the GPU's clocks falls on all alike. Each candidate first runs
// untimed for about 200 ms (at least two steps; in round 1 one more, which
// makes its GEMM choices), then 3 steps are timed back to back, as the
// bench times them (timeEachMs: the host's launches overlap the GPU's
// work). A step timed while the host ran ahead, against one timed from an
// idle GPU, favoured chunks of many launches. After the first round,
// candidates slower than 1.1x the best are dropped; the winner is one of
// the last round's.
TuneResult timeChunkCandidates(const std::vector<int64_t> &candidates,
                               const std::function<void(int64_t)> &setChunk,
                               const std::function<void()> &step,
                               CUstream stream) {
  std::vector<std::vector<double>> ms(candidates.size());
  std::vector<size_t> order(candidates.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::mt19937 rng(1);
  for (int round = 0; round < 3; ++round) {
    std::shuffle(order.begin(), order.end(), rng);
    for (size_t i : order) {
      setChunk(candidates[i]);
      if (round == 0)
        step(); // GEMM choices and compiles: outside `once`
      double once = cuda::timeMs(step, stream);
      for (int w = 1; w < std::max(2, int(200 / once)); ++w)
        step();
      for (double t : cuda::timeEachMs(step, 3, stream))
        ms[i].push_back(t);
    }
    if (round == 0) {
      double best = std::numeric_limits<double>::infinity();
      for (auto &m : ms)
        best = std::min(best, medianOf(m));
      llvm::erase_if(order,
                     [&](size_t i) { return medianOf(ms[i]) > 1.1 * best; });
    }
  }
  TuneResult r;
  for (size_t i = 0; i < candidates.size(); ++i) {
    Trial t;
    t.params = {{"CHUNK_ROWS", candidates[i]}};
    t.ms = medianOf(ms[i]);
    r.trials.push_back(t);
    if (llvm::is_contained(order, i) &&
        (r.winner < 0 || t.ms < r.trials[r.winner].ms))
      r.winner = int(i);
  }
  return r;
}

} // namespace tilejit
