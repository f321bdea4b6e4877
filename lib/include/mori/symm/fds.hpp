// File descriptors of this process (leak checks of the tools and tests).
#pragma once

namespace mori::symm {

// Open file descriptors of this process; -1 where /proc/self/fd cannot be read.
int count_open_fds();

}  // namespace mori::symm
