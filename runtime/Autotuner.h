//===- Autotuner.h - pick the fastest correct config -----------*- C++ -*-===//
//
// The best BLOCK_SIZE / num_warps depends on the GPU, the shape and the
// dtype, so tilejit measures instead of guessing, the way Triton's and
// TileLang's autotuners do, and keeps the failures those have had out:
//
//  1. compile every candidate in parallel (each DSL build owns its MLIR
//     context and NVRTC is thread-safe); a compile error skips the candidate
//     with the error as its reason;
//  2. load each one and skip those over the device's limits (threads per
//     block, registers x threads, shared memory) with the numbers;
//  3. run each once and check its output against a reference: a wrong
//     candidate cannot win however fast it is;
//  4. time the survivors with CUDA events, the L2 flushed before each run;
//  5. run the winner once more, so the target's buffers hold exactly what a
//     run with the chosen config alone produces.
// Before every launch (check, warm-up, timed) the tuner asks the target to
// restore the inputs its kernel writes and to poison (NaN-fill) its outputs:
// an in-place kernel never sees an earlier trial's result, and a config that
// writes only part of the output cannot pass on an earlier trial's data.
//
// The selection logic here never calls CUDA: a TuningTarget does the compiles
// and launches, so tests drive it with fakes and no GPU. The CUDA helpers at
// the end (device identity and limits, an L2-flushing event timer) are what
// real targets use. Results persist through TuningDatabase.h.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_RUNTIME_AUTOTUNER_H
#define TILEJIT_RUNTIME_AUTOTUNER_H

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace tilejit {
namespace cuda {
class Device;
class DeviceBuffer;
} // namespace cuda

/// One configuration: compile-time parameter name -> value.
using TuneParams = std::map<std::string, int64_t>;
/// "BLOCK_SIZE=4096 num_warps=8".
std::string formatParams(const TuneParams &params);
/// {"BLOCK_SIZE=4096", "num_warps=8"}: KernelSpec::config's overrides.
std::vector<std::string> paramOverrides(const TuneParams &params);

/// What a loaded kernel uses per block.
struct KernelResources {
  int threads = 0;
  int registers = 0; ///< per thread
  int sharedBytes = 0;
};

/// What one block may use on the device.
struct DeviceLimits {
  int maxThreadsPerBlock = 1024;
  int maxRegistersPerBlock = 64 * 1024;
  int maxSharedBytes = 227 * 1024; ///< opt-in maximum
};

/// Empty when `r` fits in `limits`, else e.g. "exceeds registers: 128 x 1024
/// threads = 131072 > 65536".
std::string exceedsLimits(const KernelResources &r, const DeviceLimits &limits);

/// A compiled candidate, owned by the tuner, meaningful to its target only.
class TuneCandidate {
public:
  virtual ~TuneCandidate() = default;
};

/// The GPU side of tuning one kernel on one set of buffers.
class TuningTarget {
public:
  virtual ~TuningTarget() = default;
  /// Builds and compiles `params`. Called from several threads at once.
  /// Throws (any std::exception) when the candidate does not compile.
  virtual std::unique_ptr<TuneCandidate> compile(const TuneParams &params) = 0;
  /// Loads a compiled candidate (calling thread) and reports its resources.
  virtual KernelResources load(TuneCandidate &candidate) = 0;
  /// Restores every input the kernel writes and NaN-fills every output.
  virtual void resetBuffers() = 0;
  /// Launches once and waits for it.
  virtual void launch(TuneCandidate &candidate) = 0;
  /// Milliseconds of one launch with the L2 flushed before it.
  virtual double timeLaunch(TuneCandidate &candidate) = 0;
  /// Checks the outputs of the last launch: empty when right, else why not.
  virtual std::string checkOutputs() = 0;
};

enum class TrialStatus {
  Ok,
  CompileError,
  ExceedsLimits,
  WrongResult,
  LaunchError
};
/// "ok", "compile error", "exceeds limits", "wrong result", "launch error".
const char *trialStatusName(TrialStatus status);
/// Inverse of trialStatusName; false for anything else.
bool parseTrialStatus(const std::string &name, TrialStatus &status);

/// What happened to one candidate.
struct Trial {
  TuneParams params;
  TrialStatus status = TrialStatus::Ok;
  std::string detail; ///< the reason when status is not Ok
  double ms = 0;      ///< median of the timed launches (Ok only)
  double compileMs = 0;
  KernelResources resources;
  /// "ok", "compile error: ...", "exceeds registers: ...", "wrong result: ...".
  std::string statusText() const;
};

struct TuneOptions {
  int warmup = 2;
  int repetitions = 10; ///< timed launches per candidate (median is kept)
  unsigned threads = 0; ///< parallel compiles; 0 = hardware concurrency
  std::function<void(const std::string &)> progress; ///< e.g. to stderr
};

struct TuneResult {
  std::vector<Trial> trials; ///< one per candidate, in candidate order
  int winner = -1;           ///< index into trials; -1 when none passed
  const Trial *best() const { return winner < 0 ? nullptr : &trials[winner]; }
};

/// Runs steps 1-5 above. When no candidate passes, winner is -1 and the
/// target's outputs are those of the last launch (poisoned or wrong).
TuneResult autotune(TuningTarget &target,
                    const std::vector<TuneParams> &candidates,
                    const DeviceLimits &limits, const TuneOptions &options);

//===----------------------------------------------------------------------===//
// CUDA helpers for targets
//===----------------------------------------------------------------------===//

/// What identifies a GPU in a tuning key.
struct DeviceIdentity {
  std::string name;
  int smCount = 0;
  int ccMajor = 0, ccMinor = 0;
  int driverVersion = 0;
};
DeviceIdentity deviceIdentity(const cuda::Device &device);
DeviceLimits deviceLimits(const cuda::Device &device);

/// Times launches with CUDA events on the legacy default stream; before each
/// it overwrites a buffer twice the L2 size so every run starts from HBM.
class L2FlushTimer {
public:
  explicit L2FlushTimer(const cuda::Device &device);
  ~L2FlushTimer();
  double timeMs(const std::function<void()> &launch);

private:
  std::unique_ptr<cuda::DeviceBuffer> Scratch;
  uint8_t Fill = 0;
};

} // namespace tilejit

#endif // TILEJIT_RUNTIME_AUTOTUNER_H
