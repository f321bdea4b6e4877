// SPDX-License-Identifier: MIT
// Test-only fault injection: MORI_FAULT=<point>:<rank>[,<point>:<rank>...] makes the named rank _exit(17) at
// the named point (or, for points ending in ".hang", sleep forever). Compiled in when MORI_FAULT_INJECTION is
// on (the default for test builds); otherwise every call is a no-op and the variable is ignored. Points a
// caller implements itself (fault_armed) do something else, e.g. a2a.slow-kernel: every push of the rank is
// slower by MORI_FAULT_DELAY_NS nanoseconds (fault_delay_ns; docs/perf-check.md "A/B").
//
// An unknown point is a usage error (validate_fault_spec, called once by every tool before any MPI traffic),
// so that a misspelt point cannot make a fault test pass by injecting nothing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace mori::symm::detail {

// Throws UsageError naming the point and listing the known ones when MORI_FAULT names an unknown point or is
// malformed (an empty item, no or two ':', a rank that is not a number or '*', a teardown.<step> point whose
// step mori-teardown-repro never journals). The variable is read and parsed once per process; a malformed one
// arms nothing. No-op when fault injection is compiled out.
void validate_fault_spec();
bool fault_point_known(const std::string& point);
std::string known_fault_points();

void fault_point(const char* point, int rank) noexcept;
// True (and nothing else happens) when the point is armed for this rank; for faults a caller implements
// itself, e.g. corrupting one element.
// Records that the point fired on this rank (fault_items, meta.faults).
bool fault_armed(const char* point, int rank) noexcept;

// The delay of the a2a.slow-kernel point (MORI_FAULT_DELAY_NS, whole nanoseconds in 1..10 s; a bad value is
// validate_fault_spec's usage error); 0 when unset or compiled out.
std::uint64_t fault_delay_ns() noexcept;

// The items of MORI_FAULT, in order, and whether each fired in this process. Empty when compiled out.
struct FaultItem {
  std::string point, rank;
  bool fired = false;
};
std::vector<FaultItem> fault_items();
// At exit: a warning for every item armed for this rank (or for a rank outside the job, on rank 0) that never
// fired, so that a fault test cannot pass by injecting nothing.
void warn_unfired_faults(int rank, int world) noexcept;

}  // namespace mori::symm::detail
