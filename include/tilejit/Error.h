//===- Error.h - tilejit's error type ---------------------------*- C++ -*-===//
//
// Every user-facing failure (bad DSL program, bad shapes, NVRTC errors, no GPU)
// is reported as a tilejit::Error whose message names what went wrong and where.
//
//===----------------------------------------------------------------------===//
#ifndef TILEJIT_ERROR_H
#define TILEJIT_ERROR_H

#include <stdexcept>
#include <string>

namespace tilejit {

class Error : public std::runtime_error {
public:
  explicit Error(const std::string &message) : std::runtime_error(message) {}
};

} // namespace tilejit

#endif // TILEJIT_ERROR_H
