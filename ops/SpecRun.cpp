//===- SpecRun.cpp - run any spec-declared kernel on its own --------------===//
#include "ops/SpecRun.h"

#include "ops/TunedConfig.h"
#include "runtime/CublasLt.h"
#include "runtime/CudaDriver.h"
#include "runtime/Npy.h"
#include "tilejit/HostFloat.h"
#include "tilejit/Timing.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <cmath>
#include <cstdio>
#include <thread>

namespace tilejit {

struct SpecRun::Gpu {
  cuda::Device device = cuda::Device::open();
  std::vector<cuda::DeviceBuffer> buffers; ///< parameter order; scalars empty
  std::vector<void *> pointers;
  /// Times a launch with L2 flushed before it (made on first use).
  double timeMs(const std::function<void()> &launch) {
    if (!timer)
      timer.emplace(device);
    return timer->timeMs(launch);
  }

private:
  std::optional<L2FlushTimer> timer;
};

namespace {

/// SplitMix64: a counter-based generator, so element i's value needs no
/// other element's and rows fill in parallel.
uint64_t mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// Uniform in (0, 1) from stream `s`, draw `i`.
double uniform(uint64_t s, uint64_t i) {
  return (double(mix(s ^ mix(i)) >> 11) + 0.5) * 0x1.0p-53;
}

/// N(0, 1) by Box-Muller from two draws.
double normal(uint64_t s, uint64_t i) {
  return std::sqrt(-2 * std::log(uniform(s, 2 * i))) *
         std::cos(2 * M_PI * uniform(s, 2 * i + 1));
}

/// fn(row) for rows [0, n), spread over the machine's cores.
void parallelRows(int64_t n, const std::function<void(int64_t)> &fn) {
  int64_t threads = std::max(1u, std::thread::hardware_concurrency());
  threads = std::min(threads, std::max<int64_t>(1, n / 16));
  std::vector<std::thread> pool;
  for (int64_t t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (int64_t r = t; r < n; r += threads)
        fn(r);
    });
  for (std::thread &t : pool)
    t.join();
}

void storeAs(void *base, DType t, size_t i, double v) {
  if (t == DType::I32)
    static_cast<int32_t *>(base)[i] = int32_t(v);
  else if (t == DType::I64)
    static_cast<int64_t *>(base)[i] = int64_t(v);
  else
    storeFromDouble(base, t, i, v);
}

void fill(SpecRun::Buffer &b, const std::map<std::string, int64_t> &sizes,
          uint64_t seed) {
  const ArgFill &f = b.spec->fill;
  int64_t cols = b.shape.empty() ? 1 : b.shape.back();
  int64_t rows = cols == 0 ? 0 : int64_t(b.host.size() / dtypeSize(b.dtype)) / cols;
  uint64_t stream = mix(seed ^ std::hash<std::string>()(b.spec->name));
  void *base = b.host.data();
  if (f.kind == ArgFill::Kind::Zeros)
    return; // allocated zeroed
  if (f.kind == ArgFill::Kind::ClassIndex) {
    int64_t classes = sizes.at(f.classes), n = rows * cols;
    for (int64_t i = 0; i < n; ++i)
      storeAs(base, b.dtype, i,
              f.ignoreEvery > 0 && i % f.ignoreEvery == f.ignoreEvery - 1
                  ? double(f.ignoreIndex)
                  : double(mix(stream ^ mix(i)) % uint64_t(classes)));
    return;
  }
  if (!isFloat(b.dtype))
    throw Error("argument '" + b.spec->name + "' is " + dtypeName(b.dtype) +
                ": normal and log-softmax fills need a float argument");
  parallelRows(rows, [&](int64_t r) {
    std::vector<double> row(cols);
    for (int64_t c = 0; c < cols; ++c)
      row[c] = f.mean + f.sd * normal(stream, uint64_t(r * cols + c));
    if (f.kind == ArgFill::Kind::LogSoftmax) {
      double m = *std::max_element(row.begin(), row.end()), s = 0;
      for (double x : row)
        s += std::exp(x - m);
      for (double &x : row)
        x -= m + std::log(s);
    }
    for (int64_t c = 0; c < cols; ++c)
      storeFromDouble(base, b.dtype, size_t(r * cols + c), row[c]);
  });
}

/// Half an ulp of `dtype` relative to the value: what rounding a reference
/// value to the output's dtype alone may cost.
double roundoff(DType t) {
  return t == DType::BF16 ? 0x1p-8 : t == DType::F16 ? 0x1p-11 : 0;
}

double parseNumber(const std::string &kernel, const std::string &o) {
  std::string text = o.substr(o.find('=') + 1);
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception &) {
    used = 0;
  }
  if (text.empty() || used != text.size())
    throw Error("kernel '" + kernel + "': '" + o + "' has no numeric value");
  return v;
}

} // namespace

std::string formatNumber(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", v);
  return text;
}

SpecRun::SpecRun(const KernelSpec &spec, const SpecRunOptions &options)
    : Spec(spec), O(options) {
  const RunSpec &run = spec.run;
  auto fail = [&](const std::string &why) {
    throw Error("kernel '" + spec.name + "': " + why);
  };
  if (!run.declared())
    fail("its spec declares no arguments (only `tilejit run fused_ce_tvd` "
         "and `fused_linear_ce` run the other built-in kernels)");
  std::string known;
  for (const SizeSpec &s : run.sizes)
    known += " " + s.name;
  for (auto &[name, v] : O.sizes) {
    auto decl = llvm::find_if(
        run.sizes, [&](const SizeSpec &s) { return s.name == name; });
    if (decl == run.sizes.end())
      fail("unknown size '" + name + "' (its sizes:" + known + ")");
    if (v < decl->min)
      fail("size " + name + " = " + std::to_string(v) +
           " must be >= " + std::to_string(decl->min));
  }
  for (const SizeSpec &s : run.sizes)
    if (!O.sizes.count(s.name))
      fail("missing size " + s.name + " (" + s.help + "): give --size " +
           s.name + "=N");

  // --set: scalar arguments by name, the rest are compile-time parameters.
  std::string params, scalars;
  std::set<std::string> setScalars; // scalar arguments --set gave
  for (const ParamSpec &p : spec.params)
    params += " " + p.name;
  for (const ArgSpec &a : run.args)
    if (a.role == ArgSpec::Role::Scalar) {
      Scalars[a.name] = a.value;
      scalars += " " + a.name;
    }
  for (const std::string &o : O.set) {
    std::string name = o.substr(0, o.find('='));
    const ArgSpec *a = run.arg(name);
    if (!a || a->role != ArgSpec::Role::Scalar) {
      if (!spec.param(name))
        fail("--set " + o + ": it has no parameter or scalar argument '" +
             name + "' (its parameters:" + params + "; its scalar arguments:" +
             (scalars.empty() ? " none" : scalars) + ")");
      ParamSet.push_back(o);
      continue;
    }
    double v = parseNumber(spec.name, o);
    if (!(v >= a->minValue && v <= a->maxValue)) {
      fail("'" + o + "': " + name + " must be in [" +
           formatNumber(a->minValue) + ", " + formatNumber(a->maxValue) + "]");
    }
    Scalars[name] = v;
    setScalars.insert(name);
  }
  for (const ArgSpec &a : run.args)
    if (a.role == ArgSpec::Role::SizeScalar && O.sizes.count(a.size))
      Scalars[a.name] = double(O.sizes.at(a.size));

  std::vector<std::string> set = ParamSet;
  ConfigSource = set.empty() ? "default" : "--set";
  if (O.gpu && O.useTuned && set.empty()) {
    Device = std::make_unique<Gpu>();
    set = tunedOverrides(tuningKey(deviceIdentity(Device->device)),
                         &ConfigSource);
  }
  Config = spec.config(O.dtype, set, O.sizes);
  K.emplace(Kernel::compile(spec, {O.dtype, set, O.sizes, O.arch}));
  checkRunSpec(spec, K->params());
  for (auto &[name, v] : Config.params) {
    // A value the spec derives from the launch shape (deriveParams) under
    // a scalar argument's name is that argument's default (lce_gemm's
    // leading dimensions); --set still overrides it.
    if (!spec.param(name) && run.arg(name) && !setScalars.count(name))
      Scalars[name] = double(v);
    else
      Scalars.emplace(name, double(v));
  }

  G = runGrid(run, O.sizes, Config);

  for (const KernelParam &p : K->params()) {
    const ArgSpec *a = run.arg(p.name);
    if (!a->isPointer()) {
      double v = Scalars.at(p.name);
      // i64: [-2^63, 2^63), the doubles that convert exactly.
      bool inRange = p.dtype == DType::I32 ? v >= INT32_MIN && v <= INT32_MAX
                                           : v >= -0x1p63 && v < 0x1p63;
      if (p.dtype == DType::F32)
        checkF32Scalar(p.name, v);
      else if (!inRange || v != std::floor(v))
        fail("scalar " + p.name + " = " + formatNumber(v) + " is not an " +
             dtypeName(p.dtype));
      Buffers.push_back({a, p.dtype, {}, {}});
      continue;
    }
    Buffer b{a, p.dtype, {}, {}};
    __int128 n = 1;
    for (const std::string &d : a->shape) {
      b.shape.push_back(ArgSpec::isExtent(d) ? std::stoll(d) : O.sizes.at(d));
      n *= b.shape.back();
    }
    if (n * dtypeSize(p.dtype) > (__int128(1) << 46))
      fail("argument '" + p.name + "' " + formatShape(b.shape) +
           " would need more than 64 TiB");
    auto file = O.inputFiles.find(p.name);
    if (file != O.inputFiles.end()) {
      if (a->role != ArgSpec::Role::Input)
        fail("--input " + p.name + ": '" + p.name + "' is an output");
      std::string what = "--input " + p.name + "=" + file->second + ": ";
      NpyArray npy;
      try {
        npy = readNpy(file->second, p.dtype);
      } catch (const Error &e) {
        fail(what + e.what());
      }
      if (npy.shape != b.shape)
        fail(what + "shape " + formatShape(npy.shape) +
             ", but the kernel takes " + formatShape(b.shape) + " (" +
             llvm::join(a->shape, ", ") + ")");
      b.host = std::move(npy.data);
    } else {
      b.host.assign(size_t(n) * dtypeSize(p.dtype), 0);
      if (a->role == ArgSpec::Role::Input)
        fill(b, O.sizes, O.seed);
    }
    Buffers.push_back(std::move(b));
  }
  for (auto &[name, file] : O.inputFiles)
    if (!run.arg(name))
      fail("--input " + name + "=" + file + ": the kernel has no argument '" +
           name + "'");
}

SpecRun::~SpecRun() = default;

std::vector<std::pair<std::string, double>> SpecRun::scalarArgs() const {
  std::vector<std::pair<std::string, double>> values;
  for (const Buffer &b : Buffers)
    if (!b.spec->isPointer())
      values.emplace_back(b.spec->name, Scalars.at(b.spec->name));
  return values;
}

/// A grid of 0 programs along some axis: nothing to launch.
static bool emptyGrid(Grid g) { return g.x == 0 || g.y == 0 || g.z == 0; }

double SpecRun::bytesMoved() const {
  if (Spec.run.bytesMoved)
    return Spec.run.bytesMoved(O.sizes, O.dtype);
  double bytes = 0;
  for (const Buffer &b : Buffers)
    bytes += double(b.host.size());
  return bytes;
}

const SpecRun::Buffer &SpecRun::buffer(const std::string &name) const {
  for (const Buffer &b : Buffers)
    if (b.spec->name == name && b.spec->isPointer())
      return b;
  std::string known;
  for (const Buffer &b : Buffers)
    if (b.spec->isPointer())
      known += " " + b.spec->name;
  throw Error("kernel '" + Spec.name + "' has no array argument '" + name +
              "' (its arrays:" + known + ")");
}

std::vector<KernelArg>
SpecRun::kernelArgs(const std::vector<void *> &pointers) const {
  std::vector<KernelArg> args;
  for (size_t i = 0; i < Buffers.size(); ++i) {
    const Buffer &b = Buffers[i];
    if (b.spec->isPointer()) {
      args.push_back(KernelArg::pointer(
          pointers[i], b.dtype, int64_t(b.host.size() / dtypeSize(b.dtype))));
      continue;
    }
    double v = Scalars.at(b.spec->name);
    args.push_back(b.dtype == DType::F32   ? KernelArg::f32(float(v))
                   : b.dtype == DType::I32 ? KernelArg::i32(int32_t(v))
                                           : KernelArg::i64(int64_t(v)));
  }
  return args;
}

void SpecRun::runOnCpu(std::optional<InterpretLevel> level) {
  std::vector<void *> host;
  for (Buffer &b : Buffers)
    host.push_back(b.host.data());
  if (!emptyGrid(G))
    K->runOnCpu(G, kernelArgs(host), level);
}

double SpecRun::runOnGpu(int timedRuns) {
  if (!Device)
    Device = std::make_unique<Gpu>();
  Gpu &d = *Device;
  if (d.buffers.empty())
    for (const Buffer &b : Buffers) {
      d.buffers.emplace_back(b.host.size());
      d.pointers.push_back(reinterpret_cast<void *>(d.buffers.back().ptr()));
    }
  for (size_t i = 0; i < Buffers.size(); ++i) {
    if (!Buffers[i].spec->isPointer())
      continue;
    if (Buffers[i].spec->role == ArgSpec::Role::Input)
      d.buffers[i].copyFromHost(Buffers[i].host.data(), Buffers[i].host.size());
    else
      d.buffers[i].memset(0xFF); // NaN in f32/f16/bf16: unwritten shows
  }
  std::vector<KernelArg> args = kernelArgs(d.pointers);
  if (emptyGrid(G))
    return 0;
  K->launch(G, args);
  cuda::synchronize();
  for (size_t i = 0; i < Buffers.size(); ++i)
    if (Buffers[i].spec->role == ArgSpec::Role::Output)
      d.buffers[i].copyToHost(Buffers[i].host.data(), Buffers[i].host.size());
  if (timedRuns <= 0)
    return 0;
  std::vector<double> ms;
  for (int i = 0; i < timedRuns; ++i)
    ms.push_back(d.timeMs([&] { K->launch(G, args); }));
  return medianOf(ms);
}

/// Size `name` of a spec's declared product.
static int64_t gemmSize(const KernelSpec &spec,
                        const std::map<std::string, int64_t> &sizes,
                        const std::string &name) {
  auto it = sizes.find(name);
  if (it == sizes.end())
    throw Error("kernel '" + spec.name + "': its product names size '" + name +
                "', which it does not declare");
  return it->second;
}

double SpecRun::flops() const {
  if (!Spec.run.gemm)
    return 0;
  const RunSpec::Gemm &g = *Spec.run.gemm;
  return 2.0 * double(gemmSize(Spec, O.sizes, g.m)) *
         double(gemmSize(Spec, O.sizes, g.n)) *
         double(gemmSize(Spec, O.sizes, g.k));
}

double SpecRun::vendorGemmMs(int timedRuns, bool copyOutput) {
  if (!Spec.run.gemm)
    throw Error("kernel '" + Spec.name + "' declares no product to time "
                "cuBLASLt on");
  if (!Device || Device->buffers.empty())
    throw Error("vendorGemmMs: runOnGpu has not copied the operands");
  const RunSpec::Gemm &g = *Spec.run.gemm;
  auto value = [&](const std::string &name) {
    auto it = Scalars.find(name);
    if (it == Scalars.end())
      throw Error("kernel '" + Spec.name + "': its product names '" + name +
                  "', neither a parameter nor a scalar argument");
    return it->second;
  };
  const int64_t m = gemmSize(Spec, O.sizes, g.m),
                n = gemmSize(Spec, O.sizes, g.n),
                k = gemmSize(Spec, O.sizes, g.k);
  const bool ta = value(g.transA) != 0, tb = value(g.transB) != 0;
  auto index = [&](const std::string &name) {
    return size_t(&buffer(name) - Buffers.data());
  };
  auto matrix = [&](const std::string &name, int64_t rows, int64_t cols,
                    const std::string &ld) {
    size_t i = index(name);
    return cublaslt::Matrix{Device->buffers[i].ptr(), Buffers[i].dtype, rows,
                            cols, int64_t(value(ld))};
  };
  cublaslt::Matrix a = ta ? matrix(g.a, k, m, g.lda) : matrix(g.a, m, k, g.lda);
  cublaslt::Matrix b = tb ? matrix(g.b, n, k, g.ldb) : matrix(g.b, k, n, g.ldb);
  cublaslt::Matrix c = matrix(g.c, m, n, g.ldc);
  const float alpha = float(value(g.alpha)), beta = float(value(g.beta));
  // Choosing the algorithm runs the product several times: with beta != 0
  // C would hold more than one accumulation.
  if (copyOutput && beta != 0)
    throw Error("kernel '" + Spec.name + "': cuBLASLt's C is compared only "
                "at beta = 0");
  cublaslt::Gemm gemm;
  gemm.setTimedCandidates(8);
  gemm.run(a, ta, b, tb, c, alpha, beta); // chooses the algorithm
  cuda::synchronize();
  if (copyOutput) {
    size_t i = index(g.c);
    Device->buffers[i].copyToHost(Buffers[i].host.data(),
                                  Buffers[i].host.size());
  }
  std::vector<double> ms;
  for (int i = 0; i < timedRuns; ++i)
    ms.push_back(
        Device->timeMs([&] { gemm.run(a, ta, b, tb, c, alpha, beta); }));
  return medianOf(ms);
}

std::map<std::string, std::vector<double>> SpecRun::referenceOutputs() const {
  ReferenceArgs ra;
  ra.scalars = Scalars;
  ra.sizes = O.sizes;
  for (const Buffer &b : Buffers) {
    if (b.spec->role == ArgSpec::Role::Input)
      ra.inputs[b.spec->name] = {b.host.data(), b.dtype, b.shape};
    else if (b.spec->role == ArgSpec::Role::Output)
      ra.outputs[b.spec->name].assign(b.host.size() / dtypeSize(b.dtype), 0);
  }
  Spec.run.reference(ra);
  return std::move(ra.outputs);
}

std::vector<OutputCheck> SpecRun::check() const {
  if (!hasReference())
    throw Error("kernel '" + Spec.name + "' has no reference to check with");
  if (!Want) // the inputs never change, so neither does the reference
    Want = referenceOutputs();
  std::vector<OutputCheck> checks;
  for (const Buffer &b : Buffers) {
    if (b.spec->role != ArgSpec::Role::Output)
      continue;
    OutputCheck c;
    c.name = b.spec->name;
    const std::vector<double> &want = Want->at(c.name);
    const Tolerance &t = b.spec->tol;
    double relTol = t.rtol + roundoff(b.dtype);
    for (size_t i = 0; i < want.size(); ++i) {
      double got = loadAsDouble(b.host.data(), b.dtype, i);
      if (std::isnan(got) && std::isnan(want[i])) {
        ++c.nans;
        continue;
      }
      double err = std::fabs(got - want[i]);
      double tol = t.atol + relTol * std::fabs(want[i]);
      double ratio = std::isnan(err) ? HUGE_VAL
                     : err == 0      ? 0
                     : tol == 0      ? HUGE_VAL
                                     : err / tol;
      if (!std::isnan(err))
        c.maxAbsError = std::max(c.maxAbsError, err);
      if (c.worstIndex < 0 || ratio > c.worstRatio) {
        c.worstRatio = ratio;
        c.worstIndex = int64_t(i);
        c.got = got;
        c.want = want[i];
      }
    }
    c.passed = c.worstRatio <= 1;
    checks.push_back(c);
  }
  return checks;
}

std::string describeChecks(const std::vector<OutputCheck> &checks,
                           bool *passed) {
  std::string s;
  *passed = true;
  for (const OutputCheck &c : checks) {
    std::string nans =
        c.nans ? llvm::formatv("; {0} NaN in both, matched", c.nans).str() : "";
    if (c.worstIndex < 0) // empty, or NaN in both everywhere
      s += "  " + c.name + ": " +
           (c.nans ? std::to_string(c.nans) + " NaN in both, matched"
                   : std::string("empty")) +
           ": ok\n";
    else
      s += llvm::formatv("  {0}: max |error| {1:e2}, worst {2:f2} of the "
                         "tolerance at element {3} (got {4:e6}, want "
                         "{5:e6}){6}: {7}\n",
                         c.name, c.maxAbsError, c.worstRatio, c.worstIndex,
                         c.got, c.want, nans, c.passed ? "ok" : "FAIL")
               .str();
    *passed &= c.passed;
  }
  return s + (*passed ? "check: PASS\n" : "check: FAIL\n");
}

void SpecRun::writeNpy(const std::string &name, const std::string &path) const {
  const Buffer &b = buffer(name);
  tilejit::writeNpy(path, b.dtype, b.shape, b.host.data());
}

TuningKey SpecRun::tuningKey(const DeviceIdentity &device) const {
  return kernelTuningKey(Spec, O.dtype, O.sizes, device);
}

//===----------------------------------------------------------------------===//
// Tuning: the spec's candidates through runtime/Autotuner.h on SpecRun's
// device buffers. No kernel of this kind writes its inputs, so a reset
// NaN-fills the outputs only. A candidate passes when its outputs match the
// reference or, for a spec without one, when every output is finite.
//===----------------------------------------------------------------------===//

namespace {
struct Candidate : TuneCandidate {
  Kernel kernel;
  Grid grid; ///< its config's (a grid of blocks follows the block size)
  Candidate(Kernel k, Grid g) : kernel(std::move(k)), grid(g) {}
  void launch(const std::vector<KernelArg> &args) const {
    kernel.launch(grid, args);
  }
};
} // namespace

class SpecTuningTarget : public TuningTarget {
public:
  explicit SpecTuningTarget(SpecRun &run) : R(run) {
    R.runOnGpu(); // allocates the device buffers and copies the inputs
    Args = R.kernelArgs(R.Device->pointers);
  }
  const cuda::Device &device() const { return R.Device->device; }

  std::unique_ptr<TuneCandidate> compile(const TuneParams &params) override {
    const SpecRunOptions &o = R.options();
    std::vector<std::string> set = paramOverrides(params);
    return std::make_unique<Candidate>(
        Kernel::compile(R.spec(), {o.dtype, set, o.sizes, o.arch}),
        runGrid(R.spec().run, o.sizes, R.spec().config(o.dtype, set, o.sizes)));
  }
  KernelResources load(TuneCandidate &c) override {
    const Kernel &k = static_cast<Candidate &>(c).kernel;
    k.compileForGpu();
    return tuningResources(k);
  }
  void resetBuffers() override {
    for (size_t i = 0; i < R.Buffers.size(); ++i)
      if (R.Buffers[i].spec->role == ArgSpec::Role::Output)
        R.Device->buffers[i].memset(0xFF);
  }
  void launch(TuneCandidate &c) override {
    static_cast<Candidate &>(c).launch(Args);
    cuda::synchronize();
  }
  double timeLaunch(TuneCandidate &c) override {
    return R.Device->timeMs([&] { static_cast<Candidate &>(c).launch(Args); });
  }
  std::string checkOutputs() override {
    for (size_t i = 0; i < R.Buffers.size(); ++i) {
      SpecRun::Buffer &b = R.Buffers[i];
      if (b.spec->role != ArgSpec::Role::Output)
        continue;
      R.Device->buffers[i].copyToHost(b.host.data(), b.host.size());
      size_t n = b.host.size() / dtypeSize(b.dtype);
      for (size_t e = 0; e < n && !R.hasReference(); ++e)
        if (!std::isfinite(loadAsDouble(b.host.data(), b.dtype, e)))
          return b.spec->name + " is not finite at element " +
                 std::to_string(e) + " (unwritten?)";
    }
    if (!R.hasReference())
      return {};
    bool passed = false;
    std::string table = describeChecks(R.check(), &passed);
    return passed ? "" : table;
  }

private:
  SpecRun &R;
  std::vector<KernelArg> Args;
};

SpecTuneReport tuneSpecGpu(SpecRun &run, int repetitions, bool retune,
                           const std::function<void(const std::string &)>
                               &progress) {
  SpecTuningTarget target(run);
  SpecTuneReport r;
  r.key = run.tuningKey(deviceIdentity(target.device()));
  TuningDatabase db = TuningDatabase::fromEnvironment();
  r.path = db.enabled() ? db.pathFor(r.key).string() : "";
  TuneOptions topts;
  topts.repetitions = repetitions;
  topts.progress = progress;
  r.entry = lookupOrTune(
      db, r.key,
      [&] {
        return autotune(target, run.spec().candidateConfigs(),
                        deviceLimits(target.device()), topts);
      },
      retune, &r.fromDatabase);
  return r;
}

} // namespace tilejit
