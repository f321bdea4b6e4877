// SPDX-License-Identifier: MIT
// The all-to-all's plan (mori/symm/a2a/plan.hpp) held to a table written by hand, not regenerated from the
// code: each expected cell names the measurement or the rule behind it. The cells live in one data file,
// results/expectations/a2a-plan.json (MORI_A2A_PLAN_TABLE), which scripts/evidence also checks every row of a
// run against (docs/evidence.md "The plan check"); this file builds each case's facts. The facts are those
// the driver gathers (lib/src/a2a/a2a.cpp); the device figures are the H200's as its runtime reports them
// (132 multiprocessors, 50 MiB of L2, 4 resident 512-thread push blocks per multiprocessor) and an
// MI300X-like device's (304 compute units, 4 MiB of L2, no NVML).
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "mori/symm/a2a/detail/placement.hpp"
#include "mori/symm/a2a/plan.hpp"
#include "mori/symm/base/error.hpp"
#include "mori/symm/base/json.hpp"

using namespace mori::symm;

namespace {

constexpr std::size_t KiB = 1024, MiB = 1024 * 1024;

DeviceInfo h200(const std::string& pci) {
  DeviceInfo d;
  d.name = "NVIDIA H200";
  d.arch = "sm_90";
  d.pci_bus_id = pci;
  d.multiprocessors = 132;
  d.l2_bytes = 50 * MiB;
  d.memory_bytes = std::uint64_t{143} << 30;
  d.memory_clock_khz = 2619000;
  d.memory_bus_bits = 6144;
  return d;
}

DeviceInfo mi300x_like(const std::string& pci) {
  DeviceInfo d;
  d.name = "AMD Instinct MI300X-like";
  d.arch = "gfx942";
  d.pci_bus_id = pci;
  d.multiprocessors = 304;
  d.l2_bytes = 4 * MiB;
  d.memory_bytes = std::uint64_t{192} << 30;
  d.memory_clock_khz = 1300000;
  d.memory_bus_bits = 8192;
  return d;
}

std::string pci(int i) {
  char b[32];
  std::snprintf(b, sizeof(b), "0000:%02x:00.0", 0x19 + 0x10 * i);
  return b;
}

// The facts of `ranks` placed by (node, device, MPS, MIG), as find_placement gathers them.
struct Rank {
  int node;
  DeviceInfo dev;
  int ordinal;
  bool mps;
  bool mig;
};
A2aFacts facts_of(const std::vector<Rank>& ranks, Platform platform = Platform::cuda, double link_gbps = 0) {
  std::vector<detail::RankPlace> all;
  for (const auto& r : ranks) all.push_back(detail::rank_place(r.node, r.dev, r.ordinal, r.mps, r.mig));
  A2aFacts f;
  f.platform = platform;
  f.placement = detail::device_placement_of(all, platform == Platform::host);
  f.placement.link_gbps = link_gbps;
  if (link_gbps > 0) f.placement.link_source = "NVLink (test)";
  f.device = ranks.at(0).dev;
  f.cache_hints = platform == Platform::cuda;  // sm_90 kernels have them (arch_has_l2_cache_hints)
  // 2048 threads per multiprocessor on sm_90: 4 blocks of 512 threads resident at once.
  const int sms = f.device.multiprocessors;
  f.resident_blocks = [sms](const detail::PushSpec&) { return 4L * sms; };
  return f;
}

std::vector<Rank> distinct_h200s(int n, bool per_rank_visible_devices = false) {
  std::vector<Rank> r;
  for (int i = 0; i < n; ++i) r.push_back({0, h200(pci(i)), per_rank_visible_devices ? 0 : i, false, false});
  return r;
}

std::vector<Rank> one_h200(int n, bool mps) {
  std::vector<Rank> r;
  for (int i = 0; i < n; ++i) r.push_back({0, h200(pci(0)), 0, mps, false});
  return r;
}

// The hand-written table (results/expectations/a2a-plan.json), read once.
const Json& plan_table() {
  static const Json table = [] {
    std::ifstream in(MORI_A2A_PLAN_TABLE);
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return in.good() || !text.empty() ? Json::parse(text) : Json();
  }();
  return table;
}

const Json* table_case(const std::string& name) {
  const Json& t = plan_table();
  if (!t.is_object() || !t.contains("cases")) return nullptr;
  for (const auto& c : t.at("cases"))
    if (c.at("name") == name) return &c;
  return nullptr;
}

Protocol protocol_named(const std::string& s) {
  for (Protocol p : {Protocol::simple, Protocol::direct, Protocol::ll, Protocol::copy})
    if (s == to_string(p)) return p;
  ADD_FAILURE() << "no protocol " << s;
  return Protocol::simple;
}

// Every cell of the table's case `name` against the plan of these facts: the users' command (every choice
// automatic) at device sync names the cell's protocol, and the push kernel of the cell's protocol (at host
// sync: the simple push without the device barrier) has the cell's blocks per peer, unroll, launch, signal
// scope and source cache, as a row records them (lib/src/a2a/a2a.cpp).
void expect_case(const A2aFacts& f, const std::string& name) {
  const Json* c = table_case(name);
  ASSERT_NE(c, nullptr) << "no case " << name << " in " << MORI_A2A_PLAN_TABLE;
  EXPECT_EQ(std::string(to_string(placement_class(f.placement))),
            c->at("match").at("placement").get<std::string>())
      << name;
  ASSERT_FALSE(c->at("cells").empty()) << name;
  const A2aConfig cfg;
  for (const auto& cell : c->at("cells")) {
    const auto chunk = cell.at("chunk").get<std::size_t>();
    const bool device_sync = cell.at("sync") == "device";
    const std::string proto = cell.at("protocol").get<std::string>();
    const std::string what =
        name + ", " + std::to_string(chunk) + " B, sync " + cell.at("sync").get<std::string>() + ", " + proto;
    EXPECT_FALSE(cell.at("cite").get<std::string>().empty()) << what << ": a cell without its citation";
    const A2aChunkPlan plan = a2a_chunk_plan(cfg, f, chunk);
    ASSERT_EQ(plan.protocols.size(), 1u) << what;
    // Nothing configured: the ceiling measures the automatic SM-copy shape only.
    EXPECT_EQ(plan.ceiling_copies.size(), 1u) << what;
    const Protocol p = protocol_named(proto);
    // At device sync the cell's protocol is the automatic choice, except in a cell of a given --protocol.
    if (device_sync && !cell.value("protocol_given", false)) {
      EXPECT_EQ(std::string(to_string(plan.protocols[0])), proto) << what;
    }
    const detail::PushSpec s = a2a_push_plan(cfg, f, Addressing::lsa, device_sync, chunk, p);
    EXPECT_EQ(s.blocks_per_peer, cell.at("blocks_per_peer").get<int>()) << what;
    EXPECT_EQ(s.unroll, cell.at("unroll").get<int>()) << what;
    const bool overlap = f.platform == Platform::host ? false : s.overlap;  // the host engine launches plain
    EXPECT_EQ(overlap ? "programmatic" : "plain", cell.at("launch").get<std::string>()) << what;
    EXPECT_EQ(!device_sync     ? "none"
              : s.device_scope ? "device"
                               : "system",
              cell.at("signal_scope").get<std::string>())
        << what;
    EXPECT_EQ(p == Protocol::copy    ? "none"
              : s.source_evict_first ? "evict_first"
                                     : "normal",
              cell.at("source_cache").get<std::string>())
        << what;
  }
}

}  // namespace

// 2, 4 and 8 distinct H200s, one rank each (the users' node). Protocol: direct below 16 MiB, simple from
// there (lib/src/a2a/plan.cpp kCells, distinct devices: results/h200x2/protocol-sweep/). Blocks per peer: at
// least min(32, chunk / 512 threads / 16 B) for remote peers, else one block per 8 vectors per thread up to 4
// per multiprocessor across peers (plan.cpp auto_blocks_per_peer): 256 KiB -> 32; 64 MiB -> 528 / world (264
// at 2 ranks, as in docs/mori-a2a.md's sample output). Unroll 8 from 16 MiB (auto_unroll). Launch:
// programmatic one rank per GPU on sm_90 (docs/mori-a2a.md "Launches"). Signals at system scope: peers on
// other devices (docs/mori-a2a.md "Signal scope"). Source loads normal: evict-first only where ranks share a
// GPU (docs/mori-a2a.md "Source cache").
TEST(A2aPlan, DistinctH200s) {
  for (int n : {2, 4, 8}) {
    const A2aFacts f = facts_of(distinct_h200s(n), Platform::cuda, 450);
    const std::string what = std::to_string(n) + " distinct H200s";
    EXPECT_STREQ(to_string(placement_class(f.placement)), "one_rank_per_gpu") << what;
    expect_case(f, "h200-distinct-" + std::to_string(n));
    // Physical limit (docs/mori-a2a.md "References"): per device 2 w c through HBM and (w - 1) c over the
    // links; here the 450 GB/s links bound it: total = w^2 c / ((w - 1) c / link) = w^2 x 450 / (w - 1).
    const A2aChunkPlan p = a2a_chunk_plan(A2aConfig{}, f, 256 * KiB);
    ASSERT_TRUE(p.physical.gbps.has_value()) << what;
    EXPECT_NEAR(*p.physical.gbps, n * n * 450.0 / (n - 1), 1e-6) << what;
  }
}

// 8 ranks on one H200 under MPS (results/h200/, the suite's main configuration). Protocol: direct to 16 MiB,
// copy from 64 MiB (plan.cpp kCells, a shared device: results/h200/protocol-sweep-scope/). Blocks per peer: 4
// at 256 KiB (one block per 8 vectors per thread), raised to 8 where programmatic launches still fit the
// residency rule 8 x (8 x 8 + 1) = 520 <= 528 (results/lab/h200/signal-scope/overlap-bpp/: 8 overlapped 10.01
// us against 4 blocks 10.33); at 4 MiB 64 blocks launched plain (8 overlapped 141.5 us against 64 plain
// 135.7). Device-scope signals: every rank on this GPU (docs/mori-a2a.md "Signal scope"). Source: normal at
// 256 KiB (2 x 8 x 8 x pitch = 32 MiB fits the 50 MiB L2), evict-first at 4 MiB (docs/mori-a2a.md "Source
// cache", results/h200/ source-cache runs). The copy protocol: one barrier block per peer, plain launch,
// system scope (a2a_push_plan; docs/mori-a2a.md "Synchronisation and protocols").
TEST(A2aPlan, EightRanksOnOneH200UnderMps) {
  const A2aFacts f = facts_of(one_h200(8, true));
  EXPECT_STREQ(to_string(placement_class(f.placement)), "one_gpu");
  expect_case(f, "h200-one-gpu-8-mps");
  // Every byte read and written once in one HBM: total <= HBM / 2 (docs/mori-a2a.md "References").
  const A2aChunkPlan p = a2a_chunk_plan(A2aConfig{}, f, 256 * KiB);
  ASSERT_TRUE(p.physical.gbps.has_value());
  EXPECT_NEAR(*p.physical.gbps, 2.0 * 2619e6 * 6144 / 8 / 1e9 / 2, 1e-6);
  EXPECT_TRUE(p.physical.l2_resident);
}

// 4 ranks over 2 H200s, 2 per GPU under MPS: not one GPU (system scope, normal loads), not one rank per GPU
// (the shared-device cells of plan.cpp kCells), and the residency rule decides launches with 2
// ranks per device: 8 blocks per peer fit (2 x (4 x 8 + 1) = 66 <= 528). No single physical limit
// (references.cpp physical_limit: ranks spread unevenly over devices).
TEST(A2aPlan, FourRanksOverTwoH200s) {
  std::vector<Rank> r;
  for (int i = 0; i < 4; ++i) r.push_back({0, h200(pci(i / 2)), i / 2, true, false});
  const A2aFacts f = facts_of(r);
  EXPECT_STREQ(to_string(placement_class(f.placement)), "several_ranks_per_gpu");
  EXPECT_EQ(f.placement.max_ranks_per_device, 2);
  expect_case(f, "h200-4-ranks-over-2-gpus");
  EXPECT_FALSE(a2a_chunk_plan(A2aConfig{}, f, 256 * KiB).physical.gbps.has_value());
}

// Per-rank CUDA_VISIBLE_DEVICES: every rank sees its GPU as ordinal 0, and the PCI bus ids tell them apart
// (a2a/detail/placement.hpp), so the plan is that of 8 distinct H200s, with the links' rate read by PCI id
// (docs/mori-a2a.md "Placement").
TEST(A2aPlan, PerRankVisibleDevices) {
  const A2aFacts f = facts_of(distinct_h200s(8, true), Platform::cuda, 450);
  EXPECT_STREQ(to_string(placement_class(f.placement)), "one_rank_per_gpu");
  expect_case(f, "h200-per-rank-visible-devices-8");
  const A2aChunkPlan p = a2a_chunk_plan(A2aConfig{}, f, 256 * KiB);
  EXPECT_NE(p.physical.source.find("NVLink"), std::string::npos) << p.physical.source;
}

// Ranks whose host names differ on one GPU (containers on one machine, one team): the host name is no part
// of "same GPU" (a2a/detail/placement.hpp), so they are one GPU: device scope, and the residency rule decides
// launches (2 x (2 x 8 + 1) = 34 <= 528: 8 blocks per peer overlapped), as for 8 ranks on one H200.
TEST(A2aPlan, HostNamesDifferOnOneGpu) {
  const A2aFacts f = facts_of(one_h200(2, true));  // the place a rank sends has no host name to differ in
  EXPECT_STREQ(to_string(placement_class(f.placement)), "one_gpu");
  expect_case(f, "h200-host-names-differ-2");
}

// Two MIG instances of one GPU: refused before any plan (docs/mori-a2a.md "Placement", exit 2).
TEST(A2aPlan, TwoMigInstancesAreRefused) {
  std::vector<Rank> r = {{0, h200(pci(0)), 0, false, true}, {0, h200(pci(0)), 1, false, true}};
  const A2aFacts f = facts_of(r);
  EXPECT_THROW(a2a_plan_refusals(A2aConfig{}, f, {}, "sm_90"), UsageError);
}

// An MI300X-like node, 8 GPUs over xGMI: the distinct-device tables (plan.cpp kCells, auto_blocks_per_peer
// with remote peers: 32 at 256 KiB), plain launches (programmatic dependent launch is NVIDIA's, sm_90+),
// system scope (device scope never measured on AMD: docs/mori-a2a.md "Signal scope"), normal loads (no cache
// hints off NVIDIA, arch_has_l2_cache_hints). No link rate (NVML is NVIDIA's): the bound is HBM alone, 64 c /
// (16 c / HBM) = 4 x HBM.
TEST(A2aPlan, Mi300xLikeNode) {
  std::vector<Rank> r;
  for (int i = 0; i < 8; ++i) r.push_back({0, mi300x_like(pci(i)), i, false, false});
  const A2aFacts f = facts_of(r, Platform::amd);
  EXPECT_STREQ(to_string(placement_class(f.placement)), "one_rank_per_gpu");
  expect_case(f, "mi300x-like-8");
  EXPECT_THROW(a2a_plan_refusals(
                   [] {
                     A2aConfig c;
                     c.signal_scope = SignalScope::device;
                     return c;
                   }(),
                   f, {}, ""),
               UsageError);
  const A2aChunkPlan p = a2a_chunk_plan(A2aConfig{}, f, 256 * KiB);
  ASSERT_TRUE(p.physical.gbps.has_value());
  EXPECT_NEAR(*p.physical.gbps, 4 * (2.0 * 1300e6 * 8192 / 8 / 1e9), 1e-6);
  EXPECT_NE(p.physical.source.find("HBM alone"), std::string::npos) << p.physical.source;
}

// Options given by hand win over the plan's own choice, and the ceiling then measures both shapes
// (references.hpp measure_ceiling: a shape given by hand never lowers the bound).
TEST(A2aPlan, ConfiguredShapeAddsACeilingShape) {
  const A2aFacts f = facts_of(one_h200(8, true));
  A2aConfig c;
  c.blocks_per_peer = 16;
  const A2aChunkPlan p = a2a_chunk_plan(c, f, 256 * KiB);
  ASSERT_EQ(p.ceiling_copies.size(), 2u);
  EXPECT_EQ(p.ceiling_copies[0].blocks_per_peer, 8);
  EXPECT_EQ(p.ceiling_copies[1].blocks_per_peer, 16);
  // 16 blocks per peer: 8 x (128 + 1) = 1032 > 528 waiting places, so launched plain (docs "Launches").
  EXPECT_FALSE(a2a_push_plan(c, f, Addressing::lsa, true, 256 * KiB, Protocol::direct).overlap);
}

// Test-only switch (MORI_FAULT a2a.distinct-policy): 8 ranks on one H200 take the plan of 8 distinct H200s
// (the DistinctH200s row: direct, 32 blocks per peer at 256 KiB; simple, 66 at 64 MiB; system scope; normal
// loads) while the residency rule still decides launches: 8 x (8 x 32 + 1) = 2056 > 528 places, so plain
// (docs/mori-a2a.md "Launches"). The physical limit stays that of one GPU.
TEST(A2aPlan, DistinctPolicyOnOneGpu) {
  A2aFacts f = facts_of(one_h200(8, true));
  f.distinct_policy = true;
  expect_case(f, "h200-distinct-policy-8");
  EXPECT_STREQ(to_string(placement_class(f.placement)), "one_gpu");
  EXPECT_EQ(a2a_ll_block_limit(f, 8), 132 / 64);
  A2aConfig c;
  c.signal_scope = SignalScope::device;
  EXPECT_THROW(a2a_plan_refusals(c, f, {}, "sm_90"), UsageError);
}

// The host runtime (what CTest's rehearsal of the several-GPU evidence preset runs, docs/evidence.md): the
// table's host case at 2, 4 and 8 ranks, whatever the CPU count (the runtime's "multiprocessors").
TEST(A2aPlan, HostRuntime) {
  for (int n : {2, 4, 8})
    for (int cpus : {2, 64}) {
      std::vector<Rank> r;
      DeviceInfo d;
      d.name = "host (POSIX shared memory)";
      d.multiprocessors = cpus;
      for (int i = 0; i < n; ++i) r.push_back({0, d, 0, false, false});
      const A2aFacts f = facts_of(r, Platform::host);
      SCOPED_TRACE(std::to_string(n) + " ranks, " + std::to_string(cpus) + " CPUs");
      expect_case(f, "host");
    }
}

// Every case of the table names the test that builds its facts (one table: no case left unchecked).
TEST(A2aPlan, EveryTableCaseHasItsTest) {
  const Json& t = plan_table();
  ASSERT_TRUE(t.is_object()) << MORI_A2A_PLAN_TABLE;
  EXPECT_EQ(t.at("schema"), "mori.a2a-plan-table/1");
  const std::vector<std::string> tests = {
      "A2aPlan.DistinctH200s",           "A2aPlan.EightRanksOnOneH200UnderMps",
      "A2aPlan.FourRanksOverTwoH200s",   "A2aPlan.PerRankVisibleDevices",
      "A2aPlan.HostNamesDifferOnOneGpu", "A2aPlan.Mi300xLikeNode",
      "A2aPlan.DistinctPolicyOnOneGpu",  "A2aPlan.HostRuntime"};
  for (const auto& c : t.at("cases"))
    EXPECT_NE(std::find(tests.begin(), tests.end(), c.at("test").get<std::string>()), tests.end())
        << c.at("name").get<std::string>();
}

// The sweep is data (a2a_row_plans): sync modes, then device sync's protocols, each over the addressing
// models, then the graph rows; the order the reports have always had.
TEST(A2aPlan, RowPlansInTheReportsOrder) {
  A2aConfig c;
  c.graph = 16;
  const auto rows = a2a_row_plans(c, {Protocol::direct, Protocol::copy});
  std::vector<std::string> got;
  for (const auto& r : rows)
    got.push_back(std::string(to_string(r.sync)) + "/" + to_string(r.protocol) + "/" +
                  to_string(r.addressing) + "/" + std::to_string(r.graph_iters));
  EXPECT_EQ(got, (std::vector<std::string>{"host/simple/ptr/0", "host/simple/lsa/0", "device/direct/ptr/0",
                                           "device/direct/lsa/0", "device/copy/ptr/0", "device/copy/lsa/0",
                                           "device/direct/ptr/16", "device/direct/lsa/16",
                                           "device/copy/ptr/16", "device/copy/lsa/16"}));
  c.graph = 0;
  c.syncs = {SyncMode::device};
  c.addressing = {Addressing::lsa};
  EXPECT_EQ(a2a_row_plans(c, {Protocol::simple}).size(), 1u);
}
