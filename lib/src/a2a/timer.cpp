// SPDX-License-Identifier: MIT
// Timing of engine steps in the three launch modes (timer.hpp).
#include "timer.hpp"

#include <algorithm>
#include <chrono>
#include <memory>

#include "mori/symm/comm/bootstrap.hpp"
#include "mori/symm/comm/stats.hpp"
#include "mori/symm/comm/timed_region.hpp"

namespace mori::symm::detail {

namespace {

// fn, its host time appended to *out (divided by per) where out is set.
std::function<void()> timed_call(const std::function<void()>& fn, std::vector<double>* out, int per) {
  if (!out) return fn;
  out->clear();
  return [&fn, out, per] {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    out->push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() /
                   per);
  };
}

}  // namespace

std::vector<double> Timer::samples(Launch how, const std::function<void()>& one, const std::string& step) {
  const int k = std::max(graph_k, 1);
  std::vector<double> us;
  std::unique_ptr<CapturedGraph> g;
  if (how == Launch::graph) {
    g = eng.capture([&] {
      for (int i = 0; i < k; ++i) one();
    });
    if (!g) return us;
    for (int i = 0; i < std::max(1, warmup / k); ++i) g->launch();
    eng.sync();
  } else if (how == Launch::stream) {
    for (int i = 0; i < warmup; ++i) one();
    eng.sync();
  }
  boot.barrier_fast(step + ".start");
  {
    // From here to the end barrier no MPI call leaves the team (docs/mori-a2a.md "Timed loops and MPI").
    const TimedRegion region(step);
    if (how == Launch::graph) {
      const std::function<void()> replay = [&] { g->launch(); };
      us = eng.time_each(std::max(kMinSamples, (iters + k - 1) / k), timed_call(replay, launch_us, k));
      for (auto& v : us) v /= k;
    } else if (how == Launch::stream) {
      us = eng.time_each(iters, timed_call(one, launch_us, 1));
    } else {
      for (int i = 0; i < warmup + iters; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        one();
        if (i >= warmup)
          us.push_back(
              std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
      }
    }
    eng.sync();
  }
  boot.barrier_fast(step + ".end");
  return us;
}

double Timer::p50(Launch how, const std::function<void()>& one, const std::string& step) {
  return time_stats(max_over_ranks(boot, step + ".times", samples(how, one, step))).p50;
}

}  // namespace mori::symm::detail
