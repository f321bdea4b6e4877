// SPDX-License-Identifier: MIT
// Typed errors of the library. Library code throws these; only a tool's main() maps them to exit codes.
#pragma once

#include <stdexcept>
#include <string>

namespace mori::symm {

// Exit codes of every tool (docs/usage.md, "Exit codes").
enum class ExitCode : int { ok = 0, check_failed = 1, usage = 2, runtime = 3, timeout = 4 };

class Error : public std::runtime_error {
 public:
  Error(ExitCode code, const std::string& what) : std::runtime_error(what), code_(code) {}
  ExitCode code() const noexcept { return code_; }

 private:
  ExitCode code_;
};

// Bad input: an option, a size, a mismatch between ranks. Exit 2.
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& what) : Error(ExitCode::usage, what) {}
};

// A GPU, MPI or POSIX call failed. Carries the call text, where it was made, the API's error name and the
// rank.
class ApiError : public Error {
 public:
  ApiError(std::string call, const char* file, int line, std::string api_error, std::string detail = {});
  const std::string& call() const noexcept { return call_; }
  const std::string& api_error() const noexcept { return api_error_; }

 private:
  std::string call_;
  std::string api_error_;
};

// A bounded wait ran out. Exit 4. Constructing one records that a bound expired (wait_bound_expired()).
class TimeoutError : public Error {
 public:
  explicit TimeoutError(const std::string& what);
};

// Once any wait of this process has run past its bound, a rank is missing: the waits of the error and
// teardown paths that follow (collectives, the final barrier) use min(bound, kExpiredWaitBoundS) instead of
// the full bound again, so that a job with a hung rank ends within --timeout-s + 5 s (docs/reliability.md).
constexpr double kExpiredWaitBoundS = 1.5;
void note_wait_bound_expired() noexcept;
bool wait_bound_expired() noexcept;

// A duration for messages: "0.001", "2.5", "60".
std::string format_seconds(double s);

// Wrong data or a failing check. Exit 1.
class CheckFailed : public Error {
 public:
  explicit CheckFailed(const std::string& what) : Error(ExitCode::check_failed, what) {}
};

// Name of an errno value ("ENOENT"), never null.
const char* errno_name(int err) noexcept;

// "rank 3" once the bootstrap knows the rank, "rank ?" before; "nodeB rank 3" on a job of several nodes.
std::string rank_tag();
void set_rank_tag(int rank) noexcept;
// The node that rank_tag names first; set by the bootstrap of a job that spans several nodes.
void set_node_tag(const std::string& node);

}  // namespace mori::symm

// Checks a POSIX call that returns -1 and sets errno on failure.
#define MORI_CHECK_POSIX(expr)                                                                  \
  do {                                                                                          \
    if ((expr) == -1)                                                                           \
      throw ::mori::symm::ApiError(#expr, __FILE__, __LINE__, ::mori::symm::errno_name(errno)); \
  } while (0)
