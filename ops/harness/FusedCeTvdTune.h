//===- FusedCeTvdTune.h - autotuning the CE+TVD kernels --------*- C++ -*-===//
//
// `tilejit tune fused_ce_tvd` and the tuned-config lookup of `tilejit run`.
// The forward and the backward kernel are tuned separately, each over its
// KernelSpec's candidates (runtime/Autotuner.h), on one set of device buffers:
//
//  - forward: a candidate's outputs are checked by running the default
//    backward after it and comparing everything on sampled rows with the fp64
//    reference (checkCeTvd), plus every output element is checked to be
//    finite (outputs are NaN-poisoned before each launch, so a config that
//    skips part of them fails). The winner's run leaves the saved state the
//    backward reads.
//  - backward: the forward's chosen config runs once first; then the same
//    check on the gradient.
// Neither kernel writes its inputs; the one in/out buffer, the forward's
// bad_target flag, is zeroed before every launch.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_OPS_HARNESS_FUSEDCETVDTUNE_H
#define TILEJIT_OPS_HARNESS_FUSEDCETVDTUNE_H

#include "kernels_spec/reference/Inputs.h"
#include "runtime/Autotuner.h"
#include "runtime/TuningDatabase.h"

#include <string>
#include <vector>

namespace tilejit {

/// The key of `kernel` (a CE+TVD row kernel) for in's shape and dtype on
/// `device`; `inPlace` for fused_ce_tvd_loss_grad writing its gradient over
/// the student (an entry of its own).
TuningKey ceTvdTuningKey(const std::string &kernel, const ref::CeTvdInputs &in,
                         const DeviceIdentity &device, bool inPlace = false);

/// The stored tuned config of `kernel` as NAME=VALUE overrides, or empty
/// when there is none (then *source says so; else it names the file).
std::vector<std::string> tunedCeTvdOverrides(const std::string &kernel,
                                             const ref::CeTvdInputs &in,
                                             const DeviceIdentity &device,
                                             std::string *source,
                                             bool inPlace = false);

struct CeTvdTuneOptions {
  std::string arch;       ///< empty = the device's own
  int repetitions = 20;   ///< timed launches per candidate
  int64_t checkRows = 16; ///< rows compared with the fp64 reference
  bool retune = false;    ///< tune even when an entry exists
  /// The forward kernel tuned (CeTvdRunOptions::forwardKernel; empty: the
  /// one chosen for the arch).
  std::string forwardKernel;
  std::function<void(const std::string &)> progress;
};

/// One kernel's outcome: the entry used and where it came from.
struct CeTvdTunedKernel {
  TuningKey key;
  TuningEntry entry;
  bool fromDatabase = false;
  std::string path; ///< the tuning file (empty when the database is off)
  double bytes = 0; ///< bytes moved per launch, for GB/s
};

struct CeTvdTuneReport {
  std::string device;
  CeTvdTunedKernel forward, backward;
};

/// Tunes (or looks up) both kernels on the GPU. Throws tilejit::Error when
/// there is no GPU or no candidate of a kernel passes.
CeTvdTuneReport tuneCeTvdGpu(const ref::CeTvdInputs &in,
                             const std::vector<float> &gCe,
                             const std::vector<float> &gTvd,
                             const CeTvdTuneOptions &options);

} // namespace tilejit

#endif // TILEJIT_OPS_HARNESS_FUSEDCETVDTUNE_H
