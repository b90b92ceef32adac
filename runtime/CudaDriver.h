//===- CudaDriver.h - CUDA Driver API loaded at run time --------*- C++ -*-===//
//
// tilejit never links libcuda: the driver is dlopen'ed ("libcuda.so.1") the
// first time something here needs it, so every tilejit binary starts on a
// machine without an NVIDIA driver and can say clearly why the GPU path is not
// available (and suggest --device=cpu). cuda.h is used for types and enums
// only.
//
// Every failing driver call becomes a tilejit::Error naming the call and the
// driver's error name and description. Destructors never throw; they log.
//
// Lifetime: a Device owns a reference on the primary context and makes it
// current on the calling thread; DeviceBuffer, Module, Stream and Event objects
// live in that context, so keep the Device alive until they are destroyed.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_RUNTIME_CUDADRIVER_H
#define TILEJIT_RUNTIME_CUDADRIVER_H

#include <cuda.h>

#include "tilejit/TensorMap.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace tilejit {
namespace cuda {

/// True when libcuda.so.1 loads, cuInit succeeds and at least one GPU is
/// visible. Never throws; on false, *whyNot (if given) explains, e.g.
/// "libcuda.so.1 not found: no NVIDIA driver on this machine (...)".
bool driverAvailable(std::string *whyNot = nullptr);

/// A GPU and its primary context.
class Device {
public:
  /// Retains the primary context of GPU `ordinal` (-1: currentOrdinal()) and
  /// makes it current on this thread. Throws tilejit::Error (suggesting
  /// --device=cpu) without a GPU.
  static Device open(int ordinal = -1);
  /// The GPU of the context current on this thread (the caller's, e.g. the
  /// one torch.cuda.set_device chose). A thread with no current context
  /// gets GPU 0's primary context made current and 0, as the CUDA runtime
  /// gives a thread's first call: threads the caller never set up (the
  /// ones PyTorch runs backward on for GPU 0) then launch in the context
  /// the caller's memory lives in.
  static int currentOrdinal();

  Device(Device &&other) noexcept;
  Device &operator=(Device &&other) noexcept;
  Device(const Device &) = delete;
  Device &operator=(const Device &) = delete;
  ~Device();

  /// Makes the primary context current on the calling thread (needed once per
  /// extra thread that uses this device; open() does it for its own thread).
  void makeCurrent() const;

  int ordinal() const { return Ordinal; }
  CUdevice handle() const { return Dev; }
  CUcontext context() const { return Ctx; }

  std::string name() const;
  /// {major, minor}, e.g. {9, 0} on an H100/H200.
  std::pair<int, int> computeCapability() const;
  /// "sm_90" style name, as NVRTC's --gpu-architecture expects.
  std::string archString() const;
  int smCount() const;
  /// The driver's CUDA version as an integer, e.g. 13000 for 13.0.
  int driverVersion() const;
  /// Largest dynamic + static shared memory a block may opt in to (bytes).
  int maxSharedMemoryPerBlockOptin() const;
  /// Registers one block may use (64K on every GPU since Kepler).
  int maxRegistersPerBlock() const;
  int maxThreadsPerBlock() const;
  /// L2 cache size in bytes (the autotuner overwrites this much between runs).
  int l2CacheBytes() const;
  size_t totalMemory() const;

private:
  Device(int ordinal, CUdevice dev, CUcontext ctx)
      : Ordinal(ordinal), Dev(dev), Ctx(ctx) {}
  int attribute(CUdevice_attribute attr) const;

  int Ordinal = -1;
  CUdevice Dev = 0;
  CUcontext Ctx = nullptr;
};

/// Device memory owned by this object (cuMemAlloc / cuMemFree).
class DeviceBuffer {
public:
  DeviceBuffer() = default;
  /// Allocates `bytes` (zero bytes gives an empty buffer with ptr() == 0).
  explicit DeviceBuffer(size_t bytes);
  DeviceBuffer(DeviceBuffer &&other) noexcept;
  DeviceBuffer &operator=(DeviceBuffer &&other) noexcept;
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;
  ~DeviceBuffer();

  size_t size() const { return Size; }
  CUdeviceptr ptr() const { return Ptr; }

  /// Copies `bytes` from host memory to the buffer at `offsetBytes`
  /// (synchronous). Throws if the range does not fit in the buffer.
  void copyFromHost(const void *src, size_t bytes, size_t offsetBytes = 0);
  /// Copies `bytes` starting at `offsetBytes` of the buffer to host memory
  /// (synchronous); the offset form lets callers sample rows of big outputs.
  void copyToHost(void *dst, size_t bytes, size_t offsetBytes = 0) const;
  /// Copies all of `src` (same size) into this buffer, on the device.
  void copyFrom(const DeviceBuffer &src);
  /// Sets every byte of the buffer to `value` (synchronous w.r.t. the host).
  void memset(uint8_t value);

private:
  void checkRange(const char *what, size_t bytes, size_t offsetBytes) const;
  void release() noexcept;

  CUdeviceptr Ptr = 0;
  size_t Size = 0;
};

/// A kernel entry point in a loaded Module. The Module must outlive it.
struct Function {
  CUfunction fn = nullptr;
  std::string name;

  /// Registers per thread.
  int numRegs() const;
  /// Local (spill/stack) memory per thread, bytes.
  int localBytes() const;
  /// Largest block this kernel can be launched with (limited by registers).
  int maxThreadsPerBlock() const;
  /// Statically allocated shared memory, bytes.
  int sharedBytes() const;
  /// Allows launches with up to `bytes` of dynamic shared memory (the driver
  /// refuses more than 48 KiB unless the kernel opts in).
  void setMaxDynamicSharedBytes(int bytes) const;
  /// Allows clusters of more than 8 blocks (up to 16 on sm_90).
  void allowNonPortableClusterSize() const;

private:
  int attribute(CUfunction_attribute attr) const;
};

/// A loaded CUBIN or PTX image (cuModuleLoadDataEx / cuModuleUnload).
class Module {
public:
  /// Loads a CUBIN (ELF) image, e.g. nvrtc::CompileResult::cubin.
  static Module fromCubin(const std::vector<char> &cubin);
  /// Loads PTX text; the driver JIT-compiles it for the current device.
  static Module fromPtx(const std::string &ptx);

  Module(Module &&other) noexcept;
  Module &operator=(Module &&other) noexcept;
  Module(const Module &) = delete;
  Module &operator=(const Module &) = delete;
  ~Module();

  /// Looks up an extern "C" kernel; throws if the module has no such entry.
  Function function(const std::string &name) const;
  CUmodule handle() const { return Mod; }

private:
  Module(const void *image, const char *kind);
  void release() noexcept;

  CUmodule Mod = nullptr;
};

/// Grid or block extents; unspecified dimensions are 1 (`{n}`, `{x, y}`).
struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};

/// Launches `fn` on `stream` (nullptr = legacy default stream).
/// `argPointers[i]` points at the value of kernel parameter i.
void launch(const Function &fn, Dim3 grid, Dim3 block, size_t sharedBytes,
            CUstream stream, std::vector<void *> &argPointers);

/// Encodes a 2-D tensor map of `shape` (tilejit/TensorMap.h) into `map`
/// (cuTensorMapEncodeTiled: 16-bit elements, 128-, 64- or 32-byte swizzle,
/// zeros outside the tensor). Returns the driver's error text, or "" once
/// encoded.
std::string encodeTensorMap(const TensorMapShape &shape, CUtensorMap &map);

/// Waits for all work in the current context (cuCtxSynchronize).
void synchronize();
/// Waits for the work on `stream` (nullptr: the legacy default stream).
void synchronize(CUstream stream);

/// Sets `bytes` bytes at `ptr` to `value`, in order on `stream` (no host
/// synchronization; capturable in a CUDA graph).
void memsetAsync(CUdeviceptr ptr, uint8_t value, size_t bytes,
                 CUstream stream);
/// Sets `count` elements of `elementBytes` (2 or 4) at `ptr` to the bit
/// pattern `pattern` (e.g. 0x3f80: bf16 1.0), as memsetAsync does.
void fillAsync(CUdeviceptr ptr, uint32_t pattern, size_t elementBytes,
               size_t count, CUstream stream);

/// Device-to-device copy bandwidth in bytes/s (bytes read + written): the
/// fastest of `iterations` copies of `bytes`, in each of three fresh pairs
/// of buffers.
double measureCopyBandwidth(size_t bytes, int iterations = 10);

/// A blocking stream (CU_STREAM_DEFAULT): ordered with the legacy default
/// stream, where DeviceBuffer's synchronous copies and memsets run.
class Stream {
public:
  Stream();
  Stream(Stream &&other) noexcept;
  Stream &operator=(Stream &&other) noexcept;
  Stream(const Stream &) = delete;
  Stream &operator=(const Stream &) = delete;
  ~Stream();

  CUstream get() const { return S; }
  void synchronize() const;

private:
  void release() noexcept;
  CUstream S = nullptr;
};

/// A CUDA graph: the work one call put on a stream, captured once and
/// replayed with one launch (the whole step of an operation, say).
class Graph {
public:
  /// Captures what enqueue(stream) puts on `stream`; nothing runs yet.
  /// Throws tilejit::Error if, meanwhile, anything uses the legacy default
  /// stream (a synchronous copy, a memset, a launch on stream 0) or a call
  /// cannot be captured. Work put on other created streams is not captured.
  static Graph capture(const Stream &stream,
                       const std::function<void(CUstream)> &enqueue);
  Graph(Graph &&other) noexcept;
  Graph &operator=(Graph &&other) noexcept;
  Graph(const Graph &) = delete;
  Graph &operator=(const Graph &) = delete;
  ~Graph();

  /// Replays the captured work on `stream`, asynchronously.
  void launch(CUstream stream) const;

private:
  Graph() = default;
  void release() noexcept;
  CUgraph G = nullptr;
  CUgraphExec Exec = nullptr;
};

/// True while `stream` is being captured into a graph.
bool isCapturing(CUstream stream);

/// A timing event.
class Event {
public:
  Event();
  Event(Event &&other) noexcept;
  Event &operator=(Event &&other) noexcept;
  Event(const Event &) = delete;
  Event &operator=(const Event &) = delete;
  ~Event();

  void record(CUstream stream = nullptr);
  void synchronize() const;
  /// Milliseconds between two recorded events (`end` must have completed,
  /// e.g. after end.synchronize()).
  static float elapsedMs(const Event &start, const Event &end);
  CUevent get() const { return E; }

private:
  void release() noexcept;
  CUevent E = nullptr;
};

/// Milliseconds of the work `enqueue` puts on `stream` (default: the legacy
/// default stream), between two events recorded around it; waits for it to
/// finish.
template <typename Fn> float timeMs(Fn &&enqueue, CUstream stream = nullptr) {
  Event start, stop;
  start.record(stream);
  enqueue();
  stop.record(stream);
  stop.synchronize();
  return Event::elapsedMs(start, stop);
}

/// Milliseconds of each of `n` >= 1 runs of `enqueue` on `stream`, queued
/// back to back with an event between runs and one wait at the end: the
/// host's launch work overlaps the GPU's, as in a training loop and in
/// triton.testing.do_bench (which also clears L2 between runs), where
/// timeMs puts it inside each run.
template <typename Fn>
std::vector<double> timeEachMs(Fn &&enqueue, int n, CUstream stream = nullptr) {
  std::vector<Event> marks(std::max(n, 0) + 1);
  marks[0].record(stream);
  for (int i = 0; i < n; ++i) {
    enqueue();
    marks[i + 1].record(stream);
  }
  marks.back().synchronize();
  std::vector<double> ms;
  for (int i = 0; i < n; ++i)
    ms.push_back(Event::elapsedMs(marks[i], marks[i + 1]));
  return ms;
}

} // namespace cuda
} // namespace tilejit

#endif // TILEJIT_RUNTIME_CUDADRIVER_H
