// SPDX-License-Identifier: MIT
// Logging: spdlog to stderr, every line tagged with host, rank and pid.
#pragma once

// GCC 13 reports -Warray-bounds inside fmt 9's own header (format_dragon's bigint) once inlined; the report's
// location is that header, so silencing it here keeps our own code under the warning.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 13
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Warray-bounds"
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif
#include <spdlog/spdlog.h>
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 13
#pragma GCC diagnostic pop
#endif

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
