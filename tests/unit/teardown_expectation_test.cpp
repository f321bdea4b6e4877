// SPDX-License-Identifier: MIT
// Which teardown outcomes are as expected (teardown/scenarios.hpp outcome_as_expected): a scenario's expected
// outcome, and for a race (no-sync: teardown while this rank's own writes may be in flight) an api_error or a
// crash from that device work too, never a hang, a leak, damage or a journal error
// (docs/mori-teardown-repro.md, "Races").
#include <gtest/gtest.h>

#include "mori/symm/teardown/scenarios.hpp"

namespace mori::symm {
namespace {

ScenarioSummary summary(const char* name, TeardownOutcome o) {
  ScenarioSummary s;
  s.name = name;
  s.world = 8;
  s.outcome = o;
  return s;
}

TEST(TeardownExpectation, NoSyncIsARaceThatMayFault) {
  const TeardownScenario* s = find_teardown_scenario("no-sync");
  ASSERT_NE(s, nullptr);
  EXPECT_TRUE(s->race);
  using O = TeardownOutcome;
  EXPECT_TRUE(outcome_as_expected(*s, O::ok));
  // The H100 at 8 ranks under MPS: final_sync -> CUDA_ERROR_ILLEGAL_ADDRESS (api_error); 4 x H200 before
  // final_sync was journalled: the rank ended early (crash).
  EXPECT_TRUE(outcome_as_expected(*s, O::api_error));
  EXPECT_TRUE(outcome_as_expected(*s, O::crash));
  for (O o : {O::hang, O::leak, O::damaged, O::journal_error})
    EXPECT_FALSE(outcome_as_expected(*s, o)) << to_string(o);
  EXPECT_STREQ(expected_text(*s), "ok|api_error|crash");
}

TEST(TeardownExpectation, OrdersThatAreNoRaceHoldToTheirOneOutcome) {
  using O = TeardownOutcome;
  for (const auto& s : teardown_scenarios()) {
    if (s.race) continue;
    EXPECT_TRUE(outcome_as_expected(s, s.expected)) << s.name;
    for (O o : {O::ok, O::api_error, O::crash, O::hang, O::leak}) {
      if (o != s.expected) {
        EXPECT_FALSE(outcome_as_expected(s, o)) << s.name << " " << to_string(o);
      }
    }
  }
  EXPECT_FALSE(find_teardown_scenario("ordered")->race);
}

TEST(TeardownExpectation, TheReportCountsARacesFaultAsExpected) {
  using O = TeardownOutcome;
  EXPECT_EQ(count_unexpected({summary("no-sync", O::api_error), summary("ordered", O::ok)}), 0);
  EXPECT_EQ(count_unexpected({summary("no-sync", O::hang)}), 1);
  EXPECT_EQ(count_unexpected({summary("ordered", O::api_error)}), 1);
  EXPECT_EQ(count_unexpected({summary("atexit", O::pending)}), 0);
  const Json j = scenarios_json(
      {summary("no-sync", O::api_error), summary("ordered", O::crash), summary("atexit", O::pending)});
  EXPECT_EQ(j[0]["expected"], "ok");
  EXPECT_EQ(j[0]["race"], true);
  EXPECT_EQ(j[0]["as_expected"], true);
  EXPECT_EQ(j[1]["race"], false);
  EXPECT_EQ(j[1]["as_expected"], false);
  EXPECT_TRUE(j[2]["as_expected"].is_null());
}

}  // namespace
}  // namespace mori::symm
