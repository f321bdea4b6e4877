// SPDX-License-Identifier: MIT
// Sizes on the command line: "256K", "64M", "1G", "4096" (bytes).
#pragma once

#include <cstddef>
#include <string>

#include "mori/symm/base/error.hpp"

namespace mori::symm {

// A size of 2^64 bytes or more: the UsageError parse_size throws for it, naming the limit, so that a caller
// with a limit of its own can say "too large" in its words.
class SizeTooLarge : public UsageError {
 public:
  using UsageError::UsageError;
};

// Parses a size with an optional K/M/G (KiB/MiB/GiB) suffix; throws UsageError naming `option` on anything
// else, SizeTooLarge for 2^64 bytes or more.
std::size_t parse_size(const std::string& option, const std::string& text);

}  // namespace mori::symm
