// SPDX-License-Identifier: MIT
// mori-probe --health verdicts (lib/include/mori/symm/health/health.hpp) over made-up facts.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <string>

#include "mori/symm/a2a/fleet.hpp"
#include "mori/symm/base/error.hpp"
#include "mori/symm/health/health.hpp"

using namespace mori::symm;

namespace {

PairFact row(int src, int dst, double write, double read, double lat, const char* addressing = "ptr") {
  PairFact r;
  r.src = src;
  r.dst = dst;
  r.addressing = addressing;
  r.write_gbps = write;
  r.read_gbps = read;
  r.latency_us = lat;
  r.src_pci = "0000:0" + std::to_string(src) + ":00.0";
  r.dst_pci = "0000:0" + std::to_string(dst) + ":00.0";
  r.links = 18;
  return r;
}

// Every ordered pair of n GPUs at the same figures.
std::vector<PairFact> even(int n, double write = 350, double read = 350, double lat = 1.6) {
  std::vector<PairFact> v;
  for (int s = 0; s < n; ++s)
    for (int d = 0; d < n; ++d)
      if (s != d) v.push_back(row(s, d, write, read, lat));
  return v;
}

const HealthCheck* find_check(const std::vector<HealthCheck>& c, const std::string& id,
                              const std::string& subject) {
  for (const auto& x : c)
    if (x.id == id && x.subject == subject) return &x;
  return nullptr;
}

int count(const std::vector<HealthCheck>& c, Verdict v) {
  int n = 0;
  for (const auto& x : c) n += x.verdict == v;
  return n;
}

Json expectations_doc(const std::vector<Json>& entries) {
  Json doc = {{"schema", "mori.expectations/1"}, {"entries", Json::array()}};
  for (const auto& e : entries) doc["entries"].push_back(e);
  return doc;
}

Json h200_write_ratio() {
  return {
      {"devices", {"H200"}}, {"interconnect", "nvlink"},   {"check", "write_over_copy_engine"}, {"min", 0.90},
      {"max", 1.05},         {"source", "results/x.json"}, {"source_kind", "evidence"}};
}

}  // namespace

TEST(Health, PlacementFromRanksAndDevices) {
  EXPECT_EQ(node_layout_of(4, 1, true), NodeLayout::host);
  EXPECT_EQ(node_layout_of(4, 1, false), NodeLayout::shared_device);
  EXPECT_EQ(node_layout_of(2, 2, false), NodeLayout::two_devices);
  EXPECT_EQ(node_layout_of(8, 8, false), NodeLayout::several_devices);
  EXPECT_EQ(node_layout_of(8, 4, false), NodeLayout::shared_device);
}

TEST(Health, EvenNodePasses) {
  const auto c = check_pairs(even(4), NodeLayout::several_devices, OutlierLimits{});
  EXPECT_EQ(count(c, Verdict::fail), 0);
  EXPECT_EQ(count(c, Verdict::warn), 0);
  EXPECT_FALSE(has_failure(c));
  // 12 pairs x 3 figures, plus the verified-writes and answered-ping-pong checks.
  EXPECT_EQ(c.size(), 12u * 3 + 2);
}

TEST(Health, DegradedPairFailsAndIsNamed) {
  auto rows = even(4);
  for (auto& r : rows)
    if (r.src == 1 && r.dst == 2) r.write_gbps = 0.80 * 350, r.links = 12;
  const auto c = check_pairs(rows, NodeLayout::several_devices, OutlierLimits{});
  const auto* x = find_check(c, "pair.write_gbps", "1->2 ptr");
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(x->verdict, Verdict::fail);
  EXPECT_NE(x->detail.find("0000:01:00.0 -> 0000:02:00.0"), std::string::npos) << x->detail;
  EXPECT_NE(x->detail.find("12 NVLink links"), std::string::npos) << x->detail;
  EXPECT_EQ(count(c, Verdict::fail), 1);
  EXPECT_TRUE(has_failure(c));
}

TEST(Health, ThresholdsWarnThenFail) {
  auto rows = even(3);
  rows[0].read_gbps = 0.90 * 350;   // below 0.92: warn
  rows[1].latency_us = 1.6 / 0.90;  // above 1/0.92: warn
  rows[2].latency_us = 1.6 / 0.80;  // above 1/0.85: fail
  const auto c = check_pairs(rows, NodeLayout::several_devices, OutlierLimits{});
  EXPECT_EQ(find_check(c, "pair.read_gbps", "0->1 ptr")->verdict, Verdict::warn);
  EXPECT_EQ(find_check(c, "pair.latency_us", "0->2 ptr")->verdict, Verdict::warn);
  EXPECT_EQ(find_check(c, "pair.latency_us", "1->0 ptr")->verdict, Verdict::fail);
  EXPECT_EQ(find_check(c, "pair.write_gbps", "0->1 ptr")->verdict, Verdict::pass);
}

TEST(Health, TwoGpusCompareTheDirections) {
  std::vector<PairFact> rows = {row(0, 1, 350, 350, 1.6), row(1, 0, 280, 350, 1.6)};
  const auto c = check_pairs(rows, NodeLayout::two_devices, OutlierLimits{});
  const auto* w = find_check(c, "pair.write_gbps", "0<->1 ptr");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->verdict, Verdict::fail);
  EXPECT_NEAR(*w->measured, 0.8, 1e-9);
  EXPECT_NE(w->detail.find("1->0 ptr"), std::string::npos) << w->detail;
  EXPECT_EQ(find_check(c, "pair.read_gbps", "0<->1 ptr")->verdict, Verdict::pass);
}

TEST(Health, HostRuntimeOnlyGrossOutliersAndLatencyNeverFails) {
  auto rows = even(4, 10, 10, 5);
  rows[0].write_gbps = 5;    // 0.5 x: noise on shared cores, passes
  rows[1].latency_us = 500;  // 100 x: at most a warning
  rows[2].read_gbps = 0.3;   // 0.03 x: fails
  const auto c = check_pairs(rows, NodeLayout::host, host_outlier_limits());
  EXPECT_EQ(find_check(c, "pair.write_gbps", "0->1 ptr")->verdict, Verdict::pass);
  EXPECT_EQ(find_check(c, "pair.latency_us", "0->2 ptr")->verdict, Verdict::warn);
  const auto* r = find_check(c, "pair.read_gbps", "0->3 ptr");
  EXPECT_EQ(r->verdict, Verdict::fail);
  EXPECT_NE(r->detail.find("ranks 0 and 3"), std::string::npos) << r->detail;
}

TEST(Health, WrongWriteAndTimeoutFail) {
  auto rows = even(3);
  rows[1].verified = false;
  rows[2].timed_out = true;
  const auto c = check_pairs(rows, NodeLayout::several_devices, OutlierLimits{});
  EXPECT_EQ(find_check(c, "pair.writes_verified", "every pair")->verdict, Verdict::fail);
  EXPECT_EQ(find_check(c, "pair.pingpongs_answered", "every pair")->verdict, Verdict::fail);
}

TEST(Health, PairFactsFromMatrixRows) {
  MatrixRow r;
  r.src = 0;
  r.dst = 1;
  r.lsa = true;
  r.write.gbps = Measured::of(351.0);
  r.write.copy_engine_gbps = Measured::of(380.0);
  r.write.verified = true;
  r.write.kernel.variant = "bulk/2x/t16k";
  r.write.kernel.requested = WriteKernel::bulk;
  r.write.kernel.kernel = WriteKernel::plain;  // what ran (no bulk copies on this device)
  r.read_gbps = Measured::none("not measured");
  r.latency_us_p50 = Measured::none("the ping-pong timed out at round 3 of 1000 (bound 20 s)");
  r.timed_out = true;
  PeerMatrix m;
  m.rows = {r};
  const auto f = pair_facts(m);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(f[0].addressing, "lsa");
  EXPECT_DOUBLE_EQ(*f[0].write_gbps, 351.0);
  EXPECT_FALSE(f[0].read_gbps.has_value());
  EXPECT_FALSE(f[0].latency_us.has_value());
  EXPECT_DOUBLE_EQ(*f[0].copy_engine_gbps, 380.0);
  EXPECT_TRUE(f[0].timed_out);
  EXPECT_TRUE(f[0].verified);
  // The kernel the row recorded, not one resolved again from the options.
  EXPECT_EQ(f[0].write_kernel, "bulk/2x/t16k (ran plain)");
}

TEST(Health, LinksDownCountersAndXid) {
  LinkSnapshot ok;
  ok.known = true;
  ok.links_up = 18;
  ok.replay_errors = 5;
  ok.crc_errors = 0;
  ok.xid_events = 0;
  auto after = ok;
  EXPECT_EQ(count(check_links({{"a", ok, after}}, 2), Verdict::fail), 0);
  after.replay_errors = 6;
  after.links_up = 17;
  after.links_down = 1;
  after.xid_events = 1;
  const auto c = check_links({{"a", ok, after}}, 2);
  EXPECT_EQ(find_check(c, "nvlink.links_up", "GPU a")->verdict, Verdict::fail);
  EXPECT_EQ(find_check(c, "nvlink.replay_errors", "GPU a")->verdict, Verdict::fail);
  EXPECT_EQ(find_check(c, "nvlink.crc_errors", "GPU a")->verdict, Verdict::pass);
  EXPECT_EQ(find_check(c, "xid.events", "GPU a")->verdict, Verdict::fail);
  // Without NVML every link check is no_reference, with the reason.
  LinkSnapshot none;
  none.why = "host runtime: no NVML";
  const auto n = check_links({{"host", none, none}}, 1);
  EXPECT_EQ(count(n, Verdict::no_reference), static_cast<int>(n.size()));
  EXPECT_EQ(n[0].detail, "host runtime: no NVML");
}

TEST(Health, DiagnosisErrorFails) {
  EXPECT_EQ(check_diagnoses(Json::array())[0].verdict, Verdict::pass);
  const Json d = {{{"id", "fabric_attribute_lies"}, {"severity", "warning"}}};
  EXPECT_EQ(check_diagnoses(d)[0].verdict, Verdict::pass);
  const Json e = {{{"id", "fd_limit_low"}, {"severity", "error"}}};
  const auto c = check_diagnoses(e);
  EXPECT_EQ(c[0].verdict, Verdict::fail);
  EXPECT_NE(c[0].detail.find("fd_limit_low"), std::string::npos);
}

TEST(Health, AllToAllVerifiedOrNotRun) {
  A2aFact ok{true, "", 4, 1 << 20, "device", false, 100.0, 0, "", "", {}, ""};
  A2aFact bad = ok;
  bad.wrong = 3;
  bad.wrong_ranks = {1, 2};
  bad.wrong_by = "rank 1,2";
  A2aFact skipped;
  skipped.not_run = "one rank: no peers";
  const auto c = check_a2a({ok, bad, skipped});
  EXPECT_EQ(c[0].verdict, Verdict::pass);
  EXPECT_EQ(c[1].verdict, Verdict::fail);
  EXPECT_EQ(c[1].detail, "3 wrong element(s), received by rank 1,2");
  EXPECT_EQ(c[2].verdict, Verdict::no_reference);
  EXPECT_NE(c[2].detail.find("no peers"), std::string::npos);
}

// On a job of several nodes each node's fact names it; a run that failed is a fail naming the error.
TEST(Health, AllToAllPerNodeNamesTheNode) {
  A2aFact a{true, "", 4, 1 << 20, "device", false, 100.0, 0, "nodeA", "", {}, ""};
  A2aFact b = a;
  b.node = "nodeB";
  b.ran = false;
  b.error = "the window's rendezvous failed";
  const auto c = check_a2a({a, b});
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].subject, "all-to-all 1048576 B device world 4 on nodeA");
  EXPECT_EQ(c[0].verdict, Verdict::pass);
  EXPECT_EQ(c[1].subject, "all-to-all on nodeB");
  EXPECT_EQ(c[1].verdict, Verdict::fail);
  EXPECT_EQ(c[1].detail, "failed: the window's rendezvous failed");
  a.node.clear();
  EXPECT_EQ(a2a_subject(a), "all-to-all 1048576 B device world 4");  // one node: as before
}

TEST(Health, ExpectationsParseAndRejectNamingTheFile) {
  const auto e = parse_expectations(expectations_doc({h200_write_ratio()}), "site.json");
  ASSERT_EQ(e.entries.size(), 1u);
  EXPECT_TRUE(e.entries[0].higher_is_better);
  EXPECT_THROW(parse_expectations(Json::array(), "a.json"), UsageError);
  EXPECT_THROW(parse_expectations({{"schema", "mori.expectations/2"}, {"entries", Json::array()}}, "a.json"),
               UsageError);
  auto bad = h200_write_ratio();
  bad["min"] = 2;  // above max
  EXPECT_THROW(parse_expectations(expectations_doc({bad}), "a.json"), UsageError);
  bad = h200_write_ratio();
  bad["chek"] = "x";
  try {
    parse_expectations(expectations_doc({bad}), "site.json");
    FAIL() << "an unknown field was accepted";
  } catch (const UsageError& x) {
    EXPECT_NE(std::string(x.what()).find("site.json"), std::string::npos) << x.what();
    EXPECT_NE(std::string(x.what()).find("chek"), std::string::npos) << x.what();
  }
  bad = h200_write_ratio();
  bad["check"] = "speed";
  EXPECT_THROW(parse_expectations(expectations_doc({bad}), "a.json"), UsageError);
  bad = h200_write_ratio();
  bad.erase("min");
  bad.erase("max");
  EXPECT_THROW(parse_expectations(expectations_doc({bad}), "a.json"), UsageError);
}

TEST(Health, WriteOverCopyEngineGoalOnH200) {
  const auto e = parse_expectations(expectations_doc({h200_write_ratio()}), "x.json");
  auto r = row(0, 1, 366, 370, 1.6);
  r.copy_engine_gbps = 393;  // 0.931: passes
  r.write_kernel = "plain/4x/u4 (ran plain)";
  auto c = check_expectations({r}, "NVIDIA H200", false, e);
  const auto* x = find_check(c, "expect.write_over_copy_engine", "0->1 ptr");
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(x->verdict, Verdict::pass);
  EXPECT_NE(x->detail.find("plain/4x/u4"), std::string::npos) << x->detail;
  EXPECT_NE(x->source.find("results/x.json"), std::string::npos);
  r.write_gbps = 0.85 * 393;  // below 0.90: fails
  c = check_expectations({r}, "NVIDIA H200", false, e);
  EXPECT_EQ(find_check(c, "expect.write_over_copy_engine", "0->1 ptr")->verdict, Verdict::fail);
  r.write_gbps = 1.2 * 393;  // above 1.05: the copy engine is no ceiling
  c = check_expectations({r}, "NVIDIA H200", false, e);
  EXPECT_EQ(find_check(c, "expect.write_over_copy_engine", "0->1 ptr")->verdict, Verdict::warn);
  // Checks without an entry are no_reference, never pass.
  EXPECT_EQ(find_check(c, "expect.write_gbps", "0->1 ptr")->verdict, Verdict::no_reference);
}

TEST(Health, DeviceWithoutExpectationsIsNoReference) {
  const auto e = parse_expectations(expectations_doc({h200_write_ratio()}), "x.json");
  auto r = row(0, 1, 300, 300, 2);
  r.copy_engine_gbps = 320;
  const auto c = check_expectations({r}, "AMD Instinct MI355X", false, e);
  EXPECT_EQ(count(c, Verdict::no_reference), static_cast<int>(c.size()));
  EXPECT_EQ(count(c, Verdict::pass), 0);
}

TEST(Health, OnlyALimitIsNoReferenceWithinIt) {
  Json lim = {{"devices", {"H100 80GB HBM3"}},
              {"interconnect", "nvlink"},
              {"check", "write_gbps"},
              {"max", 450},
              {"source", "https://example.invalid/h100"},
              {"source_kind", "published"}};
  const auto e = parse_expectations(expectations_doc({lim}), "x.json");
  EXPECT_EQ(judge("expect.write_gbps", "p", 400.0, "GB/s", &e.entries[0]).verdict, Verdict::no_reference);
  EXPECT_EQ(judge("expect.write_gbps", "p", 500.0, "GB/s", &e.entries[0]).verdict, Verdict::warn);
  EXPECT_EQ(judge("expect.write_gbps", "p", std::nullopt, "GB/s", &e.entries[0]).verdict,
            Verdict::no_reference);
}

TEST(Health, LatencyExpectationFailsAboveMax) {
  Json lat = {{"devices", {"H200"}}, {"interconnect", "nvlink"},   {"check", "latency_us_p50"},
              {"max", 2.0},          {"source", "results/y.json"}, {"source_kind", "evidence"}};
  const auto e = parse_expectations(expectations_doc({lat}), "x.json");
  EXPECT_FALSE(e.entries[0].higher_is_better);
  EXPECT_EQ(judge("expect.latency_us_p50", "p", 1.6, "us", &e.entries[0]).verdict, Verdict::pass);
  EXPECT_EQ(judge("expect.latency_us_p50", "p", 2.5, "us", &e.entries[0]).verdict, Verdict::fail);
}

TEST(Health, SiteFileOnTopReplacesOursOfTheSameKey) {
  const auto ours = parse_expectations(expectations_doc({h200_write_ratio()}), "default.json");
  auto mine = h200_write_ratio();
  mine["min"] = 0.95;
  mine["source"] = "site evidence";
  const auto site = parse_expectations(expectations_doc({mine}), "site.json");
  const auto m = merge_expectations(ours, site);
  ASSERT_EQ(m.entries.size(), 1u);
  EXPECT_EQ(m.entries[0].source, "site evidence");
  EXPECT_EQ(m.files, (std::vector<std::string>{"default.json", "site.json"}));
  const auto* x = find_expectation(m, "NVIDIA H200", "nvlink", "write_over_copy_engine");
  ASSERT_NE(x, nullptr);
  EXPECT_DOUBLE_EQ(*x->min, 0.95);
  EXPECT_EQ(find_expectation(m, "NVIDIA H200", "same-device", "write_over_copy_engine"), nullptr);
}

TEST(Health, A2aExpectationMatchesWorldAndChunk) {
  Json a = {{"devices", {"H200"}},
            {"interconnect", "same-device"},
            {"check", "a2a_agg_bw_gbps"},
            {"min", 1440},
            {"world", 8},
            {"chunk_bytes", 16777216},
            {"source", "results/h200/a2a-w8-r1.json"},
            {"source_kind", "evidence"}};
  const auto e = parse_expectations(expectations_doc({a}), "x.json");
  A2aFact f{true, "", 8, 16777216, "device", false, 1700.0, 0, "", "", {}, ""};
  auto c = check_a2a_expectations({f}, "NVIDIA H200", "same-device", e);
  EXPECT_EQ(c[0].verdict, Verdict::pass);
  f.agg_bw_gbps = 1000;
  c = check_a2a_expectations({f}, "NVIDIA H200", "same-device", e);
  EXPECT_EQ(c[0].verdict, Verdict::fail);
  f.world = 4;  // another world: no figure for it
  c = check_a2a_expectations({f}, "NVIDIA H200", "same-device", e);
  EXPECT_EQ(c[0].verdict, Verdict::no_reference);
}

TEST(Health, CommittedExpectationsParseAndCiteTheirSources) {
  std::ifstream f(MORI_RESULTS_DIR "/expectations/default.json");
  ASSERT_TRUE(f.good());
  const std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const auto e = parse_expectations(Json::parse(text), "default.json");
  ASSERT_FALSE(e.entries.empty());
  for (const auto& x : e.entries) {
    if (x.source_kind == "published") {
      EXPECT_EQ(x.source.rfind("https://", 0), 0u) << "a published figure without its address: " << x.source;
    }
    if (x.source_kind == "evidence") {
      EXPECT_EQ(x.source.rfind("results/", 0), 0u) << x.source;
    }
  }
  // The goal the issue restates: SM writes through the window >= 0.90 x the copy engine on the H200.
  const auto* goal = find_expectation(e, "NVIDIA H200", "nvlink", "write_over_copy_engine");
  ASSERT_NE(goal, nullptr);
  EXPECT_DOUBLE_EQ(*goal->min, 0.90);
  EXPECT_EQ(find_expectation(e, "AMD Instinct MI355X", "peer", "write_gbps"), nullptr);
}

TEST(Health, FormatListsWhatDidNotPassAndCounts) {
  auto rows = even(3);
  rows[0].write_gbps = 100;
  const auto s = format_health(check_pairs(rows, NodeLayout::several_devices, OutlierLimits{}));
  EXPECT_NE(s.find("fail  pair.write_gbps  0->1 ptr"), std::string::npos) << s;
  EXPECT_NE(s.find("pair.write_gbps: 5 pass 1 fail"), std::string::npos) << s;
  const Json j = to_json(check_diagnoses(Json::array()));
  EXPECT_EQ(j[0]["verdict"], "pass");
  EXPECT_EQ(j[0]["measured"], 0.0);
}

// ---- The fleet (docs/mori-probe.md "Health on many nodes")

namespace {
NodeFacts node_facts(const std::string& name, int gpus, const std::string& driver) {
  return {name, "0-7", gpus, "NVIDIA H100 80GB HBM3", driver, "13000", "fabric"};
}
}  // namespace

TEST(Health, FleetNamesTheOneNodeThatDiffersFromTheMajority) {
  const auto checks =
      check_fleet({node_facts("a", 8, "580.1"), node_facts("b", 7, "580.1"), node_facts("c", 8, "580.1")});
  std::vector<std::string> failed;
  for (const auto& c : checks)
    if (c.verdict == Verdict::fail) failed.push_back(c.id + "@" + c.node);
  EXPECT_EQ(failed, std::vector<std::string>{"fleet.gpu_count@b"});
  for (const auto& c : checks)
    if (c.verdict == Verdict::fail) {
      EXPECT_EQ(c.detail, "GPUs '7', 2 of 3 nodes have '8'");
    }
  EXPECT_EQ(checks.size(),
            5u);  // gpu_count fails on b; model, driver, runtime and handle type pass once each
}

TEST(Health, FleetNamesTheNodeWhoseHandleTypeDiffers) {
  auto odd = node_facts("b", 8, "580.1");
  odd.handle = "posix_fd";
  const auto checks = check_fleet({node_facts("a", 8, "580.1"), odd, node_facts("c", 8, "580.1")});
  std::vector<std::string> failed;
  for (const auto& c : checks)
    if (c.verdict == Verdict::fail) failed.push_back(c.id + "@" + c.node + ": " + c.detail);
  EXPECT_EQ(failed, std::vector<std::string>{
                        "fleet.handle_type@b: handle type 'posix_fd', 2 of 3 nodes have 'fabric'"});
}

namespace {
A2aFact node_a2a(const std::string& node, int world, double gbps) {
  A2aFact f;
  f.ran = true;
  f.node = node;
  f.world = world;
  f.agg_bw_gbps = gbps;
  return f;
}
}  // namespace

TEST(Health, FleetA2aSlowNamesTheNodePastTheMarginOfItsSize) {
  // Four nodes of 8: times 1, 1, 1.1 and 1.5 (1 / bandwidth); lower median 1; margin 0.25: d alone is slow.
  // A node of 7 is compared with nobody.
  const std::vector<A2aFact> nodes = {node_a2a("a", 8, 100), node_a2a("b", 8, 100),
                                      node_a2a("c", 8, 100 / 1.1), node_a2a("d", 8, 100 / 1.5),
                                      node_a2a("e", 7, 10)};
  const auto checks = check_fleet_a2a(nodes, A2aFleetRules{});
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_EQ(checks[0].id, "fleet.a2a_slow");
  EXPECT_EQ(checks[0].node, "d");
  EXPECT_EQ(checks[0].verdict, Verdict::fail);
  EXPECT_NEAR(*checks[0].measured, 1.5, 1e-9);
}

TEST(Health, FleetA2aSlowOnTheHostRuntimeWarnsPastThreeTimes) {
  A2aFleetRules host;
  host.host_runtime = true;
  const auto two = check_fleet_a2a({node_a2a("a", 2, 30), node_a2a("b", 2, 12)}, host);  // 2.5x: no flag
  ASSERT_EQ(two.size(), 1u);
  EXPECT_EQ(two[0].verdict, Verdict::pass);
  EXPECT_EQ(two[0].node, "");
  const auto slow = check_fleet_a2a({node_a2a("a", 2, 30), node_a2a("b", 2, 3)}, host);  // 10x: a warning
  ASSERT_EQ(slow.size(), 1u);
  EXPECT_EQ(slow[0].verdict, Verdict::warn);
  EXPECT_EQ(slow[0].node, "b");
  // One node, a failed or unmeasured one: nothing to compare.
  auto failed = node_a2a("b", 2, 1);
  failed.error = "lost";
  EXPECT_TRUE(check_fleet_a2a({node_a2a("a", 2, 30), failed}, host).empty());
  EXPECT_TRUE(check_fleet_a2a({node_a2a("a", 2, 30)}, A2aFleetRules{}).empty());
}

TEST(Health, FleetWithoutAMajorityFailsEveryNode) {
  const auto checks = check_fleet({node_facts("a", 8, "580.1"), node_facts("b", 8, "575.0")});
  int fails = 0;
  for (const auto& c : checks)
    if (c.id == "fleet.driver_version") {
      EXPECT_EQ(c.verdict, Verdict::fail);
      EXPECT_NE(c.detail.find("no value holds a majority"), std::string::npos);
      ++fails;
    }
  EXPECT_EQ(fails, 2);
  EXPECT_TRUE(check_fleet({node_facts("alone", 8, "580.1")}).empty());
}

TEST(Health, NodeHealthIsTheWorstOfItsChecks) {
  const std::vector<NodeFacts> nodes = {node_facts("a", 8, "x"), node_facts("b", 8, "x"),
                                        node_facts("c", 8, "x")};
  std::vector<HealthCheck> checks = {
      {"pair.write_gbps", "0->1", Verdict::warn, 1.0, "GB/s", "", "", "", "a"},
      {"a2a.verified", "all-to-all", Verdict::fail, 3.0, "count", "", "", "", "b"},
      {"a2a.verified", "all-to-all", Verdict::fail, 3.0, "count", "", "", "", "b"},
      {"doctor.no_error", "every rank", Verdict::fail, 1.0, "count", "", "", "", ""}};
  const auto h = node_health(nodes, checks);
  ASSERT_EQ(h.size(), 3u);
  EXPECT_EQ(h[0].verdict, Verdict::warn);
  EXPECT_EQ(h[1].verdict, Verdict::fail);
  EXPECT_EQ(h[1].failing, std::vector<std::string>{"a2a.verified"});
  EXPECT_EQ(h[2].verdict, Verdict::pass);  // a check of the whole job names no node
  EXPECT_EQ(failing_nodes(h), std::vector<std::string>{"b"});
  EXPECT_NE(format_node_health(h).find("a2a.verified"), std::string::npos);
  EXPECT_EQ(to_json(h[1])["failing"][0], "a2a.verified");
}
