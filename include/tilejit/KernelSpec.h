//===- KernelSpec.h - the kernels tilejit knows by name ---------*- C++ -*-===//
#ifndef TILEJIT_KERNELSPEC_H
#define TILEJIT_KERNELSPEC_H

#include "tilejit/DSL.h"
#include "tilejit/TileModule.h"

#include <functional>
#include <string>
#include <vector>

namespace tilejit {

/// A compile-time parameter of a kernel and the values the autotuner may try.
struct ParamSpec {
  std::string name;
  std::vector<int64_t> candidates;
  int64_t defaultValue;
  std::string help;
};

/// A kernel written in the DSL: its parameters and how to build it.
struct KernelSpec {
  std::string name;
  std::string summary;
  std::vector<ParamSpec> params;
  std::vector<DType> dtypes; ///< supported dtypes of the kernel's data
  std::function<TileModule(const dsl::Config &)> build;

  /// Default parameters for `dtype`, then each "NAME=VALUE" of `overrides`.
  /// Throws tilejit::Error for unknown names, bad values or dtypes.
  dsl::Config config(DType dtype,
                     const std::vector<std::string> &overrides = {}) const;
};

/// Every kernel in kernels_spec/, in a fixed order.
const std::vector<KernelSpec> &kernelRegistry();
/// The kernel called `name`; throws tilejit::Error listing the known names.
const KernelSpec &findKernel(const std::string &name);

} // namespace tilejit

#endif // TILEJIT_KERNELSPEC_H
