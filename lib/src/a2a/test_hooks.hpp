// SPDX-License-Identifier: MIT
// Private to the all-to-all driver: every test-only hook it has, in one place (docs/reliability.md, "Fault
// injection"). Each reads a MORI_FAULT point armed for this rank; with fault injection compiled out none is
// ever armed and each is a no-op. The driver calls them at the moments their comments name.
#pragma once

#include <cstdint>
#include <string>

namespace mori::symm::detail {

class A2aTestHooks {
 public:
  explicit A2aTestHooks(int rank) : rank_(rank) {}

  // a2a.distinct-policy, the job's (armed for rank 0, read by every rank): ranks sharing a GPU take the plan
  // of distinct GPUs. Rank 0 warns once.
  bool distinct_policy() const;
  // a2a.slow-kernel: every push of this rank is slower by MORI_FAULT_DELAY_NS (docs/perf-check.md "A/B");
  // 0 when not armed.
  std::uint64_t slow_push_ns() const;
  // The verification mutants (a2a.no-barrier, a2a.stale in epoch 1, a2a.overrun): the engine's kMutate bits
  // for a verified epoch.
  std::uint32_t mutation(int epoch) const;
  // Just before a row's timed loop: a2a.announce says so on stderr (device sync; scripts/faults signals the
  // rank there); outside a graph, the a2a.timed point, and a2a.no-launch hangs this rank on the host as a
  // stuck rank would, bounded by twice the job's timeout plus 10 s, before any collective step.
  void before_timed_loop(const std::string& tag, bool device_sync, bool graph, double timeout_s) const;

 private:
  int rank_;
};

}  // namespace mori::symm::detail
