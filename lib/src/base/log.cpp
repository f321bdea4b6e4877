// SPDX-License-Identifier: MIT
#include "mori/symm/base/log.hpp"
#include "mori/symm/base/env.hpp"

#include <spdlog/sinks/stdout_sinks.h>
#include <unistd.h>

#include <cstdlib>

#include "mori/symm/base/detail/text.hpp"
#include "mori/symm/base/error.hpp"

namespace mori::symm::log {
namespace {
using detail::host_name;
void apply_pattern(const std::string& rank) {
  spdlog::set_pattern("[%H:%M:%S.%e] [" + host_name() + " " + rank + " pid " + std::to_string(getpid()) +
                      "] [%l] %v");
}
}  // namespace

spdlog::level::level_enum parse_level(const std::string& name) {
  for (int l = spdlog::level::trace; l <= spdlog::level::off; ++l) {
    auto lvl = static_cast<spdlog::level::level_enum>(l);
    if (name == spdlog::level::to_string_view(lvl)) return lvl;
  }
  if (name == "warn") return spdlog::level::warn;
  throw UsageError("--log-level / MORI_LOG_LEVEL: unknown level '" + name +
                   "' (accepted: trace, debug, info, warn, error, critical, off)");
}

void init(const std::string& level) {
  static bool once = [] {
    auto logger = spdlog::stderr_logger_mt("mori");
    spdlog::set_default_logger(logger);
    return true;
  }();
  (void)once;
  std::string lvl = level;
  if (lvl.empty()) {
    const char* env = env_read("MORI_LOG_LEVEL");
    lvl = env && *env ? env : "info";
  }
  spdlog::set_level(parse_level(lvl));
  spdlog::flush_on(spdlog::level::warn);
  apply_pattern("rank ?");
}

void set_rank(int rank) {
  set_rank_tag(rank);
  apply_pattern("rank " + std::to_string(rank));
}

}  // namespace mori::symm::log
