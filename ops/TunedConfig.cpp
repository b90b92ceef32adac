//===- TunedConfig.cpp - a kernel's entry in the tuning database ----------===//
#include "ops/TunedConfig.h"

#include "runtime/Autotuner.h"
#include "runtime/CudaDriver.h"
#include "tilejit/Compiler.h"
#include "tilejit/Error.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/xxhash.h"

#include <map>
#include <mutex>

namespace tilejit {

std::string specHash(const KernelSpec &spec, DType dtype,
                     const std::map<std::string, int64_t> &shape) {
  // By the spec object too: a spec built by the caller may share a name
  // with a registered one.
  std::string key = spec.name + "@" +
                    std::to_string(reinterpret_cast<uintptr_t>(&spec)) + "|" +
                    dtypeName(dtype) + "|" + spec.tuningShapeKey(shape);
  static std::mutex mutex;
  static std::map<std::string, std::string> hashes;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (auto it = hashes.find(key); it != hashes.end())
      return it->second;
  }
  // Built for the bucket's own size, so every shape of a bucket (one
  // tuning entry) hashes alike.
  std::map<std::string, int64_t> bucket = shape;
  for (const TuneKeyArg &arg : spec.tuneKey)
    if (arg.pow2Bucket && bucket.count(arg.name) && bucket[arg.name] > 0)
      bucket[arg.name] = int64_t(llvm::PowerOf2Ceil(bucket[arg.name]));
  std::string hash;
  try {
    hash = llvm::utohexstr(
        llvm::xxh3_64bits(spec.build(spec.config(dtype, {}, bucket)).str()));
  } catch (const Error &) {
    hash = "none"; // the defaults do not build for this shape
  }
  std::lock_guard<std::mutex> lock(mutex);
  return hashes.emplace(key, hash).first->second;
}

TuningKey kernelTuningKey(const KernelSpec &spec, DType dtype,
                          const std::map<std::string, int64_t> &shape,
                          const DeviceIdentity &device) {
  TuningKey key;
  key.kernel = spec.name;
  key.shape = spec.tuningShapeKey(shape);
  key.dtype = dtypeName(dtype);
  key.device = device;
  // A winner for another compiler or another version of the kernel, or
  // among other candidates than today's, is not today's winner.
  key.kernelVersion = compilerSourceHash();
  key.kernelVersion += ";spec " + specHash(spec, dtype, shape);
  for (const ParamSpec &p : spec.params) {
    key.kernelVersion += ";" + p.name + "=";
    for (int64_t c : p.candidates)
      key.kernelVersion += std::to_string(c) + ",";
  }
  return key;
}

std::vector<std::string>
tunedOverrides(const KernelSpec &spec, DType dtype,
               const std::map<std::string, int64_t> &shape,
               const DeviceIdentity &device, std::string *source) {
  return tunedOverrides(kernelTuningKey(spec, dtype, shape, device), source);
}

std::vector<std::string> tunedOverrides(const TuningKey &key,
                                        std::string *source) {
  TuningDatabase db = TuningDatabase::fromEnvironment();
  if (std::optional<TuningEntry> e = db.lookup(key)) {
    *source = "tuned, " + db.pathFor(key).string();
    return paramOverrides(e->best);
  }
  *source = db.enabled() ? "default; not tuned for " + key.shape + " " +
                               key.dtype + " on this GPU"
                         : "default; TILEJIT_CACHE=0";
  return {};
}

const DeviceIdentity &currentGpuIdentity() {
  static std::mutex mutex;
  static std::map<int, DeviceIdentity> ids; // by ordinal, read once each
  int ordinal = cuda::Device::currentOrdinal();
  std::lock_guard<std::mutex> lock(mutex);
  auto it = ids.find(ordinal);
  if (it == ids.end())
    it = ids.emplace(ordinal, deviceIdentity(cuda::Device::open(ordinal)))
             .first;
  return it->second;
}

std::vector<std::string>
tunedOverridesHere(const KernelSpec &spec, DType dtype,
                   const std::map<std::string, int64_t> &shape,
                   std::string *source) {
  spec.tuningShapeKey(shape); // a missing size is the caller's error anywhere
  const DeviceIdentity *device;
  try {
    device = &currentGpuIdentity();
  } catch (const Error &) {
    *source = "default; no usable GPU to look up a tuned config for";
    return {};
  }
  return tunedOverrides(spec, dtype, shape, *device, source);
}

KernelResources tuningResources(const Kernel &kernel) {
  KernelUsage u = kernel.resources();
  return {u.threads, u.registers, u.staticSharedBytes + u.dynamicSharedBytes};
}

} // namespace tilejit
