//===- Autotuner.cpp - candidate selection, and its CUDA helpers ----------===//
#include "runtime/Autotuner.h"

#include "runtime/CudaDriver.h"
#include "tilejit/Log.h"
#include "tilejit/Timing.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <iterator>
#include <thread>

namespace tilejit {

std::string formatParams(const TuneParams &params) {
  std::string s;
  for (const auto &[name, value] : params)
    s += (s.empty() ? "" : " ") + name + "=" + std::to_string(value);
  return s;
}

std::vector<std::string> paramOverrides(const TuneParams &params) {
  std::vector<std::string> out;
  for (const auto &[name, value] : params)
    out.push_back(name + "=" + std::to_string(value));
  return out;
}

std::string exceedsLimits(const KernelResources &r, const DeviceLimits &l) {
  auto n = [](int64_t v) { return std::to_string(v); };
  if (r.threads > l.maxThreadsPerBlock)
    return "exceeds threads per block: " + n(r.threads) + " > " +
           n(l.maxThreadsPerBlock);
  int64_t regs = int64_t(r.registers) * r.threads;
  if (regs > l.maxRegistersPerBlock)
    return "exceeds registers: " + n(r.registers) + " x " + n(r.threads) +
           " threads = " + n(regs) + " > " + n(l.maxRegistersPerBlock);
  if (r.sharedBytes > l.maxSharedBytes)
    return "exceeds shared memory: " + n(r.sharedBytes) + " > " +
           n(l.maxSharedBytes) + " bytes";
  return {};
}

namespace {
const char *const kStatusNames[] = {"ok", "compile error", "exceeds limits",
                                    "wrong result", "launch error"};
} // namespace

const char *trialStatusName(TrialStatus status) {
  return kStatusNames[static_cast<int>(status)];
}

bool parseTrialStatus(const std::string &name, TrialStatus &status) {
  for (int i = 0; i < int(std::size(kStatusNames)); ++i)
    if (name == kStatusNames[i]) {
      status = static_cast<TrialStatus>(i);
      return true;
    }
  return false;
}

std::string Trial::statusText() const {
  switch (status) {
  case TrialStatus::Ok:
    return "ok";
  case TrialStatus::ExceedsLimits:
    return detail; // "exceeds ...: ..."
  default:
    return std::string(trialStatusName(status)) + ": " + detail;
  }
}

namespace {

/// The first line of a (possibly long, multi-line) compiler message.
std::string firstLine(const std::string &text) {
  std::string line = text.substr(0, text.find('\n'));
  return line.size() > 200 ? line.substr(0, 200) + "..." : line;
}

/// Step 1: compiles every candidate on a pool of threads.
std::vector<std::unique_ptr<TuneCandidate>>
compileAll(TuningTarget &target, std::vector<Trial> &trials, unsigned threads) {
  std::vector<std::unique_ptr<TuneCandidate>> compiled(trials.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i; (i = next++) < trials.size();) {
      auto t0 = std::chrono::steady_clock::now();
      try {
        compiled[i] = target.compile(trials[i].params);
      } catch (const std::exception &e) {
        trials[i].status = TrialStatus::CompileError;
        trials[i].detail = firstLine(e.what());
      }
      trials[i].compileMs = msSince(t0);
    }
  };
  if (threads == 0)
    threads = std::max(1u, std::thread::hardware_concurrency());
  threads = std::min<unsigned>(threads, trials.size());
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t)
    pool.emplace_back(worker);
  worker();
  for (std::thread &t : pool)
    t.join();
  return compiled;
}

/// Runs `fn`; an exception marks the trial with `status` and returns false.
template <typename Fn> bool attempt(Trial &trial, TrialStatus status, Fn &&fn) {
  try {
    fn();
    return true;
  } catch (const std::exception &e) {
    trial.status = status;
    trial.detail = firstLine(e.what());
    return false;
  }
}

} // namespace

TuneResult autotune(TuningTarget &target,
                    const std::vector<TuneParams> &candidates,
                    const DeviceLimits &limits, const TuneOptions &options) {
  auto say = [&](const std::string &s) {
    if (options.progress)
      options.progress(s);
  };
  TuneResult result;
  for (const TuneParams &p : candidates)
    result.trials.push_back(Trial{p});
  std::vector<Trial> &trials = result.trials;

  say("compiling " + std::to_string(trials.size()) + " candidates");
  auto t0 = std::chrono::steady_clock::now();
  auto compiled = compileAll(target, trials, options.threads);
  say("compiled in " + std::to_string(int(msSince(t0))) + " ms");

  for (size_t i = 0; i < trials.size(); ++i) {
    Trial &t = trials[i];
    auto skip = [&] {
      say("  " + formatParams(t.params) + ": " + t.statusText());
      log()->info("autotune: skipping {}: {}", formatParams(t.params),
                  t.statusText());
      compiled[i].reset();
    };
    if (t.status != TrialStatus::Ok) {
      skip();
      continue;
    }
    TuneCandidate &c = *compiled[i];
    // Steps 2 and 3: fits the device, and computes the right thing.
    if (!attempt(t, TrialStatus::CompileError,
                 [&] { t.resources = target.load(c); })) {
      t.detail = "load: " + t.detail;
      skip();
      continue;
    }
    if (std::string why = exceedsLimits(t.resources, limits); !why.empty()) {
      t.status = TrialStatus::ExceedsLimits;
      t.detail = why;
      skip();
      continue;
    }
    std::string wrong;
    if (!attempt(t, TrialStatus::LaunchError, [&] {
          target.resetBuffers();
          target.launch(c);
          wrong = target.checkOutputs();
        })) {
      skip();
      continue;
    }
    if (!wrong.empty()) {
      t.status = TrialStatus::WrongResult;
      t.detail = wrong;
      skip();
      continue;
    }
    // Step 4: the median of repeated runs, each from restored inputs.
    std::vector<double> ms;
    if (!attempt(t, TrialStatus::LaunchError, [&] {
          for (int w = 0; w < options.warmup; ++w) {
            target.resetBuffers();
            target.launch(c);
          }
          for (int r = 0; r < std::max(1, options.repetitions); ++r) {
            target.resetBuffers();
            ms.push_back(target.timeLaunch(c));
          }
        })) {
      skip();
      continue;
    }
    t.ms = medianOf(ms);
    if (!std::isfinite(t.ms)) {
      t.status = TrialStatus::LaunchError;
      t.detail = "no valid time";
      skip();
      continue;
    }
    say("  " + formatParams(t.params) + ": " + std::to_string(t.ms) + " ms");
    if (result.winner < 0 || t.ms < trials[result.winner].ms)
      result.winner = static_cast<int>(i);
  }

  // Step 5: leave the buffers as one run of the winner alone leaves them.
  if (result.winner >= 0) {
    target.resetBuffers();
    target.launch(*compiled[result.winner]);
    say("winner: " + formatParams(trials[result.winner].params));
  } else {
    say("no candidate passed");
  }
  return result;
}

//===----------------------------------------------------------------------===//
// CUDA helpers
//===----------------------------------------------------------------------===//

DeviceIdentity deviceIdentity(const cuda::Device &device) {
  DeviceIdentity id;
  id.name = device.name();
  id.smCount = device.smCount();
  std::tie(id.ccMajor, id.ccMinor) = device.computeCapability();
  id.driverVersion = device.driverVersion();
  return id;
}

DeviceLimits deviceLimits(const cuda::Device &device) {
  DeviceLimits l;
  l.maxThreadsPerBlock = device.maxThreadsPerBlock();
  l.maxRegistersPerBlock = device.maxRegistersPerBlock();
  l.maxSharedBytes = device.maxSharedMemoryPerBlockOptin();
  return l;
}

L2FlushTimer::L2FlushTimer(const cuda::Device &device)
    : Scratch(std::make_unique<cuda::DeviceBuffer>(
          2 * static_cast<size_t>(std::max(device.l2CacheBytes(), 1 << 20)))) {}

L2FlushTimer::~L2FlushTimer() = default;

double L2FlushTimer::timeMs(const std::function<void()> &launch) {
  Scratch->memset(++Fill); // a write of 2x L2: evicts every line there
  return cuda::timeMs(launch);
}

} // namespace tilejit
