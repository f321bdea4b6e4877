// SPDX-License-Identifier: MIT
// Private to the all-to-all driver: one row of the sweep run (docs/mori-a2a.md "The contract"): verified over
// back-to-back epochs with rank skew, timed, its references measured in the same launch mode (the push alone,
// the synchronisation alone), its rates set against the chunk's ceiling and physical limit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "mori/symm/a2a/detail/engine.hpp"
#include "mori/symm/a2a/plan.hpp"
#include "mori/symm/a2a/types.hpp"
#include "test_hooks.hpp"
#include "timer.hpp"

namespace mori::symm {
class Bootstrap;
}

namespace mori::symm::detail {

// What every row of one job shares. The references must outlive it.
struct A2aRowRunner {
  A2aEngine& eng;
  Bootstrap& boot;
  const A2aConfig& cfg;
  const A2aFacts& facts;
  const A2aTestHooks& hooks;
  std::uint64_t signal_offset;  // the window's signal pad
  std::uint64_t ll_offset;      // the ll protocol's staging, after the two receive buffers

  // The receive layout of a chunk (kernels/abi.hip MoriA2aLayout).
  A2aLayout layout(std::size_t chunk) const;
  Timer timer(int graph_k) const { return {eng, boot, cfg.warmup, cfg.iters, graph_k}; }
  // Collective: one row of the chunk's plan.
  A2aResult run(const A2aChunkPlan& plan, const A2aRowPlan& row, const Ceiling& ceiling) const;

 private:
  // The row's kernel shape and launch (a2a/plan.hpp), with the test hook's delay.
  PushSpec spec(Addressing a, bool sync, std::size_t chunk, Protocol proto = Protocol::simple) const;
  std::uint64_t verify(const A2aLayout& L, const PushSpec& base, int graph_k, const std::string& tag,
                       double skew, int* epochs_run, std::vector<int>* wrong_ranks) const;
  void warn_blocks_per_peer(Protocol proto, const PushSpec& s) const;
  void put_rates(A2aResult& r, const A2aChunkPlan& plan, const Ceiling& ceiling) const;
};

}  // namespace mori::symm::detail
