//===- KernelSpec.h - the kernels tilejit knows by name ---------*- C++ -*-===//
#ifndef TILEJIT_KERNELSPEC_H
#define TILEJIT_KERNELSPEC_H

#include "tilejit/DSL.h"
#include "tilejit/Interpreter.h"
#include "tilejit/TileModule.h"

#include <cmath>
#include <deque>
#include <functional>
#include <map>
#include <optional>
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

/// How `tilejit run` fills an input argument of a spec-declared kernel.
/// Values are drawn in double, then rounded once to the argument's dtype
/// (RNE); each argument has its own stream of a seeded generator, so a
/// value depends on (seed, argument name, index) only.
struct ArgFill {
  enum class Kind { Normal, LogSoftmax, ClassIndex, Zeros };
  Kind kind = Kind::Zeros;
  double mean = 0, sd = 1; ///< Normal; LogSoftmax: of the logits
  std::string classes;     ///< ClassIndex: the size giving the class count
  int64_t ignoreEvery = 0; ///< ClassIndex: rows r with r % n == n - 1 ...
  int64_t ignoreIndex = -100; ///< ... hold this instead of a class

  /// Elements ~ N(mean, sd).
  static ArgFill normal(double sd = 1, double mean = 0);
  /// Rows (the last dimension) of log-probabilities: log_softmax of logits
  /// ~ N(0, sd), computed in double.
  static ArgFill logSoftmax(double sd = 2);
  /// Class indices uniform in [0, size `classes`), every `ignoreEvery`-th
  /// row (0: none) `ignoreIndex` (padding tokens).
  static ArgFill classIndex(std::string classes, int64_t ignoreEvery = 0,
                            int64_t ignoreIndex = -100);
  static ArgFill zeros();
};

/// How far an output may be from the fp64 reference: |got - want| <= atol +
/// rtol |want| + the rounding of want to the output's dtype (half an ulp,
/// at most 2^-8 |want| for bf16, 2^-11 for f16, 0 for f32), element by
/// element.
struct Tolerance {
  double atol = 0, rtol = 0;
};

/// One parameter of a kernel (by its DSL name, tile.arg_name) as `tilejit
/// run` sees it. Pointer arguments take their dtype from the kernel and
/// their shape from named sizes (row-major, contiguous); scalars take a
/// size's value or a default that `--set NAME=VALUE` overrides.
struct ArgSpec {
  enum class Role { Input, Output, SizeScalar, Scalar };
  std::string name;
  Role role = Role::Input;
  /// Input/Output: size names or fixed extents ("3"); {}: 1 element.
  std::vector<std::string> shape;
  ArgFill fill;                   ///< Input
  Tolerance tol;                  ///< Output, against the reference
  std::string size;               ///< SizeScalar: the size whose value it is
  double value = 0;               ///< Scalar: the default
  double minValue = -HUGE_VAL, maxValue = HUGE_VAL; ///< Scalar: its range

  static ArgSpec input(std::string name, std::vector<std::string> shape,
                       ArgFill fill);
  static ArgSpec output(std::string name, std::vector<std::string> shape,
                        Tolerance tol = {});
  static ArgSpec sizeScalar(std::string name, std::string size);
  static ArgSpec scalar(std::string name, double defaultValue,
                        double minValue = -HUGE_VAL,
                        double maxValue = HUGE_VAL);
  bool isPointer() const { return role == Role::Input || role == Role::Output; }
  /// Whether a shape entry is a fixed extent (decimal digits, e.g. "3").
  static bool isExtent(const std::string &d) {
    return !d.empty() && d.size() < 10 &&
           d.find_first_not_of("0123456789") == std::string::npos;
  }
};

/// A read-only host array as a reference sees it: elements of `dtype`
/// (bf16/f16 widened exactly), row-major over `shape`.
struct HostTensor {
  const void *data = nullptr;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  int64_t numElements() const;
  double operator[](int64_t i) const;
};

/// What a reference computes from: the inputs, the scalars' values (and the
/// config's compile-time parameters, e.g. a switch) and the sizes by name; it writes every output it checks (`out`, sized and zeroed).
/// The accessors throw tilejit::Error naming an unknown name.
struct ReferenceArgs {
  std::map<std::string, HostTensor> inputs;
  std::map<std::string, std::vector<double>> outputs;
  std::map<std::string, double> scalars;
  std::map<std::string, int64_t> sizes;
  const HostTensor &in(const std::string &name) const;
  std::vector<double> &out(const std::string &name);
  double scalar(const std::string &name) const;
  int64_t size(const std::string &name) const;
};

/// A named size of a launch (BT, V): set by `tilejit run --size NAME=N`,
/// at least `min` (0 by default: a grid of 0 programs launches nothing).
struct SizeSpec {
  std::string name;
  std::string help;
  int64_t min = 0;
};

/// How to run a kernel on its own from the CLI: its sizes, each argument,
/// the grid and, optionally, the bytes it must move and an fp64 reference.
struct RunSpec {
  std::vector<SizeSpec> sizes;
  std::vector<ArgSpec> args; ///< one per kernel parameter, any order
  /// Programs along x, y, z: a size name, or SIZE/PARAM for one program
  /// per block of the config's PARAM elements (ceil(SIZE / PARAM)).
  std::vector<std::string> grid;
  /// Bytes the kernel must move at least (the roofline's), for `tilejit
  /// bench`; unset: every pointer argument read or written once.
  std::function<double(const std::map<std::string, int64_t> &sizes,
                       DType dtype)>
      bytesMoved;
  /// Fills the outputs in fp64 from the inputs; unset: no check.
  std::function<void(ReferenceArgs &)> reference;

  /// For a kernel that computes C = alpha op(A) op(B) + beta C (row-major,
  /// op(A) M x K, op(B) K x N): the names that make up the product, so that
  /// `tilejit bench|tune` count its 2 M N K FLOP and `tilejit bench` times
  /// cuBLASLt on the same operands in the same process. Each of transA,
  /// transB, lda, ldb, ldc, alpha and beta names a parameter or a scalar
  /// argument (transA and transB: 0 or 1).
  struct Gemm {
    std::string a = "A", b = "B", c = "C"; ///< array arguments
    std::string m = "M", n = "N", k = "K"; ///< sizes
    std::string transA = "TRANS_A", transB = "TRANS_B";
    std::string lda = "lda", ldb = "ldb", ldc = "ldc";
    std::string alpha = "alpha", beta = "beta";
  };
  std::optional<Gemm> gemm;

  bool declared() const { return !args.empty(); }
  /// The declaration of argument `name`, or nullptr.
  const ArgSpec *arg(const std::string &name) const;
};

/// Programs along each axis of `run`'s grid for `sizes` and a config.
/// Throws tilejit::Error for a size or parameter it does not have.
Grid runGrid(const RunSpec &run, const std::map<std::string, int64_t> &sizes,
             const dsl::Config &config);

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
  /// How `tilejit run|bench|tune KERNEL --size ...` drive it; empty for
  /// kernels that only operations (fused_ce_tvd, ...) launch.
  RunSpec run;

  /// Default parameters for `dtype`, then each "NAME=VALUE" of `overrides`.
  /// Throws tilejit::Error for unknown names, bad values or dtypes.
  dsl::Config config(DType dtype,
                     const std::vector<std::string> &overrides = {}) const;
  /// The same with shapeDefaults (if any) for the parameters `overrides`
  /// leave unset, then deriveParams (if any), for the launch `shape`.
  dsl::Config config(DType dtype, const std::vector<std::string> &overrides,
                     const std::map<std::string, int64_t> &shape) const;
  /// The declaration of parameter `name`, or nullptr.
  const ParamSpec *param(const std::string &name) const;
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

/// Throws tilejit::Error unless `spec.run` declares each of `params` (the
/// built kernel's) once, with shapes and grid naming declared sizes only.
void checkRunSpec(const KernelSpec &spec,
                  const std::vector<KernelParam> &params);

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

/// `spec` as a row kernel over rows of size `rowSize`, with the compiler's
/// row schedules among its parameters: KEEP_ROW (tile-keep-rows: a row
/// walked again is read from shared memory) and, where `splits` lists
/// more than 1, SPLIT_ROWS (tile-split-rows: each row shared by that many
/// programs of a cluster; only for walks that carry add/max/min
/// reductions). The longest row of the shape, ROW_EXTENT, is derived.
/// With `keptCopyAhead` > 0, a shape whose rows have 12288 elements or more
/// defaults to a row read once: KEEP_ROW 1, KEEP_COPY_AHEAD keptCopyAhead
/// and SPLIT_ROWS the listed split nearest rowSize / 8192 (parameters set
/// by the caller stay as set; with KEEP_ROW set to 0, none of them).
KernelSpec withRowSchedules(KernelSpec spec, std::string rowSize,
                            std::vector<int64_t> splits,
                            int64_t keptCopyAhead = 0);
/// Adds a kernel (a user's own spec) to those findKernel(), Kernel::compile
/// and the C ABI know by name. Throws tilejit::Error when the name is taken
/// or the spec has no build function. Thread-safe, but register before
/// other threads iterate kernelRegistry().
void registerKernel(KernelSpec spec);
/// The kernel called `name`; throws tilejit::Error listing the known names.
const KernelSpec &findKernel(const std::string &name);

} // namespace tilejit

#endif // TILEJIT_KERNELSPEC_H
