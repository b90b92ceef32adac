//===- ConfigSample.h - a sample of a kernel's tuning space ---------------===//
//
// The compile tests cannot build every point of a tuning space in CI time
// (NVRTC and ptxas take seconds per config). They build this sample: the
// defaults, each candidate of each parameter with the rest at their
// defaults (every value is compiled at least once), and points of the full
// product of the tuned candidates (combinations of values) drawn with a
// fixed seed, at most `combinations` of them. Drawn, not evenly spaced: a
// stride that shares a factor with the inner parameters' candidate counts
// would pin them to one value.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_TESTS_UNIT_CONFIGSAMPLE_H
#define TILEJIT_TESTS_UNIT_CONFIGSAMPLE_H

#include "runtime/Autotuner.h"
#include "tilejit/KernelSpec.h"

#include <algorithm>
#include <iterator>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace tilejit {

/// The sample, as --set overrides.
inline std::vector<std::vector<std::string>>
sampleConfigs(const KernelSpec &spec, size_t combinations) {
  std::vector<std::vector<std::string>> configs = {{}};
  for (const ParamSpec &p : spec.params)
    for (int64_t v : p.candidates)
      if (v != p.defaultValue)
        configs.push_back({p.name + "=" + std::to_string(v)});
  auto product = spec.candidateConfigs();
  if (product.empty() || combinations == 0)
    return configs;
  std::vector<size_t> all(product.size()), picked;
  std::iota(all.begin(), all.end(), size_t(0));
  std::sample(all.begin(), all.end(), std::back_inserter(picked),
              combinations, std::mt19937(20261202));
  for (size_t i : picked)
    configs.push_back(paramOverrides(product[i]));
  return configs;
}

} // namespace tilejit

#endif // TILEJIT_TESTS_UNIT_CONFIGSAMPLE_H
