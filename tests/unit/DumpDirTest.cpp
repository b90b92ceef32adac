//===- DumpDirTest.cpp - TILEJIT_DUMP_DIR --------------------------------===//
//
// Every kernel that goes through compileCached() writes its stages into
// $TILEJIT_DUMP_DIR, on a compile and on a cache hit alike. NVRTC runs
// without a GPU, so this compiles a small kernel for sm_90 here.
//
//===----------------------------------------------------------------------===//
#include "runtime/Cache.h"
#include "tilejit/CachedCompile.h"
#include "tilejit/DSL.h"

#include "ExpectError.h"
#include "TestEnv.h"

#include <gtest/gtest.h>

using namespace tilejit;
using namespace tilejit::dsl;
namespace fs = std::filesystem;

namespace {

/// y[i] = 2 x[i] over bf16, one small block.
TileModule twice() {
  Config c;
  c.params = {{"num_warps", 1}};
  KernelBuilder k("twice", c);
  Value x = k.pointerArg("x", DType::BF16);
  Value y = k.pointerArg("y", DType::BF16);
  Value offs = k.arange(32);
  k.store(y, offs, k.load(x, offs) * 2.0);
  return k.finish();
}

/// The stage files of `kernel` in `dir`: the one folder named after it and
/// its key, each file non-empty.
std::vector<std::string> stageFiles(const fs::path &dir,
                                    const CompiledKernel &kernel) {
  fs::path folder = dir / (kernel.name + "-" + kernel.cacheKey.substr(0, 16));
  EXPECT_TRUE(fs::is_directory(folder)) << folder;
  std::vector<std::string> names;
  for (const fs::directory_entry &e : fs::directory_iterator(folder)) {
    EXPECT_GT(e.file_size(), 0u) << e.path();
    names.push_back(e.path().filename());
  }
  std::sort(names.begin(), names.end());
  return names;
}

TEST(DumpDir, EveryStageOnACompileAndOnACacheHit) {
  TempDir cacheDir, compiled, hit;
  KernelCache cache(cacheDir.path(), /*useDisk=*/true, 0);
  CompileOptions options; // sm_90, to the CUBIN
  std::vector<std::string> want = {"0-built.mlir", "1-tile.mlir",
                                   "2-simt.mlir",  "3-kernel.cu",
                                   "4-kernel.ptx", "5-kernel.cubin"};
  std::shared_ptr<const CompiledKernel> k;
  {
    ScopedEnv env("TILEJIT_DUMP_DIR", compiled.path().c_str());
    k = compileCached(twice(), options, cache);
  }
  std::vector<std::string> files = stageFiles(compiled.path(), *k);
  // SASS only where cuobjdump or nvdisasm is installed.
  if (!files.empty() && files.back() == "6-kernel.sass")
    want.push_back("6-kernel.sass");
  EXPECT_EQ(files, want);

  cache.dropMemory(); // the hit comes from the disk entry
  ScopedEnv env("TILEJIT_DUMP_DIR", hit.path().c_str());
  std::shared_ptr<const CompiledKernel> again =
      compileCached(twice(), options, cache);
  EXPECT_EQ(again->cacheKey, k->cacheKey);
  EXPECT_EQ(stageFiles(hit.path(), *again), want);
}

TEST(DumpDir, AnUnwritableDirectoryIsAClearError) {
  TempDir cacheDir;
  KernelCache cache(cacheDir.path(), /*useDisk=*/false, 0);
  CompileOptions options;
  options.upTo = Stage::Cuda; // no NVRTC needed for this one
  ScopedEnv env("TILEJIT_DUMP_DIR", "/proc/tilejit-dump");
  expectError([&] { compileCached(twice(), options, cache); },
              {"TILEJIT_DUMP_DIR", "cannot create", "/proc/tilejit-dump"});
}

} // namespace
