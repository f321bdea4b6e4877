// SPDX-License-Identifier: MIT
// mori-teardown-repro's scenarios: teardown orders composed of the window's own steps (lib/README.md,
// Teardown policy), every step journaled per rank before it runs (teardown/journal.hpp), and the running and
// judging of one job of them (docs/mori-teardown-repro.md).
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "mori/symm/base/json.hpp"
#include "mori/symm/base/outcome.hpp"
#include "mori/symm/comm/bootstrap.hpp"
#include "mori/symm/platform/runtime.hpp"
#include "mori/symm/teardown/journal.hpp"

namespace mori::symm {

// One scenario, as --list prints it.
struct TeardownScenario {
  const char* name;
  TeardownOutcome expected;  // on a platform that behaves as the VMM API documents
  const char* line;          // what it does
  // A race by construction (docs/mori-teardown-repro.md, "Races"): the teardown may overtake this rank's own
  // device work, so an api_error or a crash from that work is as expected as `expected` itself.
  bool race = false;
};

// Whether an outcome is within the scenario's expectation: its expected outcome, or, for a race, an api_error
// or a crash (never a hang, a leak, damage or a journal error).
bool outcome_as_expected(const TeardownScenario& s, TeardownOutcome o) noexcept;

// Every scenario, in the order `--scenario all` runs them.
const std::vector<TeardownScenario>& teardown_scenarios();
// The scenario of that name; nullptr where there is none.
const TeardownScenario* find_teardown_scenario(const std::string& name);

// A scenario's expected outcome as the report writes it: "?" for a name this build does not know (journals
// of another version); a race's reads "ok|api_error|crash".
const char* expected_text(const ScenarioSummary& s);
const char* expected_text(const TeardownScenario& s) noexcept;
// How many judged outcomes are not as expected (outcome_as_expected; a pending one is not judged; an unknown
// scenario is never as expected).
int count_unexpected(const std::vector<ScenarioSummary>& scs);
// The report's scenarios[]: each summary (to_json) with its `expected`, `race` and `as_expected` (null while
// pending).
Json scenarios_json(const std::vector<ScenarioSummary>& scs);

// What one job of scenarios runs with (mori-teardown-repro's options, checked).
struct TeardownJob {
  std::string scenario = "ordered";  // a scenario's name, or "all"
  int windows = 3;                   // divergent-order's windows
  std::size_t size_bytes = 4u << 20;
  std::optional<HandleType> handle_type;   // none: chosen by trying (resolve_handle_type)
  int cycles = 10;                         // the cycles scenario's
  std::string journal_dir;                 // claimed by this job (claim_journal_dir)
  Backend backend = Backend::auto_select;  // of the runtime the atexit scenario makes for itself
};

// What the scenarios left for the job's report, on every rank.
struct TeardownRun {
  HandleType handle_type = HandleType::posix_fd;  // the windows' (meta.handle_type)
  std::map<int, std::string> write_errors;        // rank -> errno name of a journal that could not be written
};

// Collective. Runs the job's scenarios, each journaled in job.journal_dir, then calls report (in the job's
// scope: a wait of the report that runs past its bound is journaled as one) and returns its exit code.
// on_step_expired runs on the journal's watchdog thread after it journaled a step that ran past its bound,
// before it ends the process with exit 4 (Journal::on_step_expired); it is dropped when this returns (the
// journal outlives main for the atexit scenario's hook). Throws TimeoutError where a wait ran past its bound
// (after journaling it).
int run_teardown_job(Runtime& rt, Bootstrap& boot, int device, const TeardownJob& job,
                     const std::function<void(const std::string& what)>& on_step_expired,
                     const std::function<int(const TeardownRun&)>& report);

// The windows a job of `scenario` ("all" or one name) holds at once, `windows` being --windows: the
// descriptor need of the tool's preflight and the doctor (fds_needed, base/fds.hpp). divergent-order holds
// all of its windows; leak's window is kept while atexit's is made (both to the end of the job).
int teardown_windows_held(const std::string& scenario, int windows) noexcept;

// Rank 0, after the job (every rank passed run_teardown_job's scenarios): the summary of its journals
// (job.journal_dir), with write_errors (TeardownRun), and atexit pending (its teardown runs after the report;
// detail: the command that judges it). Every scenario the job asked for (job.scenario) has its row: one that
// no journal records (every journal failed before it began) is journal_error, of `world` ranks.
std::vector<ScenarioSummary> summarize_job(const TeardownJob& job, int world,
                                           const std::map<int, std::string>& write_errors);

}  // namespace mori::symm
