//===- TunedConfig.h - a kernel's entry in the tuning database --*- C++ -*-===//
//
// What `tilejit tune` stores for a kernel spec and what a tuned compile
// (KernelOptions::tuned) looks up: one entry per kernel, shape (the spec's
// tuneKey sizes), dtype and GPU, valid for one compiler source and one set
// of candidate values and one version of the spec (specHash).
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_OPS_TUNEDCONFIG_H
#define TILEJIT_OPS_TUNEDCONFIG_H

#include "runtime/Autotuner.h"
#include "runtime/TuningDatabase.h"
#include "tilejit/Kernel.h"
#include "tilejit/KernelSpec.h"

#include <map>
#include <string>
#include <vector>

namespace tilejit {

/// A hash of the tile IR `spec` builds with its defaults for `dtype` and
/// `shape` (computed once per process): editing a spec changes it, so
/// tuning entries of the old version are not served.
std::string specHash(const KernelSpec &spec, DType dtype,
                     const std::map<std::string, int64_t> &shape);

/// The key of `spec` for `shape` (only its tuneKey sizes count) and `dtype`
/// on `device`.
TuningKey kernelTuningKey(const KernelSpec &spec, DType dtype,
                          const std::map<std::string, int64_t> &shape,
                          const DeviceIdentity &device);

/// The stored winner for `key` as NAME=VALUE overrides, or empty when there
/// is none; *source names the file, or says why there is none.
std::vector<std::string> tunedOverrides(const TuningKey &key,
                                        std::string *source);

/// The stored config of `spec` as NAME=VALUE overrides, or empty when there
/// is none; *source names the file, or says why there is none.
std::vector<std::string>
tunedOverrides(const KernelSpec &spec, DType dtype,
               const std::map<std::string, int64_t> &shape,
               const DeviceIdentity &device, std::string *source);

/// The identity of the GPU current on this thread (read once per GPU).
const DeviceIdentity &currentGpuIdentity();

/// tunedOverrides for the current GPU; without one, empty, with *source
/// saying so. Throws tilejit::Error when `shape` lacks a tuning size of
/// `spec`, GPU or not.
std::vector<std::string>
tunedOverridesHere(const KernelSpec &spec, DType dtype,
                   const std::map<std::string, int64_t> &shape,
                   std::string *source);

/// What the tuner checks against the device's limits for a kernel that
/// compileForGpu() has loaded: its threads, registers, and static plus
/// dynamic shared memory per program.
KernelResources tuningResources(const Kernel &kernel);

} // namespace tilejit

#endif // TILEJIT_OPS_TUNEDCONFIG_H
