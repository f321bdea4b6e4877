// SPDX-License-Identifier: MIT
// Timing statistics shared by every tool and script: one percentile definition (linear interpolation between
// the closest ranks, position q * (n - 1): numpy's default), and the per-sample maximum over ranks.
#pragma once

#include <string>
#include <vector>

namespace mori::symm {

class Bootstrap;

struct TimeStats {
  double min = 0, p50 = 0, p95 = 0, max = 0, mean = 0;  // microseconds
  int samples = 0;
};
TimeStats time_stats(std::vector<double> us);

// Collective: element i of the result is the maximum over ranks of element i (every rank passes as many).
std::vector<double> max_over_ranks(Bootstrap& boot, const std::string& step, const std::vector<double>& mine);

}  // namespace mori::symm
