//===- Registry.cpp - kernels by name, and their configurations -----------===//
#include "tilejit/KernelSpec.h"

#include "kernels_spec/FusedCeTvd.h"

#include <algorithm>

namespace tilejit {

dsl::Config KernelSpec::config(DType dtype,
                               const std::vector<std::string> &overrides) const {
  if (std::find(dtypes.begin(), dtypes.end(), dtype) == dtypes.end())
    throw Error("kernel '" + name + "' does not support dtype " +
                dtypeName(dtype));
  dsl::Config c;
  c.dtype = dtype;
  for (const ParamSpec &p : params)
    c.params[p.name] = p.defaultValue;
  for (const std::string &o : overrides) {
    auto eq = o.find('=');
    std::string key = o.substr(0, eq);
    if (eq == std::string::npos || !c.params.count(key))
      throw Error("kernel '" + name + "': '" + o +
                  "' is not NAME=VALUE for one of its parameters");
    try {
      size_t used = 0;
      c.params[key] = std::stoll(o.substr(eq + 1), &used);
      if (used != o.size() - eq - 1)
        throw std::invalid_argument(o);
    } catch (const std::exception &) {
      throw Error("kernel '" + name + "': '" + o + "' has a non-integer value");
    }
  }
  return c;
}

const std::vector<KernelSpec> &kernelRegistry() {
  static const std::vector<KernelSpec> kernels = {fusedCeTvdForwardSpec(),
                                                  fusedCeTvdBackwardSpec()};
  return kernels;
}

const KernelSpec &findKernel(const std::string &name) {
  std::string known;
  for (const KernelSpec &k : kernelRegistry()) {
    if (k.name == name)
      return k;
    known += " " + k.name;
  }
  throw Error("unknown kernel '" + name + "'; known kernels:" + known);
}

} // namespace tilejit
