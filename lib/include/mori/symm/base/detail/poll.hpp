// SPDX-License-Identifier: MIT
// Bounded waiting: the one loop behind every "check; if not yet, back off; give up at a deadline".
#pragma once

#include <sched.h>

#include <chrono>
#include <climits>
#include <thread>

namespace mori::symm::detail {

using PollClock = std::chrono::steady_clock;

// How a poll spends the time between two checks: the first `spins` checks back to back, the next `yields`
// each after a sched_yield, every later one after sleeping `sleep` (zero: keep yielding).
struct Backoff {
  int spins = 64;
  int yields = 2048;
  std::chrono::microseconds sleep{50};

  // Spin briefly, then yield, then sleep: cheap on oversubscribed machines.
  static constexpr Backoff oversubscribed() { return {}; }
  // Spin, then yield before every check; never sleeps (latency-sensitive waits).
  static constexpr Backoff spin_then_yield(int spins) {
    return {spins, INT_MAX, std::chrono::microseconds(0)};
  }
  // Sleep `s` before every check (waits on other processes that take milliseconds).
  static constexpr Backoff sleeping(std::chrono::microseconds s) { return {0, 0, s}; }

  // The pause before check number n + 1 (n counts from 0).
  void pause(long n) const {
    if (n < spins) return;
    if (n - spins < yields || sleep.count() == 0) {
      sched_yield();
      return;
    }
    std::this_thread::sleep_for(sleep);
  }
};

// The deadline `seconds` from now.
inline PollClock::time_point deadline_after(double seconds) {
  return PollClock::now() +
         std::chrono::duration_cast<PollClock::duration>(std::chrono::duration<double>(seconds));
}

// Calls done() until it returns true (then true) or, after a check that returned false, the deadline has
// passed (then false). done() is always called at least once; exceptions from it propagate.
template <class Done>
bool poll_until(Done&& done, PollClock::time_point deadline,
                const Backoff& backoff = Backoff::oversubscribed()) {
  for (long n = 0;; ++n) {
    if (done()) return true;
    if (PollClock::now() >= deadline) return false;
    backoff.pause(n);
  }
}

}  // namespace mori::symm::detail
