// Logging: spdlog to stderr, every line tagged with host, rank and pid.
#pragma once

#include <spdlog/spdlog.h>

#include <string>

namespace mori::symm::log {

// Sets up the process logger. level: trace|debug|info|warn|error|off; empty = $MORI_LOG_LEVEL or "info".
// Throws UsageError for an unknown level.
void init(const std::string& level = {});
// Re-tags every later line with the rank once the bootstrap knows it.
void set_rank(int rank);
// Parses a level name; throws UsageError naming the accepted values.
spdlog::level::level_enum parse_level(const std::string& name);

}  // namespace mori::symm::log
