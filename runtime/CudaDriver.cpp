//===- CudaDriver.cpp - CUDA Driver API loaded at run time ----------------===//
//
// The driver's entry points are resolved with dlsym by their ABI names. cuda.h
// maps most of the public names to versioned symbols (cuMemAlloc is really
// cuMemAlloc_v2, cuEventElapsedTime is cuEventElapsedTime_v2, ...); we spell
// the versioned name in the table below and take the pointer type from the
// same declaration, so symbol and signature always agree.
//
//===----------------------------------------------------------------------===//
#include "runtime/CudaDriver.h"

#include "tilejit/Error.h"
#include "tilejit/TensorMap.h"
#include "tilejit/Timing.h"

#include <algorithm>
#include <limits>
#include <spdlog/spdlog.h>

#include <dlfcn.h>

#include <string>
#include <type_traits>

// The table below names legacy-default-stream symbols; per-thread default
// stream builds would silently rename some of them.
#if defined(CUDA_API_PER_THREAD_DEFAULT_STREAM) ||                             \
    defined(__CUDA_API_PER_THREAD_DEFAULT_STREAM)
#error "CudaDriver.cpp expects the legacy default stream ABI names"
#endif

namespace tilejit {
namespace cuda {
namespace {

// Every driver entry point tilejit uses, by ABI symbol name.
#define TILEJIT_CUDA_FUNCTIONS(X)                                              \
  X(cuGetErrorName)                                                            \
  X(cuGetErrorString)                                                          \
  X(cuInit)                                                                    \
  X(cuDriverGetVersion)                                                        \
  X(cuDeviceGet)                                                               \
  X(cuDeviceGetCount)                                                          \
  X(cuDeviceGetName)                                                           \
  X(cuDeviceGetAttribute)                                                      \
  X(cuDeviceTotalMem_v2)                                                       \
  X(cuDevicePrimaryCtxRetain)                                                  \
  X(cuDevicePrimaryCtxRelease_v2)                                              \
  X(cuCtxSetCurrent)                                                           \
  X(cuCtxGetCurrent)                                                           \
  X(cuCtxGetDevice)                                                            \
  X(cuCtxSynchronize)                                                          \
  X(cuMemAlloc_v2)                                                             \
  X(cuMemFree_v2)                                                              \
  X(cuMemcpyHtoD_v2)                                                           \
  X(cuMemcpyDtoH_v2)                                                           \
  X(cuMemcpyDtoD_v2)                                                           \
  X(cuMemsetD8_v2)                                                             \
  X(cuMemsetD8Async)                                                           \
  X(cuMemsetD16Async)                                                          \
  X(cuMemsetD32Async)                                                          \
  X(cuModuleLoadDataEx)                                                        \
  X(cuModuleUnload)                                                            \
  X(cuModuleGetFunction)                                                       \
  X(cuFuncGetAttribute)                                                        \
  X(cuFuncSetAttribute)                                                        \
  X(cuLaunchKernel)                                                            \
  X(cuStreamCreate)                                                            \
  X(cuStreamDestroy_v2)                                                        \
  X(cuStreamSynchronize)                                                       \
  X(cuEventCreate)                                                             \
  X(cuEventDestroy_v2)                                                         \
  X(cuEventRecord)                                                             \
  X(cuEventSynchronize)                                                        \
  X(cuStreamBeginCapture_v2)                                                   \
  X(cuStreamEndCapture)                                                        \
  X(cuStreamIsCapturing)                                                       \
  X(cuGraphInstantiateWithFlags)                                               \
  X(cuGraphLaunch)                                                             \
  X(cuGraphExecDestroy)                                                        \
  X(cuGraphDestroy)                                                            \
  X(cuTensorMapEncodeTiled)

/// The resolved driver, or why it is unusable.
struct DriverApi {
#define TILEJIT_DECLARE_POINTER(Name) decltype(&::Name) Name = nullptr;
  TILEJIT_CUDA_FUNCTIONS(TILEJIT_DECLARE_POINTER)
#undef TILEJIT_DECLARE_POINTER
  // Resolved separately: _v2 appeared in CUDA 12.8 drivers, the legacy symbol
  // has the same signature and is the fallback for older drivers.
  decltype(&::cuEventElapsedTime_v2) cuEventElapsedTime = nullptr;

  bool Usable = false;
  std::string WhyNot;
};

std::string errorText(const DriverApi &d, CUresult r) {
  const char *name = nullptr;
  const char *text = nullptr;
  if (d.cuGetErrorName)
    d.cuGetErrorName(r, &name);
  if (d.cuGetErrorString)
    d.cuGetErrorString(r, &text);
  std::string out = name ? name : "CUDA error " + std::to_string(int(r));
  if (text)
    out += std::string(" (") + text + ")";
  return out;
}

bool resolveSymbols(void *lib, DriverApi &d) {
  auto resolve = [&](const char *symbol, auto &pointer) {
    pointer = reinterpret_cast<std::remove_reference_t<decltype(pointer)>>(
        dlsym(lib, symbol));
    return pointer != nullptr;
  };
#define TILEJIT_RESOLVE(Name)                                                  \
  if (!resolve(#Name, d.Name)) {                                               \
    d.WhyNot = "libcuda.so.1 has no " #Name ": the NVIDIA driver is too old "  \
               "for tilejit (a CUDA 12 or newer driver is needed)";            \
    return false;                                                              \
  }
  TILEJIT_CUDA_FUNCTIONS(TILEJIT_RESOLVE)
#undef TILEJIT_RESOLVE
  if (!resolve("cuEventElapsedTime_v2", d.cuEventElapsedTime) &&
      !resolve("cuEventElapsedTime", d.cuEventElapsedTime)) {
    d.WhyNot = "libcuda.so.1 has no cuEventElapsedTime";
    return false;
  }
  return true;
}

DriverApi loadDriver() {
  DriverApi d;
  // RTLD_LOCAL: the driver's symbols must not satisfy anyone else's lookups.
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *err = dlerror();
    d.WhyNot = std::string("libcuda.so.1 not found: no NVIDIA driver on this "
                           "machine (") +
               (err ? err : "dlopen failed") + ")";
    return d;
  }
  // The library stays loaded for the life of the process on purpose: objects
  // with static storage may still call into it during exit.
  if (!resolveSymbols(lib, d))
    return d;
  if (CUresult r = d.cuInit(0); r != CUDA_SUCCESS) {
    d.WhyNot = "NVIDIA driver found but cuInit failed: " + errorText(d, r);
    return d;
  }
  int count = 0;
  if (CUresult r = d.cuDeviceGetCount(&count); r != CUDA_SUCCESS) {
    d.WhyNot =
        "NVIDIA driver found but cuDeviceGetCount failed: " + errorText(d, r);
    return d;
  }
  if (count == 0) {
    d.WhyNot = "NVIDIA driver found but it reports no GPU";
    return d;
  }
  int version = 0;
  d.cuDriverGetVersion(&version);
  spdlog::debug("loaded libcuda.so.1: CUDA driver {}.{}, {} GPU(s)",
                version / 1000, version % 1000 / 10, count);
  d.Usable = true;
  return d;
}

/// Loads the driver once per process (thread-safe static initialisation).
const DriverApi &loadedDriver() {
  static const DriverApi driver = loadDriver();
  return driver;
}

/// The driver, or a tilejit::Error telling the user to use the CPU backend.
const DriverApi &api() {
  const DriverApi &d = loadedDriver();
  if (!d.Usable)
    throw Error("no usable CUDA GPU: " + d.WhyNot +
                ". `tilejit run --device=cpu` runs kernels on the CPU "
                "instead (bench and tune need a GPU).");
  return d;
}

/// Hints for errors whose driver description does not say what to do.
const char *hintFor(CUresult r) {
  switch (r) {
  case CUDA_ERROR_ILLEGAL_ADDRESS:
  case CUDA_ERROR_MISALIGNED_ADDRESS:
  case CUDA_ERROR_ILLEGAL_INSTRUCTION:
  case CUDA_ERROR_HARDWARE_STACK_ERROR:
  case CUDA_ERROR_LAUNCH_FAILED:
    return "; a kernel faulted (possibly one launched earlier, as launches are "
           "asynchronous) and the CUDA context is no longer usable";
  case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
    return "; the PTX is newer than this driver supports: load the CUBIN "
           "built for this GPU's arch or update the driver";
  case CUDA_ERROR_NO_BINARY_FOR_GPU:
    return "; the image was built for another GPU architecture (compile for "
           "Device::archString())";
  default:
    return "";
  }
}

[[noreturn]] void fail(CUresult r, const char *call,
                       const std::string &context = {}) {
  std::string message =
      std::string(call) + " failed: " + errorText(loadedDriver(), r);
  if (!context.empty())
    message += " while " + context;
  message += hintFor(r);
  throw Error(message);
}

void check(CUresult r, const char *call) {
  if (r != CUDA_SUCCESS)
    fail(r, call);
}

/// For destructors, which must not throw. A driver already shut down at
/// process exit is not worth a warning.
void warnIfFailed(CUresult r, const char *call) {
  if (r != CUDA_SUCCESS && r != CUDA_ERROR_DEINITIALIZED)
    spdlog::warn("{} failed: {}", call, errorText(loadedDriver(), r));
}

} // namespace

//===----------------------------------------------------------------------===//
// Driver and device
//===----------------------------------------------------------------------===//

bool driverAvailable(std::string *whyNot) {
  try {
    const DriverApi &d = loadedDriver();
    if (whyNot)
      *whyNot = d.WhyNot;
    return d.Usable;
  } catch (const std::exception &e) {
    // Nothing above should throw, but this function promises not to.
    if (whyNot)
      *whyNot = e.what();
    return false;
  }
}

int Device::currentOrdinal() {
  const DriverApi &d = api();
  CUcontext ctx = nullptr;
  check(d.cuCtxGetCurrent(&ctx), "cuCtxGetCurrent");
  if (!ctx) {
    // Retained once for the process, as the runtime keeps it.
    static CUcontext primary = [&] {
      CUdevice first = 0;
      check(d.cuDeviceGet(&first, 0), "cuDeviceGet");
      CUcontext c = nullptr;
      check(d.cuDevicePrimaryCtxRetain(&c, first), "cuDevicePrimaryCtxRetain");
      return c;
    }();
    check(d.cuCtxSetCurrent(primary), "cuCtxSetCurrent");
    return 0;
  }
  // Every launch asks: the last context's ordinal is kept per thread (a
  // handle could only name another GPU after its context was destroyed and
  // another created at the same address).
  thread_local CUcontext lastContext = nullptr;
  thread_local int lastOrdinal = 0;
  if (ctx == lastContext)
    return lastOrdinal;
  CUdevice dev = 0;
  check(d.cuCtxGetDevice(&dev), "cuCtxGetDevice");
  int count = 0, ordinal = 0;
  check(d.cuDeviceGetCount(&count), "cuDeviceGetCount");
  for (int i = 0; i < count; ++i) {
    CUdevice each = 0;
    check(d.cuDeviceGet(&each, i), "cuDeviceGet");
    if (each == dev) {
      ordinal = i;
      break;
    }
  }
  lastContext = ctx;
  lastOrdinal = ordinal;
  return ordinal;
}

Device Device::open(int ordinal) {
  const DriverApi &d = api();
  if (ordinal < 0)
    ordinal = currentOrdinal();
  int count = 0;
  check(d.cuDeviceGetCount(&count), "cuDeviceGetCount");
  if (ordinal < 0 || ordinal >= count)
    throw Error("GPU " + std::to_string(ordinal) +
                " does not exist: the driver reports " + std::to_string(count) +
                " GPU(s)");
  CUdevice dev = 0;
  check(d.cuDeviceGet(&dev, ordinal), "cuDeviceGet");
  CUcontext ctx = nullptr;
  check(d.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  Device device(ordinal, dev, ctx); // Releases the context if anything throws.
  device.makeCurrent();
  spdlog::debug("opened GPU {}: {} ({}, {} SMs)", ordinal, device.name(),
                device.archString(), device.smCount());
  return device;
}

Device::Device(Device &&other) noexcept
    : Ordinal(other.Ordinal), Dev(other.Dev), Ctx(other.Ctx) {
  other.Ctx = nullptr;
}

Device &Device::operator=(Device &&other) noexcept {
  std::swap(Ordinal, other.Ordinal);
  std::swap(Dev, other.Dev);
  std::swap(Ctx, other.Ctx);
  return *this;
}

Device::~Device() {
  if (Ctx)
    warnIfFailed(loadedDriver().cuDevicePrimaryCtxRelease_v2(Dev),
                 "cuDevicePrimaryCtxRelease");
}

void Device::makeCurrent() const {
  check(api().cuCtxSetCurrent(Ctx), "cuCtxSetCurrent");
}

int Device::attribute(CUdevice_attribute attr) const {
  int value = 0;
  check(api().cuDeviceGetAttribute(&value, attr, Dev), "cuDeviceGetAttribute");
  return value;
}

std::string Device::name() const {
  char buffer[256] = {};
  check(api().cuDeviceGetName(buffer, sizeof(buffer) - 1, Dev),
        "cuDeviceGetName");
  return buffer;
}

std::pair<int, int> Device::computeCapability() const {
  return {attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
          attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)};
}

std::string Device::archString() const {
  auto [major, minor] = computeCapability();
  return "sm_" + std::to_string(major * 10 + minor);
}

int Device::smCount() const {
  return attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
}

int Device::driverVersion() const {
  int version = 0;
  check(api().cuDriverGetVersion(&version), "cuDriverGetVersion");
  return version;
}

int Device::maxSharedMemoryPerBlockOptin() const {
  return attribute(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
}

int Device::maxRegistersPerBlock() const {
  return attribute(CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK);
}

int Device::maxThreadsPerBlock() const {
  return attribute(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
}

int Device::l2CacheBytes() const {
  return attribute(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
}

size_t Device::totalMemory() const {
  size_t bytes = 0;
  check(api().cuDeviceTotalMem_v2(&bytes, Dev), "cuDeviceTotalMem");
  return bytes;
}

//===----------------------------------------------------------------------===//
// DeviceBuffer
//===----------------------------------------------------------------------===//

DeviceBuffer::DeviceBuffer(size_t bytes) {
  // cuMemAlloc rejects zero bytes; an empty buffer is still useful (e.g. a
  // zero-sized tensor), so represent it with a null pointer.
  if (bytes == 0)
    return;
  if (CUresult r = api().cuMemAlloc_v2(&Ptr, bytes); r != CUDA_SUCCESS)
    fail(r, "cuMemAlloc", "allocating " + std::to_string(bytes) + " bytes");
  Size = bytes;
}

DeviceBuffer::DeviceBuffer(DeviceBuffer &&other) noexcept
    : Ptr(other.Ptr), Size(other.Size) {
  other.Ptr = 0;
  other.Size = 0;
}

DeviceBuffer &DeviceBuffer::operator=(DeviceBuffer &&other) noexcept {
  if (this != &other) {
    release();
    std::swap(Ptr, other.Ptr);
    std::swap(Size, other.Size);
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() { release(); }

void DeviceBuffer::release() noexcept {
  if (Ptr)
    warnIfFailed(loadedDriver().cuMemFree_v2(Ptr), "cuMemFree");
  Ptr = 0;
  Size = 0;
}

void DeviceBuffer::checkRange(const char *what, size_t bytes,
                              size_t offsetBytes) const {
  if (offsetBytes > Size || bytes > Size - offsetBytes)
    throw Error(std::string(what) + " of " + std::to_string(bytes) +
                " bytes at offset " + std::to_string(offsetBytes) +
                " is outside a device buffer of " + std::to_string(Size) +
                " bytes");
}

void DeviceBuffer::copyFromHost(const void *src, size_t bytes,
                                size_t offsetBytes) {
  checkRange("copy to the device", bytes, offsetBytes);
  if (bytes == 0)
    return;
  check(api().cuMemcpyHtoD_v2(Ptr + offsetBytes, src, bytes), "cuMemcpyHtoD");
}

void DeviceBuffer::copyToHost(void *dst, size_t bytes,
                              size_t offsetBytes) const {
  checkRange("copy to the host", bytes, offsetBytes);
  if (bytes == 0)
    return;
  check(api().cuMemcpyDtoH_v2(dst, Ptr + offsetBytes, bytes), "cuMemcpyDtoH");
}

void DeviceBuffer::copyFrom(const DeviceBuffer &src) {
  checkRange("copy on the device", src.Size, 0);
  if (src.Size != 0)
    check(api().cuMemcpyDtoD_v2(Ptr, src.Ptr, src.Size), "cuMemcpyDtoD");
}

void DeviceBuffer::memset(uint8_t value) {
  if (Size == 0)
    return;
  // Runs on the legacy default stream; tilejit's Streams are blocking streams,
  // so kernels launched on them afterwards see the new contents.
  check(api().cuMemsetD8_v2(Ptr, value, Size), "cuMemsetD8");
}

//===----------------------------------------------------------------------===//
// Module and Function
//===----------------------------------------------------------------------===//

Module Module::fromCubin(const std::vector<char> &cubin) {
  if (cubin.empty())
    throw Error("cannot load an empty CUBIN image");
  return Module(cubin.data(), "CUBIN");
}

Module Module::fromPtx(const std::string &ptx) {
  // c_str() gives the NUL terminator the driver needs to find the PTX's end.
  return Module(ptx.c_str(), "PTX");
}

Module::Module(const void *image, const char *kind) {
  const DriverApi &d = api();
  // The JIT logs are the only place the driver explains a rejected image.
  std::vector<char> errorLog(16 * 1024, '\0');
  std::vector<char> infoLog(16 * 1024, '\0');
  CUjit_option options[] = {
      CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
      CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES};
  void *values[] = {
      errorLog.data(), reinterpret_cast<void *>(errorLog.size() - 1),
      infoLog.data(), reinterpret_cast<void *>(infoLog.size() - 1)};
  CUresult r = d.cuModuleLoadDataEx(&Mod, image, 4, options, values);
  if (r != CUDA_SUCCESS) {
    Mod = nullptr;
    std::string context = std::string("loading a ") + kind + " image";
    if (errorLog[0])
      context += "; driver JIT log:\n" + std::string(errorLog.data());
    fail(r, "cuModuleLoadDataEx", context);
  }
  if (infoLog[0])
    spdlog::debug("driver JIT log for {} image:\n{}", kind, infoLog.data());
}

Module::Module(Module &&other) noexcept : Mod(other.Mod) {
  other.Mod = nullptr;
}

Module &Module::operator=(Module &&other) noexcept {
  if (this != &other) {
    release();
    std::swap(Mod, other.Mod);
  }
  return *this;
}

Module::~Module() { release(); }

void Module::release() noexcept {
  if (Mod)
    warnIfFailed(loadedDriver().cuModuleUnload(Mod), "cuModuleUnload");
  Mod = nullptr;
}

Function Module::function(const std::string &name) const {
  Function f;
  f.name = name;
  CUresult r = api().cuModuleGetFunction(&f.fn, Mod, name.c_str());
  if (r == CUDA_ERROR_NOT_FOUND)
    throw Error("kernel '" + name +
                "' not found in the loaded module (is it declared extern "
                "\"C\" __global__?)");
  if (r != CUDA_SUCCESS)
    fail(r, "cuModuleGetFunction", "looking up kernel '" + name + "'");
  return f;
}

int Function::attribute(CUfunction_attribute attr) const {
  int value = 0;
  if (CUresult r = api().cuFuncGetAttribute(&value, attr, fn);
      r != CUDA_SUCCESS)
    fail(r, "cuFuncGetAttribute", "querying kernel '" + name + "'");
  return value;
}

int Function::numRegs() const { return attribute(CU_FUNC_ATTRIBUTE_NUM_REGS); }

int Function::localBytes() const {
  return attribute(CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES);
}

int Function::maxThreadsPerBlock() const {
  return attribute(CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
}

int Function::sharedBytes() const {
  return attribute(CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES);
}

void Function::setMaxDynamicSharedBytes(int bytes) const {
  if (CUresult r = api().cuFuncSetAttribute(
          fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes);
      r != CUDA_SUCCESS)
    fail(r, "cuFuncSetAttribute",
         "allowing " + std::to_string(bytes) +
             " bytes of dynamic shared memory for kernel '" + name + "'");
}

void Function::allowNonPortableClusterSize() const {
  if (CUresult r = api().cuFuncSetAttribute(
          fn, CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1);
      r != CUDA_SUCCESS)
    fail(r, "cuFuncSetAttribute",
         "allowing clusters of more than 8 blocks for kernel '" + name + "'");
}

//===----------------------------------------------------------------------===//
// Launch, streams, events
//===----------------------------------------------------------------------===//

namespace {
std::string dimText(Dim3 d) {
  return "(" + std::to_string(d.x) + "," + std::to_string(d.y) + "," +
         std::to_string(d.z) + ")";
}
} // namespace

void launch(const Function &fn, Dim3 grid, Dim3 block, size_t sharedBytes,
            CUstream stream, std::vector<void *> &argPointers) {
  const DriverApi &d = api();
  if (!fn.fn)
    throw Error("launch of a null kernel handle");
  // The driver answers an oversized block with a bare CUDA_ERROR_INVALID_VALUE;
  // say which limit was hit instead. The limit depends on register use.
  unsigned long long threads = 1ull * block.x * block.y * block.z;
  int maxThreads = fn.maxThreadsPerBlock();
  if (threads > static_cast<unsigned long long>(maxThreads))
    throw Error("block " + dimText(block) + " has " + std::to_string(threads) +
                " threads but kernel '" + fn.name + "' allows at most " +
                std::to_string(maxThreads) + " (it uses " +
                std::to_string(fn.numRegs()) + " registers per thread)");
  // Beyond 48 KiB of static plus dynamic shared memory a kernel must opt in
  // explicitly; opting in whenever there is dynamic memory covers kernels
  // whose static arrays push a smaller dynamic size past the line.
  if (sharedBytes > 0)
    fn.setMaxDynamicSharedBytes(static_cast<int>(sharedBytes));
  CUresult r = d.cuLaunchKernel(
      fn.fn, grid.x, grid.y, grid.z, block.x, block.y, block.z,
      static_cast<unsigned>(sharedBytes), stream,
      argPointers.empty() ? nullptr : argPointers.data(), nullptr);
  if (r != CUDA_SUCCESS)
    fail(r, "cuLaunchKernel",
         "launching '" + fn.name + "' with grid " + dimText(grid) + ", block " +
             dimText(block) + ", " + std::to_string(sharedBytes) +
             " bytes of dynamic shared memory");
}

std::string encodeTensorMap(const TensorMapShape &shape, CUtensorMap &map) {
  const DriverApi &d = api();
  cuuint64_t dims[2] = {shape.dims[0], shape.dims[1]};
  cuuint64_t strides[1] = {shape.strideBytes};
  cuuint32_t box[2] = {shape.box[0], shape.box[1]}, ones[2] = {1, 1};
  CUtensorMapSwizzle swizzle = shape.swizzleBytes == 128
                                   ? CU_TENSOR_MAP_SWIZZLE_128B
                               : shape.swizzleBytes == 64
                                   ? CU_TENSOR_MAP_SWIZZLE_64B
                                   : CU_TENSOR_MAP_SWIZZLE_32B;
  CUresult r = d.cuTensorMapEncodeTiled(
      &map, CU_TENSOR_MAP_DATA_TYPE_UINT16, 2,
      reinterpret_cast<void *>(shape.address), dims, strides, box, ones,
      CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? "" : errorText(d, r);
}

void synchronize() { check(api().cuCtxSynchronize(), "cuCtxSynchronize"); }

void synchronize(CUstream stream) {
  check(api().cuStreamSynchronize(stream), "cuStreamSynchronize");
}

void memsetAsync(CUdeviceptr ptr, uint8_t value, size_t bytes,
                 CUstream stream) {
  if (bytes > 0)
    check(api().cuMemsetD8Async(ptr, value, bytes, stream), "cuMemsetD8Async");
}

void fillAsync(CUdeviceptr ptr, uint32_t pattern, size_t elementBytes,
               size_t count, CUstream stream) {
  if (count == 0)
    return;
  if (elementBytes == 2)
    check(api().cuMemsetD16Async(ptr, uint16_t(pattern), count, stream),
          "cuMemsetD16Async");
  else if (elementBytes == 4)
    check(api().cuMemsetD32Async(ptr, pattern, count, stream),
          "cuMemsetD32Async");
  else
    throw Error("fillAsync: elements of 2 or 4 bytes (got " +
                std::to_string(elementBytes) + ")");
}

double measureCopyBandwidth(size_t bytes, int iterations) {
  // The fastest copy over three fresh pairs of buffers: a ceiling. One pair
  // per process gave 3.83 to 4.26 TB/s on one H200 from one process to the
  // next, by where the buffers landed.
  float best = std::numeric_limits<float>::infinity();
  for (int pair = 0; pair < 3; ++pair) {
    DeviceBuffer src(bytes), dst(bytes);
    src.memset(1);
    for (int i = 0; i < iterations + 1; ++i) { // the first one warms up
      float t = timeMs([&] {
        check(api().cuMemcpyDtoD_v2(dst.ptr(), src.ptr(), bytes),
              "cuMemcpyDtoD");
      });
      if (i > 0)
        best = std::min(best, t);
    }
  }
  return 2.0 * bytes / (best * 1e-3);
}

Stream::Stream() {
  // A blocking stream (not CU_STREAM_NON_BLOCKING) is ordered with the legacy
  // default stream, where the synchronous copies and memsets of DeviceBuffer
  // run, so their results are visible to kernels launched here.
  check(api().cuStreamCreate(&S, CU_STREAM_DEFAULT), "cuStreamCreate");
}

Stream::Stream(Stream &&other) noexcept : S(other.S) { other.S = nullptr; }

Stream &Stream::operator=(Stream &&other) noexcept {
  if (this != &other) {
    release();
    std::swap(S, other.S);
  }
  return *this;
}

Stream::~Stream() { release(); }

void Stream::release() noexcept {
  if (S)
    warnIfFailed(loadedDriver().cuStreamDestroy_v2(S), "cuStreamDestroy");
  S = nullptr;
}

void Stream::synchronize() const {
  check(api().cuStreamSynchronize(S), "cuStreamSynchronize");
}

Event::Event() {
  check(api().cuEventCreate(&E, CU_EVENT_DEFAULT), "cuEventCreate");
}

Event::Event(Event &&other) noexcept : E(other.E) { other.E = nullptr; }

Event &Event::operator=(Event &&other) noexcept {
  if (this != &other) {
    release();
    std::swap(E, other.E);
  }
  return *this;
}

Event::~Event() { release(); }

void Event::release() noexcept {
  if (E)
    warnIfFailed(loadedDriver().cuEventDestroy_v2(E), "cuEventDestroy");
  E = nullptr;
}

void Event::record(CUstream stream) {
  check(api().cuEventRecord(E, stream), "cuEventRecord");
}

void Event::synchronize() const {
  check(api().cuEventSynchronize(E), "cuEventSynchronize");
}

Graph Graph::capture(const Stream &stream,
                     const std::function<void(CUstream)> &enqueue) {
  const DriverApi &d = api();
  // `stream` is blocking (ordered with the legacy default stream), so any
  // use of the legacy stream while it captures (a synchronous copy, a
  // memset, a launch on stream 0), from any thread, fails the capture: that
  // is what proves the step free of host synchronization. Thread-local mode
  // also refuses unsafe calls (cuMemAlloc) from this thread. Work enqueue
  // puts on another created stream is not captured: it runs at once.
  check(d.cuStreamBeginCapture_v2(stream.get(),
                                  CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
        "cuStreamBeginCapture");
  CUgraph graph = nullptr;
  try {
    enqueue(stream.get());
  } catch (...) {
    d.cuStreamEndCapture(stream.get(), &graph); // leave capture mode
    if (graph)
      d.cuGraphDestroy(graph);
    throw;
  }
  check(d.cuStreamEndCapture(stream.get(), &graph), "cuStreamEndCapture");
  Graph g;
  g.G = graph;
  check(d.cuGraphInstantiateWithFlags(&g.Exec, graph, 0), "cuGraphInstantiate");
  return g;
}

Graph::Graph(Graph &&other) noexcept : G(other.G), Exec(other.Exec) {
  other.G = nullptr;
  other.Exec = nullptr;
}

Graph &Graph::operator=(Graph &&other) noexcept {
  if (this != &other) {
    release();
    std::swap(G, other.G);
    std::swap(Exec, other.Exec);
  }
  return *this;
}

Graph::~Graph() { release(); }

void Graph::release() noexcept {
  if (Exec)
    warnIfFailed(loadedDriver().cuGraphExecDestroy(Exec), "cuGraphExecDestroy");
  if (G)
    warnIfFailed(loadedDriver().cuGraphDestroy(G), "cuGraphDestroy");
  Exec = nullptr;
  G = nullptr;
}

bool isCapturing(CUstream stream) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  check(api().cuStreamIsCapturing(stream, &status), "cuStreamIsCapturing");
  return status != CU_STREAM_CAPTURE_STATUS_NONE;
}

void Graph::launch(CUstream stream) const {
  check(api().cuGraphLaunch(Exec, stream), "cuGraphLaunch");
}

float Event::elapsedMs(const Event &start, const Event &end) {
  float ms = 0.0f;
  check(api().cuEventElapsedTime(&ms, start.E, end.E), "cuEventElapsedTime");
  return ms;
}

} // namespace cuda
} // namespace tilejit
