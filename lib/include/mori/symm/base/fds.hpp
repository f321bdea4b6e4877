// SPDX-License-Identifier: MIT
// File descriptors of this process (leak checks of the tools and tests).
#pragma once

#include <cstdint>

namespace mori::symm {

// Open file descriptors of this process; -1 where /proc/self/fd cannot be read.
int count_open_fds();

// count_open_fds() the first time this process asked (the tool's start, before its runtime and windows): the
// base of the descriptor need, the same for the tools' preflight and the doctor's fd_limit_low.
int open_fds_at_start();

// The one rule for the descriptors a rank needs (the tools' preflight and the doctor's fd_limit_low,
// docs/setup.md "Large jobs"): `open_now` open already (MPI's, the logs', the tool's; negative = unreadable,
// counted as 64), and for each of the `windows` windows it holds at once in a load/store team of `team`
// ranks, four for its own allocation (the handle, its local mapping, its own slot's handle and mapping) and
// two per peer (the imported handle and its mapping; the received descriptor is closed once imported), plus
// 16 (the socket, a descriptor in flight, the tool's files).
std::uint64_t fds_needed(int team, int windows, int open_now) noexcept;

// This process's descriptor limit (RLIMIT_NOFILE) after raising the soft limit towards `wanted` where the
// hard limit allows; {soft, hard}. Never throws.
struct FdLimit {
  std::uint64_t soft = 0, hard = 0;
};
FdLimit raise_fd_limit(std::uint64_t wanted) noexcept;

}  // namespace mori::symm
