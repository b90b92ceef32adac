//===- Log.cpp ------------------------------------------------------------===//
#include "tilejit/Log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <cstdlib>

namespace tilejit {

std::shared_ptr<spdlog::logger> log() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    auto l = spdlog::stderr_color_mt("tilejit");
    l->set_pattern("[%H:%M:%S.%e] [%^%l%$] %v");
    const char *env = std::getenv("TILEJIT_LOG");
    l->set_level(env ? spdlog::level::from_str(env) : spdlog::level::warn);
    return l;
  }();
  return logger;
}

} // namespace tilejit
