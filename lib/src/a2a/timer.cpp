// SPDX-License-Identifier: MIT
// Timing of engine steps in the three launch modes (timer.hpp).
#include "timer.hpp"

#include <algorithm>
#include <chrono>

#include "mori/symm/comm/bootstrap.hpp"
#include "mori/symm/comm/stats.hpp"

namespace mori::symm::detail {

std::vector<double> Timer::samples(Launch how, const std::function<void()>& one, const std::string& step) {
  const int k = std::max(graph_k, 1);
  std::vector<double> us;
  if (how == Launch::graph) {
    auto g = eng.capture([&] {
      for (int i = 0; i < k; ++i) one();
    });
    if (!g) return us;
    for (int i = 0; i < std::max(1, warmup / k); ++i) g->launch();
    eng.sync();
    boot.barrier_fast(step + ".start");
    us = eng.time_each(std::max(kMinSamples, (iters + k - 1) / k), [&] { g->launch(); });
    for (auto& v : us) v /= k;
  } else if (how == Launch::stream) {
    for (int i = 0; i < warmup; ++i) one();
    eng.sync();
    boot.barrier_fast(step + ".start");
    us = eng.time_each(iters, one);
  } else {
    boot.barrier_fast(step + ".start");
    for (int i = 0; i < warmup + iters; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      one();
      if (i >= warmup)
        us.push_back(
            std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  eng.sync();
  boot.barrier_fast(step + ".end");
  return us;
}

double Timer::p50(Launch how, const std::function<void()>& one, const std::string& step) {
  return time_stats(max_over_ranks(boot, step + ".times", samples(how, one, step))).p50;
}

}  // namespace mori::symm::detail
