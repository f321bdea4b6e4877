// SPDX-License-Identifier: MIT
// Private to the all-to-all driver: the references (ceiling, physical limit) every result row is compared
// with; the ceiling is timed by the driver's Timer (timer.hpp).
#pragma once

#include <vector>

#include "mori/symm/a2a/detail/engine.hpp"
#include "mori/symm/a2a/detail/placement.hpp"
#include "mori/symm/a2a/types.hpp"
#include "timer.hpp"

namespace mori::symm::detail {

// Copies of the same bytes into the same destinations, all ranks at once: the SM copy (the push without
// synchronisation) and the engine's copies, plain and graph-captured, two rounds each; the best of all.
// sm_copies: the SM copy in every kernel shape worth trying (the automatic one, and the row's own where the
// options set another), so that a shape given by hand never lowers the bound.
Ceiling measure_ceiling(Timer& t, const A2aLayout& L, const std::vector<PushSpec>& sm_copies, int world);

PhysicalLimit physical_limit(const DevicePlacement& pl, const DeviceInfo& d, std::uint64_t chunk,
                             std::uint64_t pitch);

}  // namespace mori::symm::detail
