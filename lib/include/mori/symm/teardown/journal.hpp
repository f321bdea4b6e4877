// SPDX-License-Identifier: MIT
// A per-rank step journal that survives a crash, and the report built from journals (lib/README.md,
// Reports and exit codes; docs/mori-teardown-repro.md).
//
// Each step writes a "begin" line before it runs and an "end" line after, with write(2) on an O_APPEND fd, so
// the last line of a journal says where the process died. A SIGSEGV/SIGBUS/SIGABRT handler appends the signal
// with async-signal-safe writes and re-raises it. A step whose own wait runs past its bound (a TimeoutError)
// is journalled (E ... TIMEOUT, then H naming the step) and the TimeoutError rethrown; a watchdog thread, a
// backstop for a step with no bound of its own, turns a step that runs past watchdog_bound_s(bound) into a
// "hang" line naming the step and ends the process with exit code 4.
//
// Line format (tab separated):
//   O scenario world            a scenario starts       D scenario               it ended
//   B scenario step peer        a step starts           E scenario step peer status us end_us
//   S scenario signal           a fatal signal          H scenario why           a bound expired (a step ran
//                                                                                past it, or a wait between
//                                                                                steps)
//   L scenario fds handles mappings device_bytes        resources not returned at the end of a scenario
//   C scenario cycle fds handles mappings free_bytes    one line per cycle (scenario "cycles")
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "mori/symm/base/json.hpp"
#include "mori/symm/base/outcome.hpp"

namespace mori::symm {

// The watchdog's margin over the step bound: it fires at bound + kWatchdogMarginS + 10% of the bound, after
// any wait of the step bounded by the same --timeout-s has reported (and a peer's has ended the job).
inline constexpr double kWatchdogMarginS = 5.0;
double watchdog_bound_s(double step_bound_s);

class Journal {
 public:
  // Opens DIR/rank-<rank>.journal (appending), installs the signal handlers and starts the watchdog.
  Journal(const std::string& dir, int rank, double step_bound_s);
  ~Journal();
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  void begin_scenario(const std::string& scenario, int world);
  void end_scenario();
  // Runs f as one step. Returns its status (an ApiError's name). A TimeoutError is journalled (status
  // TIMEOUT, and an H line) and rethrown as a TimeoutError naming the step; any other exception is rethrown.
  StepStatus step(const std::string& name, int peer, const std::function<void()>& f);
  void leak(std::int64_t fds, std::int64_t handles, std::int64_t mappings, std::int64_t device_bytes);
  // A wait outside any step ran past its bound (a TimeoutError): an "H" line naming it, so that the summary
  // tells an expired bound from a crash. No-op outside a scenario.
  void bound_expired(const std::string& what);
  // Called by the watchdog, on its thread, after it journalled a step that ran past its bound and before it
  // ends the process with exit 4 (for a report of what happened; it must not wait for other ranks). Set it
  // before the first step; clear it (nullptr) before what it refers to goes away: the journal outlives main
  // for the atexit scenario's hook.
  void on_step_expired(std::function<void(const std::string& what)> f);
  void cycle(int cycle, std::int64_t fds, std::int64_t handles, std::int64_t mappings,
             std::uint64_t free_bytes);
  const std::string& path() const noexcept { return path_; }
  // "" while every line was written; else the errno name of the first failed write (ENOSPC, EIO ...), after
  // which the journal takes no more lines.
  std::string write_error() const;

 private:
  void line(const std::string& s);
  void watchdog();

  mutable std::mutex mu_;  // line() runs on the main thread and the watchdog
  std::string write_error_;
  std::int64_t lines_ = 0;
  int fd_ = -1;
  int rank_;
  std::string path_;
  std::string scenario_;
  double bound_s_;
  std::atomic<std::int64_t> step_started_ns_{0};  // 0 = no step running
  std::atomic<bool> stop_{false};
  std::thread watchdog_;
  std::mutex expired_mu_;  // on_expired_ is set on the main thread and read by the watchdog
  std::function<void(const std::string&)> on_expired_;
};

// One scenario of a run, over the ranks whose journals hold it.
struct ScenarioSummary {
  std::string name;
  int world = 0;
  TeardownOutcome outcome = TeardownOutcome::ok;  // the outcome of the rank that speaks for the scenario
  std::string detail;                             // why, where there is something to say
  Json ranks = Json::array();                     // {rank, outcome, steps, leaked[, detail][, cycles]} each
};

// More ranks than any job has: a journal whose world is larger is not one of this tool's, and a file
// rank-<r>.journal with r at or past it is no rank's.
inline constexpr int kMaxJournalWorld = 1 << 20;

// Builds the scenarios of the mori.teardown/1 payload from every rank-*.journal in dir. Throws UsageError if
// the folder holds no journal of a rank or a journal whose world exceeds kMaxJournalWorld, ApiError if one
// cannot be read. A damaged journal (a torn line, an unknown record, a malformed number or step status) makes
// its rank's outcome damaged, naming the file and line; damage before any scenario is reported as a scenario
// named "(damaged journal)"; a file named like a journal but of no rank (rank-99999999999.journal) makes
// every scenario damaged, naming it. A rank of the job (0..world-1) with no record of a scenario, its journal
// missing from the folder or silent on the scenario, makes the scenario journal_error (unless a crash, hang
// or damage speaks for it), naming the ranks. write_errors (rank -> errno name, from the job itself) makes
// every scenario such a rank did not finish journal_error.
std::vector<ScenarioSummary> summarize_journals(const std::string& dir,
                                                const std::map<int, std::string>& write_errors = {});

// {name, world, outcome[, detail], ranks}: one element of the payload's scenarios[].
Json to_json(const ScenarioSummary& s);

}  // namespace mori::symm
