// SPDX-License-Identifier: MIT
#include "mori/symm/base/fds.hpp"

#include <dirent.h>
#include <sys/resource.h>

#include <algorithm>

namespace mori::symm {

int count_open_fds() {
  int n = 0;
  DIR* d = opendir("/proc/self/fd");
  if (!d) return -1;
  while (readdir(d)) ++n;
  closedir(d);
  return n - 3;  // ".", ".." and the DIR's own fd
}

int open_fds_at_start() {
  static const int at_start = count_open_fds();
  return at_start;
}

std::uint64_t fds_needed(int team, int windows, int open_now) noexcept {
  // What is open; per window the own allocation, its local mapping, its own slot's handle and mapping (4),
  // and per peer the imported handle and its mapping (2); and 16 for the socket, the descriptor in flight and
  // the tool's files.
  const std::uint64_t open = open_now < 0 ? 64 : static_cast<std::uint64_t>(open_now);
  const std::uint64_t per_window = 4 + 2 * static_cast<std::uint64_t>(std::max(team - 1, 0));
  return open + static_cast<std::uint64_t>(std::max(windows, 1)) * per_window + 16;
}

FdLimit raise_fd_limit(std::uint64_t wanted) noexcept {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return {};
  if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < wanted) {
    rlimit up = rl;
    up.rlim_cur = rl.rlim_max == RLIM_INFINITY ? wanted : std::min<rlim_t>(wanted, rl.rlim_max);
    if (setrlimit(RLIMIT_NOFILE, &up) == 0) rl = up;
  }
  auto value = [](rlim_t v) { return v == RLIM_INFINITY ? UINT64_MAX : static_cast<std::uint64_t>(v); };
  return {value(rl.rlim_cur), value(rl.rlim_max)};
}

}  // namespace mori::symm
