//===- Timing.h - wall-clock intervals --------------------------*- C++ -*-===//
#ifndef TILEJIT_TIMING_H
#define TILEJIT_TIMING_H

#include <chrono>

namespace tilejit {

/// Milliseconds of wall-clock time since `t0` (a steady_clock reading); the
/// compiler's, the cache's and the tuner's timings all use it.
inline double msSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now() - t0)
      .count();
}

} // namespace tilejit

#endif // TILEJIT_TIMING_H
