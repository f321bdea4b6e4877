// Sizes on the command line: "256K", "64M", "1G", "4096" (bytes).
#pragma once

#include <cstddef>
#include <string>

namespace mori::symm {

// Parses a size with an optional K/M/G (KiB/MiB/GiB) suffix; throws UsageError naming `option` on anything
// else or on overflow.
std::size_t parse_size(const std::string& option, const std::string& text);

}  // namespace mori::symm
