//===- CApiGuard.h - what every C ABI entry point does with errors -*- C++ -*-===//
#ifndef TILEJIT_OPS_CAPIGUARD_H
#define TILEJIT_OPS_CAPIGUARD_H

#include "tilejit/Error.h"

#include <string>

namespace tilejit {
namespace capi {

/// This thread's last error message (tilejit_last_error).
std::string &lastError();

/// Runs `fn`: 0 when it returns, 1 when it throws, with the message kept
/// for tilejit_last_error(). Nothing crosses the C boundary as an exception.
template <typename Fn> int guarded(Fn &&fn) {
  try {
    fn();
    lastError().clear();
    return 0;
  } catch (const std::exception &e) {
    lastError() = e.what();
  } catch (...) {
    lastError() = "unknown error";
  }
  return 1;
}

/// Throws tilejit::Error(why) unless `ok`.
inline void require(bool ok, const char *why) {
  if (!ok)
    throw Error(why);
}

} // namespace capi
} // namespace tilejit

#endif // TILEJIT_OPS_CAPIGUARD_H
