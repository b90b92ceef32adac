//===- CacheCommand.cpp - `tilejit cache` ---------------------------------===//
//
//   tilejit cache path     the cache directory (runtime/Cache.h says how it
//                          is chosen)
//   tilejit cache list     compiled kernels: key prefix, kernel, arch, size,
//                          last use (least recent first); damaged ones marked
//   tilejit cache verify   re-checks every entry's checksum and drops the bad
//                          ones; exit status 1 when it dropped any
//   tilejit cache clear [--kernels-only]
//                          removes every compiled kernel and, unless
//                          --kernels-only, the autotuner's results (tuning/)
//
// Works with TILEJIT_CACHE=0 too: that only stops compiles from using it.
//
//===----------------------------------------------------------------------===//
#include "Commands.h"

#include "runtime/Cache.h"
#include "tilejit/Error.h"

#include "llvm/Support/CommandLine.h"

#include <cstdio>
#include <ctime>
#include <iostream>

namespace cl = llvm::cl;
namespace fs = std::filesystem;
using namespace tilejit;

static cl::SubCommand cacheCmd("cache",
                               "Show, check or clear the kernel cache");
static cl::opt<std::string> cacheAction(cl::Positional,
                                        cl::desc("path|list|verify|clear"),
                                        cl::Required, cl::sub(cacheCmd));
static cl::opt<bool>
    cacheKernelsOnly("kernels-only",
                     cl::desc("clear: keep the autotuner's results"),
                     cl::sub(cacheCmd));

bool cacheCommandSelected() { return static_cast<bool>(cacheCmd); }

static std::string formatBytes(uint64_t bytes) {
  char buf[32];
  if (bytes >= (uint64_t(1) << 20))
    std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / 1048576.0);
  else
    std::snprintf(buf, sizeof buf, "%.1f KiB", bytes / 1024.0);
  return buf;
}

static std::string formatTime(int64_t ns) {
  if (ns == 0)
    return "?";
  std::time_t t = ns / 1000000000;
  std::tm tm;
  localtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

static size_t countFiles(const fs::path &dir) {
  std::error_code ec;
  size_t n = 0;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec))
    n += it->is_regular_file(ec);
  return n;
}

static void printEntries(const std::vector<CacheEntryInfo> &entries) {
  uint64_t total = 0;
  std::printf("%-16s  %-24s  %-8s  %10s  %s\n", "KEY", "KERNEL", "ARCH", "SIZE",
              "LAST USE");
  for (const CacheEntryInfo &e : entries) {
    total += e.bytes;
    std::printf("%-16s  %-24s  %-8s  %10s  %s%s\n", e.key.substr(0, 16).c_str(),
                e.kernel.empty() ? "?" : e.kernel.c_str(),
                e.arch.empty() ? "?" : e.arch.c_str(),
                formatBytes(e.bytes).c_str(), formatTime(e.lastUseNs).c_str(),
                e.valid ? "" : ("  DAMAGED: " + e.problem).c_str());
  }
  std::printf("%zu entries, %s\n", entries.size(), formatBytes(total).c_str());
}

int runCacheCommand() {
  fs::path dir = cacheDirectory();
  // Maintenance works on the directory whether or not compiles use it.
  KernelCache cache(dir, /*useDisk=*/true, cacheMaxBytes());
  if (cacheAction == "path") {
    std::cout << dir.string() << "\n";
    if (!cacheEnabled())
      std::cerr << "(not used by compiles: TILEJIT_CACHE=0)\n";
    return 0;
  }
  if (cacheAction == "list") {
    std::printf("%s (limit %s)\n", cache.kernelsDirectory().c_str(),
                formatBytes(cache.maxBytes()).c_str());
    printEntries(cache.list(/*checkContents=*/false));
    std::printf("tuning results: %zu in %s\n", countFiles(dir / "tuning"),
                (dir / "tuning").c_str());
    return 0;
  }
  if (cacheAction == "verify") {
    size_t bad = 0, total = 0;
    for (const CacheEntryInfo &e : cache.verifyAndDrop()) {
      ++total;
      if (!e.valid) {
        ++bad;
        std::printf("dropped %s (%s): %s\n", e.key.substr(0, 16).c_str(),
                    e.kernel.empty() ? "?" : e.kernel.c_str(),
                    e.problem.c_str());
      }
    }
    std::printf("%zu entries checked, %zu ok, %zu dropped\n", total,
                total - bad, bad);
    size_t badAliases = 0, aliases = 0;
    for (const CacheAliasInfo &a : cache.verifyAliases()) {
      ++aliases;
      if (!a.valid) {
        ++badAliases;
        std::printf("dropped alias %s: %s\n", a.alias.substr(0, 16).c_str(),
                    a.problem.c_str());
      }
    }
    std::printf("%zu aliases checked, %zu ok, %zu dropped\n", aliases,
                aliases - badAliases, badAliases);
    return bad || badAliases ? 1 : 0;
  }
  if (cacheAction == "clear") {
    size_t n = cache.clear();
    std::printf("removed %zu compiled kernels from %s\n", n,
                cache.kernelsDirectory().c_str());
    if (!cacheKernelsOnly) {
      fs::path tuning = dir / "tuning";
      size_t t = countFiles(tuning);
      std::error_code ec;
      fs::remove_all(tuning, ec);
      if (ec)
        throw Error("cannot remove " + tuning.string() + ": " + ec.message());
      std::printf("removed %zu tuning results from %s\n", t, tuning.c_str());
    }
    return 0;
  }
  throw Error("unknown cache action '" + cacheAction +
              "' (expected path, list, verify or clear)");
}
