//===- RowScheduleTest.cpp - the compiler's row schedules, run ------------===//
//
// tile-split-rows, tile-keep-rows and tile-copy-ahead rewrite kernels
// written one program per row; these run the rewritten kernels in the
// interpreter (each program of a cluster in step with the others, shared
// arrays per program) against the kernels' fp64 references: every split and
// keep of jsd, cross_entropy and kl_div, with and without loads ahead, kept
// rows filled by copies ahead, rows shorter than a cluster's tiles (programs
// with nothing to walk), a row longer than the shared-memory budget (kept in
// part, the rest re-read), and every 7th row ignored.
//
//===----------------------------------------------------------------------===//
#include "ops/SpecRun.h"
#include "tilejit/Compiler.h"

#include <gtest/gtest.h>

using namespace tilejit;

namespace {

void expectMatches(const std::string &kernel, DType dtype, int64_t BT,
                   int64_t V, std::vector<std::string> set) {
  SpecRunOptions o;
  o.dtype = dtype;
  o.sizes = {{"BT", BT}, {"V", V}};
  o.set = set;
  SpecRun run(findKernel(kernel), o);
  run.runOnCpu();
  bool passed = false;
  std::string report = describeChecks(run.check(), &passed);
  std::string config;
  for (const std::string &s : set)
    config += " " + s;
  EXPECT_TRUE(passed) << kernel << " " << dtypeName(dtype) << " V=" << V
                      << config << "\n"
                      << report;
}

// jsd's walks fused (one read of the row), or apart: the second walk's
// reads kept or not.
TEST(RowSchedules, JsdEverySplitAndKeep) {
  for (DType dtype : {DType::F32, DType::BF16})
    for (const char *split :
         {"SPLIT_ROWS=1", "SPLIT_ROWS=2", "SPLIT_ROWS=4", "SPLIT_ROWS=8"})
      for (const char *fuse : {"FUSE_WALKS=1", "FUSE_WALKS=0"})
        for (const char *keep : {"KEEP_ROW=0", "KEEP_ROW=1"})
          for (const char *ahead : {"LOAD_AHEAD=0", "LOAD_AHEAD=1"})
            for (int64_t V : {int64_t(1), int64_t(3001)})
              expectMatches("jsd", dtype, 8, V,
                            {split, fuse, keep, ahead, "BLOCK_SIZE=1024",
                             "num_warps=4"});
}

TEST(RowSchedules, JsdForwardAndReverseKlEndsSplit) {
  for (const char *beta : {"beta=0", "beta=1"})
    expectMatches("jsd", DType::BF16, 8, 2500,
                  {"SPLIT_ROWS=4", "KEEP_ROW=1", "BLOCK_SIZE=1024",
                   "num_warps=4", beta});
}

TEST(RowSchedules, OtherLossesSplitAndKept) {
  // Their first walks carry online-softmax states (tile.softmax_fold).
  for (DType dtype : {DType::F32, DType::BF16})
    for (std::vector<std::string> schedule :
         {std::vector<std::string>{"SPLIT_ROWS=1", "KEEP_ROW=1", "LOAD_AHEAD=1"},
          {"SPLIT_ROWS=2", "KEEP_ROW=0", "LOAD_AHEAD=0"},
          {"SPLIT_ROWS=4", "KEEP_ROW=1", "LOAD_AHEAD=0"},
          {"SPLIT_ROWS=8", "KEEP_ROW=1", "LOAD_AHEAD=1"}}) {
      const std::string &split = schedule[0], &keep = schedule[1],
                        &ahead = schedule[2];
      for (int64_t V : {int64_t(1), int64_t(3001)}) {
        expectMatches("cross_entropy", dtype, 8, V,
                      {split, keep, ahead, "BLOCK_SIZE=1024",
                       "label_smoothing=0.1", "lse_square_scale=0.01"});
        expectMatches("cross_entropy", dtype, 8, V,
                      {split, keep, ahead, "BLOCK_SIZE=1024", "HAS_WEIGHT=0",
                       "HAS_SOFTCAP=1", "softcap=15"});
        expectMatches("cross_entropy", dtype, 8, V,
                      {split, keep, ahead, "BLOCK_SIZE=1024", "HAS_SOFTCAP=0",
                       "softcap=0", "label_smoothing=0"});
        for (const char *reverse : {"reverse=0", "reverse=1"})
          expectMatches("kl_div", dtype, 8, V,
                        {split, keep, ahead, "BLOCK_SIZE=1024", reverse});
      }
    }
}

/// The tile IR `kernel` compiles to with `set` at BT = 8 and `V`.
std::string tileIR(const std::string &kernel, DType dtype, int64_t V,
                   const std::vector<std::string> &set) {
  const KernelSpec &spec = findKernel(kernel);
  dsl::Config c = spec.config(dtype, set, {{"BT", 8}, {"V", V}});
  CompileOptions o;
  o.upTo = Stage::Tile;
  return compile(spec.build(c), o).tileIR;
}

// Fused, jsd loads each input once per tile (2 loads of a tile), apart
// twice; jsd_logits' walks need each other's sums and stay apart.
TEST(RowSchedules, JsdWalksFuseIntoOneRead) {
  auto tileLoads = [](const std::string &ir) {
    size_t n = 0;
    for (size_t at = ir.find("tile.load"); at != std::string::npos;
         at = ir.find("tile.load", at + 1))
      n += ir.compare(ir.find("->", at), 15, "-> tensor<1024x") == 0;
    return n;
  };
  std::vector<std::string> plain = {"UNSWITCH=0", "PEEL_TAIL=0",
                                    "LOAD_AHEAD=0", "BLOCK_SIZE=1024"};
  auto with = [&](std::vector<std::string> set, const char *fuse) {
    set.push_back(fuse);
    return set;
  };
  EXPECT_EQ(tileLoads(tileIR("jsd", DType::F32, 3001,
                             with(plain, "FUSE_WALKS=1"))),
            2u);
  EXPECT_EQ(tileLoads(tileIR("jsd", DType::F32, 3001,
                             with(plain, "FUSE_WALKS=0"))),
            4u);
  EXPECT_EQ(tileLoads(tileIR("jsd_logits", DType::F32, 3001,
                             with(plain, "FUSE_WALKS=1"))),
            tileLoads(tileIR("jsd_logits", DType::F32, 3001,
                             with(plain, "FUSE_WALKS=0"))));
}

TEST(RowSchedules, KeptRowsCopiedAhead) {
  // Copies run 2, 4 and 7 tiles ahead of rows of 1 to 4 tiles per program,
  // so most of them are masked off past the walk's end.
  for (const char *kernel : {"jsd", "cross_entropy", "kl_div"})
    for (DType dtype : {DType::F32, DType::BF16})
      for (const char *split : {"SPLIT_ROWS=1", "SPLIT_ROWS=4"})
        for (const char *ahead : {"KEEP_COPY_AHEAD=2", "KEEP_COPY_AHEAD=4", "KEEP_COPY_AHEAD=7"})
          for (int64_t V : {int64_t(1), int64_t(3001)}) {
            // jsd's walks apart: fused, nothing is read twice.
            std::vector<std::string> set = {split, "KEEP_ROW=1", ahead,
                                            "BLOCK_SIZE=1024", "FUSE_WALKS=0"};
            EXPECT_NE(tileIR(kernel, dtype, V, set).find("tile.copy_async"),
                      std::string::npos)
                << kernel << " " << dtypeName(dtype) << " " << split << " "
                << ahead;
            expectMatches(kernel, dtype, 8, V, set);
          }
}

TEST(RowSchedules, RowLongerThanTheBudgetIsKeptInPart) {
  // Two f32 inputs take 8 bytes per element: 200 KiB keep 25600 of them.
  std::string ir = tileIR("jsd", DType::F32, 30000,
                          {"KEEP_ROW=1", "BLOCK_SIZE=1024", "FUSE_WALKS=0"});
  EXPECT_NE(ir.find("tile.shared_alloc {offset = 0 : i64, size = 25600 : i64}"),
            std::string::npos)
      << ir;
  for (const char *ahead : {"KEEP_COPY_AHEAD=0", "KEEP_COPY_AHEAD=2"})
    expectMatches("jsd", DType::F32, 3, 30000,
                  {"KEEP_ROW=1", "BLOCK_SIZE=1024", "FUSE_WALKS=0", ahead});
}

TEST(RowSchedules, SplitRowsGrowTheLaunch) {
  const KernelSpec &jsd = findKernel("jsd");
  dsl::Config c = jsd.config(DType::BF16, {"SPLIT_ROWS=4"}, {{"V", 4096}});
  CompileOptions o;
  o.upTo = Stage::Simt;
  CompiledKernel k = compile(jsd.build(c), o);
  EXPECT_EQ(k.splitRows, 4);
  EXPECT_EQ(k.clusterSize, 4);
}

} // namespace
