// Test-only fault injection: MORI_FAULT=<point>:<rank>[,<point>:<rank>...] makes the named rank _exit(17) at
// the named point (or, for points ending in ".hang", sleep forever). Compiled in when MORI_FAULT_INJECTION is
// on (the default for test builds); otherwise every call is a no-op and the variable is ignored.
//
// An unknown point is a usage error (validate_fault_spec, called once by every tool before any MPI traffic),
// so that a misspelt point cannot make a fault test pass by injecting nothing.
#pragma once

#include <string>

namespace mori::symm::detail {

// Throws UsageError naming the point and listing the known ones when MORI_FAULT names an unknown point or is
// malformed. No-op when fault injection is compiled out.
void validate_fault_spec();
bool fault_point_known(const std::string& point);
std::string known_fault_points();

void fault_point(const char* point, int rank) noexcept;
// True (and nothing else happens) when the point is armed for this rank; for faults a caller implements
// itself, e.g. corrupting one element.
bool fault_armed(const char* point, int rank) noexcept;

}  // namespace mori::symm::detail
