// SPDX-License-Identifier: MIT
// The reader side of the teardown journals: every rank's journal of a folder turned into the scenarios of the
// mori.teardown/1 report (lib/README.md, Reports and exit codes; docs/mori-teardown-repro.md).
#include "mori/symm/teardown/journal.hpp"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "mori/symm/base/detail/text.hpp"
#include "mori/symm/base/error.hpp"
#include "mori/symm/base/files.hpp"
#include "mori/symm/base/log.hpp"

namespace mori::symm {
namespace {

std::vector<std::string> split_tabs(const std::string& l) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (true) {
    auto t = l.find('\t', pos);
    out.push_back(l.substr(pos, t == std::string::npos ? std::string::npos : t - pos));
    if (t == std::string::npos) break;
    pos = t + 1;
  }
  return out;
}

// Which rank's outcome speaks for the scenario: a rank killed because the job was aborted (a crash without a
// signal of its own) says less than the rank that hung or took the signal; a journal that cannot be read or
// was not written says the most, since nothing else about that rank can be trusted.
int severity(TeardownOutcome outcome, bool own_signal) {
  using O = TeardownOutcome;
  switch (outcome) {
    case O::ok:
      return 0;
    case O::leak:
      return 1;
    case O::api_error:
      return 2;
    case O::crash:
      return own_signal ? 5 : 3;
    case O::hang:
      return 4;
    case O::pending:  // never read from a journal
      return 6;
    case O::damaged:
    case O::journal_error:
      return 7;
  }
  return 6;
}

struct RankScenario {
  Json steps = Json::array();
  int world = 0;          // as this rank's journal says (its O record)
  std::string open_step;  // begun, not ended
  int open_peer = -1;
  std::string timed_out_step;   // the last step that ended with TIMEOUT (its own bound expired)
  bool hang_own_bound = false;  // the H record followed such a step
  int begun = 0;                // steps begun: how far the rank got
  std::string signal, hang, hang_why, first_error, first_error_step, damaged;
  std::int64_t first_error_us = -1;  // when the first failed step ended (system clock); -1 = not journalled
  bool done = false;
  Json leaked = {{"fds", 0}, {"handles", 0}, {"mappings", 0}, {"device_bytes", 0}};
  bool leak = false;
  Json cycles = Json::array();
};

template <class T>
bool parse_num(const std::string& s, T& out) {
  const auto r = std::from_chars(s.data(), s.data() + s.size(), out);
  return r.ec == std::errc() && r.ptr == s.data() + s.size() && !s.empty();
}

bool parse_double(const std::string& s, double& out) {
  if (s.empty()) return false;
  char* end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

// Fields per record kind (at least; H carries a free-text reason).
const std::map<std::string, std::size_t>& record_fields() {
  static const std::map<std::string, std::size_t> m = {{"O", 3}, {"B", 4}, {"E", 6}, {"S", 3},
                                                       {"H", 2}, {"L", 6}, {"C", 7}, {"D", 2}};
  return m;
}

// Applies one record of a started scenario (B, E, S, H, L, C, D) to its rank's state; returns "", or what
// is wrong with the record (a malformed number, an unknown step status).
std::string apply_record(RankScenario& rs, const std::vector<std::string>& f) {
  const std::string& kind = f[0];
  bool ok = true;
  if (kind == "B") {
    // Steps run one after another: a step that begins while another is open is not what a journal holds.
    if (!rs.open_step.empty()) return "step '" + f[2] + "' begins while step '" + rs.open_step + "' is open";
    ok = parse_num(f[3], rs.open_peer);
    rs.open_step = f[2];
    ++rs.begun;
  } else if (kind == "E") {
    int peer = 0;
    double us = 0;
    ok = parse_num(f[3], peer) && parse_double(f[5], us);
    const auto status = parse_step_status(f[4]);
    if (!status) return "unknown step status '" + f[4] + "'";
    if (rs.open_step != f[2])
      return "step '" + f[2] + "' ends but " +
             (rs.open_step.empty() ? std::string("never began") : "step '" + rs.open_step + "' is open");
    rs.timed_out_step = status->error() == "TIMEOUT" ? f[2] : "";
    // A step run once per peer that succeeded joins the entry of its run of peers (peers, us the sum,
    // max_us): a rank's report grows with its steps, not with the world (docs/mori-teardown-repro.md,
    // "JSON"). A step that failed keeps its own entry, naming its peer.
    Json* run = rs.steps.empty() ? nullptr : &rs.steps.back();
    if (peer >= 0 && status->ok() && run && run->contains("peers") && (*run)["step"] == f[2]) {
      (*run)["peers"] = (*run)["peers"].get<int>() + 1;
      (*run)["us"] = (*run)["us"].get<double>() + us;
      (*run)["max_us"] = std::max((*run)["max_us"].get<double>(), us);
    } else if (peer >= 0 && status->ok()) {
      rs.steps.push_back(
          {{"step", f[2]}, {"status", to_string(*status)}, {"us", us}, {"peers", 1}, {"max_us", us}});
    } else {
      Json st = {{"step", f[2]}, {"status", to_string(*status)}, {"us", us}};
      if (peer >= 0) st["peer"] = peer;
      rs.steps.push_back(st);
    }
    rs.open_step.clear();
    if (!status->ok() && rs.first_error.empty()) {
      rs.first_error = status->error();
      rs.first_error_step = f[2];
      // The end time is a later field (journals written before it have none).
      if (f.size() > 6 && !parse_num(f[6], rs.first_error_us)) ok = false;
    }
  } else if (kind == "S") {
    rs.signal = f[2];
  } else if (kind == "H") {
    // In the step that is open (the watchdog's), or in the step whose own wait just expired (it ended
    // TIMEOUT).
    rs.hang_own_bound = rs.open_step.empty() && !rs.timed_out_step.empty();
    rs.hang = !rs.open_step.empty() ? rs.open_step : rs.hang_own_bound ? rs.timed_out_step : "?";
    if (f.size() > 2) rs.hang_why = f[2];
  } else if (kind == "L") {
    std::int64_t v[4] = {};
    for (int i = 0; i < 4 && ok; ++i) ok = parse_num(f[static_cast<std::size_t>(2 + i)], v[i]);
    rs.leaked = {{"fds", v[0]}, {"handles", v[1]}, {"mappings", v[2]}, {"device_bytes", v[3]}};
    rs.leak = v[0] > 0 || v[1] > 0 || v[2] > 0 || v[3] > 0;
  } else if (kind == "C") {
    int cyc = 0;
    std::int64_t v[3] = {};
    std::uint64_t free_bytes = 0;
    ok = parse_num(f[2], cyc) && parse_num(f[3], v[0]) && parse_num(f[4], v[1]) && parse_num(f[5], v[2]) &&
         parse_num(f[6], free_bytes);
    rs.cycles.push_back(
        {{"cycle", cyc}, {"fds", v[0]}, {"handles", v[1]}, {"mappings", v[2]}, {"free_bytes", free_bytes}});
  } else if (kind == "D") {
    rs.done = true;
  }
  return ok ? std::string() : "malformed number in record '" + kind + "'";
}

// Every rank's journals of a folder: scenario -> rank -> state; scenario order as first seen; world per
// scenario; damage before any scenario (rank, what).
struct JournalSet {
  std::string dir;
  std::map<std::string, std::map<int, RankScenario>> all;
  std::vector<std::string> order;
  std::map<std::string, int> world;
  std::vector<std::pair<int, std::string>> unattached;

  // Reads one rank's journal text; returns the number of lines read. Stops at the first damaged line.
  int read(const std::string& name, int rank, const std::string& text) {
    std::string current;  // the scenario this rank's journal is in
    std::size_t pos = 0;
    int lineno = 0;
    auto damage = [&](const std::string& why) {
      const std::string what = name + " line " + std::to_string(lineno) + ": " + why;
      spdlog::warn("teardown journal {}/{}", dir, what);
      if (!current.empty())
        all[current][rank].damaged = what;
      else
        unattached.emplace_back(rank, what);
    };
    while (pos < text.size()) {
      ++lineno;
      const std::size_t nl = text.find('\n', pos);
      if (nl == std::string::npos) {
        damage("truncated line (no end of line)");
        break;
      }
      // Every field is echoed (the table, the JSON, warnings): each is bounded and escaped once, here.
      auto f = split_tabs(text.substr(pos, nl - pos));
      for (auto& field : f) field = detail::printable(field, detail::kEchoBytes);
      pos = nl + 1;
      const auto kind_it = record_fields().find(f[0]);
      if (kind_it == record_fields().end()) {
        damage("unknown record");
        break;
      }
      if (f.size() < kind_it->second) {
        damage("record '" + f[0] + "' has " + std::to_string(f.size()) + " field(s), needs " +
               std::to_string(kind_it->second));
        break;
      }
      const std::string& sc = f[1];
      if (f[0] == "O") {
        int w = 0;
        if (!parse_num(f[2], w) || w < 1) {
          damage("malformed world '" + f[2] + "'");
          break;
        }
        if (w > kMaxJournalWorld)  // no job's: a file that is not a journal of this tool
          throw UsageError("--summarize: " + dir + "/" + name + " line " + std::to_string(lineno) +
                           ": world " + f[2] + " is more than any job's " + std::to_string(kMaxJournalWorld) +
                           " ranks: not a journal of mori-teardown-repro");
        if (!all.count(sc)) order.push_back(sc);
        world[sc] = w;
        all[sc][rank] = RankScenario{};
        all[sc][rank].world = w;
        current = sc;
        continue;
      }
      if (!all.count(sc) || !all[sc].count(rank)) {
        damage("record for scenario '" + sc + "' before its start");
        break;
      }
      current = sc;
      if (const std::string why = apply_record(all[sc][rank], f); !why.empty()) {
        damage(why);
        break;
      }
    }
    return lineno;
  }
};

// A rank's outcome in a scenario and why; a rank that ended without finishing is added to `unfinished`.
std::pair<TeardownOutcome, std::string> rank_outcome(int rank, const RankScenario& rs,
                                                     const std::map<int, std::string>& write_errors,
                                                     std::vector<std::pair<int, int>>& unfinished) {
  using O = TeardownOutcome;
  const std::string r = std::to_string(rank);
  const auto werr = write_errors.find(rank);
  if (werr != write_errors.end() && !rs.done)
    return {O::journal_error,
            "rank " + r + "'s journal could not be written (" + werr->second + "): its outcome is unknown"};
  if (!rs.damaged.empty()) return {O::damaged, "journal damaged: " + rs.damaged};
  if (!rs.signal.empty())
    return {O::crash,
            rs.signal + " on rank " + r + " in step " + (rs.open_step.empty() ? "?" : rs.open_step)};
  if (!rs.hang.empty())
    return {O::hang, rs.hang == "?" && !rs.hang_why.empty()
                         ? "rank " + r + ": a bound expired between steps (" + rs.hang_why + ")"
                     : rs.hang_own_bound
                         ? "rank " + r + ": step " + rs.hang + " ran past its bound (" + rs.hang_why + ")"
                         : "rank " + r + " hung in step " + rs.hang +
                               (rs.hang_why.empty() ? "" : " (" + rs.hang_why + ")")};
  // A step that began and never ended did not finish, whatever follows it (docs/mori-teardown-repro.md).
  if (!rs.done || !rs.open_step.empty()) {
    unfinished.emplace_back(rs.begun, rank);
    return {O::crash,
            "rank " + r + " ended without finishing" +
                (rs.open_step.empty() ? std::string(" (killed with the job?)") : " in step " + rs.open_step)};
  }
  if (!rs.first_error.empty())
    return {O::api_error, rs.first_error_step + " -> " + rs.first_error + " on rank " + r};
  if (rs.leak) return {O::leak, "rank " + r + " did not return " + rs.leaked.dump()};
  return {O::ok, ""};
}

// Ranks that ended without a signal of their own: every one is named, the one whose journal stops first
// (fewest steps begun) leading, since the others were most likely waiting for it when the job ended.
std::string unfinished_detail(std::vector<std::pair<int, int>> unfinished,
                              std::map<int, RankScenario>& ranks) {
  std::sort(unfinished.begin(), unfinished.end());
  const bool first_alone = unfinished.size() == 1 || unfinished[0].first < unfinished[1].first;
  std::string detail = "ended without finishing:";
  for (std::size_t i = 0; i < unfinished.size(); ++i) {
    const auto& rs = ranks[unfinished[i].second];
    detail += std::string(i ? "," : "") + " rank " + std::to_string(unfinished[i].second) +
              (rs.open_step.empty() ? " (between steps)" : " in step " + rs.open_step) +
              (i == 0 && first_alone && unfinished.size() > 1 ? " (its journal stops first)" : "");
  }
  return detail;
}

// The ranks 0..world-1 of the job with no record of the scenario, named: those without a journal in the
// folder, and those whose journal does not hold the scenario; "" where there is none.
std::string missing_detail(int world, const std::map<int, RankScenario>& ranks_state,
                           const std::set<int>& journal_ranks) {
  std::vector<int> no_file, no_record;
  for (int r = 0; r < world; ++r)
    if (!ranks_state.count(r)) (journal_ranks.count(r) ? no_record : no_file).push_back(r);
  std::string d;
  if (no_file.size() == 1)
    d = "no journal of rank " + std::to_string(no_file[0]) + " in the folder (rank-" +
        std::to_string(no_file[0]) + ".journal): its outcome is unknown";
  else if (!no_file.empty())
    d = "no journals of ranks " + detail::rank_ranges(no_file) + " in the folder: their outcomes are unknown";
  if (!no_record.empty())
    d += (d.empty() ? "" : "; ") +
         (no_record.size() == 1 ? "rank " + std::to_string(no_record[0]) +
                                      "'s journal holds no record of this scenario: its outcome is unknown"
                                : "the journals of ranks " + detail::rank_ranges(no_record) +
                                      " hold no record of this scenario: their outcomes are unknown");
  return d;
}

ScenarioSummary scenario_summary(const std::string& sc, int world, std::map<int, RankScenario>& ranks_state,
                                 const std::map<int, std::string>& write_errors,
                                 const std::set<int>& journal_ranks) {
  // A journal of a rank outside the job, or of a job of another size, is not this job's: reported as damaged
  // (foreign), never counted as one of its ranks. The job's size is what its lowest rank's journal says.
  if (!ranks_state.empty() && ranks_state.begin()->second.world > 0)
    world = ranks_state.begin()->second.world;
  for (auto& [rank, rs] : ranks_state)
    if (rs.damaged.empty() && (rank >= world || rs.world != world))
      rs.damaged = "rank-" + std::to_string(rank) + ".journal is foreign: " +
                   (rank >= world ? "rank " + std::to_string(rank) + " is outside the job's ranks 0.." +
                                        std::to_string(world - 1)
                                  : "its scenario has world " + std::to_string(rs.world) + ", the job's " +
                                        std::to_string(world));
  // A rank whose journal could not be written may have no record of this scenario at all.
  for (const auto& [rank, err] : write_errors)
    if (!ranks_state.count(rank)) ranks_state[rank] = RankScenario{};
  ScenarioSummary s;
  s.name = sc;
  s.world = world;
  int worst = 0;
  std::int64_t worst_us = -1;  // among api_error ranks: the earliest first failure in time
  int worst_rank = -1;
  std::vector<std::pair<int, int>> unfinished;  // (steps begun, rank) of ranks that ended without finishing
  for (auto& [rank, rs] : ranks_state) {
    const auto [o, d] = rank_outcome(rank, rs, write_errors, unfinished);
    Json r = {{"rank", rank}, {"outcome", to_string(o)}, {"steps", rs.steps}, {"leaked", rs.leaked}};
    if (!d.empty()) r["detail"] = d;
    if (!rs.cycles.empty()) r["cycles"] = rs.cycles;
    s.ranks.push_back(r);
    const int sev = severity(o, !rs.signal.empty());
    // Ranks that failed alike: the one whose failure came first in time speaks for the scenario, since the
    // others' failures most likely followed from it (docs/mori-teardown-repro.md).
    const bool earlier = sev == worst && o == TeardownOutcome::api_error && rs.first_error_us >= 0 &&
                         (worst_us < 0 || rs.first_error_us < worst_us);
    if (sev > worst || earlier) {
      worst = sev;
      worst_us = o == TeardownOutcome::api_error ? rs.first_error_us : -1;
      worst_rank = rank;
      s.outcome = o;
      s.detail = d;
    }
  }
  if (s.outcome == TeardownOutcome::api_error && worst_us >= 0) {
    std::vector<int> later;
    for (const auto& [rank, rs] : ranks_state)
      if (rank != worst_rank && !rs.first_error.empty()) later.push_back(rank);
    if (!later.empty())
      s.detail += " (the first failure in time; rank" + std::string(later.size() > 1 ? "s " : " ") + [&] {
        std::string t;
        for (int r : later) t += (t.empty() ? "" : ",") + std::to_string(r);
        return t;
      }() + " failed after it)";
  }
  if (worst == severity(TeardownOutcome::crash, false) && !unfinished.empty())
    s.detail = unfinished_detail(unfinished, ranks_state);
  // A peer's bound expired while a rank was still inside a step (stopped there, its watchdog not yet fired):
  // the step it stopped in is named too.
  if (s.outcome == TeardownOutcome::hang && !unfinished.empty())
    s.detail += "; " + unfinished_detail(unfinished, ranks_state);
  // Ranks of the job without a record of the scenario: their outcome is unknown. They speak for it over the
  // outcomes a scenario may be expected to have (ok, leak, api_error), so that a folder missing a rank's
  // journal is never as expected; a crash, hang or damage elsewhere keeps its voice and names them too.
  if (const std::string missing = missing_detail(world, ranks_state, journal_ranks); !missing.empty()) {
    if (worst <= severity(TeardownOutcome::api_error, false)) {
      s.outcome = TeardownOutcome::journal_error;
      s.detail = missing + (s.detail.empty() ? "" : "; " + s.detail);
    } else {
      s.detail += "; " + missing;
    }
  }
  return s;
}

// The rank a journal's file name gives, rank-<r>.journal with r in 0..kMaxJournalWorld-1 written in plain
// decimal (as Journal names it); nullopt for any other name.
std::optional<int> journal_rank(const std::string& name) {
  const std::string r = name.substr(5, name.size() - 5 - 8);
  int rank = 0;
  if (!parse_num(r, rank) || rank < 0 || rank >= kMaxJournalWorld || std::to_string(rank) != r)
    return std::nullopt;
  return rank;
}

// "rank-99999999999.journal is foreign: ..." for the files named like journals that are no rank's.
std::string foreign_detail(const std::vector<std::string>& names) {
  std::string list;
  const std::size_t shown = std::min<std::size_t>(names.size(), 4);
  for (std::size_t i = 0; i < shown; ++i) list += (i ? ", " : "") + names[i];
  if (names.size() > shown) list += " and " + std::to_string(names.size() - shown) + " more";
  return list + (names.size() == 1 ? " is" : " are") +
         " foreign: not the journal of a rank of a job (rank-<r>.journal, r in 0.." +
         std::to_string(kMaxJournalWorld - 1) + ")";
}

ScenarioSummary damaged_journal(int rank, const std::string& what) {
  Json r = {{"rank", rank},
            {"outcome", to_string(TeardownOutcome::damaged)},
            {"steps", Json::array()},
            {"leaked", {{"fds", 0}, {"handles", 0}, {"mappings", 0}, {"device_bytes", 0}}},
            {"detail", what}};
  return {"(damaged journal)", 0, TeardownOutcome::damaged, "journal damaged: " + what, Json::array({r})};
}

}  // namespace

std::vector<ScenarioSummary> summarize_journals(const std::string& dir,
                                                const std::map<int, std::string>& write_errors) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw UsageError("--summarize: '" + dir + "' is not a folder");
  JournalSet set;
  set.dir = dir;
  std::set<int> journal_ranks;
  std::vector<std::string> foreign;  // named like a journal, but no rank's (rank-99999999999.journal)
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("rank-", 0) != 0 || entry.path().extension() != ".journal") continue;
    const auto rank = journal_rank(name);
    if (!rank) {
      foreign.push_back(detail::printable(name, detail::kEchoBytes));
      continue;
    }
    journal_ranks.insert(*rank);
    const std::string text = read_file(entry.path().string(), kTeardownJournal);
    if (set.read(name, *rank, text) == 0) set.unattached.emplace_back(*rank, name + ": empty journal");
  }
  std::sort(foreign.begin(), foreign.end());
  if (journal_ranks.empty())
    throw UsageError("--summarize: no rank-*.journal files in '" + dir + "'" +
                     (foreign.empty() ? std::string() : " (" + foreign_detail(foreign) + ")"));

  for (const auto& name : foreign)
    spdlog::warn("teardown journal {}/{}: not the journal of a rank", dir, name);

  std::vector<ScenarioSummary> scenarios;
  for (const auto& [rank, what] : set.unattached) scenarios.push_back(damaged_journal(rank, what));
  for (const auto& sc : set.order)
    scenarios.push_back(scenario_summary(sc, set.world[sc], set.all[sc], write_errors, journal_ranks));
  // A file named like a journal but of no rank is not this job's: every scenario is damaged by it, as by a
  // foreign journal of a rank (docs/mori-teardown-repro.md, "Outcomes and the exit status").
  if (!foreign.empty())
    for (auto& sc : scenarios) {
      const std::string what = "journal damaged: " + foreign_detail(foreign);
      if (severity(sc.outcome, false) < severity(TeardownOutcome::damaged, false)) {
        sc.outcome = TeardownOutcome::damaged;
        sc.detail = what + (sc.detail.empty() ? "" : "; " + sc.detail);
      } else {
        sc.detail += "; " + what;
      }
    }
  return scenarios;
}

Json to_json(const ScenarioSummary& s) {
  Json j = {{"name", s.name}, {"world", s.world}, {"outcome", to_string(s.outcome)}};
  if (!s.detail.empty()) j["detail"] = s.detail;
  j["ranks"] = s.ranks;
  return j;
}

}  // namespace mori::symm
