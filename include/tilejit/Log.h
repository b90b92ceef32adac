//===- Log.h - tilejit's logger -----------------------------------*- C++ -*-===//
#ifndef TILEJIT_LOG_H
#define TILEJIT_LOG_H

#include <spdlog/spdlog.h>

#include <memory>

namespace tilejit {

/// The "tilejit" logger, writing to stderr. Its level comes from TILEJIT_LOG
/// (trace, debug, info, warn, error, off; default warn) and can be changed
/// with log()->set_level().
std::shared_ptr<spdlog::logger> log();

} // namespace tilejit

#endif // TILEJIT_LOG_H
