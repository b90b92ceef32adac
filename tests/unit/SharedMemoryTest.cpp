//===- SharedMemoryTest.cpp - shared arrays and cp.async, CPU and GPU ----===//
//
// A bf16 tile copied into a shared array with copyAsync (16-byte cp.async
// groups, the partial group element by element), then read back by other
// lanes after waitCopies: the interpreter and the GPU must give the same
// bits. The library's kernels read back only their own lanes' copies
// (waitOwnCopies), so this is the GPU test of copies that other lanes read.
//
//===----------------------------------------------------------------------===//
#include "runtime/Cache.h"
#include "runtime/CudaDriver.h"
#include "tilejit/Compiler.h"
#include "tilejit/DSL.h"
#include "tilejit/Interpreter.h"

#include "GpuTest.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

using namespace tilejit;
using namespace tilejit::dsl;

namespace {

constexpr int64_t kTile = 1024;

/// y[r] = x[kTile - 1 - r] where that index is below n, else 0: x copied
/// into shared memory asynchronously (masked by n), then read reversed, so
/// each lane reads what other lanes copied.
TileModule reverseThroughShared() {
  Config c;
  c.params = {{"num_warps", 4}};
  KernelBuilder k("reverse_shared", c);
  Value x = k.pointerArg("x", DType::BF16), y = k.pointerArg("y", DType::BF16);
  Value n = k.scalarArg("n", DType::I32);
  Value buf = k.sharedArray(kTile, DType::BF16);
  Value r = k.arange(kTile);
  k.copyAsync(buf, r, x, r, r < n);
  k.commitCopies();
  k.waitCopies(0);
  Value mirror = double(kTile - 1) - r;
  k.store(y, r, k.load(buf, mirror, mirror < n, 0.0));
  return k.finish();
}

/// bf16 bit patterns 1, 2, ... (small positive numbers, all distinct).
std::vector<uint16_t> input() {
  std::vector<uint16_t> x(kTile);
  for (int64_t i = 0; i < kTile; ++i)
    x[i] = uint16_t(0x3f80 + i);
  return x;
}

std::vector<uint16_t> expected(int32_t n) {
  std::vector<uint16_t> x = input(), y(kTile, 0);
  for (int64_t r = 0; r < kTile; ++r)
    if (kTile - 1 - r < n)
      y[r] = x[kTile - 1 - r];
  return y;
}

TEST(SharedMemory, AsyncCopyThenReverseReadInTheInterpreter) {
  TileModule m = reverseThroughShared();
  optimizeTile(m);
  for (int32_t n : {int32_t(kTile), 1000}) {
    std::vector<uint16_t> x = input(), y(kTile, 0xffff);
    interpret(m.operation(), "reverse_shared", {1, 1, 1},
              {InterpBuffer{x.data(), DType::BF16, kTile},
               InterpBuffer{y.data(), DType::BF16, kTile}, n});
    EXPECT_EQ(y, expected(n)) << "n " << n;
  }
  // Each lane's 8 adjacent bf16 are one 16-byte cp.async.
  CompiledKernel k = compile(reverseThroughShared(), {"sm_90", Stage::Ptx, {}});
  EXPECT_NE(k.ptx.find("cp.async.cg.shared.global"), std::string::npos);
}

TEST(SharedMemoryGpu, AsyncCopyThenReverseReadMatches) {
  TILEJIT_SKIP_WITHOUT_GPU();
  cuda::Device device = cuda::Device::open();
  CompiledKernel k =
      compile(reverseThroughShared(), {device.archString(), Stage::Cubin, {}});
  LoadedKernels loaded;
  std::vector<uint16_t> x = input();
  cuda::DeviceBuffer dx(kTile * 2), dy(kTile * 2);
  dx.copyFromHost(x.data(), kTile * 2);
  for (int32_t n : {int32_t(kTile), 1000}) {
    dy.memset(0xff);
    CUdeviceptr px = dx.ptr(), py = dy.ptr();
    std::vector<void *> args = {&px, &py, &n};
    cuda::launch(loaded.function(k), {1}, {unsigned(k.threads)},
                 size_t(k.dynamicSharedBytes), nullptr, args);
    cuda::synchronize();
    std::vector<uint16_t> y(kTile);
    dy.copyToHost(y.data(), kTile * 2);
    EXPECT_EQ(y, expected(n)) << "n " << n;
  }
}

} // namespace
