//===- SpecRun.h - run any spec-declared kernel on its own ------*- C++ -*-===//
//
// What `tilejit run|bench|tune KERNEL --size ...` do for a kernel whose spec
// declares its arguments (KernelSpec::run): resolve the sizes and scalars,
// build the kernel through the public Kernel API (tilejit/Kernel.h), fill
// its inputs (generated, or read from .npy files), run it in the CPU
// interpreter or on the GPU, and compare its outputs with the spec's fp64
// reference. Host buffers hold every argument in its own dtype, row-major
// over its declared shape.
//
// Errors (tilejit::Error, before anything runs): a size that is unknown,
// missing or below its declared minimum; a --set that names neither a
// parameter nor a scalar argument, or a scalar out of its range or its
// dtype's; a spec whose declarations do not match the kernel's parameters;
// a .npy file of another shape or dtype. A grid of 0 programs (a size of 0)
// launches nothing: the outputs are empty.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_OPS_SPECRUN_H
#define TILEJIT_OPS_SPECRUN_H

#include "runtime/TuningDatabase.h"
#include "tilejit/Kernel.h"
#include "tilejit/KernelSpec.h"

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tilejit {

struct SpecRunOptions {
  DType dtype = DType::BF16;
  std::map<std::string, int64_t> sizes; ///< every size the spec declares
  /// NAME=VALUE: compile-time parameters and scalar arguments.
  std::vector<std::string> set;
  std::map<std::string, std::string> inputFiles; ///< argument -> .npy
  uint64_t seed = 1234;
  bool gpu = false;
  /// GPU: take the tuning database's config when `set` pins no parameter.
  bool useTuned = true;
  std::string arch; ///< GPU target; empty: the device's
};

/// One output against the reference.
struct OutputCheck {
  std::string name;
  double maxAbsError = 0;
  double worstRatio = 0; ///< max |got - want| / tolerance (<= 1 passes)
  int64_t worstIndex = -1;
  double got = 0, want = 0; ///< at worstIndex
  int64_t nans = 0; ///< elements NaN in both the output and the reference
  bool passed = true;
};

/// The arguments of one launch of a spec-declared kernel, on the host.
class SpecRun {
public:
  /// Resolves everything and fills the inputs; throws as above.
  SpecRun(const KernelSpec &spec, const SpecRunOptions &options);
  ~SpecRun();

  const KernelSpec &spec() const { return Spec; }
  const Kernel &kernel() const { return *K; }
  /// Where the config came from: "--set", "tuned, <file>", "default; ...".
  const std::string &configSource() const { return ConfigSource; }
  Grid grid() const { return G; }
  /// The value of each scalar parameter of the kernel, in parameter order.
  std::vector<std::pair<std::string, double>> scalarArgs() const;
  /// The roofline's bytes (RunSpec::bytesMoved, or each pointer argument
  /// once).
  double bytesMoved() const;

  /// Runs the kernel in the interpreter at `level` (default:
  /// defaultInterpretLevel(), Interpreter.h); the outputs land in the host
  /// buffers.
  void runOnCpu(std::optional<InterpretLevel> level = std::nullopt);
  /// Copies the inputs to the GPU, NaN-fills the outputs there, launches
  /// once and copies the outputs back; then times `timedRuns` more launches
  /// (L2 flushed before each) and returns their median in ms (0 for none).
  double runOnGpu(int timedRuns = 0);

  /// FLOP of one launch: 2 M N K for a kernel that declares its product
  /// (RunSpec::gemm), else 0.
  double flops() const;
  /// For a kernel that declares its product: cuBLASLt's C = alpha op(A)
  /// op(B) + beta C on the operands runOnGpu copied (call it first), timed
  /// as runOnGpu times the kernel (median of `timedRuns`, L2 flushed before
  /// each) after choosing the fastest of cuBLASLt's first 8 heuristic
  /// algorithms. It overwrites C on the GPU; with copyOutput (beta = 0
  /// only), the host copy too (check() then judges cuBLASLt's result).
  /// Throws tilejit::Error without a declared product or cuBLASLt.
  double vendorGemmMs(int timedRuns, bool copyOutput = false);

  bool hasReference() const { return bool(Spec.run.reference); }
  /// Each output the reference fills against it (Tolerance in KernelSpec.h).
  std::vector<OutputCheck> check() const;
  /// Writes argument `name` (an input or an output) to a .npy file.
  void writeNpy(const std::string &name, const std::string &path) const;

  struct Buffer {
    const ArgSpec *spec;
    DType dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> host;
  };
  const Buffer &buffer(const std::string &name) const;

  /// The kernel's arguments in parameter order, pointers to `pointers[i]`
  /// for pointer parameter i (host or device addresses).
  std::vector<KernelArg> kernelArgs(const std::vector<void *> &pointers) const;
  /// This kernel's key in the tuning database.
  TuningKey tuningKey(const DeviceIdentity &device) const;
  const SpecRunOptions &options() const { return O; }

private:
  const KernelSpec &Spec;
  SpecRunOptions O;
  std::vector<std::string> ParamSet;
  std::map<std::string, double> Scalars;
  dsl::Config Config;
  std::optional<Kernel> K;
  std::string ConfigSource;
  Grid G;
  std::vector<Buffer> Buffers; ///< in parameter order; scalars have none
  struct Gpu;
  std::unique_ptr<Gpu> Device;
  /// The reference's outputs, computed on the first check().
  mutable std::optional<std::map<std::string, std::vector<double>>> Want;
  std::map<std::string, std::vector<double>> referenceOutputs() const;
  friend class SpecTuningTarget;
};

/// Formats `checks` as lines "  loss: max |error| 1.2e-07 (0.03 of the
/// tolerance): ok" and a last "check: PASS" or "check: FAIL". An element
/// NaN in both the output and the reference matches (the lines count them);
/// NaN in one of them fails.
std::string describeChecks(const std::vector<OutputCheck> &checks,
                           bool *passed);

/// `v` as printf's %g: "0.5", "-100", "1e+40", "inf".
std::string formatNumber(double v);

struct SpecTuneReport {
  TuningKey key;
  TuningEntry entry;
  bool fromDatabase = false;
  std::string path;
};

/// Tunes (or looks up, unless `retune`) run's kernel over its spec's
/// candidates on the GPU, each candidate checked against the reference
/// (or, without one, its outputs checked to be written and finite), and
/// stores the winner. Throws when no candidate passes or without a GPU.
SpecTuneReport tuneSpecGpu(SpecRun &run, int repetitions, bool retune,
                           const std::function<void(const std::string &)>
                               &progress);

} // namespace tilejit

#endif // TILEJIT_OPS_SPECRUN_H
