// SPDX-License-Identifier: MIT
// mori-teardown-repro: which teardown order breaks, on which rank, at which step.
//
// The options, the report and the table; the scenarios and their journals are the library's teardown layer
// (teardown/scenarios.hpp, teardown/journal.hpp; docs/mori-teardown-repro.md).
#include <cstdio>
#include <map>

#include "mori/symm/base/error.hpp"
#include "mori/symm/base/log.hpp"
#include "mori/symm/base/report.hpp"
#include "mori/symm/base/units.hpp"
#include "mori/symm/teardown/journal.hpp"
#include "mori/symm/teardown/journal_dir.hpp"
#include "mori/symm/teardown/scenarios.hpp"
#include "mori/symm/tool/tool.hpp"

using namespace mori::symm;

namespace {

struct Options {
  std::string scenario = "ordered";
  bool list = false;
  int windows = 3;
  std::string size = "4M";
  std::string handle_type = "auto";
  std::optional<HandleType> handle_choice;  // --handle-type, parsed: none = auto
  int cycles = 10;
  std::string journal_dir;  // empty: a new per-job folder under teardown-journal/
  std::string summarize;
  const CLI::Option* scenario_given = nullptr;  // --scenario as given: not with --summarize
};

void print_table(const std::vector<ScenarioSummary>& scs) {
  std::printf("%-22s %5s %-13s %-18s %s\n", "scenario", "world", "outcome", "expected", "detail");
  for (const auto& s : scs)
    std::printf("%-22s %5d %-13s %-18s %s\n", s.name.c_str(), s.world, to_string(s.outcome), expected_text(s),
                s.detail.c_str());
}

// Adds scenarios[] (each with its expected outcome) to doc, prints the table and writes the document. Returns
// the exit code: check_failed where an outcome differs from the expected one (a pending one is not judged).
// writer: this rank prints the table and writes the document (rank 0; after an expired bound, any rank whose
// bound expired writes the file, since mpirun may end rank 0 before its own bound expires).
int finish_report(ToolEnv& env, Json& doc, const std::vector<ScenarioSummary>& scs, bool writer) {
  doc["scenarios"] = scenarios_json(scs);
  if (writer) {
    int world_rank = 0;  // not env.is_root(): after an expired bound the bootstrap may not exist
    MORI_CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank));
    if (env.common.json != "-" && world_rank == 0) print_table(scs);
    if (!env.common.json.empty() && (env.common.json != "-" || world_rank == 0))
      write_json(env.common.json, doc);
  }
  return count_unexpected(scs) ? static_cast<int>(ExitCode::check_failed) : 0;
}

// --summarize DIR: the report of an earlier run's journals.
int summarize_only(ToolEnv& env, const Options& o) {
  Json doc;
  doc["schema"] = "mori.teardown/1";
  doc["meta"] = make_meta(env, "");
  doc["config"] = {{"summarize", o.summarize}};
  return finish_report(env, doc, summarize_journals(o.summarize), env.is_root());
}

// The job's report, once every rank ran its scenarios (collective: meta, the verdict).
int report(ToolEnv& env, const Options& o, const TeardownJob& job, const TeardownRun& run) {
  Json doc;
  doc["schema"] = "mori.teardown/1";
  doc["meta"] = make_meta(env, to_string(run.handle_type));
  doc["config"] = {{"scenario", o.scenario},         {"windows", o.windows},
                   {"size_bytes", job.size_bytes},   {"cycles", o.cycles},
                   {"journal_dir", job.journal_dir}, {"timeout_s", env.common.timeout_s}};
  // Rank 0 alone reads the journals (world journals of world-sized steps each) and says the verdict to the
  // others: every rank reading all of them was O(world^2) work per rank.
  std::vector<ScenarioSummary> scs;
  if (env.is_root()) scs = summarize_job(job, env.boot->world(), run.write_errors);
  if (!run.write_errors.empty()) {
    Json je = Json::array();
    std::string list;
    for (const auto& [r, e] : run.write_errors) {
      je.push_back({{"rank", r}, {"error", e}});
      list += (list.empty() ? "" : ", ") + ("rank " + std::to_string(r) + " (" + e + ")");
    }
    doc["journal_errors"] = je;
    if (env.is_root())
      spdlog::error("journals that could not be written: {}; the verdicts of those ranks are unknown", list);
  }
  std::uint8_t code = static_cast<std::uint8_t>(finish_report(env, doc, scs, env.is_root()));
  env.boot->broadcast("teardown.verdict", &code, 1, 0);
  return code;
}

// Whether this job claimed its journal folder: only then are the journals there its own.
std::string g_claimed_journal_dir;  // the folder this job claimed (run), "" before

// The report of a rank whose bound expired, wherever (the bootstrap included): no collective (its peers may
// be gone), this rank's meta, this job's journals as they are now (none before it claimed the folder), and
// bound_expired naming the wait. The exit code stays 4 (docs/mori-teardown-repro.md).
void report_expired_bound(ToolEnv& env, const Options& o, const std::string& what) {
  const int rank = world_rank_noexcept();
  if (!o.summarize.empty()) return;
  Json doc;
  doc["schema"] = "mori.teardown/1";
  doc["meta"] = make_meta(env, "", false);
  doc["config"] = {{"scenario", o.scenario},
                   {"windows", o.windows},
                   {"size", o.size},
                   {"cycles", o.cycles},
                   {"journal_dir", g_claimed_journal_dir.empty() ? o.journal_dir : g_claimed_journal_dir},
                   {"timeout_s", env.common.timeout_s}};
  doc["bound_expired"] = {{"rank", rank}, {"what", what}};
  std::vector<ScenarioSummary> scs;
  // A bound that expired before any rank began its journal (the bootstrap, the doctor's exchange) leaves a
  // claimed folder without journals: the report is still written, saying so.
  if (!g_claimed_journal_dir.empty()) {
    try {
      scs = summarize_journals(g_claimed_journal_dir);
    } catch (const Error& e) {
      doc["bound_expired"]["journals"] = e.what();
    }
  }
  (void)finish_report(env, doc, scs, true);
}

// --summarize, or a job: its journal folder claimed (a new one per job by default), then the scenarios.
int run(ToolEnv& env, const Options& o) {
  if (!o.summarize.empty()) return summarize_only(env, o);
  TeardownJob job;
  job.scenario = o.scenario;
  job.windows = o.windows;
  job.size_bytes = parse_size("--size", o.size);
  job.handle_type = o.handle_choice;
  job.cycles = o.cycles;
  job.backend = parse_backend(env.common.backend);
  job.journal_dir = claim_journal_dir(*env.boot, o.journal_dir);
  g_claimed_journal_dir = job.journal_dir;
  if (env.is_root()) spdlog::info("journals in {}", job.journal_dir);
  return run_teardown_job(
      *env.rt, *env.boot, env.device, job,
      [&env, &o](const std::string& what) { report_expired_bound(env, o, what); },
      [&](const TeardownRun& r) { return report(env, o, job, r); });
}

void declare_options(CLI::App& app, Options& o) {
  app.add_flag("--list", o.list, "List the scenarios, one line each");
  o.scenario_given =
      app.add_option("--scenario", o.scenario, "A scenario name or 'all'")->capture_default_str();
  app.add_option("--windows", o.windows, "Windows for divergent-order")->capture_default_str();
  app.add_option("--size", o.size, "Window size per rank (K/M/G suffixes)")->capture_default_str();
  app.add_option("--handle-type", o.handle_type, "auto | posix_fd | fabric")->capture_default_str();
  app.add_option("--cycles", o.cycles, "Cycles for the cycles scenario")->capture_default_str();
  app.add_option("--journal-dir", o.journal_dir,
                 "Folder for the per-rank journals (must hold none yet; default: a new folder "
                 "teardown-journal/job-<UTC time>-<pid>/ for each job)");
  app.add_option("--summarize", o.summarize, "Build the report from the journals in DIR (after a crash)");
}

void validate(Options& o) {
  if (o.list) {
    int rank = 0;
    MORI_CHECK_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &rank));
    if (rank == 0)
      for (const auto& s : teardown_scenarios())
        std::printf("%-22s %s (expected: %s)\n", s.name, s.line, expected_text(s));
    throw CLI::Success();
  }
  // Refused, never silently ignored (docs/mori-teardown-repro.md): --summarize runs no scenario.
  if (!o.summarize.empty() && o.scenario_given->count() > 0)
    throw UsageError(
        "--summarize: reports an earlier job's journals and runs no scenario; not with --scenario");
  if (o.scenario != "all" && !find_teardown_scenario(o.scenario)) {
    std::string names;
    for (const auto& s : teardown_scenarios()) names += std::string(names.empty() ? "" : ", ") + s.name;
    throw UsageError("--scenario: unknown '" + o.scenario + "' (accepted: all, " + names + ")");
  }
  if (o.windows < 1 || o.windows > 64) throw UsageError("--windows: must be in 1..64");
  if (o.cycles < 1 || o.cycles > 100000) throw UsageError("--cycles: must be in 1..100000");
  const auto size = parse_size("--size", o.size);
  if (size == 0 || size > (std::size_t{1} << 36)) throw UsageError("--size: must be in 1 byte..64 GiB");
  o.handle_choice = parse_handle_choice(o.handle_type);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  ToolSpec spec;
  spec.name = "mori-teardown-repro";
  spec.description = "Runs symmetric-window teardown orders on purpose and reports which break, where.";
  spec.declare = [&](CLI::App& app) { declare_options(app, o); };
  spec.validate = [&] { validate(o); };
  spec.body = [&](ToolEnv& env) { return run(env, o); };
  spec.bound_expired = [&](ToolEnv& env, const std::string& what) { report_expired_bound(env, o, what); };
  spec.windows_held = [&] { return teardown_windows_held(o.scenario, o.windows); };
  return tool_main(argc, argv, spec);
}
