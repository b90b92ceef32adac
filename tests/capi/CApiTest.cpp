//===- CApiTest.cpp - tilejit.h through libtilejit.so ---------------------===//
//
// Linked against the shared library alone: what it exports is all a caller
// of the C ABI (Python's ctypes, Rust, Julia) gets. Kernels compiled, queried
// and run in the interpreter; errors as status codes and messages; a user's
// kernel registered through the exported C++ API and found by name; the
// reduced CE+TVD against the C++ op.
//
//===----------------------------------------------------------------------===//
#include "tilejit/tilejit.h"

#include "tilejit/DSL.h"
#include "tilejit/KernelSpec.h"
#include "tilejit/ops/FusedCeTvd.h"
#include "tilejit/ops/CrossEntropy.h"
#include "tilejit/ops/Distillation.h"
#include "tilejit/ops/LinearCe.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace tilejit;

namespace {

TEST(CApi, CompilesQueriesRunsAndReportsErrors) {
  tilejit_kernel *k = nullptr;
  ASSERT_EQ(tilejit_kernel_compile("ce_tvd_row_weights", TILEJIT_F32, nullptr,
                                   0, nullptr, nullptr, 0, nullptr, &k),
            0)
      << tilejit_last_error();
  EXPECT_STREQ(tilejit_kernel_name(k), "ce_tvd_row_weights");
  ASSERT_EQ(tilejit_kernel_num_params(k), 7);
  const char *name = nullptr;
  int32_t isPointer = -1, dtype = -1;
  ASSERT_EQ(tilejit_kernel_param(k, 1, &name, &isPointer, &dtype), 0);
  EXPECT_STREQ(name, "weights");
  EXPECT_EQ(isPointer, 1);
  EXPECT_EQ(dtype, TILEJIT_F32);
  EXPECT_NE(tilejit_kernel_param(k, 7, &name, &isPointer, &dtype), 0);
  EXPECT_NE(std::string(tilejit_last_error()).find("out of range"),
            std::string::npos);

  int64_t target[3] = {0, -100, 2};
  float weights[3] = {0, 0, 0};
  tilejit_arg args[7] = {
      {TILEJIT_ARG_POINTER, TILEJIT_I64, target, 3, 0, 0},
      {TILEJIT_ARG_POINTER, TILEJIT_F32, weights, 3, 0, 0},
      {TILEJIT_ARG_I32, TILEJIT_I32, nullptr, 0, 3, 0},
      {TILEJIT_ARG_I64, TILEJIT_I64, nullptr, 0, -100, 0},
      {TILEJIT_ARG_F32, TILEJIT_F32, nullptr, 0, 0, 1.f},
      {TILEJIT_ARG_F32, TILEJIT_F32, nullptr, 0, 0, 3.f},
      {TILEJIT_ARG_I32, TILEJIT_I32, nullptr, 0, 1, 0}};
  int64_t grid[3] = {1, 1, 1};
  ASSERT_EQ(tilejit_kernel_run_cpu(k, grid, args, 7), 0)
      << tilejit_last_error();
  EXPECT_FLOAT_EQ(weights[0], 0.5f);
  EXPECT_FLOAT_EQ(weights[1], 1.5f);
  EXPECT_STREQ(tilejit_last_error(), "");

  args[2].kind = TILEJIT_ARG_F32;
  args[2].dtype = TILEJIT_F32;
  EXPECT_NE(tilejit_kernel_run_cpu(k, grid, args, 7), 0);
  EXPECT_NE(std::string(tilejit_last_error()).find("'BT'"), std::string::npos)
      << tilejit_last_error();
  args[2].kind = 9;
  EXPECT_NE(tilejit_kernel_run_cpu(k, grid, args, 7), 0);
  EXPECT_NE(tilejit_kernel_run_cpu(k, nullptr, args, 7), 0);
  tilejit_kernel_destroy(k);

  tilejit_kernel *none = reinterpret_cast<tilejit_kernel *>(1);
  EXPECT_NE(tilejit_kernel_compile("no_such_kernel", TILEJIT_F32, nullptr, 0,
                                   nullptr, nullptr, 0, nullptr, &none),
            0);
  EXPECT_EQ(none, nullptr);
  EXPECT_NE(std::string(tilejit_last_error()).find("no_such_kernel"),
            std::string::npos);
  EXPECT_STREQ(tilejit_version(), TILEJIT_VERSION);
}

TEST(CApi, TunedCompileSaysWhereItsConfigCameFrom) {
  const char *names[] = {"BT", "V"};
  const int64_t values[] = {100, 1000};
  tilejit_kernel *k = nullptr;
  ASSERT_EQ(tilejit_kernel_compile_flags("jsd", TILEJIT_BF16, nullptr, 0, names,
                                         values, 2, nullptr,
                                         TILEJIT_COMPILE_TUNED, &k),
            0)
      << tilejit_last_error();
  // A tuned entry, or the defaults and why: no GPU, or none stored.
  std::string source = tilejit_kernel_config_source(k);
  EXPECT_TRUE(source.rfind("tuned, ", 0) == 0 ||
              source.rfind("default; ", 0) == 0)
      << source;
  tilejit_kernel_usage usage;
  if (tilejit_kernel_compile_gpu(k) != 0) { // no GPU: nothing is loaded
    EXPECT_NE(tilejit_kernel_resources(k, &usage), 0);
    EXPECT_NE(std::string(tilejit_last_error()).find("compileForGpu"),
              std::string::npos)
        << tilejit_last_error();
  } else {
    ASSERT_EQ(tilejit_kernel_resources(k, &usage), 0) << tilejit_last_error();
    EXPECT_GT(usage.threads, 0);
    EXPECT_GT(usage.registers, 0);
  }
  EXPECT_NE(tilejit_kernel_resources(k, nullptr), 0);
  tilejit_kernel_destroy(k);

  ASSERT_EQ(tilejit_kernel_compile("jsd", TILEJIT_BF16, nullptr, 0, names,
                                   values, 2, nullptr, &k),
            0);
  EXPECT_STREQ(tilejit_kernel_config_source(k), "default");
  tilejit_kernel_destroy(k);

  tilejit_kernel *none = reinterpret_cast<tilejit_kernel *>(1);
  EXPECT_NE(tilejit_kernel_compile_flags("jsd", TILEJIT_BF16, nullptr, 0, names,
                                         values, 2, nullptr, 4u, &none),
            0);
  EXPECT_EQ(none, nullptr);
  EXPECT_NE(std::string(tilejit_last_error()).find("unknown flag"),
            std::string::npos)
      << tilejit_last_error();
}

TEST(CApi, TuneStoresWhatTunedCompilesFind) {
  const char *names[] = {"BT", "V"};
  const int64_t values[] = {16, 1000};
  const char *beta[] = {"beta=0.25"};
  char best[256] = "unset";
  EXPECT_NE(tilejit_kernel_tune("scale_grad", TILEJIT_BF16, nullptr, nullptr,
                                0, nullptr, 0, 3, 0, best, sizeof best),
            0);
  EXPECT_NE(std::string(tilejit_last_error()).find("declares no arguments"),
            std::string::npos)
      << tilejit_last_error();
  EXPECT_NE(tilejit_kernel_tune("jsd", TILEJIT_BF16, names, values, 2, beta, 1,
                                0, 0, best, sizeof best),
            0);
  // The tuning database of this test alone.
  std::string dir = ::testing::TempDir() + "/capi-tune-cache";
  const char *before = std::getenv("TILEJIT_CACHE_DIR");
  std::string saved = before ? before : "";
  setenv("TILEJIT_CACHE_DIR", dir.c_str(), 1);
  int rc = tilejit_kernel_tune("jsd", TILEJIT_BF16, names, values, 2, beta, 1,
                               3, 0, best, sizeof best);
  if (before)
    setenv("TILEJIT_CACHE_DIR", saved.c_str(), 1);
  else
    unsetenv("TILEJIT_CACHE_DIR");
  if (rc != 0) { // no GPU
    EXPECT_NE(std::string(tilejit_last_error()).find("GPU"), std::string::npos)
        << tilejit_last_error();
    return;
  }
  EXPECT_NE(std::string(best).find("BLOCK_SIZE="), std::string::npos) << best;
  tilejit_kernel *k = nullptr;
  ASSERT_EQ(tilejit_kernel_compile_flags("jsd", TILEJIT_BF16, nullptr, 0, names,
                                         values, 2, nullptr,
                                         TILEJIT_COMPILE_TUNED, &k),
            0)
      << tilejit_last_error();
  EXPECT_EQ(std::string(tilejit_kernel_config_source(k)).rfind("tuned, ", 0),
            0u)
      << tilejit_kernel_config_source(k);
  tilejit_kernel_destroy(k);
}

/// y[i] = a * x[i] + b over n elements.
TileModule axpb(const dsl::Config &c) {
  using namespace dsl;
  int64_t block = c.get("BLOCK_SIZE");
  KernelBuilder k("capi_axpb", c);
  Value x = k.pointerArg("x", DType::F32);
  Value y = k.pointerArg("y", DType::F32);
  Value n = k.scalarArg("n", DType::I32);
  Value a = k.scalarArg("a", DType::F32);
  Value b = k.scalarArg("b", DType::F32);
  Value offs = k.programId(0) * double(block) + k.arange(block);
  Value in = offs < n;
  k.store(y, offs, a * k.load(x, offs, in, 0) + b, in);
  return k.finish();
}

TEST(CApi, ArgsInitGivesTheOpsDefaults) {
  tilejit_ce_tvd_reduced_args r;
  std::memset(&r, 0x55, sizeof(r));
  tilejit_ce_tvd_reduced_args_init(&r);
  EXPECT_EQ(r.ignore_index, -100);
  EXPECT_EQ(r.alpha, 1.0);
  EXPECT_EQ(r.beta, 1.0);
  EXPECT_EQ(r.mean, 1);
  EXPECT_EQ(r.student, nullptr);
  EXPECT_EQ(r.row_stride, 0);
  tilejit_ce_tvd_args u;
  tilejit_ce_tvd_args_init(&u);
  EXPECT_EQ(u.ignore_index, -100);
  EXPECT_EQ(u.forward_kernel, nullptr);
  tilejit_linear_ce_args l;
  std::memset(&l, 0x55, sizeof(l));
  tilejit_linear_ce_args_init(&l);
  ops::LinearCeArgs cxx;
  EXPECT_EQ(l.ignore_index, cxx.ignoreIndex);
  EXPECT_EQ(l.reduction, TILEJIT_REDUCTION_MEAN);
  EXPECT_EQ(l.gemm_workspace_bytes, cxx.gemmWorkspaceBytes);
  EXPECT_EQ(l.label_smoothing, 0.0);
  EXPECT_EQ(l.bias, nullptr);
}

TEST(CApi, ListsTheRegisteredKernels) {
  int32_t n = tilejit_kernel_count();
  ASSERT_GT(n, 0);
  std::vector<std::string> names;
  for (int32_t i = 0; i < n; ++i)
    names.push_back(tilejit_kernel_name_at(i));
  EXPECT_NE(std::find(names.begin(), names.end(), "jsd"), names.end());
  EXPECT_NE(std::find(names.begin(), names.end(), "fused_ce_tvd_loss_grad"),
            names.end());
  EXPECT_EQ(tilejit_kernel_name_at(n), nullptr);
  EXPECT_EQ(tilejit_kernel_name_at(-1), nullptr);
}

TEST(CApi, UserKernelRegisteredInCxxIsFoundByName) {
  registerKernel({"capi_axpb",
                  "y = a x + b",
                  {{"BLOCK_SIZE", {256}, 256, "elements per program"},
                   {"num_warps", {4}, 4, "warps per program"}},
                  {DType::F32},
                  axpb,
                  {}});
  tilejit_kernel *k = nullptr;
  ASSERT_EQ(tilejit_kernel_compile("capi_axpb", TILEJIT_F32, nullptr, 0,
                                   nullptr, nullptr, 0, nullptr, &k),
            0)
      << tilejit_last_error();
  ASSERT_EQ(tilejit_kernel_num_params(k), 5);
  std::vector<float> x(300), y(300);
  for (int i = 0; i < 300; ++i)
    x[i] = float(i);
  tilejit_arg args[5] = {{TILEJIT_ARG_POINTER, TILEJIT_F32, x.data(), 300, 0, 0},
                         {TILEJIT_ARG_POINTER, TILEJIT_F32, y.data(), 300, 0, 0},
                         {TILEJIT_ARG_I32, TILEJIT_I32, nullptr, 0, 300, 0},
                         {TILEJIT_ARG_F32, TILEJIT_F32, nullptr, 0, 0, 2.f},
                         {TILEJIT_ARG_F32, TILEJIT_F32, nullptr, 0, 0, 1.f}};
  int64_t grid[3] = {2, 1, 1};
  ASSERT_EQ(tilejit_kernel_run_cpu(k, grid, args, 5), 0) << tilejit_last_error();
  for (int i = 0; i < 300; ++i)
    ASSERT_EQ(y[i], 2.f * i + 1.f) << i;
  tilejit_kernel_destroy(k);
}

TEST(CApi, ReducedCeTvdMatchesTheCxxOp) {
  const int64_t BT = 5, V = 700, stride = 703;
  std::vector<float> student(BT * stride, 1e30f), teacher(BT * stride, 1e30f);
  for (int64_t r = 0; r < BT; ++r)
    for (int64_t v = 0; v < V; ++v) {
      student[r * stride + v] = float(std::sin(0.37 * v + r));
      teacher[r * stride + v] = float(std::cos(0.21 * v - r));
    }
  std::vector<int64_t> target = {3, -100, 699, 0, 42};
  auto cxx = [&](std::vector<float> &grad, float &loss) {
    ops::CeTvdReducedArgs a;
    a.dtype = DType::F32;
    a.BT = BT;
    a.V = V;
    a.student = student.data();
    a.teacher = teacher.data();
    a.rowStride = stride;
    a.target = target.data();
    a.grad = grad.data();
    a.loss = &loss;
    a.alpha = 0.5;
    std::vector<char> ws(ops::ceTvdReducedWorkspaceBytes(a) + 16);
    void *aligned = ws.data() + (16 - uintptr_t(ws.data()) % 16) % 16;
    ops::ceTvdReduced(a, aligned, ws.size() - 16, ops::Device::Cpu);
  };
  std::vector<float> want(BT * stride), grad(BT * stride);
  float wantLoss = -1, loss = -1;
  cxx(want, wantLoss);

  tilejit_ce_tvd_reduced_args c;
  std::memset(&c, 0, sizeof(c));
  c.dtype = TILEJIT_F32;
  c.bt = BT;
  c.v = V;
  c.student = student.data();
  c.teacher = teacher.data();
  c.row_stride = stride;
  c.target = target.data();
  c.grad = grad.data();
  c.loss = &loss;
  c.ignore_index = -100;
  c.alpha = 0.5;
  c.beta = 1;
  c.mean = 1;
  size_t bytes = 0;
  ASSERT_EQ(tilejit_ce_tvd_reduced_workspace_bytes(&c, &bytes), 0);
  std::vector<float> ws(bytes / sizeof(float) + 1);
  ASSERT_EQ(tilejit_ce_tvd_reduced(&c, ws.data(), bytes, TILEJIT_DEVICE_CPU,
                                   nullptr),
            0)
      << tilejit_last_error();
  EXPECT_EQ(loss, wantLoss);
  EXPECT_GT(loss, 0.f);
  EXPECT_EQ(grad, want);

  c.row_stride = 10;
  EXPECT_NE(tilejit_ce_tvd_reduced(&c, ws.data(), bytes, TILEJIT_DEVICE_CPU,
                                   nullptr),
            0);
  EXPECT_NE(std::string(tilejit_last_error()).find("must be >= V"),
            std::string::npos);
  EXPECT_NE(tilejit_ce_tvd_reduced(nullptr, nullptr, 0, TILEJIT_DEVICE_CPU,
                                   nullptr),
            0);
  EXPECT_NE(tilejit_ce_tvd_reduced(&c, ws.data(), bytes, 7, nullptr), 0);
}

TEST(CApi, UnreducedCeTvdMatchesTheCxxOp) {
  const int64_t BT = 4, V = 500;
  std::vector<float> student(BT * V), teacher(BT * V);
  for (int64_t i = 0; i < BT * V; ++i) {
    student[i] = float(std::sin(0.37 * i));
    teacher[i] = float(std::cos(0.21 * i));
  }
  std::vector<int64_t> target = {3, -100, 499, 7};
  std::vector<float> gCe = {1, 2, 3, 4}, gTvd = {0.5, 0.5, 1, 2};
  ops::CeTvdArgs a;
  a.dtype = DType::F32;
  a.BT = BT;
  a.V = V;
  a.student = student.data();
  a.teacher = teacher.data();
  a.target = target.data();
  size_t stateBytes = tilejit_ce_tvd_state_bytes(BT);
  ASSERT_EQ(stateBytes, ops::ceTvdStateBytes(BT));
  std::vector<float> ce(BT), tvd(BT), grad(BT * V), state(stateBytes / 4);
  ops::ceTvdForward(a, ce.data(), tvd.data(), state.data(), ops::Device::Cpu);
  ops::ceTvdBackward(a, state.data(), gCe.data(), gTvd.data(), grad.data(), 0,
                     ops::Device::Cpu);

  tilejit_ce_tvd_args c;
  std::memset(&c, 0, sizeof(c));
  c.dtype = TILEJIT_F32;
  c.bt = BT;
  c.v = V;
  c.student = student.data();
  c.teacher = teacher.data();
  c.target = target.data();
  c.ignore_index = -100;
  std::vector<float> ce2(BT), tvd2(BT), grad2(BT * V), state2(stateBytes / 4);
  ASSERT_EQ(tilejit_ce_tvd_forward(&c, ce2.data(), tvd2.data(), state2.data(),
                                   TILEJIT_DEVICE_CPU, nullptr),
            0)
      << tilejit_last_error();
  ASSERT_EQ(tilejit_ce_tvd_backward(&c, state2.data(), gCe.data(), gTvd.data(),
                                    grad2.data(), 0, TILEJIT_DEVICE_CPU,
                                    nullptr),
            0)
      << tilejit_last_error();
  EXPECT_EQ(ce2, ce);
  EXPECT_EQ(tvd2, tvd);
  EXPECT_EQ(grad2, grad);
  EXPECT_EQ(ce2[1], 0.f); // ignored row
  c.forward_kernel = "no_such_kernel";
  EXPECT_NE(tilejit_ce_tvd_forward(&c, ce2.data(), tvd2.data(), state2.data(),
                                   TILEJIT_DEVICE_CPU, nullptr),
            0);
  EXPECT_NE(std::string(tilejit_last_error()).find("unknown forward kernel"),
            std::string::npos);
}

TEST(CApi, LinearCeMatchesTheCxxOp) {
  const int64_t N = 6, d = 5, V = 40;
  std::vector<float> x(N * d), W(V * d), bias(V);
  for (int64_t i = 0; i < N * d; ++i)
    x[i] = float(std::sin(0.7 * i));
  for (int64_t i = 0; i < V * d; ++i)
    W[i] = float(std::cos(0.3 * i)) / 2;
  for (int64_t v = 0; v < V; ++v)
    bias[v] = 0.01f * float(v % 7);
  std::vector<int64_t> target = {1, 39, -100, 0, 17, 40}; // 40: outside V
  auto run = [&](bool viaC, std::vector<float> &dx, std::vector<float> &dW,
                 std::vector<float> &db, float *loss, int32_t *bad) {
    ops::LinearCeArgs a;
    a.dtype = DType::F32;
    a.N = N;
    a.d = d;
    a.V = V;
    a.input = x.data();
    a.weight = W.data();
    a.bias = bias.data();
    a.target = target.data();
    a.labelSmoothing = 0.1;
    a.zLoss = 1e-3;
    a.loss = loss;
    a.gradInput = dx.data();
    a.gradWeight = dW.data();
    a.gradBias = db.data();
    a.badTarget = bad;
    a.chunkRows = 4;
    if (!viaC) {
      std::vector<char> ws(ops::linearCeWorkspaceBytes(a, ops::Device::Cpu));
      ops::linearCe(a, ws.data(), ws.size(), ops::Device::Cpu);
      return;
    }
    tilejit_linear_ce_args c;
    std::memset(&c, 0, sizeof(c));
    c.dtype = TILEJIT_F32;
    c.n = N;
    c.d = d;
    c.v = V;
    c.input = x.data();
    c.weight = W.data();
    c.bias = bias.data();
    c.target = target.data();
    c.ignore_index = -100;
    c.label_smoothing = 0.1;
    c.z_loss = 1e-3;
    c.reduction = TILEJIT_REDUCTION_MEAN;
    c.loss = loss;
    c.grad_input = dx.data();
    c.grad_weight = dW.data();
    c.grad_bias = db.data();
    c.bad_target = bad;
    c.chunk_rows = 4;
    c.gemm_workspace_bytes = 8 << 20;
    size_t bytes = 0;
    ASSERT_EQ(tilejit_linear_ce_workspace_bytes(&c, TILEJIT_DEVICE_CPU, &bytes),
              0)
        << tilejit_last_error();
    std::vector<char> ws(bytes);
    ASSERT_EQ(tilejit_linear_ce(&c, ws.data(), bytes, TILEJIT_DEVICE_CPU,
                                nullptr),
              0)
        << tilejit_last_error();
    c.reduction = 9;
    EXPECT_NE(tilejit_linear_ce(&c, ws.data(), bytes, TILEJIT_DEVICE_CPU,
                                nullptr),
              0);
    EXPECT_NE(std::string(tilejit_last_error()).find("tilejit_reduction"),
              std::string::npos);
  };
  std::vector<float> dx(N * d), dW(V * d), db(V), dx2(N * d), dW2(V * d),
      db2(V);
  float loss[2] = {-1, -1}, loss2[2] = {-1, -1};
  int32_t bad = -1, bad2 = -1;
  run(false, dx, dW, db, loss, &bad);
  run(true, dx2, dW2, db2, loss2, &bad2);
  EXPECT_EQ(bad, 6);
  EXPECT_EQ(bad2, 6);
  EXPECT_GT(loss[0], 0.f);
  EXPECT_EQ(loss2[0], loss[0]);
  EXPECT_EQ(loss2[1], loss[1]);
  EXPECT_EQ(dx2, dx);
  EXPECT_EQ(dW2, dW);
  EXPECT_EQ(db2, db);
}

} // namespace

TEST(CApi, CrossEntropyMatchesTheCxxOp) {
  const int64_t BT = 5, V = 300;
  std::vector<float> logits(BT * V), weight(V);
  for (int64_t i = 0; i < BT * V; ++i)
    logits[i] = float(std::sin(0.37 * i)) * 3;
  for (int64_t v = 0; v < V; ++v)
    weight[v] = 0.5f + float(v % 5) / 5;
  std::vector<int64_t> target = {1, V - 1, -100, 0, V}; // V: outside
  auto run = [&](bool viaC, std::vector<float> &grad, float *loss,
                 int32_t *bad) {
    std::vector<float> rows(BT), z(BT);
    if (!viaC) {
      ops::CrossEntropyArgs a;
      a.dtype = DType::F32;
      a.BT = BT;
      a.V = V;
      a.logits = logits.data();
      a.grad = grad.data();
      a.target = target.data();
      a.classWeight = weight.data();
      a.labelSmoothing = 0.1;
      a.zLoss = 1e-3;
      a.softcap = 7;
      a.loss = loss;
      a.rowLoss = rows.data();
      a.rowZLoss = z.data();
      a.badTarget = bad;
      std::vector<char> ws(ops::crossEntropyWorkspaceBytes(a));
      ops::crossEntropy(a, ws.data(), ws.size(), ops::Device::Cpu, nullptr);
      return;
    }
    tilejit_cross_entropy_args c;
    tilejit_cross_entropy_args_init(&c);
    EXPECT_EQ(c.reduction, TILEJIT_REDUCTION_MEAN);
    EXPECT_EQ(c.grad_scale, 1.0);
    EXPECT_EQ(c.ignore_index, -100);
    c.dtype = TILEJIT_F32;
    c.bt = BT;
    c.v = V;
    c.logits = logits.data();
    c.grad = grad.data();
    c.target = target.data();
    c.class_weight = weight.data();
    c.label_smoothing = 0.1;
    c.z_loss = 1e-3;
    c.softcap = 7;
    c.loss = loss;
    c.row_loss = rows.data();
    c.row_z_loss = z.data();
    c.bad_target = bad;
    size_t bytes = 0;
    ASSERT_EQ(tilejit_cross_entropy_workspace_bytes(&c, &bytes), 0)
        << tilejit_last_error();
    std::vector<char> ws(bytes);
    ASSERT_EQ(tilejit_cross_entropy(&c, ws.data(), bytes, TILEJIT_DEVICE_CPU,
                                    nullptr),
              0)
        << tilejit_last_error();
  };
  std::vector<float> g1(BT * V), g2(BT * V);
  float l1[2], l2[2];
  int32_t b1 = -1, b2 = -1;
  run(false, g1, l1, &b1);
  run(true, g2, l2, &b2);
  EXPECT_EQ(g1, g2);
  EXPECT_EQ(l1[0], l2[0]);
  EXPECT_GT(l1[0], 0.f);
  EXPECT_EQ(b2, 5);
  tilejit_cross_entropy_args bad;
  tilejit_cross_entropy_args_init(&bad);
  bad.reduction = 7;
  size_t bytes = 0;
  EXPECT_NE(tilejit_cross_entropy_workspace_bytes(&bad, &bytes), 0);
  EXPECT_NE(std::string(tilejit_last_error()).find("tilejit_reduction"),
            std::string::npos);
}

TEST(CApi, DistillationMatchesTheCxxOp) {
  constexpr int64_t BT = 5, V = 301;
  std::vector<float> student(BT * V), teacher(BT * V), up(BT);
  for (int64_t i = 0; i < BT * V; ++i) {
    student[i] = float((i * 37) % 101) / 20.f - 2.5f;
    teacher[i] = float((i * 53) % 89) / 18.f - 2.4f;
  }
  for (int64_t r = 0; r < BT; ++r)
    up[r] = 0.5f + float(r);
  // ignore_index -1, not the default: the field must reach the op.
  std::vector<int64_t> label = {1, -1, 7, 0, -1};
  auto run = [&](bool viaC, int32_t divergence, int32_t reduction,
                 std::vector<float> &grad, std::vector<float> &rows,
                 float *loss) {
    const float *gradOutput =
        reduction == TILEJIT_REDUCTION_NONE ? up.data() : nullptr;
    if (!viaC) {
      ops::DistillationArgs a;
      a.divergence = ops::Divergence(divergence);
      a.dtype = DType::F32;
      a.BT = BT;
      a.V = V;
      a.student = student.data();
      a.teacher = teacher.data();
      a.grad = grad.data();
      a.label = label.data();
      a.ignoreIndex = -1;
      a.temperature = 2;
      a.beta = 0.25;
      a.reduction = reduction == TILEJIT_REDUCTION_NONE
                        ? ops::Reduction::None
                        : reduction == TILEJIT_REDUCTION_MEAN
                              ? ops::Reduction::Mean
                              : ops::Reduction::Sum;
      a.gradOutput = gradOutput;
      a.loss = loss;
      a.rowLoss = rows.data();
      alignas(16) char ws[16];
      ops::distillation(a, ws, sizeof ws, ops::Device::Cpu, nullptr);
      return;
    }
    tilejit_distillation_args c;
    tilejit_distillation_args_init(&c);
    EXPECT_EQ(c.divergence, TILEJIT_KL_FORWARD);
    EXPECT_EQ(c.reduction, TILEJIT_REDUCTION_MEAN);
    EXPECT_EQ(c.temperature, 1.0);
    EXPECT_EQ(c.beta, 0.5);
    EXPECT_EQ(c.ignore_index, -100);
    c.divergence = divergence;
    c.dtype = TILEJIT_F32;
    c.bt = BT;
    c.v = V;
    c.student = student.data();
    c.teacher = teacher.data();
    c.grad = grad.data();
    c.label = label.data();
    c.ignore_index = -1;
    c.temperature = 2;
    c.beta = 0.25;
    c.reduction = reduction;
    c.grad_output = gradOutput;
    c.loss = loss;
    c.row_loss = rows.data();
    size_t bytes = 0;
    ASSERT_EQ(tilejit_distillation_workspace_bytes(&c, &bytes), 0)
        << tilejit_last_error();
    std::vector<char> ws(bytes + 16);
    char *aligned = ws.data() + (16 - uintptr_t(ws.data()) % 16) % 16;
    ASSERT_EQ(tilejit_distillation(&c, aligned, bytes, TILEJIT_DEVICE_CPU,
                                   nullptr),
              0)
        << tilejit_last_error();
  };
  for (int32_t d : {TILEJIT_KL_FORWARD, TILEJIT_KL_REVERSE, TILEJIT_JSD,
                    TILEJIT_JSD_LOGITS})
    for (int32_t red : {TILEJIT_REDUCTION_MEAN, TILEJIT_REDUCTION_SUM,
                        TILEJIT_REDUCTION_NONE}) {
      std::vector<float> g1(BT * V), g2(BT * V), r1(BT), r2(BT);
      float l1 = -1, l2 = -1;
      run(false, d, red, g1, r1, &l1);
      run(true, d, red, g2, r2, &l2);
      EXPECT_EQ(g1, g2) << d;
      EXPECT_EQ(r1, r2) << d;
      EXPECT_EQ(l1, l2) << d;
      EXPECT_GT(r1[0], 0.f) << d;
      EXPECT_EQ(r1[1], 0.f) << d; // ignored
    }
  tilejit_distillation_args bad;
  tilejit_distillation_args_init(&bad);
  bad.divergence = 4;
  size_t bytes = 0;
  EXPECT_NE(tilejit_distillation_workspace_bytes(&bad, &bytes), 0);
  EXPECT_NE(std::string(tilejit_last_error()).find("tilejit_divergence"),
            std::string::npos);
}
