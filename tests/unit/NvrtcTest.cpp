//===- NvrtcTest.cpp - NVRTC wrapper and toolkit tools --------------------===//
//
// Needs the CUDA toolkit (NVRTC, ptxas) but no GPU.
//
//===----------------------------------------------------------------------===//
#include "codegen/Nvrtc.h"

#include "tilejit/Error.h"

#include <gtest/gtest.h>

#include <regex>

using namespace tilejit;

namespace {

const char *kBf16Kernel = R"(#include <cuda_bf16.h>
extern "C" __global__ void scale_bf16(const __nv_bfloat16 *x, float *y,
                                      float s, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    y[i] = expf(__bfloat162float(x[i])) * s;
}
)";

TEST(Nvrtc, CompilesBf16KernelToPtxAndCubin) {
  nvrtc::CompileResult r =
      nvrtc::compile(kBf16Kernel, "scale_bf16.cu", "sm_90");
  ASSERT_FALSE(r.ptx.empty());
  EXPECT_NE(r.ptx.back(), '\0') << "trailing NUL must be stripped";
  EXPECT_EQ(r.ptx.find('\0'), std::string::npos);
  EXPECT_NE(r.ptx.find(".entry scale_bf16"), std::string::npos) << r.ptx;
  EXPECT_NE(r.ptx.find(".target sm_90"), std::string::npos);
  ASSERT_GE(r.cubin.size(), 4u);
  EXPECT_EQ(std::string(r.cubin.data(), 4), "\x7f"
                                            "ELF");
  EXPECT_GT(r.ptxMs, 0.0);
  EXPECT_GE(r.cubinMs, 0.0);
}

TEST(Nvrtc, VirtualArchGivesPtxOnly) {
  nvrtc::CompileResult r =
      nvrtc::compile(kBf16Kernel, "scale_bf16.cu", "compute_90");
  EXPECT_NE(r.ptx.find(".entry scale_bf16"), std::string::npos);
  EXPECT_TRUE(r.cubin.empty());
}

TEST(Nvrtc, PtxasAcceptsNvrtcPtxAndRejectsGarbage) {
  nvrtc::CompileResult r =
      nvrtc::compile(kBf16Kernel, "scale_bf16.cu", "compute_90");
  std::string log;
  EXPECT_TRUE(nvrtc::ptxasAccepts(r.ptx, "sm_90", &log)) << log;

  std::string broken = r.ptx;
  broken.replace(broken.find(".entry"), 6, ".entri");
  EXPECT_FALSE(nvrtc::ptxasAccepts(broken, "sm_90", &log));
  EXPECT_FALSE(log.empty());
}

TEST(Nvrtc, SyntaxErrorReportsLogWithFileAndLine) {
  const char *source = "extern \"C\" __global__ void k(float *y) {\n"
                       "  y[0] = 1.0f\n"
                       "}\n";
  try {
    nvrtc::compile(source, "broken_kernel.cu", "sm_90");
    FAIL() << "expected tilejit::Error";
  } catch (const Error &e) {
    std::string message = e.what();
    // NVRTC's diagnostics look like "broken_kernel.cu(2): error: ...".
    EXPECT_TRUE(std::regex_search(
        message, std::regex(R"(broken_kernel\.cu\([23]\): error)")))
        << message;
    EXPECT_NE(message.find("sm_90"), std::string::npos) << message;
  }
}

TEST(Nvrtc, RejectsBadArchName) {
  EXPECT_THROW(nvrtc::compile(kBf16Kernel, "k.cu", "hopper"), Error);
}

TEST(Nvrtc, ReportsVersion) {
  EXPECT_TRUE(
      std::regex_match(nvrtc::nvrtcVersion(), std::regex(R"(\d+\.\d+)")))
      << nvrtc::nvrtcVersion();
}

TEST(Nvrtc, DisassemblesCubinOrExplainsMissingTool) {
  nvrtc::CompileResult r =
      nvrtc::compile(kBf16Kernel, "scale_bf16.cu", "sm_90");
  std::string sass;
  try {
    sass = nvrtc::disassembleCubin(r.cubin);
  } catch (const Error &e) {
    // Only acceptable failure: the toolkit has neither disassembler.
    std::string message = e.what();
    EXPECT_NE(message.find("cuobjdump"), std::string::npos) << message;
    EXPECT_NE(message.find("nvdisasm"), std::string::npos) << message;
    GTEST_SKIP() << "no disassembler installed: " << message;
  }
  EXPECT_NE(sass.find("scale_bf16"), std::string::npos) << sass;
  EXPECT_NE(sass.find("EXIT"), std::string::npos) << sass;
}

} // namespace
