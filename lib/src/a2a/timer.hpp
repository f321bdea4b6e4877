// SPDX-License-Identifier: MIT
// Private to the all-to-all driver: timing of engine steps in the three launch modes (docs/mori-a2a.md
// "References": every figure is a p50 of the per-sample maximum over ranks).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "mori/symm/a2a/detail/engine.hpp"

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
  // Where set, samples() in the stream and graph modes also records the host time of each timed launch call
  // (the graph's divided by graph_k), one per sample (docs/mori-a2a.md "launch_us").
  std::vector<double>* launch_us = nullptr;
  // This rank's samples (microseconds per call); collective (barriers around the timed part).
  std::vector<double> samples(Launch how, const std::function<void()>& one, const std::string& step);
  // p50 of the per-sample maximum over ranks; collective.
  double p50(Launch how, const std::function<void()>& one, const std::string& step);
};

}  // namespace mori::symm::detail
