//===- TuningDatabase.h - tuned configs per GPU and shape ------*- C++ -*-===//
//
// Tuning takes seconds; a tuned config is valid only for the GPU, driver,
// tilejit version, shape bucket, dtype, kernel sources and candidate set it
// was measured with. So each entry is one small JSON file named by a hash of
// all of those,
//
//   <cacheDirectory()>/tuning/<kernel>-<16 hex digits>.json
//   {"format": 1, "key": {"kernel", "shape", "dtype", "gpu", "sm_count",
//    "compute_capability", "driver", "tilejit", "kernel_version"},
//    "best": {"BLOCK_SIZE": ...},
//    "trials": [{"params", "status", "detail", "ms", "compile_ms",
//                "threads", "registers", "shared_bytes"}, ...]}
//
// and the full key is stored inside and compared on read (a hash collision
// or a hand-edited file is a miss, not a wrong config). One file per entry
// means concurrent tuners of different keys never rewrite each other's
// results; writes go to a temp file in the same directory and are renamed
// into place, so a reader sees a whole entry or none. A file that does not
// parse or does not match is ignored with a warning and re-tuned, never a
// crash. No MLIR and no CUDA here.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_RUNTIME_TUNINGDATABASE_H
#define TILEJIT_RUNTIME_TUNINGDATABASE_H

#include "runtime/Autotuner.h"

#include <filesystem>
#include <optional>

namespace tilejit {

/// Everything a tuned config depends on.
struct TuningKey {
  std::string kernel;
  std::string shape; ///< KernelSpec::tuningShapeKey, e.g. "BT=4096,V=151936"
  std::string dtype;
  DeviceIdentity device;
  std::string tilejitVersion = TILEJIT_VERSION;
  /// The compiler's and kernels' source hash plus the kernel's parameter
  /// space: a stored winner is stale once the code or the candidates change.
  std::string kernelVersion;

  /// Canonical one-line form, hashed for the file name.
  std::string str() const;
};

/// A stored entry: the winner and the table it was chosen from.
struct TuningEntry {
  TuneParams best;
  std::vector<Trial> trials;
};

class TuningDatabase {
public:
  /// Entries live in `dir`; an empty `dir` disables the database (lookups
  /// miss, stores do nothing).
  explicit TuningDatabase(std::filesystem::path dir);
  /// cacheDirectory()/"tuning", or disabled when TILEJIT_CACHE=0.
  static TuningDatabase fromEnvironment();

  bool enabled() const { return !Dir.empty(); }
  const std::filesystem::path &directory() const { return Dir; }
  std::filesystem::path pathFor(const TuningKey &key) const;

  /// The entry for `key`; nullopt when absent, unreadable or not matching.
  std::optional<TuningEntry> lookup(const TuningKey &key) const;
  /// Publishes atomically (temp file + rename). Returns false, with a
  /// warning, when the directory is not writable; never throws for that.
  bool store(const TuningKey &key, const TuningEntry &entry) const;

private:
  std::filesystem::path Dir;
};

/// The config for `key`: the stored entry when there is one (no tuning)
/// unless `retune`, else tune()'s winner, stored. `*fromDatabase` (if given)
/// says which. Throws tilejit::Error when no candidate passes.
TuningEntry lookupOrTune(const TuningDatabase &db, const TuningKey &key,
                         const std::function<TuneResult()> &tune,
                         bool retune = false, bool *fromDatabase = nullptr);

} // namespace tilejit

#endif // TILEJIT_RUNTIME_TUNINGDATABASE_H
