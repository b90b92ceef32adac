//===- Registry.cpp - kernels by name, and their configurations -----------===//
#include "tilejit/KernelSpec.h"

#include "kernels_spec/FusedCeTvd.h"
#include "kernels_spec/LinearCe.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <algorithm>
#include <cmath>
#include <mutex>
#include <set>

namespace tilejit {

// Specs with a file of their own.
KernelSpec jsdSpec();          // kernels_spec/Jsd.cpp
KernelSpec jsdLogitsSpec();    // kernels_spec/Jsd.cpp
KernelSpec scaleGradSpec();    // kernels_spec/ScaleGrad.cpp
KernelSpec crossEntropySpec(); // kernels_spec/CrossEntropy.cpp
KernelSpec klDivSpec();        // kernels_spec/KlDiv.cpp
KernelSpec ceTvdLossGradSpec(); // kernels_spec/CeTvd.cpp
KernelSpec rowScaleSpec();     // kernels_spec/RowMean.cpp
KernelSpec rowLossTotalSpec(); // kernels_spec/RowMean.cpp

dsl::Config
KernelSpec::config(DType dtype,
                   const std::vector<std::string> &overrides) const {
  if (std::find(dtypes.begin(), dtypes.end(), dtype) == dtypes.end()) {
    std::string supported;
    for (DType d : dtypes)
      supported += std::string(supported.empty() ? "" : ", ") + dtypeName(d);
    throw Error("kernel '" + name + "' does not support dtype " +
                dtypeName(dtype) + " (it takes " + supported + ")");
  }
  dsl::Config c;
  c.dtype = dtype;
  for (const ParamSpec &p : params)
    c.params[p.name] = p.defaultValue;
  for (const std::string &o : overrides) {
    auto eq = o.find('=');
    std::string key = o.substr(0, eq);
    if (eq == std::string::npos)
      throw Error("kernel '" + name + "': '" + o + "' is not NAME=VALUE");
    if (!c.params.count(key)) {
      std::string known;
      for (const ParamSpec &p : params)
        known += " " + p.name;
      throw Error("kernel '" + name + "' has no parameter '" + key +
                  "' (its parameters:" + known + ")");
    }
    try {
      size_t used = 0;
      c.params[key] = std::stoll(o.substr(eq + 1), &used);
      if (used != o.size() - eq - 1)
        throw std::invalid_argument(o);
    } catch (const std::out_of_range &) {
      throw Error("kernel '" + name + "': '" + o +
                  "' is out of the 64-bit integer range");
    } catch (const std::exception &) {
      throw Error("kernel '" + name + "': '" + o + "' has a non-integer value");
    }
    int64_t v = c.params[key];
    const ParamSpec &spec = *param(key);
    auto bad = [&](const std::string &why) {
      return Error("kernel '" + name + "': '" + o + "': " + why);
    };
    if (key == "num_warps" && (v < 1 || v > 32 || (v & (v - 1))))
      throw bad("num_warps must be 1, 2, 4, 8, 16 or 32");
    // Sizes and counts start at 1; only a parameter that has 0 among its
    // candidates (a switch, a TRANS_A) takes 0.
    bool zeroAllowed = llvm::is_contained(spec.candidates, 0);
    if (v < (zeroAllowed ? 0 : 1))
      throw bad(zeroAllowed ? "values must be >= 0" : "values must be >= 1");
    if (key == "CLUSTER_SIZE" && v > 16)
      throw bad("a thread-block cluster has at most 16 programs");
    // A parameter with 0 among its candidates is a switch or a mode: one of
    // the listed values.
    if (zeroAllowed && !llvm::is_contained(spec.candidates, v))
      throw bad(key + " must be one of " +
                llvm::join(llvm::map_range(
                               spec.candidates,
                               [](int64_t c) { return std::to_string(c); }),
                           ", "));
  }
  return c;
}

dsl::Config
KernelSpec::config(DType dtype, const std::vector<std::string> &overrides,
                   const std::map<std::string, int64_t> &shape) const {
  dsl::Config c = config(dtype, overrides);
  if (shapeDefaults) {
    std::set<std::string> overridden;
    for (const std::string &o : overrides)
      overridden.insert(o.substr(0, o.find('=')));
    shapeDefaults(c, shape, overridden);
  }
  if (deriveParams)
    deriveParams(c, shape);
  return c;
}

std::vector<std::map<std::string, int64_t>>
KernelSpec::candidateConfigs() const {
  std::vector<std::map<std::string, int64_t>> configs(1);
  for (const ParamSpec &p : params) {
    if (!p.tuned)
      continue;
    std::vector<std::map<std::string, int64_t>> next;
    for (const auto &c : configs)
      for (int64_t v : p.candidates) {
        next.push_back(c);
        next.back()[p.name] = v;
      }
    configs = std::move(next);
  }
  return configs;
}

std::string
KernelSpec::tuningShapeKey(const std::map<std::string, int64_t> &shape) const {
  std::string key;
  for (const TuneKeyArg &arg : tuneKey) {
    auto it = shape.find(arg.name);
    if (it == shape.end())
      throw Error("kernel '" + name + "': tuning key needs shape '" + arg.name +
                  "'");
    int64_t v = it->second;
    if (arg.pow2Bucket && v > 1)
      v = int64_t(1) << (64 - __builtin_clzll(uint64_t(v - 1)));
    key += (key.empty() ? "" : ",") + arg.name + "=" + std::to_string(v);
  }
  return key;
}

std::vector<std::string>
KernelSpec::ownOverrides(const std::vector<std::string> &overrides) const {
  std::vector<std::string> own;
  for (const std::string &o : overrides)
    if (param(o.substr(0, o.find('='))))
      own.push_back(o);
  return own;
}

const ParamSpec *KernelSpec::param(const std::string &name) const {
  for (const ParamSpec &p : params)
    if (p.name == name)
      return &p;
  return nullptr;
}

void setSwitchFromProblem(dsl::Config &c,
                          const std::map<std::string, int64_t> &problem,
                          const std::string &name, bool absent) {
  auto it = problem.find(name);
  c.params[name] = it == problem.end() ? absent : it->second != 0;
}

bool rowsAreAligned(const dsl::Config &c,
                    const std::map<std::string, int64_t> &problem) {
  if (auto a = problem.find("ALIGNED"); a != problem.end())
    return a->second != 0;
  auto v = problem.find("V");
  return v != problem.end() &&
         v->second * int64_t(dtypeSize(c.dtype)) % 16 == 0;
}

void deriveAligned(dsl::Config &c,
                   const std::map<std::string, int64_t> &problem) {
  c.params["ALIGNED"] = rowsAreAligned(c, problem);
}

void applyAligned(dsl::KernelBuilder &k) {
  const auto &params = k.config().params;
  auto it = params.find("ALIGNED");
  if (it != params.end() && it->second != 0)
    k.assumeAlignedVectors();
}

KernelSpec withRowSchedules(KernelSpec spec, std::string rowSize,
                            std::vector<int64_t> splits,
                            int64_t keptCopyAhead) {
  spec.params.push_back({"KEEP_ROW",
                         {0, 1},
                         0,
                         "compiler: keep a row walked again in shared memory"});
  // On by default: on the H200 it took cross_entropy from 1.125 to 1.044
  // ms, kl_div from 1.748 to 1.583 and jsd from 2.107 to 2.081 at BT =
  // 4096, V = 151936, bf16 (docs/performance-row-losses.md).
  spec.params.push_back({"LOAD_AHEAD",
                         {0, 1},
                         1,
                         "compiler: issue each walk's loads one tile ahead"});
  spec.params.push_back(
      {"PEEL_TAIL",
       {0, 1},
       1,
       "compiler: run a walk's whole tiles without masks, its partial tile "
       "apart",
       /*tuned=*/false});
  spec.params.push_back({"FUSE_WALKS",
                         {0, 1},
                         1,
                         "compiler: one walk where two read the same row and "
                         "the second needs nothing the first computes",
                         /*tuned=*/false});
  spec.params.push_back({"UNSWITCH",
                         {0, 1},
                         1,
                         "compiler: one walk per value of a condition fixed "
                         "before it",
                         /*tuned=*/false});
  spec.params.push_back(
      {"KEEP_COPY_AHEAD",
       {0, 2, 4, 7},
       0,
       "compiler: fill a kept row with copies this many tiles ahead (0: off)",
       /*tuned=*/false});
  spec.params.push_back(
      {"PROGRAMS_PER_SM",
       {0, 3, 4, 5, 6},
       0,
       "compiler: programs per SM the registers are capped for (0: as many "
       "as a kept row's shared memory allows, else ptxas's choice)",
       /*tuned=*/false});
  if (splits.size() > 1)
    spec.params.push_back(
        {"SPLIT_ROWS", splits, 1,
         "compiler: programs of a thread-block cluster sharing each row"});
  if (keptCopyAhead > 0)
    spec.shapeDefaults = [size = rowSize, splits, keptCopyAhead](
                             dsl::Config &c,
                             const std::map<std::string, int64_t> &shape,
                             const std::set<std::string> &overridden) {
      // Measured on an H100 (docs/performance-row-losses.md): with the
      // per-element instructions the compiler leaves, a plain row kernel
      // waits on its second read of each row; kept in shared memory over a
      // cluster whose programs hold about 8192 elements each, cross_entropy
      // and kl_div ran 1.15-1.46x faster from V = 32000 up.
      auto it = shape.find(size);
      if (it == shape.end() || it->second < 12288)
        return;
      auto set = [&](const char *name, int64_t v) {
        if (!overridden.count(name))
          c.params[name] = v;
      };
      double perProgram = double(it->second) / 8192;
      int64_t split = 1;
      for (int64_t s : splits)
        if (std::abs(std::log2(double(s) / perProgram)) <
            std::abs(std::log2(double(split) / perProgram)))
          split = s;
      set("KEEP_ROW", 1);
      if (c.params["KEEP_ROW"] == 0)
        return; // a split alone does not pay (performance-row-losses.md)
      set("KEEP_COPY_AHEAD", keptCopyAhead);
      if (splits.size() > 1)
        set("SPLIT_ROWS", split);
    };
  auto derive = std::move(spec.deriveParams);
  std::string size = std::move(rowSize);
  spec.deriveParams = [derive, size](dsl::Config &c,
                                     const std::map<std::string, int64_t> &shape) {
    if (derive)
      derive(c, shape);
    // Only a kept row is sized by it: the other schedules compile once for
    // every row length.
    auto it = shape.find(size);
    if (it != shape.end() && c.params["KEEP_ROW"] != 0)
      c.params["ROW_EXTENT"] = it->second;
  };
  return spec;
}

/// A deque: registering a kernel keeps references to the others valid.
static std::deque<KernelSpec> &registry() {
  static std::deque<KernelSpec> kernels = {
      fusedCeTvdForwardSpec(),
      fusedCeTvdBackwardSpec(),
      fusedCeTvdForwardClusterSpec(),
      fusedCeTvdLossGradSpec(),
      ceTvdRowWeightsSpec(),
      ceTvdLossSumSpec(),
      linearCeLogitsGradSpec(),
      linearCeRowWeightsSpec(),
      linearCeLossSumSpec(),
      linearCeGemmSpec(),
      linearCeLogitsSpec(),
      withRowSchedules(jsdSpec(), "V", {1, 2, 4, 8}),
      withRowSchedules(jsdLogitsSpec(), "V", {1, 2, 4, 8}, 2),
      scaleGradSpec(),
      withRowSchedules(crossEntropySpec(), "V", {1, 2, 4, 8}, 4),
      withRowSchedules(klDivSpec(), "V", {1, 2, 4, 8}, 2),
      withRowSchedules(ceTvdLossGradSpec(), "V", {1, 2, 4, 8}, 2),
      rowScaleSpec(),
      rowLossTotalSpec()};
  return kernels;
}

static std::mutex &registryMutex() {
  static std::mutex m;
  return m;
}

const std::deque<KernelSpec> &kernelRegistry() { return registry(); }

void registerKernel(KernelSpec spec) {
  if (spec.name.empty() || !spec.build)
    throw Error("registerKernel: a kernel needs a name and a build function");
  std::lock_guard<std::mutex> lock(registryMutex());
  for (const KernelSpec &k : registry())
    if (k.name == spec.name)
      throw Error("registerKernel: a kernel named '" + spec.name +
                  "' is already registered");
  registry().push_back(std::move(spec));
}

const KernelSpec &findKernel(const std::string &name) {
  std::lock_guard<std::mutex> lock(registryMutex());
  std::string known;
  for (const KernelSpec &k : kernelRegistry()) {
    if (k.name == name)
      return k;
    known += " " + k.name;
  }
  throw Error("unknown kernel '" + name + "'; known kernels:" + known);
}

} // namespace tilejit
