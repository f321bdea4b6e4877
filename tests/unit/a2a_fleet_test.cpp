// SPDX-License-Identifier: MIT
// The fleet's rules (lib/include/mori/symm/a2a/fleet.hpp): teams of one size side by side per configuration,
// the lower median, the slow_team limits on a GPU (margin plus the team's own spread) and on the host runtime
// (3x), a team alone of its size never slow, teams with wrong elements listed and left out of the median.
#include <gtest/gtest.h>

#include "mori/symm/a2a/fleet.hpp"

using namespace mori::symm;

namespace {

A2aResult row(double p50, double p95, std::uint64_t wrong = 0, Addressing a = Addressing::lsa) {
  A2aResult r;
  r.chunk_bytes = 262144;
  r.addressing = a;
  r.sync = SyncMode::device;
  r.protocol = Protocol::direct;
  r.graph = true;
  r.graph_iters = 16;
  r.time_us.p50 = p50;
  r.time_us.p95 = p95;
  r.wrong = wrong;
  return r;
}

A2aTeamReport team(const std::string& node, const std::string& ranks, int size, std::vector<A2aResult> rows) {
  return a2a_team_report({node, ranks, size}, rows, false);
}

}  // namespace

TEST(A2aFleet, TeamReportStampsTheTeamOnEveryRowAndBestLine) {
  const auto t = team("nodeB", "4-7", 4, {row(10, 11)});
  ASSERT_EQ(t.rows.size(), 1u);
  EXPECT_EQ(t.rows[0]["team"]["node"], "nodeB");
  EXPECT_EQ(t.rows[0]["team"]["ranks"], "4-7");
  EXPECT_EQ(t.rows[0]["team_size"], 4);
  EXPECT_EQ(t.modes[0], "lsa device/direct graph 16");
  ASSERT_EQ(t.best_lines.size(), 1u);
  EXPECT_EQ(t.best_lines[0].rfind("best nodeB  chunk 262144 B: lsa device/direct graph 16", 0), 0u)
      << t.best_lines[0];
  EXPECT_EQ(t.best[0]["team"], "nodeB");
}

TEST(A2aFleet, OneSlowTeamOfTwoIsNamedAgainstTheLowerMedian) {
  const auto f = a2a_fleet(
      {team("nodeA", "0-3", 4, {row(10, 10.5)}), team("nodeB", "4-7", 4, {row(14, 14.2)})}, A2aFleetRules{});
  ASSERT_EQ(f.size(), 1u);
  const auto& e = f[0];
  EXPECT_DOUBLE_EQ(e.median_us, 10);  // two teams: the faster one
  EXPECT_DOUBLE_EQ(e.min_us, 10);
  EXPECT_DOUBLE_EQ(e.max_us, 14);
  ASSERT_EQ(e.teams.size(), 2u);
  EXPECT_EQ(e.teams[e.slowest].node, "nodeB");
  EXPECT_FALSE(e.teams[0].slow);
  // 1.4x the median against a limit of 1 + 0.25 + (14.2/14 - 1).
  EXPECT_NEAR(e.teams[1].limit, 1.25 + 0.2 / 14, 1e-12);
  EXPECT_TRUE(e.teams[1].slow);
  EXPECT_EQ(format_slow_team(e, e.teams[1]),
            "slow_team nodeB (ranks 4-7): chunk 262144 B lsa device/direct graph 16 p50 14.00 us, 1.40x the "
            "fleet median 10.00 us (limit 1.26x)");
  EXPECT_EQ(
      format_fleet(e),
      "fleet  chunk 262144 B  lsa device/direct graph 16  2 teams of 4: p50 min 10.00 / median 10.00 / max "
      "14.00 us, slowest nodeB (ranks 4-7) 1.40x the median");
}

TEST(A2aFleet, ATeamsOwnSpreadRaisesItsLimit) {
  // 1.4x the median, but its p95 is 2x its p50: within 1 + 0.25 + 1.
  const auto f = a2a_fleet({team("nodeA", "0-3", 4, {row(10, 10)}), team("nodeB", "4-7", 4, {row(14, 28)})},
                           A2aFleetRules{});
  EXPECT_FALSE(f[0].teams[1].slow);
}

TEST(A2aFleet, TheHostRuntimeAsksForThreeTimesTheMedian) {
  A2aFleetRules host;
  host.host_runtime = true;
  auto f = a2a_fleet({team("a", "0-3", 4, {row(10, 10)}), team("b", "4-7", 4, {row(29, 29)})}, host);
  EXPECT_FALSE(f[0].teams[1].slow);
  EXPECT_DOUBLE_EQ(f[0].teams[1].limit, 3.0);
  f = a2a_fleet({team("a", "0-3", 4, {row(10, 10)}), team("b", "4-7", 4, {row(31, 31)})}, host);
  EXPECT_TRUE(f[0].teams[1].slow);
}

TEST(A2aFleet, TheMedianOfManyIsNotMovedByOneSlowTeam) {
  std::vector<A2aTeamReport> teams;
  for (int i = 0; i < 15; ++i)
    teams.push_back(team("n" + std::to_string(i), std::to_string(i), 8, {row(10 + i * 0.01, 10.2)}));
  teams.push_back(team("bad", "15", 8, {row(100, 101)}));
  const auto f = a2a_fleet(teams, A2aFleetRules{});
  EXPECT_NEAR(f[0].median_us, 10.07, 1e-9);
  int slow = 0;
  for (const auto& t : f[0].teams) slow += t.slow;
  EXPECT_EQ(slow, 1);
  EXPECT_EQ(f[0].teams[f[0].slowest].node, "bad");
}

TEST(A2aFleet, TeamsOfAnotherSizeAreComparedApartAndAloneNeverSlow) {
  const auto f = a2a_fleet({team("nodeA", "0-3", 4, {row(10, 10)}), team("nodeB", "4-6", 3, {row(50, 50)})},
                           A2aFleetRules{});
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].team_size, 4);
  EXPECT_EQ(f[1].team_size, 3);
  EXPECT_FALSE(f[1].teams[0].slow);
  EXPECT_NE(format_fleet(f[1]).find("1 verified team of 3 (nodeB, ranks 4-6)"), std::string::npos)
      << format_fleet(f[1]);
}

TEST(A2aFleet, ATeamWithWrongElementsIsListedAndLeftOutOfTheMedian) {
  const auto f = a2a_fleet({team("nodeA", "0-3", 4, {row(10, 10)}), team("nodeB", "4-7", 4, {row(1, 1, 5)}),
                            team("nodeC", "8-11", 4, {row(11, 11)})},
                           A2aFleetRules{});
  ASSERT_EQ(f[0].teams.size(), 2u);
  EXPECT_EQ(f[0].unverified, std::vector<std::string>{"nodeB (ranks 4-7)"});
  EXPECT_DOUBLE_EQ(f[0].min_us, 10);
  EXPECT_NE(format_fleet(f[0]).find("; not verified: nodeB (ranks 4-7)"), std::string::npos);
  EXPECT_EQ(to_json(f[0])["unverified"][0], "nodeB (ranks 4-7)");
}

TEST(A2aFleet, ConfigurationsStayApartAndInTheirOrder) {
  const auto f = a2a_fleet({team("a", "0-1", 2, {row(10, 10), row(12, 12, 0, Addressing::ptr)}),
                            team("b", "2-3", 2, {row(10, 10), row(12, 12, 0, Addressing::ptr)})},
                           A2aFleetRules{});
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].mode, "lsa device/direct graph 16");
  EXPECT_EQ(f[1].mode, "ptr device/direct graph 16");
  EXPECT_EQ(f[1].teams.size(), 2u);
}
