//===- RunSpec.cpp - the declared arguments of a kernel -------------------===//
#include "tilejit/HostFloat.h"
#include "tilejit/KernelSpec.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringRef.h"

#include <set>

namespace tilejit {

ArgFill ArgFill::normal(double sd, double mean) {
  ArgFill f;
  f.kind = Kind::Normal;
  f.mean = mean;
  f.sd = sd;
  return f;
}

ArgFill ArgFill::logSoftmax(double sd) {
  ArgFill f = normal(sd);
  f.kind = Kind::LogSoftmax;
  return f;
}

ArgFill ArgFill::classIndex(std::string classes, int64_t ignoreEvery,
                            int64_t ignoreIndex) {
  ArgFill f;
  f.kind = Kind::ClassIndex;
  f.classes = std::move(classes);
  f.ignoreEvery = ignoreEvery;
  f.ignoreIndex = ignoreIndex;
  return f;
}

ArgFill ArgFill::zeros() { return {}; }

ArgSpec ArgSpec::input(std::string name, std::vector<std::string> shape,
                       ArgFill fill) {
  ArgSpec a;
  a.name = std::move(name);
  a.shape = std::move(shape);
  a.fill = std::move(fill);
  return a;
}

ArgSpec ArgSpec::output(std::string name, std::vector<std::string> shape,
                        Tolerance tol) {
  ArgSpec a;
  a.name = std::move(name);
  a.role = Role::Output;
  a.shape = std::move(shape);
  a.tol = tol;
  return a;
}

ArgSpec ArgSpec::sizeScalar(std::string name, std::string size) {
  ArgSpec a;
  a.name = std::move(name);
  a.role = Role::SizeScalar;
  a.size = std::move(size);
  return a;
}

ArgSpec ArgSpec::scalar(std::string name, double defaultValue,
                        double minValue, double maxValue) {
  ArgSpec a;
  a.name = std::move(name);
  a.role = Role::Scalar;
  a.value = defaultValue;
  a.minValue = minValue;
  a.maxValue = maxValue;
  return a;
}

int64_t HostTensor::numElements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

double HostTensor::operator[](int64_t i) const {
  return loadAsDouble(data, dtype, size_t(i));
}

template <typename Map>
static auto &lookup(Map &m, const std::string &name, const char *what) {
  auto it = m.find(name);
  if (it == m.end())
    throw Error(std::string("reference: no ") + what + " '" + name + "'");
  return it->second;
}

const HostTensor &ReferenceArgs::in(const std::string &name) const {
  return lookup(inputs, name, "input");
}
std::vector<double> &ReferenceArgs::out(const std::string &name) {
  return lookup(outputs, name, "output");
}
double ReferenceArgs::scalar(const std::string &name) const {
  return lookup(scalars, name, "scalar");
}
int64_t ReferenceArgs::size(const std::string &name) const {
  return lookup(sizes, name, "size");
}

const ArgSpec *RunSpec::arg(const std::string &name) const {
  for (const ArgSpec &a : args)
    if (a.name == name)
      return &a;
  return nullptr;
}

Grid runGrid(const RunSpec &run, const std::map<std::string, int64_t> &sizes,
             const dsl::Config &config) {
  std::vector<int64_t> programs;
  for (const std::string &g : run.grid) {
    auto [size, param] = llvm::StringRef(g).split('/');
    auto n = sizes.find(size.str());
    if (n == sizes.end())
      throw Error("the grid names size '" + size.str() + "', which is unset");
    int64_t block = param.empty() ? 1 : config.get(param.str());
    if (block <= 0)
      throw Error("the grid's block " + param.str() + " = " +
                  std::to_string(block) + " is not positive");
    programs.push_back(n->second / block + (n->second % block != 0));
  }
  programs.resize(3, 1);
  return {programs[0], programs[1], programs[2]};
}

void checkRunSpec(const KernelSpec &spec,
                  const std::vector<KernelParam> &params) {
  const RunSpec &run = spec.run;
  auto fail = [&](const std::string &why) {
    throw Error("kernel '" + spec.name + "': " + why);
  };
  if (!run.declared())
    fail("its spec declares no arguments, so only the operations that use "
         "it can run it");
  std::set<std::string> sizes;
  for (const SizeSpec &s : run.sizes)
    if (!sizes.insert(s.name).second)
      fail("size '" + s.name + "' is declared twice");
  auto checkSize = [&](const std::string &size, const std::string &where) {
    if (!sizes.count(size))
      fail(where + " names size '" + size + "', which the spec does not "
           "declare");
  };
  if (run.grid.empty() || run.grid.size() > 3)
    fail("the grid must name 1 to 3 sizes");
  for (const std::string &g : run.grid) {
    auto [size, param] = llvm::StringRef(g).split('/');
    checkSize(size.str(), "the grid");
    if (!param.empty() && !spec.param(param.str()))
      fail("the grid names parameter '" + param.str() +
           "', which the spec does not declare");
  }
  std::set<std::string> seen;
  for (const ArgSpec &a : run.args) {
    if (!seen.insert(a.name).second)
      fail("argument '" + a.name + "' is declared twice");
    auto p = llvm::find_if(
        params, [&](const KernelParam &kp) { return kp.name == a.name; });
    if (p == params.end())
      fail("the spec declares argument '" + a.name +
           "', which the kernel does not take");
    if (p->pointer != a.isPointer())
      fail("argument '" + a.name + "' is " +
           (p->pointer ? "a pointer" : "a scalar") + " in the kernel but " +
           (a.isPointer() ? "an array" : "a scalar") + " in the spec");
    for (const std::string &d : a.shape)
      if (!ArgSpec::isExtent(d))
        checkSize(d, "argument '" + a.name + "'");
    if (a.role == ArgSpec::Role::SizeScalar)
      checkSize(a.size, "argument '" + a.name + "'");
    if (a.role == ArgSpec::Role::Input &&
        a.fill.kind == ArgFill::Kind::ClassIndex)
      checkSize(a.fill.classes, "argument '" + a.name + "'");
  }
  for (const KernelParam &p : params)
    if (!seen.count(p.name))
      fail("parameter '" + p.name + "' has no declaration in the spec's "
           "run.args");
}

} // namespace tilejit
