//===- ConfigSample.h - a sample of a kernel's tuning space ---------------===//
//
// The compile tests cannot build every point of a tuning space in CI time
// (NVRTC and ptxas take seconds per config). They build this sample: the
// defaults, each candidate of each parameter with the rest at their
// defaults (every value is compiled at least once), and evenly spaced
// points of the full product of the tuned candidates (combinations of
// values), at most `combinations` of them.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_TESTS_UNIT_CONFIGSAMPLE_H
#define TILEJIT_TESTS_UNIT_CONFIGSAMPLE_H

#include "runtime/Autotuner.h"
#include "tilejit/KernelSpec.h"

#include <algorithm>
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
  size_t stride = std::max<size_t>(1, (product.size() + combinations - 1) /
                                          combinations);
  // Offset by half a stride so that the points are not all at the first
  // candidates of the outer parameters.
  for (size_t i = stride / 2; i < product.size(); i += stride)
    configs.push_back(paramOverrides(product[i]));
  return configs;
}

} // namespace tilejit

#endif // TILEJIT_TESTS_UNIT_CONFIGSAMPLE_H
