//===- ClusterTest.cpp - tile.cluster_reduce: DSL, interpreter, CUDA ------===//
#include "codegen/Nvrtc.h"
#include "runtime/Cache.h"
#include "runtime/CudaDriver.h"
#include "tilejit/Compiler.h"
#include "tilejit/DSL.h"
#include "tilejit/Interpreter.h"

#include "GpuTest.h"

#include <gtest/gtest.h>

using namespace tilejit;
using namespace tilejit::dsl;

namespace {

Config clusterConfig(int64_t cluster) {
  Config c;
  c.params = {{"CLUSTER_SIZE", cluster}, {"num_warps", 2}};
  return c;
}

/// Each program contributes (pid + 1) as f32, i32 and i64; program pid
/// writes the cluster's f32 sum, 2 x sum, max and min at out[4 pid ...] and
/// the i32 sum plus the i64 sum (2 x sum) at iout[pid]. With `diverge`, only
/// even programs reach the reduction (a bug the interpreter must report).
TileModule clusterKernel(int64_t cluster, bool diverge = false) {
  KernelBuilder k("cluster_sums", clusterConfig(cluster));
  Value out = k.pointerArg("out", DType::F32);
  Value iout = k.pointerArg("iout", DType::I32);
  Value pid = k.programId(0);
  Value x = (pid + 1.0).to(DType::F32);
  auto body = [&] {
    auto s = k.clusterReduce(KernelBuilder::ClusterOp::Sum, {x, x * 2.0});
    auto m = k.clusterReduce(KernelBuilder::ClusterOp::Max, {x});
    auto n = k.clusterReduce(KernelBuilder::ClusterOp::Min, {x});
    auto i = k.clusterReduce(KernelBuilder::ClusterOp::Sum, {pid + 1.0});
    auto l = k.clusterReduce(KernelBuilder::ClusterOp::Sum,
                             {(pid + 1.0).to(DType::I64)});
    k.store(out, pid * 4.0, s[0]);
    k.store(out, pid * 4.0 + 1.0, s[1]);
    k.store(out, pid * 4.0 + 2.0, m[0]);
    k.store(out, pid * 4.0 + 3.0, n[0]);
    k.store(iout, pid, i[0] + l[0].to(DType::I32));
  };
  if (diverge)
    k.ifThen(pid - (pid / 2.0) * 2.0 == 0.0, body);
  else
    body();
  return k.finish();
}

/// out[pid] = the sum over i < 3 of the cluster's sum of (pid + i + 1), plus
/// the cluster's max of pid + 1: a cluster_reduce in a loop, whose CUDA code
/// must not let a block push a round into slots a peer still reads, and one
/// outside it.
TileModule clusterLoopKernel(int64_t cluster) {
  KernelBuilder k("cluster_loop", clusterConfig(cluster));
  Value out = k.pointerArg("out", DType::F32);
  Value pid = k.programId(0);
  Var acc = k.constant(0, DType::F32);
  k.forRange(0, k.constant(3, DType::I32), 1, [&](Value i) {
    Value x = (pid + i + 1.0).to(DType::F32);
    acc = acc + k.clusterReduce(KernelBuilder::ClusterOp::Sum, {x})[0];
  });
  Value last = k.clusterReduce(KernelBuilder::ClusterOp::Max,
                               {(pid + 1.0).to(DType::F32)})[0];
  k.store(out, pid, acc + last);
  return k.finish();
}

/// What clusterLoopKernel writes for program p.
float clusterLoopExpected(int64_t C, int64_t p) {
  int64_t first = p / C * C + 1, last = first + C - 1;
  return float(3 * (first + last) * C / 2 + 3 * C + last);
}

TEST(Cluster, ReduceCombinesTheProgramsOfEachCluster) {
  const int64_t C = 4, programs = 8;
  TileModule m = clusterKernel(C);
  optimizeTile(m);
  std::vector<float> out(4 * programs, -1.f);
  std::vector<int32_t> iout(programs, -1);
  interpret(m.operation(), "cluster_sums", {programs, 1, 1},
            {InterpBuffer{out.data(), DType::F32, 4 * programs},
             InterpBuffer{iout.data(), DType::I32, programs}});
  for (int64_t p = 0; p < programs; ++p) {
    int64_t first = p / C * C + 1, last = first + C - 1;
    float sum = float((first + last) * C / 2);
    EXPECT_EQ(out[4 * p], sum) << "program " << p;
    EXPECT_EQ(out[4 * p + 1], 2 * sum) << "program " << p;
    EXPECT_EQ(out[4 * p + 2], float(last)) << "program " << p;
    EXPECT_EQ(out[4 * p + 3], float(first)) << "program " << p;
    EXPECT_EQ(iout[p], 2 * int32_t(sum)) << "program " << p;
  }
}

TEST(Cluster, DivergingProgramsAndBadGridsAreErrorsNotHangs) {
  TileModule m = clusterKernel(2, /*diverge=*/true);
  optimizeTile(m);
  std::vector<float> out(16);
  std::vector<int32_t> iout(4);
  std::vector<InterpArg> args = {InterpBuffer{out.data(), DType::F32, 16},
                                 InterpBuffer{iout.data(), DType::I32, 4}};
  try {
    interpret(m.operation(), "cluster_sums", {4, 1, 1}, args);
    FAIL() << "a cluster_reduce reached by half of a cluster must fail";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("not uniform in the cluster"),
              std::string::npos)
        << e.what();
  }
  TileModule ok = clusterKernel(2);
  optimizeTile(ok);
  try {
    interpret(ok.operation(), "cluster_sums", {3, 1, 1}, args);
    FAIL() << "a grid that is not a multiple of the cluster size must fail";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("not a multiple of its cluster"),
              std::string::npos)
        << e.what();
  }
}

TEST(Cluster, ReduceOfATileIsRejected) {
  KernelBuilder k("bad", clusterConfig(2));
  Value t = k.arange(32).to(DType::F32);
  EXPECT_THROW(k.clusterReduce(KernelBuilder::ClusterOp::Sum, {t}), Error);
}

TEST(Cluster, CudaUsesClusterDimsAndDistributedSharedMemory) {
  CompiledKernel k = compile(clusterKernel(4), {"sm_90", Stage::Ptx, {}});
  EXPECT_EQ(k.clusterSize, 4);
  EXPECT_NE(k.cuda.find("__cluster_dims__(4, 1, 1)"), std::string::npos);
  // Reductions outside loops: pushed to every block's mbarrier, and no
  // cluster barrier but the one after the mbarriers' initialization.
  EXPECT_NE(k.cuda.find("tj_cluster_reduce_once<4, tj_sum_op>"),
            std::string::npos);
  EXPECT_NE(k.ptx.find("st.async.shared::cluster.mbarrier"), std::string::npos);
  EXPECT_NE(k.ptx.find("mbarrier.try_wait.parity.acquire.cluster"),
            std::string::npos);
  EXPECT_EQ(k.ptx.find("barrier.cluster.arrive.release"), std::string::npos);
  std::string log;
  EXPECT_TRUE(nvrtc::ptxasAccepts(k.ptx, "sm_90", &log)) << log;
  // In a loop: the same pushes, on two mbarriers used in turn (waits of
  // either parity), still without a cluster barrier per combine.
  CompiledKernel loop =
      compile(clusterLoopKernel(4), {"sm_90", Stage::Ptx, {}});
  EXPECT_NE(loop.cuda.find("tj_cluster_reduce_loop<4, tj_sum_op>"),
            std::string::npos);
  EXPECT_NE(loop.cuda.find("tj_cluster_reduce_once<4, tj_max_op>"),
            std::string::npos);
  EXPECT_NE(loop.ptx.find("st.async.shared::cluster"), std::string::npos);
  EXPECT_EQ(loop.ptx.find("barrier.cluster.arrive.release"), std::string::npos);
  EXPECT_TRUE(nvrtc::ptxasAccepts(loop.ptx, "sm_90", &log)) << log;
  // Clusters need sm_90: an older target gets our message, not a crash.
  try {
    compile(clusterKernel(4), {"sm_80", Stage::Ptx, {}});
    FAIL() << "clusters compiled for sm_80";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("compile for sm_90 or newer"),
              std::string::npos)
        << e.what();
  }
  // A cluster of one program needs no cluster hardware.
  CompiledKernel one = compile(clusterKernel(1), {"sm_80", Stage::Ptx, {}});
  EXPECT_EQ(one.cuda.find("__cluster_dims__"), std::string::npos);
}

TEST(ClusterGpu, ReduceMatchesTheInterpreter) {
  TILEJIT_SKIP_WITHOUT_GPU();
  cuda::Device device = cuda::Device::open();
  for (int64_t C : {2, 4, 8, 16}) {
    const int64_t programs = 2 * C;
    cuda::DeviceBuffer out(4 * programs * sizeof(float)),
        iout(programs * sizeof(int32_t));
    runOnGpu(device, clusterKernel(C), programs, {&out, &iout});
    std::vector<float> got(4 * programs);
    out.copyToHost(got.data(), got.size() * sizeof(float));
    std::vector<int32_t> igot(programs);
    iout.copyToHost(igot.data(), igot.size() * sizeof(int32_t));
    for (int64_t p = 0; p < programs; ++p) {
      int64_t first = p / C * C + 1, last = first + C - 1;
      EXPECT_EQ(got[4 * p], float((first + last) * C / 2)) << C << " " << p;
      EXPECT_EQ(got[4 * p + 1], float((first + last) * C)) << C << " " << p;
      EXPECT_EQ(got[4 * p + 2], float(last)) << C << " " << p;
      EXPECT_EQ(got[4 * p + 3], float(first)) << C << " " << p;
      EXPECT_EQ(igot[p], int32_t((first + last) * C)) << C << " " << p;
    }
  }
}

/// clusterLoopKernel in the interpreter.
std::vector<float> interpretClusterLoop(int64_t C, int64_t programs) {
  TileModule m = clusterLoopKernel(C);
  optimizeTile(m);
  std::vector<float> out(programs, -1.f);
  interpret(m.operation(), "cluster_loop", {programs, 1, 1},
            {InterpBuffer{out.data(), DType::F32, programs}});
  return out;
}

TEST(Cluster, ReduceInALoopCombinesEachRound) {
  std::vector<float> got = interpretClusterLoop(4, 8);
  for (int64_t p = 0; p < 8; ++p)
    EXPECT_EQ(got[p], clusterLoopExpected(4, p)) << p;
}

TEST(ClusterGpu, ReduceInALoopMatchesTheInterpreter) {
  TILEJIT_SKIP_WITHOUT_GPU();
  cuda::Device device = cuda::Device::open();
  for (int64_t C : {2, 8}) {
    const int64_t programs = 4 * C;
    std::vector<float> want = interpretClusterLoop(C, programs);
    cuda::DeviceBuffer out(programs * sizeof(float));
    runOnGpu(device, clusterLoopKernel(C), programs, {&out});
    std::vector<float> got(programs);
    out.copyToHost(got.data(), got.size() * sizeof(float));
    for (int64_t p = 0; p < programs; ++p) {
      EXPECT_EQ(want[p], clusterLoopExpected(C, p)) << C << " " << p;
      EXPECT_EQ(got[p], clusterLoopExpected(C, p)) << C << " " << p;
    }
  }
}

/// kRounds rounds of cluster sums with the programs out of step: in round
/// i, program p first spins (3 i + 5 p) % 16 * 8 loop steps, then combines
/// r + 1 + C (i % 4) (every round; r is p's rank in its cluster of C) and
/// r + i (every third round: a combine under a branch, counting its own
/// runs). out[p] gets the sum of the first combines' results over the
/// rounds, out[programs + p] that of the second (exact in f32). A peer that
/// pushed a round into a buffer still being read, or bytes into an mbarrier
/// phase not yet completed, shows as a wrong sum or a hang. Every third
/// cluster runs no round (its programs never combine, and still exit).
/// The spins differ per program, not per warp: a warp of a block that reads
/// a round's slots late is not provoked here.
constexpr int64_t kRounds = 300;
TileModule clusterStressKernel(int64_t cluster) {
  KernelBuilder k("cluster_stress", clusterConfig(cluster));
  Value out = k.pointerArg("out", DType::F32);
  Value pid = k.programId(0);
  Value programs = k.numPrograms(0);
  Value zero = k.constant(0, DType::F32);
  Var every = zero, third = zero, spin = zero;
  Value id = pid / double(cluster);
  Value rank = pid - id * double(cluster);
  Value rounds =
      where(id - (id / 3.0) * 3.0 == 2.0, 0.0, k.constant(kRounds, DType::I32));
  k.forRange(0, rounds, 1, [&](Value i) {
    Value n = i * 3.0 + pid * 5.0;
    Value steps = (n - (n / 16.0) * 16.0) * 8.0;
    k.forRange(0, steps, 1, [&](Value) { spin = spin * 0.5 + 1.0; });
    Value x = rank + 1.0 + (i - (i / 4.0) * 4.0) * double(cluster);
    every = every + k.clusterReduce(KernelBuilder::ClusterOp::Sum,
                                    {x.to(DType::F32)})[0];
    k.ifThen(i - (i / 3.0) * 3.0 == 0.0, [&] {
      third = third + k.clusterReduce(KernelBuilder::ClusterOp::Sum,
                                      {(rank + i).to(DType::F32)})[0];
    });
  });
  // spin is at most 2: adding 0 x spin keeps the spinning alive.
  k.store(out, pid, every + spin * 0.0);
  k.store(out, programs + pid, third);
  return k.finish();
}

/// What program p of clusterStressKernel writes: {every, third}.
std::pair<float, float> clusterStressExpected(int64_t C, int64_t p) {
  int64_t every = 0, third = 0;
  for (int64_t i = 0; i < (p / C % 3 == 2 ? 0 : kRounds); ++i) {
    every += C * (C + 1) / 2 + C * C * (i % 4);
    if (i % 3 == 0)
      third += C * (C - 1) / 2 + C * i;
  }
  return {float(every), float(third)};
}

TEST(Cluster, ReduceInALoopOutOfStepCombinesEachRound) {
  const int64_t C = 2, programs = 6;
  TileModule m = clusterStressKernel(C);
  optimizeTile(m);
  std::vector<float> out(2 * programs, -1.f);
  interpret(m.operation(), "cluster_stress", {programs, 1, 1},
            {InterpBuffer{out.data(), DType::F32, 2 * programs}});
  for (int64_t p = 0; p < programs; ++p) {
    EXPECT_EQ(out[p], clusterStressExpected(C, p).first) << p;
    EXPECT_EQ(out[programs + p], clusterStressExpected(C, p).second) << p;
  }
}

// Combines in nested loops and under a branch, and clusters that skip
// them, compile for sm_90 without a GPU too (the next test runs them).
TEST(Cluster, ReduceInALoopOutOfStepCompiles) {
  CompiledKernel k = compile(clusterStressKernel(8), {"sm_90", Stage::Ptx, {}});
  EXPECT_NE(k.cuda.find("tj_cluster_reduce_loop<8, tj_sum_op>"),
            std::string::npos);
  std::string log;
  EXPECT_TRUE(nvrtc::ptxasAccepts(k.ptx, "sm_90", &log)) << log;
}

TEST(ClusterGpu, ReduceInALoopOutOfStepMatchesTheSums) {
  TILEJIT_SKIP_WITHOUT_GPU();
  cuda::Device device = cuda::Device::open();
  for (int64_t C : {2, 8, 16}) {
    const int64_t programs = 64 * C;
    cuda::DeviceBuffer out(2 * programs * sizeof(float));
    runOnGpu(device, clusterStressKernel(C), programs, {&out});
    std::vector<float> got(2 * programs);
    out.copyToHost(got.data(), got.size() * sizeof(float));
    for (int64_t p = 0; p < programs; ++p) {
      EXPECT_EQ(got[p], clusterStressExpected(C, p).first) << C << " " << p;
      EXPECT_EQ(got[programs + p], clusterStressExpected(C, p).second)
          << C << " " << p;
    }
  }
}

} // namespace
