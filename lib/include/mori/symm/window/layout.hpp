// SPDX-License-Identifier: MIT
// Layout of one window: buffer, signal pad, allocation size and the stride of the flat span.
#pragma once

#include <cstddef>

namespace mori::symm {

struct Layout {
  std::size_t granularity = 0;
  std::size_t buffer_bytes = 0;
  std::size_t signal_offset = 0;  // start of the signal pad inside each rank's slot (256-byte aligned)
  std::size_t signal_bytes = 0;
  std::size_t alloc_bytes = 0;  // buffer + pad rounded up to the granularity
  std::size_t stride = 0;       // distance between two ranks' slots in the flat span
};

// Throws UsageError for a zero buffer, a quantum that is not a multiple of the granularity, or overflow.
Layout compute_layout(std::size_t buffer_bytes, std::size_t signal_bytes, std::size_t granularity,
                      std::size_t stride_quantum);

// Rounds v up to a multiple of m (m > 0); throws UsageError on overflow.
std::size_t round_up_checked(std::size_t v, std::size_t m, const char* what);

}  // namespace mori::symm
