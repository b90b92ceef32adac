//===- Timing.h - wall-clock intervals --------------------------*- C++ -*-===//
#ifndef TILEJIT_TIMING_H
#define TILEJIT_TIMING_H

#include <algorithm>
#include <chrono>
#include <vector>

namespace tilejit {

/// Milliseconds of wall-clock time since `t0` (a steady_clock reading); the
/// compiler's, the cache's and the tuner's timings all use it.
inline double msSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now() - t0)
      .count();
}

/// The median of repeated timings: the middle of the sorted values (the
/// upper middle for an even count). `ms` must not be empty.
inline double medianOf(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

} // namespace tilejit

#endif // TILEJIT_TIMING_H
