// SPDX-License-Identifier: MIT
// The fleet: mori-a2a on a job of several nodes (docs/mori-a2a.md "Many nodes"). The window cannot span
// load/store teams (a peer outside the team is not addressable by a store), so such a job runs one all-to-all
// within every team, all teams at once (A2aBench::run with the job's Bootstrap), and this header gathers what
// each team measured and sets the teams side by side: per configuration the spread of p50 over the teams of
// one size, the slowest team by its node, and the teams slower than their siblings by more than the rule
// allows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "mori/symm/a2a/types.hpp"
#include "mori/symm/base/json.hpp"

namespace mori::symm {

class Bootstrap;

// One load/store team as users name it.
struct A2aTeam {
  std::string node;   // the node name of its ranks (the host, or --node-id / MORI_NODE_ID)
  std::string ranks;  // its ranks in the job, as ranges: "0-3"
  int size = 0;
};

// This rank's team in the job.
A2aTeam a2a_team_of(const Bootstrap& job);
// Every row gains the team's node, ranks and size.
void stamp_team(std::vector<A2aResult>& rows, const A2aTeam& team);

// What one team measured, as its first rank sends it to the job.
struct A2aTeamReport {
  A2aTeam team;
  std::vector<Json> rows;          // to_json of each row, in the team's order
  std::vector<std::string> modes;  // a2a_mode of each row
  std::vector<std::string> lines;  // the printed table's line of each row
  std::vector<Json> best;          // to_json of each chunk's best mode, with "team": the node
  std::vector<std::string> best_lines;
  std::uint64_t wrong = 0;
  std::vector<int> wrong_ranks;  // the job's ranks that received wrong elements in any row, ascending
  std::string plan_note;         // the plan's note on the automatic tables (A2aBench::plan_note)
};

// The report of this team's rows (stamped with the team) and their best modes; time_sliced as the table says.
A2aTeamReport a2a_team_report(const A2aTeam& team, const std::vector<A2aResult>& rows, bool time_sliced);

// Collective over job: every team's report, on every rank, in the order of the teams' first ranks (each
// team's first rank sends its own; a bounded allgather of the sizes, then of the texts).
std::vector<A2aTeamReport> gather_team_reports(Bootstrap& job, const A2aTeamReport& mine);

// When a team is slow against its siblings: on a GPU, a p50 above the fleet median by more than slow_margin
// plus the team's own spread (p95 / p50 - 1); on the host runtime, where CPU contention is not a slow node,
// above host_factor times the median.
struct A2aFleetRules {
  double slow_margin = 0.25;
  bool host_runtime = false;
  double host_factor = 3.0;
};

struct A2aFleetTeam {
  std::string node, ranks;
  double p50_us = 0, p95_us = 0;
  double ratio = 0;  // p50 / the fleet median
  double limit = 0;  // the ratio above which it is slow
  bool slow = false;
};

// One configuration (chunk, mode) over the teams of one size.
struct A2aFleetEntry {
  std::size_t chunk_bytes = 0;
  std::string mode;  // "lsa device/direct graph 16"
  int team_size = 0;
  std::vector<A2aFleetTeam> teams;  // in team order; verified rows only
  std::vector<std::string>
      unverified;  // "nodeB (ranks 4-7)": the teams of this size whose row has wrong elements
  double min_us = 0, median_us = 0, max_us = 0;
  std::size_t slowest = 0;  // index into teams
};

// Per configuration and team size, in the order the configurations first appear: the teams' verified rows
// side by side. The median is the lower median (with two teams, the faster one), so that one slow team of two
// is set against the other; a team alone of its size is listed and never slow.
std::vector<A2aFleetEntry> a2a_fleet(const std::vector<A2aTeamReport>& teams, const A2aFleetRules& rules);

// "fleet  chunk 262144 B  lsa device/direct graph 16  2 teams of 4: p50 min 11.20 / median 11.20 / max 12.10
// us, slowest nodeB (ranks 4-7) 1.08x the median"
std::string format_fleet(const A2aFleetEntry& e);
// "slow_team nodeB (ranks 4-7): chunk 262144 B lsa device/direct graph 16 p50 120.50 us, 10.76x the fleet
// median 11.20 us (limit 3.00x)"
std::string format_slow_team(const A2aFleetEntry& e, const A2aFleetTeam& t);
Json to_json(const A2aFleetEntry& e);

}  // namespace mori::symm
