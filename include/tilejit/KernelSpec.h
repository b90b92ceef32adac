//===- KernelSpec.h - the kernels tilejit knows by name ---------*- C++ -*-===//
#ifndef TILEJIT_KERNELSPEC_H
#define TILEJIT_KERNELSPEC_H

#include "tilejit/DSL.h"
#include "tilejit/TileModule.h"

#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace tilejit {

/// A compile-time parameter of a kernel and the values the autotuner may try.
struct ParamSpec {
  std::string name;
  std::vector<int64_t> candidates;
  int64_t defaultValue;
  std::string help;
  /// false: the autotuner leaves it out, so its default applies (by dtype
  /// or shape where shapeDefaults sets it): a parameter whose other
  /// candidates never won where measured. --set still takes any of them.
  bool tuned = true;
};

/// A launch-time shape argument that selects a tuning entry. Shapes that
/// behave alike share an entry: with `pow2Bucket` the value is rounded up to
/// the next power of two (BT: the time per row hardly depends on the row
/// count once the grid fills the GPU); otherwise it is used exactly (V: it
/// fixes the loop trip count and the masked tail of every row).
struct TuneKeyArg {
  std::string name;
  bool pow2Bucket = false;
};

/// A kernel written in the DSL: its parameters and how to build it.
struct KernelSpec {
  std::string name;
  std::string summary;
  std::vector<ParamSpec> params;
  std::vector<DType> dtypes; ///< supported dtypes of the kernel's data
  std::function<TileModule(const dsl::Config &)> build;
  /// Shapes in the tuning key; the dtype is always part of it as well.
  std::vector<TuneKeyArg> tuneKey;
  /// Values that follow from the parameters and the launch shape (e.g. the
  /// slice of a row each program of a cluster holds), under names that are
  /// not parameters; throws tilejit::Error when the shape does not fit the
  /// config. Unset for most kernels.
  std::function<void(dsl::Config &, const std::map<std::string, int64_t> &)>
      deriveParams;
  /// Defaults that depend on the launch shape (e.g. a cluster size by V):
  /// sets those parameters of the config (which holds the overrides) whose
  /// names are not in the third argument, the overridden ones. Unset for
  /// most kernels.
  std::function<void(dsl::Config &, const std::map<std::string, int64_t> &,
                     const std::set<std::string> &)>
      shapeDefaults;

  /// Default parameters for `dtype`, then each "NAME=VALUE" of `overrides`.
  /// Throws tilejit::Error for unknown names, bad values or dtypes.
  dsl::Config config(DType dtype,
                     const std::vector<std::string> &overrides = {}) const;
  /// The same with shapeDefaults (if any) for the parameters `overrides`
  /// leave unset, then deriveParams (if any), for the launch `shape`.
  dsl::Config config(DType dtype, const std::vector<std::string> &overrides,
                     const std::map<std::string, int64_t> &shape) const;
  /// The NAME=VALUE entries of `overrides` that name one of this kernel's
  /// parameters (for options shared by several kernels of one operation).
  std::vector<std::string>
  ownOverrides(const std::vector<std::string> &overrides) const;

  /// Every combination of the tuned parameters' candidate values, in a
  /// fixed order. The untuned ones are left out, so that config() gives
  /// them their defaults, by dtype or shape where shapeDefaults sets them.
  std::vector<std::map<std::string, int64_t>> candidateConfigs() const;

  /// The shape part of a tuning key, e.g. "BT=4096,V=151936" (tuneKey order,
  /// bucketed). Throws tilejit::Error when `shape` lacks one of tuneKey.
  std::string tuningShapeKey(const std::map<std::string, int64_t> &shape) const;
};

/// For a deriveParams: sets switch `name` (0 or 1) of `c` from the entry of
/// that name in `problem`, or to `absent` when there is none.
void setSwitchFromProblem(dsl::Config &c,
                          const std::map<std::string, int64_t> &problem,
                          const std::string &name, bool absent);

/// The problem's entry ALIGNED, or, when there is none, whether rows of V
/// elements of c.dtype are whole multiples of 16 bytes (rows V apart from a
/// cudaMalloc base, as the ops lay them out).
bool rowsAreAligned(const dsl::Config &c,
                    const std::map<std::string, int64_t> &problem);

/// For a deriveParams: sets switch ALIGNED to rowsAreAligned. Kernels that
/// see ALIGNED = 1 call KernelBuilder::assumeAlignedVectors.
void deriveAligned(dsl::Config &c,
                   const std::map<std::string, int64_t> &problem);

/// For a kernel builder: k.assumeAlignedVectors() when k's config has
/// ALIGNED = 1 (set by deriveAligned; absent means 0).
void applyAligned(dsl::KernelBuilder &k);

/// Every kernel in kernels_spec/, in a fixed order, then those added by
/// registerKernel in the order they were added.
const std::deque<KernelSpec> &kernelRegistry();
/// Adds a kernel (a user's own spec) to those findKernel(), Kernel::compile
/// and the C ABI know by name. Throws tilejit::Error when the name is taken
/// or the spec has no build function. Thread-safe, but register before
/// other threads iterate kernelRegistry().
void registerKernel(KernelSpec spec);
/// The kernel called `name`; throws tilejit::Error listing the known names.
const KernelSpec &findKernel(const std::string &name);

} // namespace tilejit

#endif // TILEJIT_KERNELSPEC_H
