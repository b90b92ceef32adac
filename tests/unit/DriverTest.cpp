//===- DriverTest.cpp - CUDA driver wrapper -------------------------------===//
//
// Without a GPU (CI) these check that the missing driver is reported clearly
// and never crashes; with a GPU they run a real kernel end to end. Each test
// skips itself in the environment where it cannot assert anything.
//
//===----------------------------------------------------------------------===//
#include "codegen/Nvrtc.h"
#include "runtime/CudaDriver.h"

#include "tilejit/Error.h"

#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <regex>

using namespace tilejit;

namespace {

bool hasGpu(std::string *why = nullptr) { return cuda::driverAvailable(why); }

std::string messageOf(const std::function<void()> &f) {
  try {
    f();
  } catch (const Error &e) {
    return e.what();
  }
  return "<no tilejit::Error thrown>";
}

TEST(Driver, WithoutGpuExplainsAndSuggestsCpu) {
  std::string why;
  if (hasGpu(&why))
    GTEST_SKIP() << "a GPU is present; see the Gpu* tests";
  EXPECT_NE(why.find("driver"), std::string::npos) << why;

  std::string message = messageOf([] { cuda::Device::open(); });
  EXPECT_NE(message.find("--device=cpu"), std::string::npos) << message;
  EXPECT_NE(message.find(why), std::string::npos) << message;
  // Anything touching the driver fails the same way rather than crashing.
  message = messageOf([] { cuda::DeviceBuffer buffer(64); });
  EXPECT_NE(message.find("--device=cpu"), std::string::npos) << message;
  EXPECT_THROW(cuda::synchronize(), Error);
}

TEST(Driver, BufferRangeIsCheckedBeforeTheDriver) {
  // An empty buffer needs no driver call, so this runs everywhere.
  cuda::DeviceBuffer empty;
  float value = 0;
  std::string message =
      messageOf([&] { empty.copyToHost(&value, sizeof(value)); });
  EXPECT_NE(message.find("outside a device buffer of 0 bytes"),
            std::string::npos)
      << message;
}

const char *kAxpbKernel = R"(
extern "C" __global__ void axpb(const float *x, float *y, float a, float b,
                                int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    y[i] = a * x[i] + b;
}
)";

class GpuTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::string why;
    if (!hasGpu(&why))
      GTEST_SKIP() << "no GPU: " << why;
    device.emplace(cuda::Device::open());
  }
  std::optional<cuda::Device> device;
};

TEST_F(GpuTest, ReportsDeviceProperties) {
  EXPECT_FALSE(device->name().empty());
  EXPECT_TRUE(std::regex_match(device->archString(), std::regex(R"(sm_\d+)")))
      << device->archString();
  auto [major, minor] = device->computeCapability();
  EXPECT_EQ(device->archString(), "sm_" + std::to_string(major * 10 + minor));
  EXPECT_GT(device->smCount(), 0);
  EXPECT_GE(device->driverVersion(), 12000);
  EXPECT_GE(device->maxSharedMemoryPerBlockOptin(), 48 * 1024);
  EXPECT_GT(device->totalMemory(), size_t(1) << 30);
}

// A launch captured into a CUDA graph runs only when the graph is launched,
// and every launch of the graph repeats it; a synchronous memset inside the
// capture is refused.
TEST_F(GpuTest, GraphsReplayCapturedLaunches) {
  nvrtc::CompileResult compiled =
      nvrtc::compile(kAxpbKernel, "axpb.cu", device->archString());
  cuda::Module module = cuda::Module::fromCubin(compiled.cubin);
  cuda::Function axpb = module.function("axpb");
  const int n = 1000;
  std::vector<float> ones(n, 1.0f);
  cuda::DeviceBuffer dx(n * sizeof(float));
  dx.copyFromHost(ones.data(), n * sizeof(float));
  float a = 2.0f, b = 1.0f; // x <- 2x + 1, in place
  CUdeviceptr px = dx.ptr();
  int count = n;
  std::vector<void *> args = {&px, &px, &a, &b, &count};
  cuda::Stream stream;
  cuda::Graph graph = cuda::Graph::capture(stream, [&](CUstream s) {
    cuda::launch(axpb, {unsigned((n + 255) / 256)}, {256}, 0, s, args);
  });
  std::vector<float> x(n);
  dx.copyToHost(x.data(), n * sizeof(float));
  EXPECT_EQ(x[0], 1.0f) << "captured work ran before the graph was launched";
  graph.launch(stream.get());
  graph.launch(stream.get());
  stream.synchronize();
  dx.copyToHost(x.data(), n * sizeof(float));
  EXPECT_EQ(x[0], 7.0f); // 1 -> 3 -> 7
  EXPECT_EQ(x[n - 1], 7.0f);
  try {
    cuda::Graph::capture(stream, [&](CUstream) { dx.memset(0); });
    ADD_FAILURE() << "a memset during the capture was accepted";
  } catch (const Error &e) {
    EXPECT_NE(std::string(e.what()).find("CAPTURE"), std::string::npos)
        << e.what();
  }
}

TEST_F(GpuTest, RunsNvrtcCubinAndChecksValues) {
  nvrtc::CompileResult compiled =
      nvrtc::compile(kAxpbKernel, "axpb.cu", device->archString());
  cuda::Module module = cuda::Module::fromCubin(compiled.cubin);
  cuda::Function axpb = module.function("axpb");
  EXPECT_GT(axpb.numRegs(), 0);
  EXPECT_GE(axpb.maxThreadsPerBlock(), 256);
  EXPECT_EQ(axpb.localBytes(), 0);
  EXPECT_EQ(axpb.sharedBytes(), 0);

  const int n = (1 << 20) + 3; // Not a multiple of the block size.
  std::vector<float> x(n);
  for (int i = 0; i < n; ++i)
    x[i] = float(i % 1000) * 0.25f;
  cuda::DeviceBuffer dx(n * sizeof(float)), dy(n * sizeof(float));
  dx.copyFromHost(x.data(), x.size() * sizeof(float));
  dy.memset(0xFF); // NaN everywhere: an element the kernel misses shows up.

  float a = 2.0f, b = -1.0f;
  CUdeviceptr px = dx.ptr(), py = dy.ptr();
  int count = n;
  std::vector<void *> args = {&px, &py, &a, &b, &count};
  cuda::Stream stream;
  cuda::Event start, stop;
  start.record(stream.get());
  cuda::launch(axpb, {unsigned((n + 255) / 256)}, {256}, 0, stream.get(), args);
  stop.record(stream.get());
  stop.synchronize();
  EXPECT_GE(cuda::Event::elapsedMs(start, stop), 0.0f);
  stream.synchronize();

  std::vector<float> y(n);
  dy.copyToHost(y.data(), y.size() * sizeof(float));
  int wrong = 0;
  for (int i = 0; i < n; ++i)
    wrong += y[i] != a * x[i] + b;
  EXPECT_EQ(wrong, 0);

  // Sampling a slice at an offset (how big outputs are spot-checked).
  float tail[3];
  dy.copyToHost(tail, sizeof(tail), (n - 3) * sizeof(float));
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(tail[i], a * x[n - 3 + i] + b);
  cuda::synchronize();
}

TEST_F(GpuTest, LoadsPtxThroughTheDriverJit) {
  // Compile PTX for the virtual arch of this GPU: the driver JIT must accept
  // it (PTX from a toolkit newer than the driver would not load).
  std::string arch = device->archString();
  nvrtc::CompileResult compiled =
      nvrtc::compile(kAxpbKernel, "axpb.cu", "compute_" + arch.substr(3));
  cuda::Module module = cuda::Module::fromPtx(compiled.ptx);
  cuda::Function axpb = module.function("axpb");

  cuda::DeviceBuffer dx(4 * sizeof(float)), dy(4 * sizeof(float));
  float x[4] = {1, 2, 3, 4}, y[4] = {};
  dx.copyFromHost(x, sizeof(x));
  float a = 3.0f, b = 0.5f;
  CUdeviceptr px = dx.ptr(), py = dy.ptr();
  int n = 4;
  std::vector<void *> args = {&px, &py, &a, &b, &n};
  cuda::launch(axpb, {1}, {32}, 0, nullptr, args);
  cuda::synchronize();
  dy.copyToHost(y, sizeof(y));
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(y[i], a * x[i] + b);
}

TEST_F(GpuTest, ReportsLoadAndLaunchErrorsClearly) {
  std::string message = messageOf(
      [] { cuda::Module::fromPtx(".version 1.0\nnot ptx at all\n"); });
  EXPECT_NE(message.find("cuModuleLoadDataEx"), std::string::npos) << message;
  EXPECT_NE(message.find("driver JIT log"), std::string::npos) << message;

  nvrtc::CompileResult compiled =
      nvrtc::compile(kAxpbKernel, "axpb.cu", device->archString());
  cuda::Module module = cuda::Module::fromCubin(compiled.cubin);
  message = messageOf([&] { module.function("no_such_kernel"); });
  EXPECT_NE(message.find("no_such_kernel"), std::string::npos) << message;

  cuda::Function axpb = module.function("axpb");
  std::vector<void *> args;
  message =
      messageOf([&] { cuda::launch(axpb, {1}, {2048}, 0, nullptr, args); });
  EXPECT_NE(message.find("allows at most"), std::string::npos) << message;

  cuda::DeviceBuffer small(16);
  float big[8];
  message = messageOf([&] { small.copyToHost(big, sizeof(big)); });
  EXPECT_NE(message.find("outside a device buffer"), std::string::npos)
      << message;
}

} // namespace
