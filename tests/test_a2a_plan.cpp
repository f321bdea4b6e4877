// The all-to-all's plan (mori/symm/a2a_plan.hpp) held to a table written by hand, not regenerated from the
// code: each expected cell names the measurement or the rule behind it. The facts are those the driver
// gathers (lib/src/a2a/a2a.cpp); the device figures are the H200's as its runtime reports them (132
// multiprocessors, 50 MiB of L2, 4 resident 512-thread push blocks per multiprocessor) and an MI300X-like
// device's (304 compute units, 4 MiB of L2, no NVML).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "mori/symm/a2a_plan.hpp"
#include "mori/symm/detail/placement.hpp"
#include "mori/symm/error.hpp"

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
  f.placement = detail::placement_of(all, platform == Platform::host);
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

// One expected row of the table: the device-sync push of the users' command at one chunk.
struct Row {
  Protocol protocol;
  int blocks_per_peer;
  int unroll;
  bool overlap;       // launch: programmatic (true) or plain
  bool device_scope;  // signal scope
  bool evict_first;   // source cache
};

void expect_row(const A2aFacts& f, std::size_t chunk, const Row& want, const std::string& what) {
  const A2aConfig cfg;  // the users' command: every choice automatic
  const A2aChunkPlan plan = a2a_chunk_plan(cfg, f, chunk);
  ASSERT_EQ(plan.protocols.size(), 1u) << what;
  EXPECT_EQ(to_string(plan.protocols[0]), std::string(to_string(want.protocol))) << what;
  const detail::PushSpec s = a2a_push_plan(cfg, f, Addressing::lsa, true, chunk, plan.protocols[0]);
  EXPECT_EQ(s.blocks_per_peer, want.blocks_per_peer) << what;
  EXPECT_EQ(s.unroll, want.unroll) << what;
  EXPECT_EQ(s.overlap, want.overlap) << what;
  EXPECT_EQ(s.device_scope, want.device_scope) << what;
  EXPECT_EQ(s.source_evict_first, want.evict_first) << what;
  // Nothing configured: the ceiling measures the automatic SM-copy shape only.
  EXPECT_EQ(plan.ceiling_copies.size(), 1u) << what;
}

}  // namespace

// 2, 4 and 8 distinct H200s, one rank each (the users' node). Protocol: direct below 16 MiB, simple from
// there (lib/src/a2a/config.cpp kRemote, from results/h200x2/protocol-sweep/). Blocks per peer: at least
// min(32, chunk / 512 threads / 16 B) for remote peers, else one block per 8 vectors per thread up to 4 per
// multiprocessor across peers (config.cpp auto_blocks_per_peer): 256 KiB -> 32; 64 MiB -> 528 / world (264 at
// 2 ranks, as in docs/mori-a2a.md's sample output). Unroll 8 from 16 MiB (auto_unroll). Launch: programmatic
// one rank per GPU on sm_90 (docs/mori-a2a.md "Launches"). Signals at system scope: peers on other devices
// (docs/mori-a2a.md "Signal scope"). Source loads normal: evict-first only where ranks share a GPU
// (docs/mori-a2a.md "Source cache").
TEST(A2aPlan, DistinctH200s) {
  for (int n : {2, 4, 8}) {
    const A2aFacts f = facts_of(distinct_h200s(n), Platform::cuda, 450);
    const std::string what = std::to_string(n) + " distinct H200s";
    EXPECT_STREQ(to_string(placement_class(f.placement)), "one_rank_per_gpu") << what;
    expect_row(f, 256 * KiB, {Protocol::direct, 32, 4, true, false, false}, what + ", 256 KiB");
    expect_row(f, 64 * MiB, {Protocol::simple, 528 / n, 8, true, false, false}, what + ", 64 MiB");
    // Physical limit (docs/mori-a2a.md "References"): per device 2 w c through HBM and (w - 1) c over the
    // links; here the 450 GB/s links bound it: total = w^2 c / ((w - 1) c / link) = w^2 x 450 / (w - 1).
    const A2aChunkPlan p = a2a_chunk_plan(A2aConfig{}, f, 256 * KiB);
    ASSERT_TRUE(p.physical.gbps.has_value()) << what;
    EXPECT_NEAR(*p.physical.gbps, n * n * 450.0 / (n - 1), 1e-6) << what;
  }
}

// 8 ranks on one H200 under MPS (results/h200/, the suite's main configuration). Protocol: direct to 16 MiB,
// copy from 64 MiB (config.cpp kShared, from results/h200/protocol-sweep-scope/). Blocks per peer: 4 at
// 256 KiB (one block per 8 vectors per thread), raised to 8 where programmatic launches still fit the
// residency rule 8 x (8 x 8 + 1) = 520 <= 528 (results/lab/h200/signal-scope/overlap-bpp/: 8 overlapped 10.01
// us against 4 blocks 10.33); at 4 MiB 64 blocks launched plain (8 overlapped 141.5 us against 64 plain
// 135.7). Device-scope signals: every rank on this GPU (docs/mori-a2a.md "Signal scope"). Source: normal at
// 256 KiB (2 x 8 x 8 x pitch = 32 MiB fits the 50 MiB L2), evict-first at 4 MiB (docs/mori-a2a.md "Source
// cache", results/h200/ source-cache runs). The copy protocol: one barrier block per peer, plain launch,
// system scope (a2a_push_plan; docs/mori-a2a.md "Synchronisation and protocols").
TEST(A2aPlan, EightRanksOnOneH200UnderMps) {
  const A2aFacts f = facts_of(one_h200(8, true));
  EXPECT_STREQ(to_string(placement_class(f.placement)), "one_gpu");
  expect_row(f, 256 * KiB, {Protocol::direct, 8, 4, true, true, false}, "256 KiB");
  expect_row(f, 4 * MiB, {Protocol::direct, 64, 4, false, true, true}, "4 MiB");
  expect_row(f, 64 * MiB, {Protocol::copy, 1, 8, false, false, true}, "64 MiB");
  // Every byte read and written once in one HBM: total <= HBM / 2 (docs/mori-a2a.md "References").
  const A2aChunkPlan p = a2a_chunk_plan(A2aConfig{}, f, 256 * KiB);
  ASSERT_TRUE(p.physical.gbps.has_value());
  EXPECT_NEAR(*p.physical.gbps, 2.0 * 2619e6 * 6144 / 8 / 1e9 / 2, 1e-6);
  EXPECT_TRUE(p.physical.l2_resident);
}

// 4 ranks over 2 H200s, 2 per GPU under MPS: not one GPU (system scope, normal loads), not one rank per GPU
// (the shared-device protocol table, config.cpp kShared), and the residency rule decides launches with 2
// ranks per device: 8 blocks per peer fit (2 x (4 x 8 + 1) = 66 <= 528). No single physical limit
// (references.cpp physical_limit: ranks spread unevenly over devices).
TEST(A2aPlan, FourRanksOverTwoH200s) {
  std::vector<Rank> r;
  for (int i = 0; i < 4; ++i) r.push_back({0, h200(pci(i / 2)), i / 2, true, false});
  const A2aFacts f = facts_of(r);
  EXPECT_STREQ(to_string(placement_class(f.placement)), "several_ranks_per_gpu");
  EXPECT_EQ(f.placement.max_ranks_per_device, 2);
  expect_row(f, 256 * KiB, {Protocol::direct, 8, 4, true, false, false}, "256 KiB");
  EXPECT_FALSE(a2a_chunk_plan(A2aConfig{}, f, 256 * KiB).physical.gbps.has_value());
}

// Per-rank CUDA_VISIBLE_DEVICES: every rank sees its GPU as ordinal 0, and the PCI bus ids tell them apart
// (detail/placement.hpp), so the plan is that of 8 distinct H200s, with the links' rate read by PCI id
// (docs/mori-a2a.md "Placement").
TEST(A2aPlan, PerRankVisibleDevices) {
  const A2aFacts f = facts_of(distinct_h200s(8, true), Platform::cuda, 450);
  EXPECT_STREQ(to_string(placement_class(f.placement)), "one_rank_per_gpu");
  expect_row(f, 256 * KiB, {Protocol::direct, 32, 4, true, false, false}, "256 KiB");
  const A2aChunkPlan p = a2a_chunk_plan(A2aConfig{}, f, 256 * KiB);
  EXPECT_NE(p.physical.source.find("NVLink"), std::string::npos) << p.physical.source;
}

// Ranks whose host names differ on one GPU (containers on one machine, one team): the host name is no part
// of "same GPU" (detail/placement.hpp), so they are one GPU: device scope, and the residency rule decides
// launches (2 x (2 x 8 + 1) = 34 <= 528: 8 blocks per peer overlapped), as for 8 ranks on one H200.
TEST(A2aPlan, HostNamesDifferOnOneGpu) {
  const A2aFacts f = facts_of(one_h200(2, true));  // the place a rank sends has no host name to differ in
  EXPECT_STREQ(to_string(placement_class(f.placement)), "one_gpu");
  expect_row(f, 256 * KiB, {Protocol::direct, 8, 4, true, true, false}, "256 KiB");
}

// Two MIG instances of one GPU: refused before any plan (docs/mori-a2a.md "Placement", exit 2).
TEST(A2aPlan, TwoMigInstancesAreRefused) {
  std::vector<Rank> r = {{0, h200(pci(0)), 0, false, true}, {0, h200(pci(0)), 1, false, true}};
  const A2aFacts f = facts_of(r);
  EXPECT_THROW(a2a_plan_refusals(A2aConfig{}, f, {}, "sm_90"), UsageError);
}

// An MI300X-like node, 8 GPUs over xGMI: the distinct-device tables (config.cpp kRemote, auto_blocks_per_peer
// with remote peers: 32 at 256 KiB), plain launches (programmatic dependent launch is NVIDIA's, sm_90+),
// system scope (device scope never measured on AMD: docs/mori-a2a.md "Signal scope"), normal loads (no cache
// hints off NVIDIA, arch_has_l2_cache_hints). No link rate (NVML is NVIDIA's): the bound is HBM alone, 64 c /
// (16 c / HBM) = 4 x HBM.
TEST(A2aPlan, Mi300xLikeNode) {
  std::vector<Rank> r;
  for (int i = 0; i < 8; ++i) r.push_back({0, mi300x_like(pci(i)), i, false, false});
  const A2aFacts f = facts_of(r, Platform::amd);
  EXPECT_STREQ(to_string(placement_class(f.placement)), "one_rank_per_gpu");
  expect_row(f, 256 * KiB, {Protocol::direct, 32, 4, false, false, false}, "256 KiB");
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
  expect_row(f, 256 * KiB, {Protocol::direct, 32, 4, false, false, false}, "256 KiB");
  expect_row(f, 64 * MiB, {Protocol::simple, 66, 8, false, false, false}, "64 MiB");
  EXPECT_STREQ(to_string(placement_class(f.placement)), "one_gpu");
  EXPECT_EQ(a2a_ll_block_limit(f, 8), 132 / 64);
  A2aConfig c;
  c.signal_scope = SignalScope::device;
  EXPECT_THROW(a2a_plan_refusals(c, f, {}, "sm_90"), UsageError);
}
