// SPDX-License-Identifier: MIT
#include "mori/symm/teardown/journal.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "mori/symm/base/detail/fault.hpp"
#include "mori/symm/base/error.hpp"
#include "mori/symm/base/log.hpp"

namespace mori::symm {
namespace {

using Clock = std::chrono::steady_clock;

// The signal handler's view: one journal per process.
int g_journal_fd = -1;

// The current scenario's name, shared with the watchdog thread and the fatal-signal handler: lock-free
// atomics, so reading it is async-signal-safe and never a data race (a reader racing a new scenario may see a
// mix of the two names).
class SharedName {
 public:
  static constexpr std::size_t kCapacity = 128;
  static_assert(std::atomic<char>::is_always_lock_free);

  void set(const std::string& name) noexcept {
    const std::size_t n = std::min(name.size(), kCapacity - 1);
    for (std::size_t i = 0; i < n; ++i) chars_[i].store(name[i], std::memory_order_relaxed);
    chars_[n].store('\0', std::memory_order_release);
  }
  // Copies the name into buf (kCapacity bytes, NUL-terminated); returns its length.
  std::size_t get(char* buf) const noexcept {
    std::size_t n = 0;
    while (n < kCapacity - 1) {
      const char c = chars_[n].load(std::memory_order_acquire);
      if (c == '\0') break;
      buf[n++] = c;
    }
    buf[n] = '\0';
    return n;
  }
  std::string get() const {
    char buf[kCapacity];
    return std::string(buf, get(buf));
  }

 private:
  std::atomic<char> chars_[kCapacity] = {};
};
SharedName g_scenario;
SharedName g_step;  // the step running now (the watchdog names it)

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

// Returns 0, or the errno of the failed write (async-signal-safe: the fatal-signal handler uses it too).
int write_all(int fd, const char* s, std::size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, s, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return errno;
    if (w == 0) return EIO;
    s += w;
    n -= static_cast<std::size_t>(w);
  }
  return 0;
}

extern "C" void on_fatal_signal(int sig) {
  if (g_journal_fd >= 0) {
    const char* name = sig == SIGSEGV   ? "SIGSEGV"
                       : sig == SIGBUS  ? "SIGBUS"
                       : sig == SIGABRT ? "SIGABRT"
                                        : "SIGNAL";
    write_all(g_journal_fd, "S\t", 2);
    char scenario[SharedName::kCapacity];
    write_all(g_journal_fd, scenario, g_scenario.get(scenario));
    write_all(g_journal_fd, "\t", 1);
    write_all(g_journal_fd, name, std::strlen(name));
    write_all(g_journal_fd, "\n", 1);
    fsync(g_journal_fd);
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

}  // namespace

Journal::Journal(const std::string& dir, int rank, double step_bound_s)
    : rank_(rank), bound_s_(step_bound_s) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw UsageError("--journal-dir: cannot create '" + dir + "': " + ec.message());
  path_ = dir + "/rank-" + std::to_string(rank) + ".journal";
  // O_EXCL: a journal is this job's alone; a second job on the same folder cannot interleave with it.
  fd_ = open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
  if (fd_ < 0 && errno == EEXIST)
    throw UsageError("--journal-dir: '" + path_ + "' already exists (another job on the same folder?)");
  if (fd_ < 0) throw ApiError("open(" + path_ + ")", __FILE__, __LINE__, errno_name(errno));
  spdlog::debug("teardown journal: {} (step bound {} s)", path_, format_seconds(bound_s_));
  g_journal_fd = fd_;
  struct sigaction sa {};
  sa.sa_handler = on_fatal_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND;
  for (int sig : {SIGSEGV, SIGBUS, SIGABRT}) sigaction(sig, &sa, nullptr);
  watchdog_ = std::thread([this] { watchdog(); });
}

Journal::~Journal() {
  stop_ = true;
  if (watchdog_.joinable()) watchdog_.join();
  // The fd stays open while atexit hooks may still write; the handler keeps pointing at it.
}

void Journal::line(const std::string& s) {
  std::string l = s + "\n";
  std::lock_guard<std::mutex> lock(mu_);
  if (!write_error_.empty()) return;  // the journal ends at its first failed write, said once
  int err = 0;
  if (lines_ >= 40 && detail::fault_armed("journal.full", rank_)) {
    // Test-only: a file system that fills up in the middle of a line.
    (void)write_all(fd_, l.data(), l.size() / 2);
    err = ENOSPC;
  } else {
    err = write_all(fd_, l.data(), l.size());
    if (!err && fdatasync(fd_) != 0) err = errno;
  }
  if (err) {
    write_error_ = errno_name(err);
    spdlog::error(
        "teardown journal {}: write failed ({}) after {} line(s); this rank's verdicts are incomplete", path_,
        write_error_, lines_);
    return;
  }
  ++lines_;
}

std::string Journal::write_error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return write_error_;
}

void Journal::on_step_expired(std::function<void(const std::string& what)> f) {
  std::lock_guard<std::mutex> lock(expired_mu_);
  on_expired_ = std::move(f);
}

double watchdog_bound_s(double step_bound_s) {
  return step_bound_s + kWatchdogMarginS + 0.1 * step_bound_s;
}

void Journal::watchdog() {
  // A backstop for a step with no bound of its own (a GPU call that never returns): it fires later than the
  // step's own waits, so that a rank waiting for a stopped peer reports first, naming the step and the
  // peer (docs/mori-teardown-repro.md, The journal).
  const double bound = watchdog_bound_s(bound_s_);
  while (!stop_) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const std::int64_t started = step_started_ns_.load();
    if (started && static_cast<double>(now_ns() - started) * 1e-9 > bound) {
      const std::string what = "step " + g_step.get() + " of scenario " + g_scenario.get() + " ran past " +
                               format_seconds(bound) + " s on rank " + std::to_string(rank_) +
                               " (--timeout-s " + format_seconds(bound_s_) + " plus the watchdog's margin)";
      line("H\t" + g_scenario.get() + "\t" + what);
      spdlog::error("teardown journal: {}; ending this rank with exit code 4", what);
      std::function<void(const std::string&)> report;
      {
        std::lock_guard<std::mutex> lock(expired_mu_);
        report = on_expired_;
      }
      if (report) {
        try {
          report(what);
        } catch (const std::exception& e) {
          spdlog::error("teardown journal: the report after the expired bound: {}", e.what());
        }
      }
      std::fflush(stdout);
      _exit(static_cast<int>(ExitCode::timeout));
    }
  }
}

void Journal::begin_scenario(const std::string& scenario, int world) {
  scenario_ = scenario;
  g_scenario.set(scenario);
  line("O\t" + scenario + "\t" + std::to_string(world));
}

void Journal::end_scenario() {
  line("D\t" + scenario_);
}

StepStatus Journal::step(const std::string& name, int peer, const std::function<void()>& f) {
  line("B\t" + scenario_ + "\t" + name + "\t" + std::to_string(peer));
  if (detail::fault_armed(("teardown." + name + ".crash").c_str(), rank_)) raise(SIGSEGV);
  const auto t0 = Clock::now();
  g_step.set(name);
  step_started_ns_ = now_ns();
  detail::fault_point(("teardown." + name + ".hang").c_str(), rank_);  // test-only: never returns when armed
  StepStatus status;
  std::string timed_out;  // the TimeoutError's words, when the step's own wait ran past its bound
  auto end = [&] {
    const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%.1f", us);
    // The step's end in microseconds of the system clock: the summary names the failure that came first in
    // time across ranks (docs/mori-teardown-repro.md, Journal).
    const auto end_us = std::chrono::duration_cast<std::chrono::microseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
    line("E\t" + scenario_ + "\t" + name + "\t" + std::to_string(peer) + "\t" + to_string(status) + "\t" +
         buf + "\t" + std::to_string(end_us));
  };
  {
    // The step is over however it ends (another exception passes through): the watchdog must not take a
    // usage or runtime error for a hang.
    struct StepOver {
      std::atomic<std::int64_t>& started;
      ~StepOver() { started = 0; }
    } over{step_started_ns_};
    try {
      f();
    } catch (const ApiError& e) {
      status = StepStatus::failed(e.api_error());
    } catch (const TimeoutError& e) {
      status = StepStatus::failed("TIMEOUT");
      timed_out = e.what();
    } catch (...) {
      // Every begun step ends in the journal while the process lives: a B with no E means it died there.
      status = StepStatus::failed("EXCEPTION");
      end();
      throw;
    }
  }
  end();
  if (!timed_out.empty()) {
    // The step's own bound expired: the rank ends now (exit 4), naming the step and what it waited for,
    // before the watchdog of a stopped peer (later, by its margin) or a wait after the step does.
    const std::string what = "step " + name + " of scenario " + scenario_ + ": " + timed_out;
    bound_expired(what);
    throw TimeoutError(what);
  }
  return status;
}

void Journal::bound_expired(const std::string& what) {
  if (scenario_.empty()) return;
  std::string w = what;
  for (char& ch : w)
    if (ch == '\t' || ch == '\n') ch = ' ';
  line("H\t" + scenario_ + "\t" + w);
}

void Journal::leak(std::int64_t fds, std::int64_t handles, std::int64_t mappings, std::int64_t device_bytes) {
  line("L\t" + scenario_ + "\t" + std::to_string(fds) + "\t" + std::to_string(handles) + "\t" +
       std::to_string(mappings) + "\t" + std::to_string(device_bytes));
}

void Journal::cycle(int c, std::int64_t fds, std::int64_t handles, std::int64_t mappings,
                    std::uint64_t free_bytes) {
  line("C\t" + scenario_ + "\t" + std::to_string(c) + "\t" + std::to_string(fds) + "\t" +
       std::to_string(handles) + "\t" + std::to_string(mappings) + "\t" + std::to_string(free_bytes));
}

}  // namespace mori::symm
