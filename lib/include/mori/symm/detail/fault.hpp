// Test-only fault injection: MORI_FAULT=<point>:<rank>[,<point>:<rank>...] makes the named rank _exit(17) at
// the named point (or, for points ending in ".hang", sleep forever). Compiled in when MORI_FAULT_INJECTION is
// on (the default for test builds); otherwise every call is a no-op and the variable is ignored.
#pragma once

namespace mori::symm::detail {

void fault_point(const char* point, int rank) noexcept;
// True (and nothing else happens) when the point is armed for this rank; for faults a caller implements
// itself, e.g. corrupting one element.
bool fault_armed(const char* point, int rank) noexcept;

}  // namespace mori::symm::detail
