// File descriptors of this process (leak checks of the tools and tests).
#pragma once

#include <cstdint>

namespace mori::symm {

// Open file descriptors of this process; -1 where /proc/self/fd cannot be read.
int count_open_fds();

// The descriptors a rank needs for a job whose load/store team has `team` ranks, `open_now` being open
// already (MPI's, the logs', the tool's; count_open_fds): with POSIX-fd handles a rank holds every peer's
// received descriptor and its imported handle (two per peer on the host runtime), the own allocation's, the
// socket's and a margin of 16 on top of what is open. A negative open_now (unreadable) counts as 64.
std::uint64_t fds_needed_for_team(int team, int open_now);

// This process's descriptor limit (RLIMIT_NOFILE) after raising the soft limit towards `wanted` where the
// hard limit allows; {soft, hard}. Never throws.
struct FdLimit {
  std::uint64_t soft = 0, hard = 0;
};
FdLimit raise_fd_limit(std::uint64_t wanted) noexcept;

}  // namespace mori::symm
