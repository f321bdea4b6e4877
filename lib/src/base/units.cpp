// SPDX-License-Identifier: MIT
#include "mori/symm/base/units.hpp"

#include <cctype>
#include <limits>

#include "mori/symm/base/error.hpp"

namespace mori::symm {

std::size_t parse_size(const std::string& option, const std::string& text) {
  const std::string accepted = " (accepted: a positive integer of bytes, or with K, M, G: 256K, 64M, 1G)";
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text[0])))
    throw UsageError(option + ": '" + text + "' is not a size" + accepted);
  std::size_t pos = 0;
  unsigned long long v = 0;
  const std::string too_large = option + ": '" + text + "' is too large (the limit is 2^64 - 1 bytes, " +
                                std::to_string(std::numeric_limits<unsigned long long>::max()) + ")";
  try {
    v = std::stoull(text, &pos);
  } catch (const std::out_of_range&) {
    throw SizeTooLarge(too_large);
  } catch (const std::exception&) {
    throw UsageError(option + ": '" + text + "' is not a size" + accepted);
  }
  std::string suffix = text.substr(pos);
  unsigned shift = 0;
  if (suffix == "" || suffix == "B")
    shift = 0;
  else if (suffix == "K" || suffix == "k" || suffix == "KiB")
    shift = 10;
  else if (suffix == "M" || suffix == "m" || suffix == "MiB")
    shift = 20;
  else if (suffix == "G" || suffix == "g" || suffix == "GiB")
    shift = 30;
  else
    throw UsageError(option + ": '" + text + "' has an unknown unit" + accepted);
  if (v > (std::numeric_limits<unsigned long long>::max() >> shift)) throw SizeTooLarge(too_large);
  return static_cast<std::size_t>(v << shift);
}

}  // namespace mori::symm
