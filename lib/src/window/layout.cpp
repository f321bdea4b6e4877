// SPDX-License-Identifier: MIT
#include "mori/symm/window/layout.hpp"

#include <limits>
#include <string>

#include "mori/symm/base/error.hpp"

namespace mori::symm {

std::size_t round_up_checked(std::size_t v, std::size_t m, const char* what) {
  if (m == 0) throw UsageError(std::string(what) + ": rounding unit is zero");
  if (v > std::numeric_limits<std::size_t>::max() - (m - 1))
    throw UsageError(std::string(what) + ": size overflows");
  return (v + m - 1) / m * m;
}

Layout compute_layout(std::size_t buffer_bytes, std::size_t signal_bytes, std::size_t granularity,
                      std::size_t stride_quantum) {
  if (buffer_bytes == 0) throw UsageError("window: buffer size must be > 0");
  if (granularity == 0) throw UsageError("window: granularity is zero");
  if (stride_quantum % granularity != 0)
    throw UsageError("--stride-quantum: " + std::to_string(stride_quantum) +
                     " is not a multiple of the allocation granularity " + std::to_string(granularity));
  Layout l;
  l.granularity = granularity;
  l.buffer_bytes = buffer_bytes;
  l.signal_bytes = signal_bytes;
  l.signal_offset = round_up_checked(buffer_bytes, 256, "window buffer");
  if (l.signal_offset > std::numeric_limits<std::size_t>::max() - signal_bytes)
    throw UsageError("window: buffer + signal pad overflows");
  l.alloc_bytes = round_up_checked(l.signal_offset + signal_bytes, granularity, "window allocation");
  l.stride =
      stride_quantum ? round_up_checked(l.alloc_bytes, stride_quantum, "--stride-quantum") : l.alloc_bytes;
  return l;
}

}  // namespace mori::symm
