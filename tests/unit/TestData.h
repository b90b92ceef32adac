//===- TestData.h - reading tests/data (numerics.json, vectors.json) -*- C++
//-*-//
//
// Infinities are the strings "-inf"/"inf"; null means "not defined" (lse and
// sigma of ignored rows) and reads as NaN. Errors throw std::runtime_error,
// which GoogleTest reports as a failure of the test that read the data.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_TESTS_UNIT_TESTDATA_H
#define TILEJIT_TESTS_UNIT_TESTDATA_H

#include "kernels_spec/reference/Inputs.h"
#include "tilejit/HostFloat.h"

#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#ifndef TILEJIT_TEST_DATA_DIR
#error "TILEJIT_TEST_DATA_DIR must name the tests/data directory"
#endif

namespace tilejit {
namespace testdata {

namespace json = llvm::json;

inline json::Value readJson(const std::string &name) {
  std::string path = std::string(TILEJIT_TEST_DATA_DIR) + "/" + name;
  std::ifstream file(path);
  if (!file)
    throw std::runtime_error("cannot open " + path);
  std::stringstream text;
  text << file.rdbuf();
  llvm::Expected<json::Value> value = json::parse(text.str());
  if (!value)
    throw std::runtime_error(path + ": " + llvm::toString(value.takeError()));
  return std::move(*value);
}

inline double number(const json::Value &v) {
  if (std::optional<double> d = v.getAsNumber())
    return *d;
  if (std::optional<llvm::StringRef> s = v.getAsString()) {
    if (*s == "inf")
      return std::numeric_limits<double>::infinity();
    if (*s == "-inf")
      return -std::numeric_limits<double>::infinity();
  }
  if (v.kind() == json::Value::Null)
    return std::numeric_limits<double>::quiet_NaN();
  throw std::runtime_error("expected a number in the test data");
}

/// A JSON array of numbers, or an array of arrays flattened row-major.
inline std::vector<double> numbers(const json::Value &v) {
  std::vector<double> out;
  for (const json::Value &e : *v.getAsArray()) {
    if (e.getAsArray()) {
      std::vector<double> row = numbers(e);
      out.insert(out.end(), row.begin(), row.end());
    } else {
      out.push_back(number(e));
    }
  }
  return out;
}

inline std::vector<int64_t> integers(const json::Value &v) {
  std::vector<int64_t> out;
  for (const json::Value &e : *v.getAsArray())
    out.push_back(*e.getAsInteger());
  return out;
}

inline const json::Value &field(const json::Object &o, llvm::StringRef key) {
  const json::Value *v = o.get(key);
  if (!v)
    throw std::runtime_error("missing field '" + key.str() + "'");
  return *v;
}

/// The numerics.json case called `id`.
inline json::Object numericsCase(const std::string &id) {
  json::Value file = readJson("numerics.json");
  for (const json::Value &c : *file.getAsObject()->getArray("cases"))
    if (*c.getAsObject()->getString("id") == id)
      return *c.getAsObject();
  throw std::runtime_error("numerics.json has no case " + id);
}

/// A one-row CE+TVD problem from explicit logits (a numerics.json row).
inline ref::CeTvdInputs oneRow(const std::vector<double> &s,
                               const std::vector<double> &t, int64_t target,
                               DType dtype = DType::F32) {
  ref::CeTvdInputs in;
  in.BT = 1;
  in.V = s.size();
  in.dtype = dtype;
  in.student.resize(in.V * dtypeSize(dtype));
  in.teacher.resize(in.V * dtypeSize(dtype));
  for (int64_t v = 0; v < in.V; ++v) {
    storeFromDouble(in.student.data(), dtype, v, s[v]);
    storeFromDouble(in.teacher.data(), dtype, v, t[v]);
  }
  in.target = {target};
  return in;
}

} // namespace testdata
} // namespace tilejit

#endif // TILEJIT_TESTS_UNIT_TESTDATA_H
