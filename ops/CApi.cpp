//===- CApi.cpp - tilejit.h over tilejit/Kernel.h -------------------------===//
//
// Every entry point catches everything: a C caller gets a status and
// tilejit_last_error(), never an exception.
//
//===----------------------------------------------------------------------===//
#include "tilejit/tilejit.h"

#include "ops/CApiGuard.h"
#include "ops/SpecRun.h"
#include "runtime/Autotuner.h"
#include "tilejit/Kernel.h"
#include "tilejit/KernelSpec.h"

#include <algorithm>
#include <cstring>
#include <string>

using namespace tilejit;

static_assert(int(DType::BF16) == TILEJIT_BF16 &&
                  int(DType::F32) == TILEJIT_F32 &&
                  int(DType::I1) == TILEJIT_I1,
              "tilejit_dtype follows tilejit::DType");
static_assert(int(KernelArg::Kind::F32) == TILEJIT_ARG_F32,
              "tilejit_arg_kind follows tilejit::KernelArg::Kind");

struct tilejit_kernel {
  Kernel kernel;
};

namespace {

using capi::guarded;
using capi::require;

DType dtypeOf(int32_t d) {
  require(d >= TILEJIT_I1 && d <= TILEJIT_F32, "unknown tilejit_dtype");
  return DType(d);
}

std::vector<KernelArg> argsOf(const tilejit_arg *args, size_t n) {
  require(args || n == 0, "null argument array");
  std::vector<KernelArg> out;
  for (size_t i = 0; i < n; ++i) {
    const tilejit_arg &a = args[i];
    require(a.kind >= TILEJIT_ARG_POINTER && a.kind <= TILEJIT_ARG_F32,
            "unknown tilejit_arg_kind");
    KernelArg k{KernelArg::Kind(a.kind), dtypeOf(a.dtype), a.ptr,
                a.num_elements, a.i, a.f};
    out.push_back(k);
  }
  return out;
}

Grid gridOf(const int64_t grid[3]) {
  require(grid != nullptr, "null grid");
  return {grid[0], grid[1], grid[2]};
}

} // namespace

std::string &capi::lastError() {
  thread_local std::string message;
  return message;
}

extern "C" {

const char *tilejit_version(void) { return TILEJIT_VERSION; }

int32_t tilejit_kernel_count(void) { return int32_t(kernelRegistry().size()); }

const char *tilejit_kernel_name_at(int32_t i) {
  const std::deque<KernelSpec> &specs = kernelRegistry();
  return i >= 0 && size_t(i) < specs.size() ? specs[size_t(i)].name.c_str()
                                            : nullptr;
}

const char *tilejit_last_error(void) { return capi::lastError().c_str(); }

int tilejit_kernel_compile(const char *name, int32_t dtype,
                           const char *const *set, size_t n_set,
                           const char *const *shape_names,
                           const int64_t *shape_values, size_t n_shape,
                           const char *arch, tilejit_kernel **out) {
  return tilejit_kernel_compile_flags(name, dtype, set, n_set, shape_names,
                                      shape_values, n_shape, arch, 0, out);
}

int tilejit_kernel_compile_flags(const char *name, int32_t dtype,
                                 const char *const *set, size_t n_set,
                                 const char *const *shape_names,
                                 const int64_t *shape_values, size_t n_shape,
                                 const char *arch, uint32_t flags,
                                 tilejit_kernel **out) {
  return guarded([&] {
    require(name && out, "null kernel name or output handle");
    *out = nullptr;
    require((set || n_set == 0) &&
                ((shape_names && shape_values) || n_shape == 0),
            "null parameter or shape array");
    require((flags & ~uint32_t(TILEJIT_COMPILE_TUNED)) == 0,
            "unknown flag of tilejit_kernel_compile_flags");
    KernelOptions o;
    o.dtype = dtypeOf(dtype);
    for (size_t i = 0; i < n_set; ++i) {
      require(set[i] != nullptr, "null parameter string");
      o.set.push_back(set[i]);
    }
    for (size_t i = 0; i < n_shape; ++i) {
      require(shape_names[i] != nullptr, "null shape name");
      o.shape[shape_names[i]] = shape_values[i];
    }
    o.arch = arch ? arch : "";
    o.tuned = flags & TILEJIT_COMPILE_TUNED;
    *out = new tilejit_kernel{Kernel::compile(name, o)};
  });
}

void tilejit_kernel_destroy(tilejit_kernel *kernel) { delete kernel; }

const char *tilejit_kernel_name(const tilejit_kernel *kernel) {
  return kernel ? kernel->kernel.name().c_str() : "";
}

const char *tilejit_kernel_config(const tilejit_kernel *kernel) {
  return kernel ? kernel->kernel.config().c_str() : "";
}

const char *tilejit_kernel_config_source(const tilejit_kernel *kernel) {
  return kernel ? kernel->kernel.configSource().c_str() : "";
}

int32_t tilejit_kernel_num_params(const tilejit_kernel *kernel) {
  return kernel ? int32_t(kernel->kernel.params().size()) : 0;
}

int tilejit_kernel_param(const tilejit_kernel *kernel, int32_t i,
                         const char **name, int32_t *is_pointer,
                         int32_t *dtype) {
  return guarded([&] {
    require(kernel != nullptr, "null kernel");
    const auto &ps = kernel->kernel.params();
    require(i >= 0 && size_t(i) < ps.size(), "parameter index out of range");
    if (name)
      *name = ps[i].name.c_str();
    if (is_pointer)
      *is_pointer = ps[i].pointer;
    if (dtype)
      *dtype = int32_t(ps[i].dtype);
  });
}

int tilejit_kernel_run_cpu(const tilejit_kernel *kernel, const int64_t grid[3],
                           const tilejit_arg *args, size_t n_args) {
  return guarded([&] {
    require(kernel != nullptr, "null kernel");
    kernel->kernel.runOnCpu(gridOf(grid), argsOf(args, n_args));
  });
}

int tilejit_kernel_compile_gpu(const tilejit_kernel *kernel) {
  return guarded([&] {
    require(kernel != nullptr, "null kernel");
    kernel->kernel.compileForGpu();
  });
}

int tilejit_kernel_resources(const tilejit_kernel *kernel,
                             tilejit_kernel_usage *usage) {
  return guarded([&] {
    require(kernel && usage, "null kernel or usage");
    KernelUsage u = kernel->kernel.resources();
    *usage = {u.threads, u.registers, u.staticSharedBytes,
              u.dynamicSharedBytes};
  });
}

int tilejit_kernel_launch(const tilejit_kernel *kernel, const int64_t grid[3],
                          const tilejit_arg *args, size_t n_args,
                          void *stream) {
  return guarded([&] {
    require(kernel != nullptr, "null kernel");
    kernel->kernel.launch(gridOf(grid), argsOf(args, n_args),
                          static_cast<CUstream>(stream));
  });
}

int tilejit_kernel_tune(const char *name, int32_t dtype,
                        const char *const *size_names,
                        const int64_t *size_values, size_t n_sizes,
                        const char *const *set, size_t n_set,
                        int32_t repetitions, int32_t retune, char *best,
                        size_t best_bytes) {
  return guarded([&] {
    require(name != nullptr, "null kernel name");
    require((size_names && size_values) || n_sizes == 0, "null size array");
    require(set || n_set == 0, "null set array");
    require(repetitions >= 1, "repetitions must be >= 1");
    const KernelSpec &spec = findKernel(name);
    if (!spec.run.declared())
      throw Error("kernel '" + spec.name +
                  "' declares no arguments to run it on its own, so it "
                  "cannot be tuned alone (its operation tunes it)");
    SpecRunOptions o;
    o.dtype = dtypeOf(dtype);
    for (size_t i = 0; i < n_sizes; ++i) {
      require(size_names[i] != nullptr, "null size name");
      o.sizes[size_names[i]] = size_values[i];
    }
    for (size_t i = 0; i < n_set; ++i) {
      require(set[i] != nullptr, "null set string");
      o.set.push_back(set[i]);
    }
    o.gpu = true;
    o.useTuned = false;
    SpecRun run(spec, o);
    SpecTuneReport report =
        tuneSpecGpu(run, repetitions, retune != 0, [](const std::string &) {});
    std::string winner;
    for (const std::string &p : paramOverrides(report.entry.best))
      winner += (winner.empty() ? "" : ",") + p;
    if (best && best_bytes > 0) {
      size_t n = std::min(winner.size(), best_bytes - 1);
      std::memcpy(best, winner.data(), n);
      best[n] = '\0';
    }
  });
}

} // extern "C"
