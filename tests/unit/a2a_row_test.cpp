// SPDX-License-Identifier: MIT
// The all-to-all row declared once (lib/include/mori/symm/a2a/row.hpp): its JSON keeps the keys and order the
// reports have always had, the printed table is the one mori-a2a printed before the table existed (the format
// strings below are that printer's), the schema holds every field with its role, and the helpers agree.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "mori/symm/a2a/row.hpp"
#include "mori/symm/a2a/summary.hpp"

using namespace mori::symm;

namespace {
A2aResult full_row() {
  A2aResult r;
  r.chunk_bytes = 262144;
  r.addressing = Addressing::lsa;
  r.sync = SyncMode::device;
  r.graph = true;
  r.graph_iters = 16;
  r.protocol = Protocol::direct;
  r.blocks_per_peer = 8;
  r.unroll = 8;
  r.launch = "programmatic";
  r.signal_scope = "device";
  r.source_cache = "evict_first";
  r.placement = "one_gpu";
  r.table_world = 8;
  r.table_device = "NVIDIA H200";
  r.iters = 320;
  r.time_us = {11.5, 11.87, 12.25, 13.0, 11.9, 20};
  r.push_only_us = 4.25;
  r.sync_only_us = 3.5;
  r.agg_bw_gbps = 1234.5;
  r.total_bw_gbps = 1413.75;
  r.algbw_gbps = 176.7;
  r.busbw_gbps = 154.6;
  r.ceiling = {1700.0, "sm_copy", true, 0.01, {{"sm_copy", true, 1, 1690.0, 8, 8, "normal"}}};
  r.physical = {3350.0, "HBM3 4.8 TB/s x 0.7", true};
  r.verified_epochs = 4;
  r.skew_us = 2.0;
  r.wrong = 3;
  return r;
}

// mori-a2a's printer before the row was declared once.
std::string old_header() {
  char b[512];
  std::snprintf(b, sizeof(b), "%10s %5s %6s %6s %5s %5s %9s %9s %9s %10s %10s %7s %9s %7s %s\n", "chunk",
                "addr", "sync", "proto", "graph", "bpp", "p50_us", "push_us", "sync_us", "total_GB/s",
                "ceil_GB/s", "ceil_%", "phys_GB/s", "#wrong", "notes");
  return b;
}

std::string old_line(const A2aResult& r, const std::string& notes) {
  char phys[32] = "-";
  if (r.physical.gbps) std::snprintf(phys, sizeof(phys), "%.0f", *r.physical.gbps);
  char b[512];
  std::snprintf(b, sizeof(b),
                "%9zuB %5s %6s %6s %5s %5d %9.2f %9.2f %9.2f %10.1f %10.1f %6.1f%% %9s %7llu%s\n",
                r.chunk_bytes, to_string(r.addressing), to_string(r.sync), to_string(r.protocol),
                r.graph ? std::to_string(r.graph_iters).c_str() : "-", r.blocks_per_peer, r.time_us.p50,
                r.push_only_us, r.sync_only_us, r.total_bw_gbps, r.ceiling.gbps,
                r.ceiling.gbps > 0 ? 100.0 * r.total_bw_gbps / r.ceiling.gbps : 0.0, phys,
                static_cast<unsigned long long>(r.wrong), notes.c_str());
  return b;
}
}  // namespace

TEST(A2aRow, JsonKeysInTheReportsOrder) {
  // mori.a2a/3 added team_size, team and launch_us; the others keep their order.
  const std::vector<std::string> keys = {"chunk_bytes",
                                         "addressing",
                                         "sync",
                                         "graph",
                                         "graph_iters",
                                         "protocol",
                                         "blocks_per_peer",
                                         "unroll",
                                         "launch",
                                         "signal_scope",
                                         "source_cache",
                                         "placement",
                                         "table_world",
                                         "table_device",
                                         "team_size",
                                         "team",
                                         "iters",
                                         "samples",
                                         "time_us",
                                         "launch_us",
                                         "push_only_us",
                                         "sync_only_us",
                                         "agg_bw_gbps",
                                         "total_bw_gbps",
                                         "algbw_gbps",
                                         "busbw_gbps",
                                         "ceiling_bw_gbps",
                                         "ceiling_kind",
                                         "ceiling_graph",
                                         "ceiling_spread",
                                         "ceilings",
                                         "ceiling_ratio",
                                         "physical_bw_gbps",
                                         "physical_source",
                                         "l2_resident",
                                         "verified_epochs",
                                         "skew_us",
                                         "wrong"};
  const Json j = to_json(full_row());
  std::vector<std::string> got;
  for (const auto& [k, v] : j.items()) got.push_back(k);
  EXPECT_EQ(got, keys);
  EXPECT_EQ(j["samples"], 20);
  EXPECT_EQ(j["time_us"].dump(), R"({"min":11.5,"p50":11.87,"p95":12.25,"max":13.0,"mean":11.9})");
  EXPECT_EQ(j["ceilings"][0].dump(),
            R"({"kind":"sm_copy","graph":true,"round":1,"gbps":1690.0,"blocks_per_peer":8,"unroll":8,)"
            R"("source_cache":"normal"})");
  EXPECT_DOUBLE_EQ(j["ceiling_ratio"].get<double>(), 1413.75 / 1700.0);
  EXPECT_EQ(j["wrong"], 3);
  A2aResult bare;
  bare.ceiling.samples = {{"copy_engine", false, 2, 10.0, 0, 0, ""}};
  const Json b = to_json(bare);
  EXPECT_TRUE(b["physical_bw_gbps"].is_null());
  EXPECT_EQ(b["ceiling_ratio"], 0.0);  // no ceiling measured
  EXPECT_TRUE(b["ceilings"][0]["blocks_per_peer"].is_null());
  EXPECT_TRUE(b["ceilings"][0]["source_cache"].is_null());
  EXPECT_TRUE(b["launch_us"].is_null());  // a row that timed no launch call
  A2aResult team = full_row();
  team.launch_us = 2.5;
  team.team_node = "nodeB";
  team.team_ranks = "4-7";
  team.team_size = 4;
  const Json t = to_json(team);
  EXPECT_EQ(t["launch_us"], 2.5);
  EXPECT_EQ(t["team"].dump(), R"({"node":"nodeB","ranks":"4-7"})");
  EXPECT_EQ(t["team_size"], 4);
}

TEST(A2aRow, TableIsThePrintersTable) {
  EXPECT_EQ(a2a_table_header(), old_header());
  A2aResult r = full_row();
  EXPECT_EQ(a2a_table_line(r, false), old_line(r, " L2-resident device-scope evict-first programmatic"));
  EXPECT_EQ(a2a_table_line(r, true),
            old_line(r, " L2-resident device-scope evict-first programmatic TIME-SLICED(no MPS)"));
  A2aResult host;  // eager, host sync, no physical limit, no ceiling
  host.chunk_bytes = 16;
  host.graph_iters = 16;  // eager (graph false): the column shows "-" whatever the count
  host.launch = "plain";
  EXPECT_EQ(a2a_table_line(host, false), old_line(host, ""));
  host.chunk_bytes = 1ull << 33;
  host.blocks_per_peer = 65535;
  host.time_us.p50 = 123456789.125;
  host.wrong = ~0ull;
  EXPECT_EQ(a2a_table_line(host, false), old_line(host, ""));
}

TEST(A2aRow, SchemaHoldsEveryFieldWithItsRole) {
  const Json s = a2a_row_schema();
  const auto& fields = a2a_row_fields();
  ASSERT_EQ(s["properties"].size(), fields.size());
  for (const auto& f : fields) {
    const Json& p = s["properties"][f.name];
    EXPECT_EQ(p["x-role"], to_string(f.role)) << f.name;
    EXPECT_FALSE(p["description"].get<std::string>().empty()) << f.name;
    EXPECT_EQ(p.contains("x-better"), f.better != Better::none) << f.name;
    const bool required =
        std::find(s["required"].begin(), s["required"].end(), Json(f.name)) != s["required"].end();
    EXPECT_EQ(required, f.required) << f.name;
  }
  // The gated metrics: what perf-check gated before the table existed (docs/perf-check.md "Metrics").
  std::vector<std::string> gated;
  for (const auto& f : fields)
    if (f.better != Better::none) gated.push_back(std::string(f.name) + ":" + to_string(f.better));
  EXPECT_EQ(gated,
            (std::vector<std::string>{"time_us:lower", "push_only_us:lower", "sync_only_us:lower",
                                      "agg_bw_gbps:higher", "total_bw_gbps:higher", "busbw_gbps:higher"}));
}

TEST(A2aRow, ModeAndRatioAreTheSummarys) {
  A2aResult r = full_row();
  r.wrong = 0;
  EXPECT_EQ(a2a_mode(r), "lsa device/direct graph 16");
  const auto best = a2a_best_modes({r});
  ASSERT_EQ(best.size(), 1u);
  EXPECT_EQ(best[0].mode, a2a_mode(r));
  EXPECT_DOUBLE_EQ(best[0].ceiling_ratio, a2a_ceiling_ratio(r));
  r.sync = SyncMode::host;
  r.graph = false;
  EXPECT_EQ(a2a_mode(r), "lsa host");
}
