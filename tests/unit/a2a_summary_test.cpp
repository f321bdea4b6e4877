// SPDX-License-Identifier: MIT
// The main job's conclusion (lib/include/mori/symm/a2a/summary.hpp): the default graph length and the best
// mode per chunk.
#include <gtest/gtest.h>

#include "mori/symm/a2a/summary.hpp"

using namespace mori::symm;

namespace {
A2aResult row(std::size_t chunk, Addressing a, SyncMode s, Protocol p, int graph, double p50, double gbps,
              double ceil, std::uint64_t wrong = 0) {
  A2aResult r;
  r.chunk_bytes = chunk;
  r.addressing = a;
  r.sync = s;
  r.protocol = p;
  r.graph = graph > 0;
  r.graph_iters = graph;
  r.time_us.p50 = p50;
  r.total_bw_gbps = gbps;
  r.ceiling.gbps = ceil;
  r.wrong = wrong;
  return r;
}
constexpr std::size_t k256 = 256 << 10, k4M = 4 << 20;
}  // namespace

TEST(A2aSummary, DefaultGraphOnlyOnAGpuWithDeviceSync) {
  A2aConfig c;
  EXPECT_EQ(default_graph_iters(c, false), kDefaultGraphIters);
  EXPECT_EQ(kDefaultGraphIters % 2, 0);        // the copy protocol needs an even launch count per replay
  EXPECT_EQ(default_graph_iters(c, true), 0);  // host runtime: no graphs
  c.syncs = {SyncMode::host};
  EXPECT_EQ(default_graph_iters(c, false), 0);
  c.syncs = {SyncMode::device};
  EXPECT_EQ(default_graph_iters(c, false), kDefaultGraphIters);
  c.protocols = {Protocol::copy};
  c.verify_epochs = 3;  // a graph cannot hold copy then: no default graph rather than a usage error
  EXPECT_EQ(default_graph_iters(c, false), 0);
  c.verify_epochs = 4;
  EXPECT_EQ(default_graph_iters(c, false), kDefaultGraphIters);
  // The default passes the same validation an explicit --graph 16 does.
  c.chunks = {k256};
  c.graph = default_graph_iters(c, false);
  EXPECT_NO_THROW(validate_a2a(c, 8, 0, false));
}

TEST(A2aSummary, BestIsTheFastestVerifiedRowPerChunk) {
  std::vector<A2aResult> rows = {
      row(k256, Addressing::ptr, SyncMode::host, Protocol::simple, 0, 40.0, 100, 500),
      row(k256, Addressing::lsa, SyncMode::host, Protocol::simple, 0, 42.0, 95, 500),
      row(k256, Addressing::lsa, SyncMode::device, Protocol::direct, 0, 20.0, 200, 500),
      row(k256, Addressing::lsa, SyncMode::device, Protocol::direct, 16, 9.0, 400, 500, /*wrong=*/3),
      row(k256, Addressing::ptr, SyncMode::device, Protocol::direct, 16, 10.0, 400, 500),
      row(k4M, Addressing::ptr, SyncMode::host, Protocol::simple, 0, 300.0, 1000, 2000),
      row(k4M, Addressing::ptr, SyncMode::device, Protocol::simple, 0, 310.0, 990, 2000),
  };
  const auto best = a2a_best_modes(rows);
  ASSERT_EQ(best.size(), 2u);
  EXPECT_EQ(best[0].chunk_bytes, k256);
  EXPECT_EQ(best[0].mode, "ptr device/direct graph 16");  // the faster lsa graph row has wrong elements
  EXPECT_EQ(best[0].graph_iters, 16);
  EXPECT_DOUBLE_EQ(best[0].p50_us, 10.0);
  EXPECT_DOUBLE_EQ(best[0].ceiling_ratio, 0.8);
  ASSERT_TRUE(best[0].host_p50_us.has_value());
  EXPECT_DOUBLE_EQ(*best[0].host_p50_us, 40.0);  // the fastest host-sync row, not the first
  EXPECT_DOUBLE_EQ(*best[0].gain_over_host, 4.0);
  EXPECT_EQ(best[1].chunk_bytes, k4M);
  EXPECT_EQ(best[1].mode, "ptr host");  // host sync may win; its gain is then 1
  EXPECT_DOUBLE_EQ(*best[1].gain_over_host, 1.0);
  EXPECT_EQ(format_best(best[0]),
            "best  chunk 262144 B: ptr device/direct graph 16  10.00 us  80.0% of ceiling  4.00x host sync "
            "(40.00 us)");
  const Json j = to_json(best[0]);
  EXPECT_EQ(j["graph_iters"], 16);
  EXPECT_EQ(j["protocol"], "direct");
  EXPECT_DOUBLE_EQ(j["gain_over_host"].get<double>(), 4.0);
}

TEST(A2aSummary, NoHostRowNoCeilingNoVerifiedRow) {
  std::vector<A2aResult> rows = {
      row(k256, Addressing::lsa, SyncMode::device, Protocol::direct, 16, 9.0, 400, 0),
      row(k4M, Addressing::lsa, SyncMode::device, Protocol::direct, 0, 50.0, 400, 500, /*wrong=*/1),
      row(k4M, Addressing::lsa, SyncMode::device, Protocol::direct, 0, 0.0, 0, 500),  // not measured
  };
  const auto best = a2a_best_modes(rows);
  ASSERT_EQ(best.size(), 1u);  // 4 MiB has no verified, measured row
  EXPECT_FALSE(best[0].gain_over_host.has_value());
  EXPECT_DOUBLE_EQ(best[0].ceiling_ratio, 0.0);
  EXPECT_EQ(format_best(best[0]),
            "best  chunk 262144 B: lsa device/direct graph 16  9.00 us  no ceiling  no host-sync row");
  EXPECT_TRUE(to_json(best[0])["gain_over_host"].is_null());
  EXPECT_TRUE(a2a_best_modes({}).empty());
}
