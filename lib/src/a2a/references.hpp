// SPDX-License-Identifier: MIT
// Private to the all-to-all driver: timing of engine steps in the three launch modes, and the references
// (ceiling, physical limit) every result row is compared with.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "mori/symm/a2a/a2a.hpp"
#include "mori/symm/a2a/detail/engine.hpp"
#include "mori/symm/a2a/detail/placement.hpp"

namespace mori::symm {
class Bootstrap;
}

namespace mori::symm::detail {

// How a step is launched while timed:
//   wall   - one call per sample, wall clock (host-synchronised modes; the call waits for its own work)
//   stream - back to back on the stream, per-launch device time (events; the host runtime: wall clock)
//   graph  - graph_k calls captured once, replayed; per call = replay / graph_k
enum class Launch { wall, stream, graph };

constexpr int kMinSamples = 20;

struct Timer {
  A2aEngine& eng;
  Bootstrap& boot;
  int warmup = 5;
  int iters = 20;
  int graph_k = 16;
  // This rank's samples (microseconds per call); collective (barriers around the timed part).
  std::vector<double> samples(Launch how, const std::function<void()>& one, const std::string& step);
  // p50 of the per-sample maximum over ranks; collective.
  double p50(Launch how, const std::function<void()>& one, const std::string& step);
};

// Copies of the same bytes into the same destinations, all ranks at once: the SM copy (the push without
// synchronisation) and the engine's copies, plain and graph-captured, two rounds each; the best of all.
// sm_copies: the SM copy in every kernel shape worth trying (the automatic one, and the row's own where the
// options set another), so that a shape given by hand never lowers the bound.
Ceiling measure_ceiling(Timer& t, const A2aLayout& L, const std::vector<PushSpec>& sm_copies, int world);

PhysicalLimit physical_limit(const DevicePlacement& pl, const DeviceInfo& d, std::uint64_t chunk,
                             std::uint64_t pitch);

}  // namespace mori::symm::detail
