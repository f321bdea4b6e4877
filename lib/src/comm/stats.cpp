// SPDX-License-Identifier: MIT
#include "mori/symm/comm/stats.hpp"

#include <algorithm>
#include <cmath>

#include "mori/symm/comm/bootstrap.hpp"

namespace mori::symm {

TimeStats time_stats(std::vector<double> us) {
  TimeStats t;
  t.samples = static_cast<int>(us.size());
  if (us.empty()) return t;
  std::sort(us.begin(), us.end());
  auto pct = [&](double q) {
    const double pos = q * static_cast<double>(us.size() - 1);
    const auto lo = static_cast<std::size_t>(std::floor(pos));
    const auto hi = std::min(lo + 1, us.size() - 1);
    return us[lo] + (us[hi] - us[lo]) * (pos - static_cast<double>(lo));
  };
  t.min = us.front();
  t.max = us.back();
  t.p50 = pct(0.5);
  t.p95 = pct(0.95);
  double sum = 0;
  for (double v : us) sum += v;
  t.mean = sum / static_cast<double>(us.size());
  return t;
}

std::vector<double> max_over_ranks(Bootstrap& boot, const std::string& step,
                                   const std::vector<double>& mine) {
  const auto world = static_cast<std::size_t>(boot.world());
  std::vector<double> all(mine.size() * world);
  boot.allgather(step, mine.data(), all.data(), mine.size() * sizeof(double));
  std::vector<double> out(mine.size(), 0);
  for (std::size_t r = 0; r < world; ++r)
    for (std::size_t i = 0; i < mine.size(); ++i) out[i] = std::max(out[i], all[r * mine.size() + i]);
  return out;
}

}  // namespace mori::symm
