// SPDX-License-Identifier: MIT
// The fleet: every team's all-to-all gathered and set side by side (lib/include/mori/symm/a2a/fleet.hpp).
#include "mori/symm/a2a/fleet.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <tuple>

#include "mori/symm/a2a/row.hpp"
#include "mori/symm/a2a/summary.hpp"
#include "mori/symm/base/detail/text.hpp"
#include "mori/symm/base/error.hpp"
#include "mori/symm/comm/bootstrap.hpp"

namespace mori::symm {
namespace {

// A team's report on the wire: one JSON text (invalid UTF-8 replaced, so that a host name cannot stop it).
Json report_json(const A2aTeamReport& r) {
  return {{"node", r.team.node},     {"ranks", r.team.ranks},
          {"size", r.team.size},     {"rows", r.rows},
          {"modes", r.modes},        {"lines", r.lines},
          {"best", r.best},          {"best_lines", r.best_lines},
          {"wrong", r.wrong},        {"wrong_ranks", r.wrong_ranks},
          {"plan_note", r.plan_note}};
}

A2aTeamReport report_of(const Json& j) {
  A2aTeamReport r;
  r.team = {j.at("node").get<std::string>(), j.at("ranks").get<std::string>(), j.at("size").get<int>()};
  r.rows = j.at("rows").get<std::vector<Json>>();
  r.modes = j.at("modes").get<std::vector<std::string>>();
  r.lines = j.at("lines").get<std::vector<std::string>>();
  r.best = j.at("best").get<std::vector<Json>>();
  r.best_lines = j.at("best_lines").get<std::vector<std::string>>();
  r.wrong = j.at("wrong").get<std::uint64_t>();
  r.wrong_ranks = j.at("wrong_ranks").get<std::vector<int>>();
  r.plan_note = j.at("plan_note").get<std::string>();
  if (r.modes.size() != r.rows.size() || r.lines.size() != r.rows.size())
    throw Error(ExitCode::runtime, "a team's report holds " + std::to_string(r.rows.size()) + " rows but " +
                                       std::to_string(r.modes.size()) + " modes and " +
                                       std::to_string(r.lines.size()) + " lines");
  return r;
}

double lower_median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[(v.size() - 1) / 2];
}

std::string fixed2(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.2f", v);
  return buf;
}

}  // namespace

A2aTeam a2a_team_of(const Bootstrap& job) {
  return {job.node_name(job.rank()), detail::rank_ranges(job.team()), job.team_size()};
}

void stamp_team(std::vector<A2aResult>& rows, const A2aTeam& team) {
  for (auto& r : rows) {
    r.team_node = team.node;
    r.team_ranks = team.ranks;
    r.team_size = team.size;
  }
}

A2aTeamReport a2a_team_report(const A2aTeam& team, const std::vector<A2aResult>& rows, bool time_sliced) {
  A2aTeamReport out;
  out.team = team;
  std::vector<A2aResult> stamped = rows;
  stamp_team(stamped, team);
  for (const auto& r : stamped) {
    out.rows.push_back(to_json(r));
    out.modes.push_back(a2a_mode(r));
    out.lines.push_back(a2a_table_line(r, time_sliced));
    out.wrong += r.wrong;
    out.wrong_ranks.insert(out.wrong_ranks.end(), r.wrong_ranks.begin(), r.wrong_ranks.end());
  }
  std::sort(out.wrong_ranks.begin(), out.wrong_ranks.end());
  out.wrong_ranks.erase(std::unique(out.wrong_ranks.begin(), out.wrong_ranks.end()), out.wrong_ranks.end());
  for (const auto& b : a2a_best_modes(stamped)) {
    Json j = to_json(b);
    j["team"] = team.node;
    out.best.push_back(j);
    const std::string line = format_best(b);  // "best  chunk ...": the team's node after "best"
    out.best_lines.push_back("best " + team.node + line.substr(line.rfind("best", 0) == 0 ? 4 : 0));
  }
  return out;
}

std::vector<A2aTeamReport> gather_team_reports(Bootstrap& job, const A2aTeamReport& mine) {
  const bool leader = job.team_rank() == 0;
  const std::string text =
      leader ? report_json(mine).dump(-1, ' ', false, Json::error_handler_t::replace) : std::string();
  const auto sizes = job.allgather_value("a2a.fleet.sizes", static_cast<std::uint64_t>(text.size()));
  const std::uint64_t width = *std::max_element(sizes.begin(), sizes.end());
  std::string padded = text;
  padded.resize(width, '\0');
  std::string all(width * sizes.size(), '\0');
  job.allgather("a2a.fleet.reports", padded.data(), all.data(), width);
  std::vector<A2aTeamReport> out;
  for (std::size_t r = 0; r < sizes.size(); ++r)
    if (sizes[r] > 0) {
      const Json j = Json::parse(all.substr(r * width, sizes[r]), nullptr, false);
      if (j.is_discarded())
        throw Error(ExitCode::runtime, "the team report of rank " + std::to_string(r) + " is not JSON");
      out.push_back(report_of(j));
    }
  return out;
}

std::vector<A2aFleetEntry> a2a_fleet(const std::vector<A2aTeamReport>& teams, const A2aFleetRules& rules) {
  std::vector<A2aFleetEntry> out;
  std::map<std::tuple<std::size_t, std::string, int>, std::size_t> index;  // (chunk, mode, size) -> out
  for (const auto& t : teams)
    for (std::size_t i = 0; i < t.rows.size(); ++i) {
      const Json& row = t.rows[i];
      const std::size_t chunk = row.at("chunk_bytes").get<std::size_t>();
      const auto key = std::make_tuple(chunk, t.modes[i], t.team.size);
      auto it = index.find(key);
      if (it == index.end()) {
        it = index.emplace(key, out.size()).first;
        A2aFleetEntry e;
        e.chunk_bytes = chunk;
        e.mode = t.modes[i];
        e.team_size = t.team.size;
        out.push_back(e);
      }
      const double p50 = row.at("time_us").at("p50").get<double>();
      if (row.at("wrong").get<std::uint64_t>() != 0 || !(p50 > 0)) {  // verified rows only
        out[it->second].unverified.push_back(t.team.node + " (ranks " + t.team.ranks + ")");
        continue;
      }
      A2aFleetTeam ft;
      ft.node = t.team.node;
      ft.ranks = t.team.ranks;
      ft.p50_us = p50;
      ft.p95_us = row.at("time_us").at("p95").get<double>();
      out[it->second].teams.push_back(ft);
    }
  for (auto& e : out) {
    if (e.teams.empty()) continue;
    std::vector<double> p50s;
    for (const auto& t : e.teams) p50s.push_back(t.p50_us);
    e.min_us = *std::min_element(p50s.begin(), p50s.end());
    e.max_us = *std::max_element(p50s.begin(), p50s.end());
    e.median_us = lower_median(p50s);
    for (std::size_t i = 0; i < e.teams.size(); ++i) {
      auto& t = e.teams[i];
      if (t.p50_us > e.teams[e.slowest].p50_us) e.slowest = i;
      t.ratio = t.p50_us / e.median_us;
      const double spread = std::max(0.0, t.p95_us / t.p50_us - 1);
      t.limit = rules.host_runtime ? rules.host_factor : 1 + rules.slow_margin + spread;
      t.slow = e.teams.size() > 1 && t.ratio > t.limit;
    }
  }
  return out;
}

std::string format_fleet(const A2aFleetEntry& e) {
  std::string s = "fleet  chunk " + std::to_string(e.chunk_bytes) + " B  " + e.mode + "  ";
  std::string failed;
  for (const auto& u : e.unverified) failed += (failed.empty() ? "; not verified: " : ", ") + u;
  if (e.teams.empty()) return s + "no verified row in the teams of " + std::to_string(e.team_size) + failed;
  if (e.teams.size() == 1)
    return s + "1 verified team of " + std::to_string(e.team_size) + " (" + e.teams[0].node + ", ranks " +
           e.teams[0].ranks + "): p50 " + fixed2(e.teams[0].p50_us) + " us, no other to compare with" +
           failed;
  const auto& slow = e.teams[e.slowest];
  return s + std::to_string(e.teams.size()) + " teams of " + std::to_string(e.team_size) + ": p50 min " +
         fixed2(e.min_us) + " / median " + fixed2(e.median_us) + " / max " + fixed2(e.max_us) +
         " us, slowest " + slow.node + " (ranks " + slow.ranks + ") " + fixed2(slow.ratio) + "x the median" +
         failed;
}

std::string format_slow_team(const A2aFleetEntry& e, const A2aFleetTeam& t) {
  return "slow_team " + t.node + " (ranks " + t.ranks + "): chunk " + std::to_string(e.chunk_bytes) + " B " +
         e.mode + " p50 " + fixed2(t.p50_us) + " us, " + fixed2(t.ratio) + "x the fleet median " +
         fixed2(e.median_us) + " us (limit " + fixed2(t.limit) + "x)";
}

Json to_json(const A2aFleetEntry& e) {
  Json teams = Json::array();
  for (const auto& t : e.teams)
    teams.push_back({{"node", t.node},
                     {"ranks", t.ranks},
                     {"p50_us", t.p50_us},
                     {"p95_us", t.p95_us},
                     {"ratio", t.ratio},
                     {"limit", t.limit},
                     {"slow", t.slow}});
  const bool any = !e.teams.empty();
  return {{"chunk_bytes", e.chunk_bytes},
          {"mode", e.mode},
          {"team_size", e.team_size},
          {"teams", teams},
          {"p50_min_us", any ? Json(e.min_us) : Json(nullptr)},
          {"p50_median_us", any ? Json(e.median_us) : Json(nullptr)},
          {"p50_max_us", any ? Json(e.max_us) : Json(nullptr)},
          {"slowest", any ? Json(e.teams[e.slowest].node) : Json(nullptr)},
          {"unverified", e.unverified}};
}

}  // namespace mori::symm
