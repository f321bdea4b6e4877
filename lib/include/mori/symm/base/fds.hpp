// File descriptors of this process (leak checks of the tools and tests).
#pragma once

#include <cstdint>

namespace mori::symm {

// Open file descriptors of this process; -1 where /proc/self/fd cannot be read.
int count_open_fds();

// The descriptors a rank needs for a job whose load/store team has `team` ranks: with POSIX-fd handles a rank
// holds every peer's received descriptor and its imported handle (two per peer on the host runtime), and MPI
// and the tool keep some of their own.
std::uint64_t fds_needed_for_team(int team);

// This process's descriptor limit (RLIMIT_NOFILE) after raising the soft limit towards `wanted` where the
// hard limit allows; {soft, hard}. Never throws.
struct FdLimit {
  std::uint64_t soft = 0, hard = 0;
};
FdLimit raise_fd_limit(std::uint64_t wanted) noexcept;

}  // namespace mori::symm
