// SPDX-License-Identifier: MIT
// The all-to-all driver's test-only hooks (test_hooks.hpp).
#include "test_hooks.hpp"

#include <chrono>
#include <cstdio>
#include <thread>

#include "mori/symm/a2a/detail/engine.hpp"
#include "mori/symm/base/detail/fault.hpp"
#include "mori/symm/base/log.hpp"

namespace mori::symm::detail {

bool A2aTestHooks::distinct_policy() const {
  const bool armed = fault_armed("a2a.distinct-policy", 0);
  if (armed && rank_ == 0)
    spdlog::warn("MORI_FAULT a2a.distinct-policy: ranks sharing a GPU take the plan of distinct GPUs");
  return armed;
}

std::uint64_t A2aTestHooks::slow_push_ns() const {
  return fault_armed("a2a.slow-kernel", rank_) ? fault_delay_ns() : 0;
}

std::uint32_t A2aTestHooks::mutation(int epoch) const {
  std::uint32_t m = 0;
  if (fault_armed("a2a.no-barrier", rank_)) m |= kMutateNoWait;
  if (epoch == 1 && fault_armed("a2a.stale", rank_)) m |= kMutateStale;
  if (fault_armed("a2a.overrun", rank_)) m |= kMutateOverrun;
  return m;
}

void A2aTestHooks::before_timed_loop(const std::string& tag, bool device_sync, bool graph,
                                     double timeout_s) const {
  if (device_sync && fault_armed("a2a.announce", rank_)) {
    std::fprintf(stderr, "MORI_FAULT: rank %d entering the timed loop %s\n", rank_, tag.c_str());
    std::fflush(stderr);
  }
  if (graph) return;
  fault_point("a2a.timed", rank_);
  if (device_sync && fault_armed("a2a.no-launch", rank_))
    std::this_thread::sleep_for(std::chrono::duration<double>(2 * timeout_s + 10));
}

}  // namespace mori::symm::detail
