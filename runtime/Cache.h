//===- Cache.h - where compiled kernels are kept ----------------*- C++ -*-===//
//
// A compile costs hundreds of milliseconds (MLIR + NVRTC); a disk hit about a
// millisecond (print the IR, hash, read and check six files), and a lookup by
// key in the same process tens of nanoseconds.
//
// Location (cacheDirectory()): $TILEJIT_CACHE_DIR if set, else
// $XDG_CACHE_HOME/tilejit, else ~/.cache/tilejit. Inside it:
//   kernels/<key>/   one compiled kernel (KernelCache, below)
//   aliases/<hash>   the key of the kernel built from some unoptimized IR
//                    and that kernel's request digest (lets a fresh process
//                    skip the tile passes on a hit)
//   tuning/          the autotuner's database (owned by the autotuner)
// TILEJIT_CACHE=0 turns the disk cache off: nothing is read or written there
// (the in-process cache stays: it cannot be stale). TILEJIT_CACHE_MAX_BYTES
// bounds kernels/ (default 1 GiB; least recently used entries go first).
//
// Key: BLAKE3-256 over a canonical serialization of named fields (CacheKey).
// compileCached() (tilejit/CachedCompile.h) fills in everything that can
// change the binary; see runtime/CachedCompile.cpp for the list.
//
// Entry format: a directory kernels/<64 hex key>/ holding tile.mlir,
// simt.mlir, kernel.cu, kernel.ptx, kernel.cubin and meta.json (kernel name,
// params, arch, versions, threads, resource usage read from the CUBIN, key
// fields, the size of every file, and one BLAKE3 checksum over the key, the
// kernel name, the thread count and every file). A directory rather
// than one file so the parts can be inspected with ordinary tools (cuobjdump
// kernel.cubin, less kernel.cu).
//
// Concurrency and crashes, without locks on the read or write path:
//  - a writer fills .tmp-<key>-<pid>-<n>/ in kernels/ (same file system) and
//    renames it to <key>/; rename is atomic, so readers see a whole entry or
//    none. If <key>/ already exists the writer lost a race: that is a hit; its
//    temp directory is removed (a failed removal is only logged).
//  - a reader checks meta.json's key, format, sizes and checksum; anything
//    torn, truncated or mixed is a miss: the entry is renamed to .trash-...
//    (atomic, so two readers never fight over it), removed, and rebuilt.
//  - no fsync: after a power loss a file may be torn, and the checksum
//    catches that like any other damage.
//  - eviction (after a store, when kernels/ is over the limit) takes an
//    advisory lock on kernels/.evict.lock with llvm::sys::fs::tryLockFile so
//    only one process evicts at a time; others skip it (threads of one
//    process may evict together: removal is atomic, so that is safe). Leftover
//    .tmp-/.trash- directories older than ten minutes (killed writers) go at
//    the same time.
//  - last use = meta.json's mtime, set when an entry is loaded from disk or
//    published (once per process per kernel; in-process hits touch nothing).
//
// Unwritable directory: the first failed write logs one warning and the cache
// keeps working in memory only for the rest of the process.
//
// No MLIR here: this file is linked by tools that must start fast.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_RUNTIME_CACHE_H
#define TILEJIT_RUNTIME_CACHE_H

#include "runtime/CudaDriver.h"
#include "tilejit/Compiler.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace tilejit {

/// $TILEJIT_CACHE_DIR, else $XDG_CACHE_HOME/tilejit, else ~/.cache/tilejit
/// (empty variables count as unset). Not created here.
std::filesystem::path cacheDirectory();

/// False when TILEJIT_CACHE=0 (also "false", "off", "no"): no disk caching.
bool cacheEnabled();

/// TILEJIT_CACHE_MAX_BYTES (plain bytes, or with a K/M/G suffix for KiB/MiB/
/// GiB; 0 means no limit), default 1 GiB. Bounds the kernels/ directory.
uint64_t cacheMaxBytes();

/// Named key fields, serialized canonically (sorted by name, every name and
/// value length-prefixed, so no two field sets share a byte string) and
/// hashed with BLAKE3-256. Adding the same name twice throws tilejit::Error.
class CacheKey {
public:
  CacheKey &add(const std::string &name, const std::string &value);
  CacheKey &add(const std::string &name, int64_t value);

  /// 64 lower-case hex digits.
  std::string hex() const;
  /// The exact bytes that are hashed (for tests and debugging).
  std::string canonical() const;
  const std::map<std::string, std::string> &fields() const { return Fields; }

private:
  std::map<std::string, std::string> Fields;
};

/// What `tilejit cache list|verify` reports about one entry on disk.
struct CacheEntryInfo {
  std::string key;
  std::filesystem::path path;
  std::string kernel, arch;
  uint64_t bytes = 0;
  int64_t lastUseNs = 0; ///< meta.json's mtime, ns since the Unix epoch
  std::string requestDigest; ///< CompiledKernel::requestDigest
  bool valid = false;
  std::string problem; ///< why it is not valid
};

/// What `tilejit cache verify` reports about one alias file.
struct CacheAliasInfo {
  std::string alias, key;
  bool valid = false;
  std::string problem; ///< why it is not valid
};

/// Kernels by key: in memory, and on disk under <dir>/kernels unless disk
/// caching is off. Thread-safe; one instance per directory per process is
/// enough (global() is the one compileCached() uses).
class KernelCache {
public:
  /// `dir` is the cache root (kernels/ goes inside). An empty `dir` or
  /// `useDisk` false: memory only. `maxBytes` 0: no size limit.
  KernelCache(std::filesystem::path dir, bool useDisk, uint64_t maxBytes);
  /// A cache configured from the environment (cacheDirectory(),
  /// cacheEnabled(), cacheMaxBytes()).
  static std::unique_ptr<KernelCache> fromEnvironment();
  /// The process-wide fromEnvironment() cache, made on first use.
  static KernelCache &global();

  /// The kernel stored under `key`, from memory or a verified disk entry;
  /// nullptr on a miss (a bad disk entry is removed and counts as a miss).
  std::shared_ptr<const CompiledKernel> lookup(const std::string &key);

  /// Keeps `kernel` under `key` in memory and publishes it on disk.
  /// `keyFields` (CacheKey::fields(), long values abbreviated) and `params`
  /// go into meta.json for people reading it. Never throws for disk trouble.
  std::shared_ptr<const CompiledKernel>
  store(const std::string &key, CompiledKernel kernel,
        const std::map<std::string, std::string> &keyFields = {},
        const std::vector<std::string> &params = {});

  /// Aliases: a second name for a key (compileCached() names each entry
  /// also by a hash of the unoptimized IR, so a fresh process finds it
  /// without running the passes). Kept in memory and in aliases/<alias>;
  /// findAlias returns "" when unknown or malformed. An alias never vouches
  /// for an entry: the entry it names is verified as usual, and its caller
  /// checks that the entry's CompiledKernel::requestDigest is the request's.
  /// The file records `requestDigest` (the entry's) for verifyAliases().
  std::string findAlias(const std::string &alias);
  void storeAlias(const std::string &alias, const std::string &key,
                  const std::string &requestDigest);
  /// Checks every alias on disk: it must name a valid entry whose request
  /// digest is the one the alias recorded. Removes those that do not.
  std::vector<CacheAliasInfo> verifyAliases();

  /// Every entry on disk, oldest use first. With `checkContents`, reads and
  /// verifies each one (slower); otherwise only meta.json is read.
  std::vector<CacheEntryInfo> list(bool checkContents = false) const;
  /// Removes entries that fail verification; returns what verify found.
  std::vector<CacheEntryInfo> verifyAndDrop();
  /// Removes every entry (and leftover temp directories) and forgets the
  /// in-memory ones. Returns the number of entries removed.
  size_t clear();
  /// Evicts least recently used entries until kernels/ fits in the limit
  /// (never `keep`). Skipped if another process holds the eviction lock.
  void evict(const std::string &keep = {});

  /// Forgets the in-memory entries (the next lookup reads the disk).
  void dropMemory();

  /// Whether lookups read the disk, and whether stores still write it
  /// (false after the first failed write: the one warning is logged then).
  bool diskEnabled() const { return UseDisk; }
  bool writable() const { return UseDisk && Writable.load(); }
  const std::filesystem::path &directory() const { return Dir; }
  std::filesystem::path kernelsDirectory() const { return Dir / "kernels"; }
  uint64_t maxBytes() const { return MaxBytes; }

  /// Test hook: called in store() after the temp directory is complete and
  /// before the rename (a test stops the process there and kills it).
  std::function<void(const std::filesystem::path &tempDir)>
      beforePublishForTesting;

private:
  std::shared_ptr<const CompiledKernel> loadFromDisk(const std::string &key);
  void publish(const std::string &key, const CompiledKernel &kernel,
               const std::map<std::string, std::string> &keyFields,
               const std::vector<std::string> &params);
  void disableWrites(const std::string &why);

  std::filesystem::path Dir;
  bool UseDisk;
  std::atomic<bool> Writable{true};
  uint64_t MaxBytes;
  mutable std::mutex Mutex;
  std::unordered_map<std::string, std::shared_ptr<const CompiledKernel>> Memory;
  std::unordered_map<std::string, std::string> Aliases;
};

/// The module of `kernel`'s CUBIN (its PTX when there is no CUBIN).
cuda::Module loadModule(const CompiledKernel &kernel);
/// `kernel`'s entry point in `module`, ready to launch: clusters of more
/// than 8 blocks are allowed for a kernel that uses them.
cuda::Function entryPoint(const cuda::Module &module,
                          const CompiledKernel &kernel);

/// A compiled kernel in a module of its own: what a tuning candidate holds
/// (LoadedKernels shares modules by key instead).
struct OwnModuleKernel {
  CompiledKernel compiled;
  std::optional<cuda::Module> module;
  cuda::Function fn;
  /// Loads `compiled` and looks up its entry point.
  void load() {
    module.emplace(loadModule(compiled));
    fn = entryPoint(*module, compiled);
  }
};

/// Loaded modules by cache key, so that launching a kernel that is already
/// loaded costs one map lookup. Modules belong to the current CUDA context:
/// keep one LoadedKernels per Device and destroy it before the Device.
class LoadedKernels {
public:
  /// The kernel's entry point, loading its CUBIN (its PTX when there is no
  /// CUBIN) the first time its key is seen. Kernels without a cache key
  /// (from compile()) are told apart by a hash of their binary.
  const cuda::Function &function(const CompiledKernel &kernel);

private:
  struct Loaded {
    explicit Loaded(cuda::Module m) : module(std::move(m)) {}
    cuda::Module module;
    cuda::Function function;
  };
  std::mutex Mutex;
  std::unordered_map<std::string, std::unique_ptr<Loaded>> Map;
};

} // namespace tilejit

#endif // TILEJIT_RUNTIME_CACHE_H
