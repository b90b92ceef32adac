//===- CacheTest.cpp - the kernel cache -----------------------------------===//
//
// No GPU needed. Every test uses its own temporary TILEJIT_CACHE_DIR, never
// the user's cache; and so that no other test in this binary touches it
// either (anything that calls compileCached() without a KernelCache uses
// KernelCache::global(), made from the environment on first use), a global
// test environment below points TILEJIT_CACHE_DIR at a fresh temporary
// directory for the whole binary. Most tests store synthetic kernels (no
// compile); those that need the real pipeline compile fused_ce_tvd_fwd (~0.6 s
// of NVRTC), and the cross-process ones run the tilejit CLI of the same build
// (TILEJIT_CLI_PATH), skipping when it is not there (a build carried to
// another machine).
//
//===----------------------------------------------------------------------===//
#include "runtime/Cache.h"

#include "tilejit/CachedCompile.h"
#include "tilejit/Error.h"
#include "tilejit/KernelSpec.h"
#include "tilejit/Log.h"

#include "llvm/Support/JSON.h"

#include "GpuTest.h"
#include "TestEnv.h"

#include <gtest/gtest.h>
#include <spdlog/sinks/ostream_sink.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <fcntl.h>
#include <fstream>
#include <set>
#include <sstream>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace tilejit;
namespace fs = std::filesystem;

namespace {

/// Counts the logger's warnings that contain `needle` while alive.
class WarningCounter {
public:
  explicit WarningCounter(std::string needle) : Needle(std::move(needle)) {
    Sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(Text);
    Sink->set_level(spdlog::level::warn);
    OldLevel = log()->level();
    log()->set_level(spdlog::level::warn);
    log()->sinks().push_back(Sink);
  }
  ~WarningCounter() {
    auto &sinks = log()->sinks();
    sinks.erase(std::find(sinks.begin(), sinks.end(), Sink));
    log()->set_level(OldLevel);
  }
  int count() const {
    std::string s = Text.str();
    int n = 0;
    for (size_t p = s.find(Needle); p != std::string::npos;
         p = s.find(Needle, p + 1))
      ++n;
    return n;
  }

private:
  std::string Needle;
  std::ostringstream Text;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> Sink;
  spdlog::level::level_enum OldLevel;
};

/// A kernel as compile() would return it, with `cubinBytes` of filler.
CompiledKernel syntheticKernel(const std::string &name, char fill = 'x',
                               size_t cubinBytes = 4096) {
  CompiledKernel k;
  k.name = name;
  k.threads = 256;
  k.tileIR = "module { // tile " + name + " }";
  k.simtIR = "module { // simt " + name + " }";
  k.cuda = "extern \"C\" __global__ void " + name + "() {}";
  k.ptx = ".entry " + name + " {}";
  k.cubin.assign(cubinBytes, fill);
  return k;
}

std::string keyOf(const std::string &s) {
  return CacheKey().add("test", s).hex();
}

std::string readAll(const fs::path &p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

void writeAll(const fs::path &p, const std::string &bytes) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << bytes;
}

size_t countEntries(const fs::path &cacheDir) {
  return KernelCache(cacheDir, true, 0).list().size();
}

void setMtime(const fs::path &p, int64_t secondsAgo) {
  timespec ts[2];
  clock_gettime(CLOCK_REALTIME, &ts[0]);
  ts[0].tv_sec -= secondsAgo;
  ts[1] = ts[0];
  ASSERT_EQ(utimensat(AT_FDCWD, p.c_str(), ts, 0), 0) << p;
}

/// A parameter of fused_ce_tvd_fwd: its default, or a candidate that is not
/// the default (the defaults move as the kernels are tuned).
int64_t fwdParam(const std::string &name, bool otherThanDefault = false) {
  for (const ParamSpec &p : findKernel("fused_ce_tvd_fwd").params)
    if (p.name == name) {
      if (!otherThanDefault)
        return p.defaultValue;
      for (int64_t c : p.candidates)
        if (c != p.defaultValue)
          return c;
    }
  throw Error("fused_ce_tvd_fwd has no parameter " + name);
}

/// The build `tilejit compile fused_ce_tvd_fwd` makes (its default shape).
TileModule buildFwd(const std::vector<std::string> &overrides = {},
                    DType dtype = DType::BF16) {
  const KernelSpec &spec = findKernel("fused_ce_tvd_fwd");
  return spec.build(spec.config(dtype, overrides, {{"BT", 64}, {"V", 32000}}));
}

/// Keeps the whole test binary away from the user's cache (see the top).
class PrivateCacheDirectory : public ::testing::Environment {
public:
  void SetUp() override {
    Dir = std::make_unique<TempDir>();
    setenv("TILEJIT_CACHE_DIR", (Dir->path() / "cache").c_str(), 1);
  }
  void TearDown() override { Dir.reset(); }

private:
  std::unique_ptr<TempDir> Dir;
};
[[maybe_unused]] ::testing::Environment *const kPrivateCache =
    ::testing::AddGlobalTestEnvironment(new PrivateCacheDirectory);

//===----------------------------------------------------------------------===//
// The tilejit CLI in child processes
//===----------------------------------------------------------------------===//

const char *cliPath() {
#ifdef TILEJIT_CLI_PATH
  return TILEJIT_CLI_PATH;
#else
  return "";
#endif
}

#define REQUIRE_CLI()                                                          \
  if (!fs::exists(cliPath()))                                                  \
  GTEST_SKIP() << "tilejit CLI not found at '" << cliPath() << "'"

/// Starts `tilejit args...` with TILEJIT_CACHE_DIR=cacheDir (and `env`),
/// stdout and stderr going to `outFile`.
pid_t spawnCli(
    const std::vector<std::string> &args, const fs::path &cacheDir,
    const fs::path &outFile,
    const std::vector<std::pair<std::string, std::string>> &env = {}) {
  pid_t pid = fork();
  if (pid != 0)
    return pid;
  setenv("TILEJIT_CACHE_DIR", cacheDir.c_str(), 1);
  unsetenv("TILEJIT_CACHE");
  unsetenv("TILEJIT_CACHE_MAX_BYTES");
  setenv("TILEJIT_LOG", "debug", 1);
  for (const auto &[k, v] : env)
    setenv(k.c_str(), v.c_str(), 1);
  int fd = open(outFile.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  dup2(fd, 1);
  dup2(fd, 2);
  std::vector<char *> argv{const_cast<char *>(cliPath())};
  for (const std::string &a : args)
    argv.push_back(const_cast<char *>(a.c_str()));
  argv.push_back(nullptr);
  execv(cliPath(), argv.data());
  _exit(127);
}

int waitExit(pid_t pid) {
  int status = 0;
  if (waitpid(pid, &status, 0) != pid)
    return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/// Runs the CLI to completion; returns its exit status, output in *out.
int runCli(const std::vector<std::string> &args, const fs::path &cacheDir,
           std::string *out,
           const std::vector<std::pair<std::string, std::string>> &env = {}) {
  fs::path outFile =
      cacheDir.parent_path() / (cacheDir.filename().string() + ".cli-out");
  int rc = waitExit(spawnCli(args, cacheDir, outFile, env));
  *out = readAll(outFile);
  fs::remove(outFile);
  return rc;
}

const std::vector<std::string> kCompileFwd = {
    "compile", "fused_ce_tvd_fwd", "--bt", "64",       "--vocab",
    "32000",   "--emit=cubin",     "-o",   "/dev/null"};

//===----------------------------------------------------------------------===//
// Location and settings
//===----------------------------------------------------------------------===//

TEST(Cache, DirectoryComesFromTheEnvironment) {
  ScopedEnv home("HOME", "/home/someone");
  {
    ScopedEnv dir("TILEJIT_CACHE_DIR", "/tmp/explicit");
    ScopedEnv xdg("XDG_CACHE_HOME", "/xdg");
    EXPECT_EQ(cacheDirectory(), "/tmp/explicit");
  }
  {
    ScopedEnv dir("TILEJIT_CACHE_DIR", "");
    ScopedEnv xdg("XDG_CACHE_HOME", "/xdg");
    EXPECT_EQ(cacheDirectory(), "/xdg/tilejit");
  }
  {
    ScopedEnv dir("TILEJIT_CACHE_DIR", nullptr);
    ScopedEnv xdg("XDG_CACHE_HOME", "relative/ignored");
    EXPECT_EQ(cacheDirectory(), "/home/someone/.cache/tilejit");
  }
}

TEST(Cache, EnabledAndSizeLimitSettings) {
  {
    ScopedEnv on("TILEJIT_CACHE", nullptr);
    EXPECT_TRUE(cacheEnabled());
  }
  for (const char *off : {"0", "off", "false", "NO"}) {
    ScopedEnv e("TILEJIT_CACHE", off);
    EXPECT_FALSE(cacheEnabled()) << off;
  }
  {
    ScopedEnv e("TILEJIT_CACHE", "1");
    EXPECT_TRUE(cacheEnabled());
  }
  {
    ScopedEnv e("TILEJIT_CACHE_MAX_BYTES", nullptr);
    EXPECT_EQ(cacheMaxBytes(), uint64_t(1) << 30);
  }
  {
    ScopedEnv e("TILEJIT_CACHE_MAX_BYTES", "12345");
    EXPECT_EQ(cacheMaxBytes(), 12345u);
  }
  {
    ScopedEnv e("TILEJIT_CACHE_MAX_BYTES", "64M");
    EXPECT_EQ(cacheMaxBytes(), uint64_t(64) << 20);
  }
  {
    WarningCounter warnings("TILEJIT_CACHE_MAX_BYTES");
    ScopedEnv e("TILEJIT_CACHE_MAX_BYTES", "lots");
    EXPECT_EQ(cacheMaxBytes(), uint64_t(1) << 30);
    EXPECT_EQ(warnings.count(), 1);
  }
}

//===----------------------------------------------------------------------===//
// Keys (infra.md item 1)
//===----------------------------------------------------------------------===//

TEST(CacheKey, CanonicalAndUnambiguous) {
  CacheKey a, b;
  a.add("x", "1").add("y", "2");
  b.add("y", "2").add("x", "1");
  EXPECT_EQ(a.hex(), b.hex()) << "insertion order must not matter";
  EXPECT_EQ(a.hex().size(), 64u);
  // Field boundaries are part of the encoding.
  EXPECT_NE(CacheKey().add("a", "bc").hex(), CacheKey().add("ab", "c").hex());
  EXPECT_NE(CacheKey().add("a", "b").add("c", "").hex(),
            CacheKey().add("a", "b").hex());
  EXPECT_THROW(CacheKey().add("x", "1").add("x", "2"), Error);
}

TEST(CacheKey, SensitiveToEveryComponent) {
  CompileOptions base;
  std::map<std::string, std::string> fields;
  std::string baseKey = kernelCacheKey(buildFwd(), base, &fields);
  // The same kernel built again (new MLIR context) has the same key.
  EXPECT_EQ(kernelCacheKey(buildFwd(), base), baseKey);

  // The compile-time constants of this build are all in the key.
  EXPECT_EQ(fields.at("tilejit_version"), TILEJIT_VERSION);
  EXPECT_FALSE(fields.at("nvrtc_version").empty());
  EXPECT_EQ(fields.at("source_hash").size(), 64u);
  EXPECT_EQ(fields.at("arch"), "sm_90");
  EXPECT_EQ(fields.at("num_warps"), std::to_string(fwdParam("num_warps")));
  for (const char *k : {"tile_ir", "signature", "kernel_attrs", "nvrtc_options",
                        "constexpr.BLOCK_SIZE"})
    EXPECT_TRUE(fields.count(k)) << k;
  // ...and changing any one of them changes the key.
  CacheKey same;
  for (const auto &[k, v] : fields)
    same.add(k, v);
  EXPECT_EQ(same.hex(), baseKey);
  for (const char *k : {"tilejit_version", "nvrtc_version", "source_hash"}) {
    CacheKey changed;
    for (const auto &[name, v] : fields)
      changed.add(name, name == k ? v + ".1" : v);
    EXPECT_NE(changed.hex(), baseKey) << k;
  }

  std::map<std::string, std::string> variants;
  auto with = [](auto f) {
    CompileOptions o;
    f(o);
    return o;
  };
  for (const char *param : {"num_warps", "BLOCK_SIZE"}) {
    std::string set =
        param +
        ("=" + std::to_string(fwdParam(param, /*otherThanDefault=*/true)));
    variants[set] = kernelCacheKey(buildFwd({set}), base);
  }
  variants["f16"] = kernelCacheKey(buildFwd({}, DType::F16), base);
  variants["f32"] = kernelCacheKey(buildFwd({}, DType::F32), base);
  variants["sm_90a"] =
      kernelCacheKey(buildFwd(), with([](auto &o) { o.arch = "sm_90a"; }));
  variants["sm_80"] =
      kernelCacheKey(buildFwd(), with([](auto &o) { o.arch = "sm_80"; }));
  variants["compute_90"] =
      kernelCacheKey(buildFwd(), with([](auto &o) { o.arch = "compute_90"; }));
  variants["-lineinfo"] = kernelCacheKey(
      buildFwd(), with([](auto &o) { o.nvrtcOptions = {"-lineinfo"}; }));
  // An IR change that keeps the name, attributes and signature.
  std::string text = buildFwd().str();
  size_t at = text.find("arith.addf");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, 10, "arith.mulf");
  variants["IR"] =
      kernelCacheKey(TileModule::parse(text, "fused_ce_tvd_fwd"), base);

  std::set<std::string> distinct{baseKey};
  for (const auto &[what, key] : variants) {
    EXPECT_NE(key, baseKey) << what;
    distinct.insert(key);
  }
  EXPECT_EQ(distinct.size(), variants.size() + 1) << "two variants collided";
}

TEST(CacheKey, SameInTwoProcesses) {
  REQUIRE_CLI();
  TempDir tmp;
  fs::path dir = tmp.path() / "cache";
  std::string out;
  ASSERT_EQ(runCli(kCompileFwd, dir, &out), 0) << out;
  auto entries = KernelCache(dir, true, 0).list(true);
  ASSERT_EQ(entries.size(), 1u) << out;
  EXPECT_TRUE(entries[0].valid) << entries[0].problem;
  // This process computes the same key as the CLI did...
  EXPECT_EQ(kernelCacheKey(buildFwd(), CompileOptions()), entries[0].key);
  // ...and a second CLI process, made to compute it (no alias), hits.
  fs::remove_all(dir / "aliases");
  ASSERT_EQ(runCli(kCompileFwd, dir, &out), 0) << out;
  EXPECT_NE(
      out.find("cache hit fused_ce_tvd_fwd " + entries[0].key.substr(0, 16)),
      std::string::npos)
      << out;
  EXPECT_EQ(out.find("cache miss"), std::string::npos) << out;
  EXPECT_EQ(countEntries(dir), 1u);
}

//===----------------------------------------------------------------------===//
// Concurrent writers (infra.md item 2)
//===----------------------------------------------------------------------===//

TEST(Cache, SixteenProcessesCompileTheSameKernel) {
  REQUIRE_CLI();
  TempDir tmp;
  fs::path dir = tmp.path() / "cache";
  std::vector<pid_t> pids;
  for (int i = 0; i < 16; ++i)
    pids.push_back(spawnCli({"compile", "fused_ce_tvd_fwd", "--emit=cubin",
                             "-o", (tmp.path() / ("out" + std::to_string(i)))},
                            dir, tmp.path() / ("log" + std::to_string(i))));
  for (int i = 0; i < 16; ++i)
    EXPECT_EQ(waitExit(pids[i]), 0)
        << readAll(tmp.path() / ("log" + std::to_string(i)));

  std::string first = readAll(tmp.path() / "out0");
  EXPECT_EQ(first.substr(0, 4), "\x7f"
                                "ELF");
  for (int i = 1; i < 16; ++i)
    EXPECT_EQ(readAll(tmp.path() / ("out" + std::to_string(i))), first)
        << "process " << i << " got another binary";
  auto entries = KernelCache(dir, true, 0).list(/*checkContents=*/true);
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_TRUE(entries[0].valid) << entries[0].problem;
  for (const auto &e : fs::directory_iterator(dir / "kernels"))
    EXPECT_EQ(e.path().filename().string().rfind(".tmp-", 0), std::string::npos)
        << "temp directory left behind: " << e.path();
}

TEST(Cache, ConcurrentThreadsStoreTheSameKey) {
  TempDir tmp;
  std::string key = keyOf("threads");
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i)
    threads.emplace_back([&] {
      KernelCache c(tmp.path(), true, 0); // one per thread: no shared memory
      c.store(key, syntheticKernel("k"));
    });
  for (auto &t : threads)
    t.join();
  auto entries = KernelCache(tmp.path(), true, 0).list(true);
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_TRUE(entries[0].valid);
}

//===----------------------------------------------------------------------===//
// Torn, truncated and mixed entries (infra.md item 3)
//===----------------------------------------------------------------------===//

TEST(Cache, WriterKilledMidPublish) {
  TempDir tmp;
  std::string key = keyOf("killed");
  int pipeFds[2];
  ASSERT_EQ(pipe(pipeFds), 0);
  pid_t child = fork();
  if (child == 0) {
    KernelCache c(tmp.path(), true, 0);
    c.beforePublishForTesting = [&](const fs::path &) {
      (void)!write(pipeFds[1], "x", 1);
      for (;;)
        pause(); // killed here, between writing and renaming
    };
    c.store(key, syntheticKernel("k"));
    _exit(0);
  }
  char c;
  ASSERT_EQ(read(pipeFds[0], &c, 1), 1);
  kill(child, SIGKILL);
  EXPECT_EQ(waitExit(child), 128 + SIGKILL);
  close(pipeFds[0]);
  close(pipeFds[1]);

  // The complete-looking temp directory is never read as the entry.
  fs::path leftover;
  for (const auto &e : fs::directory_iterator(tmp.path() / "kernels"))
    if (e.path().filename().string().rfind(".tmp-", 0) == 0)
      leftover = e.path();
  ASSERT_FALSE(leftover.empty());
  KernelCache reader(tmp.path(), true, 0);
  EXPECT_EQ(reader.lookup(key), nullptr);
  reader.store(key, syntheticKernel("k"));
  KernelCache again(tmp.path(), true, 0);
  auto hit = again.lookup(key);
  ASSERT_NE(hit, nullptr);
  EXPECT_EQ(hit->cubin, syntheticKernel("k").cubin);
  // Old temp directories go at the next eviction pass.
  setMtime(leftover, 3600);
  KernelCache(tmp.path(), true, uint64_t(1) << 30).evict();
  EXPECT_FALSE(fs::exists(leftover));
  EXPECT_EQ(countEntries(tmp.path()), 1u);
}

// What a launch needs besides the binary comes back from disk with it.
TEST(Cache, LaunchSettingsSurviveTheDisk) {
  TempDir tmp;
  std::string key = keyOf("launch-settings");
  CompiledKernel k = syntheticKernel("k");
  k.clusterSize = 8;
  k.dynamicSharedBytes = 77824;
  KernelCache(tmp.path(), true, 0).store(key, k);
  auto hit = KernelCache(tmp.path(), true, 0).lookup(key);
  ASSERT_NE(hit, nullptr);
  EXPECT_EQ(hit->threads, 256);
  EXPECT_EQ(hit->clusterSize, 8);
  EXPECT_EQ(hit->dynamicSharedBytes, 77824);
}

TEST(Cache, DamagedEntriesAreMissesAndAreDropped) {
  struct Damage {
    const char *what;
    std::function<void(const fs::path &entry, const fs::path &other)> apply;
  };
  const Damage damages[] = {
      {"truncated cubin",
       [](const fs::path &e, const fs::path &) {
         fs::resize_file(e / "kernel.cubin", 100);
       }},
      {"empty cubin",
       [](const fs::path &e, const fs::path &) {
         fs::resize_file(e / "kernel.cubin", 0);
       }},
      {"cubin from another writer (same size)",
       [](const fs::path &e, const fs::path &) {
         writeAll(e / "kernel.cubin", std::string(4096, 'y'));
       }},
      {"meta.json of another entry",
       [](const fs::path &e, const fs::path &other) {
         fs::copy_file(other / "meta.json", e / "meta.json",
                       fs::copy_options::overwrite_existing);
       }},
      {"cubin of another entry",
       [](const fs::path &e, const fs::path &other) {
         fs::copy_file(other / "kernel.cubin", e / "kernel.cubin",
                       fs::copy_options::overwrite_existing);
       }},
      {"meta.json truncated",
       [](const fs::path &e, const fs::path &) {
         fs::resize_file(e / "meta.json", 40);
       }},
      {"meta.json missing",
       [](const fs::path &e, const fs::path &) {
         fs::remove(e / "meta.json");
       }},
      {"ptx missing", [](const fs::path &e,
                         const fs::path &) { fs::remove(e / "kernel.ptx"); }},
      {"thread count edited in meta.json",
       [](const fs::path &e, const fs::path &) {
         std::string s = readAll(e / "meta.json");
         size_t at = s.find("\"threads\": 256");
         ASSERT_NE(at, std::string::npos) << s;
         s.replace(at, 15, "\"threads\": 128");
         writeAll(e / "meta.json", s);
       }},
      {"one flipped byte in the CUDA source",
       [](const fs::path &e, const fs::path &) {
         std::string s = readAll(e / "kernel.cu");
         s[s.size() / 2] ^= 1;
         writeAll(e / "kernel.cu", s);
       }},
  };
  for (const Damage &d : damages) {
    TempDir tmp;
    std::string key = keyOf("victim"), otherKey = keyOf("other");
    {
      KernelCache c(tmp.path(), true, 0);
      c.store(key, syntheticKernel("victim"));
      c.store(otherKey, syntheticKernel("other", 'z'));
    }
    fs::path entry = tmp.path() / "kernels" / key;
    d.apply(entry, tmp.path() / "kernels" / otherKey);
    {
      WarningCounter warnings("dropping damaged entry");
      KernelCache reader(tmp.path(), true, 0);
      EXPECT_EQ(reader.lookup(key), nullptr) << d.what;
      EXPECT_EQ(warnings.count(), 1) << d.what;
    }
    EXPECT_FALSE(fs::exists(entry)) << d.what << ": not dropped";
    EXPECT_NE(KernelCache(tmp.path(), true, 0).lookup(otherKey), nullptr)
        << d.what << ": the other entry must be untouched";
  }
}

TEST(Cache, VerifyReportsAndDropsBadEntries) {
  TempDir tmp;
  KernelCache c(tmp.path(), true, 0);
  c.store(keyOf("good"), syntheticKernel("good"));
  c.store(keyOf("bad"), syntheticKernel("bad"));
  fs::resize_file(tmp.path() / "kernels" / keyOf("bad") / "kernel.cubin", 1);
  auto entries = c.verifyAndDrop();
  ASSERT_EQ(entries.size(), 2u);
  int bad = 0;
  for (const auto &e : entries)
    if (!e.valid) {
      ++bad;
      EXPECT_EQ(e.key, keyOf("bad"));
      EXPECT_NE(e.problem.find("kernel.cubin"), std::string::npos) << e.problem;
    }
  EXPECT_EQ(bad, 1);
  EXPECT_EQ(c.lookup(keyOf("bad")), nullptr) << "memory copy must go too";
  auto after = c.list(true);
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(after[0].key, keyOf("good"));
}

//===----------------------------------------------------------------------===//
// Compile through the cache: hits, rebuilds, failures
//===----------------------------------------------------------------------===//

TEST(Cache, CompileCachedHitsRebuildsAndNeverStoresFailures) {
  TempDir tmp;
  KernelCache cache(tmp.path(), true, uint64_t(1) << 30);
  TileModule m = buildFwd();
  CompileOptions o;

  // A failed compile (NVRTC rejects the arch) leaves nothing behind.
  CompileOptions bad;
  bad.arch = "sm_1";
  EXPECT_THROW(compileCached(m, bad, cache), Error);
  EXPECT_EQ(countEntries(tmp.path()), 0u);
  EXPECT_EQ(cache.lookup(kernelCacheKey(m, bad)), nullptr);
  EXPECT_FALSE(fs::exists(tmp.path() / "aliases") &&
               !fs::is_empty(tmp.path() / "aliases"));

  auto first = compileCached(m, o, cache);
  ASSERT_FALSE(first->cubin.empty());
  EXPECT_EQ(first->cacheKey, kernelCacheKey(m, o));
  EXPECT_EQ(countEntries(tmp.path()), 1u);

  // Same process: the very same object, without compiling or reading files.
  auto usSince = [](auto t0) {
    return std::chrono::duration<double, std::micro>(
               std::chrono::steady_clock::now() - t0)
        .count();
  };
  auto t0 = std::chrono::steady_clock::now();
  TileModule again = buildFwd();
  double buildUs = usSince(t0);
  t0 = std::chrono::steady_clock::now();
  auto second = compileCached(again, o, cache);
  double hitUs = usSince(t0);
  EXPECT_EQ(second.get(), first.get());
  std::cout << "in-process: DSL build " << buildUs << " us, compileCached hit "
            << hitUs << " us\n";

  // A fresh cache object (as in a new process) reads the entry from disk.
  KernelCache fresh(tmp.path(), true, uint64_t(1) << 30);
  auto fromDisk = compileCached(m, o, fresh);
  EXPECT_NE(fromDisk.get(), first.get());
  EXPECT_EQ(fromDisk->cubin, first->cubin);
  EXPECT_EQ(fromDisk->ptx, first->ptx);
  EXPECT_EQ(fromDisk->cuda, first->cuda);
  EXPECT_EQ(fromDisk->tileIR, first->tileIR);
  EXPECT_EQ(fromDisk->threads, first->threads);
  EXPECT_EQ(fromDisk->cacheKey, first->cacheKey);

  // meta.json says what the entry is, for people and `tilejit cache list`.
  fs::path entry = tmp.path() / "kernels" / first->cacheKey;
  auto meta = llvm::json::parse(readAll(entry / "meta.json"));
  ASSERT_TRUE(bool(meta)) << llvm::toString(meta.takeError());
  const llvm::json::Object *obj = meta->getAsObject();
  ASSERT_NE(obj, nullptr);
  EXPECT_EQ(obj->getString("kernel"), "fused_ce_tvd_fwd");
  EXPECT_EQ(obj->getString("arch"), "sm_90");
  EXPECT_EQ(obj->getString("tilejit_version"), TILEJIT_VERSION);
  EXPECT_EQ(obj->getInteger("threads"), 32 * fwdParam("num_warps"));
  ASSERT_NE(obj->getArray("params"), nullptr);
  EXPECT_EQ(obj->getArray("params")->size(), 15u); // the kernel's arguments
  const llvm::json::Object *res = obj->getObject("resources");
  ASSERT_NE(res, nullptr);
  EXPECT_GT(res->getInteger("registers").value_or(0), 16);
  EXPECT_LE(res->getInteger("registers").value_or(999), 255);
  EXPECT_EQ(obj->getObject("files")->getInteger("kernel.cubin"),
            int64_t(first->cubin.size()));

  // A truncated CUBIN is detected and rebuilt, never returned.
  fs::path cubin = entry / "kernel.cubin";
  fs::resize_file(cubin, fs::file_size(cubin) / 2);
  KernelCache afterDamage(tmp.path(), true, uint64_t(1) << 30);
  auto rebuilt = compileCached(m, o, afterDamage);
  EXPECT_EQ(rebuilt->cubin, first->cubin);
  auto entries = afterDamage.list(true);
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_TRUE(entries[0].valid) << entries[0].problem;
}

// An alias file that names another valid entry (another kernel, or the same
// kernel for another shape's constexprs) is never served: the entry must have
// been built for the request, and `cache verify` drops such aliases.
TEST(Cache, AliasNamingAnotherEntryIsNotServed) {
  TempDir tmp;
  CompileOptions o;
  // The same kernel for two vocab sizes: V = 32001 rows are not 16-byte
  // aligned, so its binary must not be the V = 32000 one.
  const KernelSpec &spec = findKernel("fused_ce_tvd_fwd");
  TileModule aligned =
      spec.build(spec.config(DType::BF16, {}, {{"BT", 64}, {"V", 32000}}));
  TileModule unaligned =
      spec.build(spec.config(DType::BF16, {}, {{"BT", 64}, {"V", 32001}}));
  std::string alignedKey, unalignedKey;
  {
    KernelCache c(tmp.path(), true, 0);
    alignedKey = compileCached(aligned, o, c)->cacheKey;
    unalignedKey = compileCached(unaligned, o, c)->cacheKey;
  }
  ASSERT_NE(alignedKey, unalignedKey);

  // Point every alias of the V = 32001 kernel at the V = 32000 entry.
  size_t redirected = 0;
  for (const auto &f : fs::directory_iterator(tmp.path() / "aliases")) {
    std::string text = readAll(f.path());
    if (text.rfind(unalignedKey, 0) == 0) {
      writeAll(f.path(), alignedKey + text.substr(unalignedKey.size()));
      ++redirected;
    }
  }
  ASSERT_EQ(redirected, 1u);
  {
    KernelCache c(tmp.path(), true, 0);
    auto k = compileCached(unaligned, o, c);
    EXPECT_EQ(k->cacheKey, unalignedKey);
    // ... and the alias was rewritten to the right key.
    KernelCache again(tmp.path(), true, 0);
    EXPECT_EQ(compileCached(unaligned, o, again)->cacheKey, unalignedKey);
  }

  // A _bwd entry named by the _fwd kernel's alias, request digest and all.
  const KernelSpec &bwdSpec = findKernel("fused_ce_tvd_bwd");
  TileModule bwd = bwdSpec.build(
      bwdSpec.config(DType::BF16, {}, {{"BT", 64}, {"V", 32000}}));
  std::string bwdKey;
  {
    KernelCache c(tmp.path(), true, 0);
    bwdKey = compileCached(bwd, o, c)->cacheKey;
  }
  std::string bwdAlias;
  for (const auto &f : fs::directory_iterator(tmp.path() / "aliases"))
    if (readAll(f.path()).rfind(bwdKey, 0) == 0)
      bwdAlias = readAll(f.path());
  ASSERT_FALSE(bwdAlias.empty());
  for (const auto &f : fs::directory_iterator(tmp.path() / "aliases"))
    if (readAll(f.path()).rfind(alignedKey, 0) == 0)
      writeAll(f.path(), bwdAlias);
  {
    KernelCache c(tmp.path(), true, 0);
    auto k = compileCached(aligned, o, c);
    EXPECT_EQ(k->name, "fused_ce_tvd_fwd");
    EXPECT_EQ(k->cacheKey, alignedKey);
  }

  // verify: an alias whose entry was built for another request, one that
  // names no entry, and a malformed one are dropped; the rest are kept.
  fs::path aliases = tmp.path() / "aliases";
  writeAll(aliases / keyOf("wrong-request"), bwdAlias.substr(0, 65) +
                                                 alignedKey.substr(0, 64) +
                                                 "\n");
  writeAll(aliases / keyOf("dangling"), keyOf("nothing") + "\n" +
                                            keyOf("nothing") + "\n");
  writeAll(aliases / keyOf("malformed"), "not a key\n");
  KernelCache c(tmp.path(), true, 0);
  std::map<std::string, std::string> problems;
  size_t ok = 0;
  for (const CacheAliasInfo &a : c.verifyAliases())
    a.valid ? void(++ok) : void(problems[a.alias] = a.problem);
  EXPECT_EQ(ok, 3u); // fwd at 32000 and 32001, bwd
  ASSERT_EQ(problems.size(), 3u);
  EXPECT_NE(problems[keyOf("wrong-request")].find("another request"),
            std::string::npos);
  EXPECT_NE(problems[keyOf("dangling")].find("no entry"), std::string::npos);
  EXPECT_NE(problems[keyOf("malformed")].find("not a key"), std::string::npos);
  EXPECT_FALSE(fs::exists(aliases / keyOf("wrong-request")));
  EXPECT_EQ(c.verifyAliases().size(), 3u);
}

//===----------------------------------------------------------------------===//
// Unwritable directory, disabled cache, size limit
//===----------------------------------------------------------------------===//

TEST(Cache, UnwritableDirectoryFallsBackToMemoryWithOneWarning) {
  TempDir tmp;
  // A path below a regular file can never be created, even by root.
  writeAll(tmp.path() / "file", "not a directory");
  std::vector<fs::path> dirs = {tmp.path() / "file" / "sub"};
  if (geteuid() != 0) { // chmod stops everyone but root
    fs::create_directories(tmp.path() / "ro");
    fs::permissions(tmp.path() / "ro", fs::perms(0500));
    dirs.push_back(tmp.path() / "ro");
  }
  for (const fs::path &dir : dirs) {
    WarningCounter warnings("in memory only");
    KernelCache c(dir, true, uint64_t(1) << 30);
    for (int i = 0; i < 3; ++i)
      c.store(keyOf(std::to_string(i)),
              syntheticKernel("k" + std::to_string(i)));
    c.storeAlias(keyOf("alias"), keyOf("0"), keyOf("request"));
    for (int i = 0; i < 3; ++i) {
      auto k = c.lookup(keyOf(std::to_string(i)));
      ASSERT_NE(k, nullptr) << dir;
      EXPECT_EQ(k->name, "k" + std::to_string(i));
    }
    EXPECT_EQ(c.findAlias(keyOf("alias")), keyOf("0"));
    EXPECT_FALSE(c.writable());
    EXPECT_EQ(warnings.count(), 1) << dir;
  }
}

TEST(Cache, DisabledByEnvironment) {
  TempDir tmp;
  fs::path dir = tmp.path() / "cache";
  ScopedEnv d("TILEJIT_CACHE_DIR", dir.c_str());
  ScopedEnv off("TILEJIT_CACHE", "0");
  auto c = KernelCache::fromEnvironment();
  EXPECT_FALSE(c->diskEnabled());
  c->store(keyOf("a"), syntheticKernel("a"));
  EXPECT_NE(c->lookup(keyOf("a")), nullptr) << "memory still works";
  EXPECT_FALSE(fs::exists(dir));

  if (!fs::exists(cliPath()))
    return;
  std::string out;
  ASSERT_EQ(runCli(kCompileFwd, dir, &out, {{"TILEJIT_CACHE", "0"}}), 0) << out;
  EXPECT_FALSE(fs::exists(dir)) << "TILEJIT_CACHE=0 must not touch the disk";
}

TEST(Cache, LeastRecentlyUsedEntriesAreEvicted) {
  TempDir tmp;
  uint64_t entryBytes;
  {
    KernelCache probe(tmp.path(), true, 0);
    probe.store(keyOf("probe"), syntheticKernel("a"));
    entryBytes = probe.list()[0].bytes;
    probe.clear();
  }
  // Room for three and a half entries.
  uint64_t limit = entryBytes * 7 / 2;
  {
    KernelCache c(tmp.path(), true, limit);
    for (const char *name : {"a", "b", "c"})
      c.store(keyOf(name), syntheticKernel(name));
  }
  // Make the order unambiguous: a oldest, then b, then c.
  int64_t age = 300;
  for (const char *name : {"a", "b", "c"})
    setMtime(tmp.path() / "kernels" / keyOf(name) / "meta.json", age--);

  KernelCache c(tmp.path(), true, limit);
  ASSERT_NE(c.lookup(keyOf("a")), nullptr); // a is now the most recent
  c.store(keyOf("d"), syntheticKernel("d"));

  std::set<std::string> left;
  for (const auto &e : c.list())
    left.insert(e.kernel);
  EXPECT_EQ(left, (std::set<std::string>{"a", "c", "d"}));
  EXPECT_EQ(c.lookup(keyOf("b")), nullptr);
  // Eviction empties the disk, not this process's memory.
  setMtime(tmp.path() / "kernels" / keyOf("a") / "meta.json", 1000);
  c.store(keyOf("e"), syntheticKernel("e"));
  EXPECT_FALSE(fs::exists(tmp.path() / "kernels" / keyOf("a")));
  EXPECT_NE(c.lookup(keyOf("a")), nullptr) << "a was loaded into memory";
}

TEST(Cache, ClearRemovesEverything) {
  TempDir tmp;
  KernelCache c(tmp.path(), true, 0);
  c.store(keyOf("a"), syntheticKernel("a"));
  c.store(keyOf("b"), syntheticKernel("b"));
  c.storeAlias(keyOf("x"), keyOf("a"), keyOf("request"));
  // A killed writer's leftover goes too, and is not counted as an entry.
  fs::create_directories(tmp.path() / "kernels" / ".tmp-killed-writer");
  EXPECT_EQ(c.clear(), 2u);
  EXPECT_EQ(countEntries(tmp.path()), 0u);
  EXPECT_TRUE(fs::is_empty(tmp.path() / "kernels"));
  EXPECT_EQ(c.lookup(keyOf("a")), nullptr);
  EXPECT_EQ(c.findAlias(keyOf("x")), "");
}

TEST(Cache, CommandLine) {
  REQUIRE_CLI();
  TempDir tmp;
  fs::path dir = tmp.path() / "cache";
  {
    KernelCache c(dir, true, 0);
    c.store(keyOf("good"), syntheticKernel("good_kernel"));
    c.store(keyOf("bad"), syntheticKernel("bad_kernel"));
  }
  fs::resize_file(dir / "kernels" / keyOf("bad") / "kernel.cubin", 10);
  fs::create_directories(dir / "tuning");
  writeAll(dir / "tuning" / "x.json", "{}");

  std::string out;
  EXPECT_EQ(runCli({"cache", "path"}, dir, &out), 0);
  EXPECT_EQ(out, dir.string() + "\n");
  EXPECT_EQ(runCli({"cache", "list"}, dir, &out), 0);
  EXPECT_NE(out.find("good_kernel"), std::string::npos) << out;
  EXPECT_NE(out.find(keyOf("good").substr(0, 16)), std::string::npos) << out;
  EXPECT_NE(out.find("2 entries"), std::string::npos) << out;
  EXPECT_EQ(runCli({"cache", "verify"}, dir, &out), 1) << out;
  EXPECT_NE(out.find("dropped " + keyOf("bad").substr(0, 16)),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("2 entries checked, 1 ok, 1 dropped"), std::string::npos)
      << out;
  EXPECT_EQ(runCli({"cache", "verify"}, dir, &out), 0) << out;
  EXPECT_EQ(runCli({"cache", "clear"}, dir, &out), 0) << out;
  EXPECT_EQ(countEntries(dir), 0u);
  EXPECT_FALSE(fs::exists(dir / "tuning"));
  EXPECT_NE(runCli({"cache", "frobnicate"}, dir, &out), 0);
  // Options LLVM rejects itself are bad input too: exit 2, not 1.
  EXPECT_EQ(runCli({"run", "fused_ce_tvd", "--no-such-option"}, dir, &out), 2)
      << out;
  // An option of the other operation is refused, not ignored.
  EXPECT_EQ(
      runCli({"run", "fused_ce_tvd", "--device=cpu", "--hidden=4"}, dir, &out),
      2)
      << out;
  EXPECT_NE(out.find("--hidden does not apply to fused_ce_tvd"),
            std::string::npos)
      << out;
}

//===----------------------------------------------------------------------===//
// Loaded modules (GPU only)
//===----------------------------------------------------------------------===//

TEST(CacheGpu, LoadedKernelsLoadOnceAndLookUpInMicroseconds) {
  TILEJIT_SKIP_WITHOUT_GPU();
  TempDir tmp;
  cuda::Device device = cuda::Device::open();
  CompileOptions o;
  o.arch = device.archString();
  KernelCache cache(tmp.path(), true, 0);
  auto k = compileCached(buildFwd(), o, cache);
  LoadedKernels loaded;
  auto t0 = std::chrono::steady_clock::now();
  const cuda::Function &f = loaded.function(*k);
  double loadUs = std::chrono::duration<double, std::micro>(
                      std::chrono::steady_clock::now() - t0)
                      .count();
  EXPECT_GT(f.numRegs(), 0);
  const int kLookups = 1000;
  t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < kLookups; ++i)
    ASSERT_EQ(&loaded.function(*k), &f);
  double lookupUs = std::chrono::duration<double, std::micro>(
                        std::chrono::steady_clock::now() - t0)
                        .count() /
                    kLookups;
  std::cout << "module load " << loadUs << " us, loaded lookup " << lookupUs
            << " us\n";
  EXPECT_LT(lookupUs, 50.0);
}

} // namespace
