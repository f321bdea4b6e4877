// SPDX-License-Identifier: MIT
// Is a build older than its tree? (docs/reliability.md, "Revisions"): runs, in the source folder the build
// recorded, the same command cmake/revision.cmake ran at build time, and compares. Never throws: every
// failure (a POSIX call, git missing, no answer within the bound) leaves the answer unknown, saying why.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <vector>

#include "mori/symm/base/error.hpp"
#include "mori/symm/base/version.hpp"
#include "mori_build_revision.h"

extern char** environ;

namespace mori::symm {
namespace {

// Defined once, in cmake/revision.cmake, which ran it at build time: the digests compare.
constexpr const char* kTreeCommand = MORI_BUILD_TREE_COMMAND;

std::string failed(const char* call, int err) {
  return std::string(call) + " failed: " + errno_name(err);
}

// Starts kTreeCommand in `dir` in a process group of its own, its stdout the pipe's write end `out_fd`,
// stderr and stdin /dev/null. Returns its pid, or -1 with `why` (the first call that failed).
pid_t spawn_tree_command(const std::string& dir, int out_fd, std::string& why) {
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  // Each setup call is checked (they return an error number, not -1/errno); the first failure is the reason.
  int rc = posix_spawn_file_actions_init(&fa);
  if (rc != 0) {
    why = failed("posix_spawn_file_actions_init", rc);
    return -1;
  }
  rc = posix_spawnattr_init(&attr);
  if (rc != 0) {
    posix_spawn_file_actions_destroy(&fa);
    why = failed("posix_spawnattr_init", rc);
    return -1;
  }
  const char* step = "posix_spawn_file_actions_adddup2";
  rc = posix_spawn_file_actions_adddup2(&fa, out_fd, STDOUT_FILENO);
  if (rc == 0) {
    step = "posix_spawn_file_actions_addopen(stderr)";
    rc = posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
  }
  if (rc == 0) {
    step = "posix_spawn_file_actions_addopen(stdin)";
    rc = posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  }
  if (rc == 0) {
    step = "posix_spawnattr_setflags";
    rc = posix_spawnattr_setflags(&attr,
                                  POSIX_SPAWN_SETPGROUP);  // its own group: an expired bound ends all of it
  }
  if (rc == 0) {
    step = "posix_spawnattr_setpgroup";
    rc = posix_spawnattr_setpgroup(&attr, 0);
  }
  std::vector<char*> args = {const_cast<char*>("sh"),         const_cast<char*>("-c"),
                             const_cast<char*>(kTreeCommand), const_cast<char*>("sh"),
                             const_cast<char*>(dir.c_str()),  nullptr};
  pid_t pid = -1;
  if (rc == 0) {
    step = "posix_spawn(/bin/sh)";
    rc = posix_spawn(&pid, "/bin/sh", &fa, &attr, args.data(), environ);
  }
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    why = failed(step, rc);
    return -1;
  }
  return pid;
}

// Reads `fd` until its end (at most 4 KiB kept in `out`) or until bound_s has passed. Returns true where it
// stopped early: the bound expired (`why` left empty) or a call failed (`why` names it).
bool read_bounded(int fd, double bound_s, std::string& out, std::string& why) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(bound_s);
  char buf[4096];
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return true;
    pollfd p{fd, POLLIN, 0};
    const int n = poll(&p, 1, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      why = failed("poll", errno);
      return true;
    }
    if (n == 0) continue;
    const ssize_t r = read(fd, buf, sizeof(buf));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      why = failed("read", errno);
      return true;
    }
    if (r == 0) return false;
    if (out.size() < 4096) out.append(buf, static_cast<std::size_t>(r));
  }
}

// Runs kTreeCommand in `dir`; returns its exit status (or -1) and its stdout in `out`, or sets `why`.
int run_tree_command(const std::string& dir, double bound_s, std::string& out, std::string& why) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    why = failed("pipe2", errno);
    return -1;
  }
  const pid_t pid = spawn_tree_command(dir, fds[1], why);
  close(fds[1]);
  if (pid < 0) {
    close(fds[0]);
    return -1;
  }
  const bool expired = read_bounded(fds[0], bound_s, out, why);
  close(fds[0]);
  if (expired) {
    kill(-pid, SIGKILL);
    if (why.empty()) why = "git gave no answer within " + std::to_string(bound_s) + " s";
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      if (why.empty()) why = failed("waitpid", errno);
      return -1;
    }
  }
  if (expired) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

TreeCheck check_build_tree(const BuildRevision& built, double bound_s) {
  TreeCheck t;
  if (built.source_dir.empty()) {
    t.why = "the build recorded no source tree (revision given with -DMORI_GIT_REV or unknown)";
    return t;
  }
  if (access(built.source_dir.c_str(), R_OK | X_OK) != 0) {
    t.why = "the source tree " + built.source_dir + " cannot be read (" + errno_name(errno) + ")";
    return t;
  }
  std::string out, why;
  const int rc = run_tree_command(built.source_dir, bound_s, out, why);
  std::vector<std::string> lines;
  for (std::size_t pos = 0; pos < out.size();) {
    const std::size_t nl = out.find('\n', pos);
    lines.push_back(out.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos));
    if (nl == std::string::npos) break;
    pos = nl + 1;
  }
  if (rc != 0 || lines.size() < 3) {
    t.why = "git could not read the source tree " + built.source_dir + (why.empty() ? "" : " (" + why + ")");
    return t;
  }
  const std::string& head = lines[0];
  const std::string& digest = lines[1];
  if (head != built.commit) {
    t.stale = true;
    t.why = "the source tree " + built.source_dir + " is at " + head + ", the build at " + built.commit;
  } else if (digest != built.tree_digest) {
    t.stale = true;
    t.why = "the tracked files of " + built.source_dir + " changed since the build (at " + built.commit + ")";
  } else {
    t.stale = false;
  }
  return t;
}

}  // namespace mori::symm
