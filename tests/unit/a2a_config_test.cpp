// SPDX-License-Identifier: MIT
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "mori/symm/a2a/types.hpp"
#include "mori/symm/a2a/detail/engine.hpp"
#include "mori/symm/a2a/detail/placement.hpp"
#include "mori/symm/a2a/plan.hpp"
#include "mori/symm/base/error.hpp"
#include "mori/symm/base/json.hpp"
#include "mori/symm/jit/jit.hpp"

#include "fake_runtime.hpp"

using namespace mori::symm;

TEST(A2aConfig, ProtocolListsNameCopy) {
  EXPECT_EQ(parse_protocols("copy"), std::vector<Protocol>{Protocol::copy});
  EXPECT_EQ(parse_protocols("direct,copy,direct"), (std::vector<Protocol>{Protocol::direct, Protocol::copy}));
  EXPECT_EQ(parse_protocols("all"),
            (std::vector<Protocol>{Protocol::simple, Protocol::direct, Protocol::ll, Protocol::copy}));
  EXPECT_STREQ(to_string(Protocol::copy), "copy");
  EXPECT_THROW(parse_protocols("copy,ce"), UsageError);
}

// A graph holds the copy protocol's copies at fixed parities: its launches per replay must be even.
TEST(A2aConfig, CopyInAGraphNeedsEvenLaunches) {
  A2aConfig c;
  c.chunks = {4096};
  c.protocols = {Protocol::copy};
  c.graph = 16;
  EXPECT_NO_THROW(validate_a2a(c, 2, 0, false));
  c.graph = 15;
  EXPECT_THROW(validate_a2a(c, 2, 0, false), UsageError);
  c.graph = 16;
  c.verify_epochs = 5;
  EXPECT_THROW(validate_a2a(c, 2, 0, false), UsageError);
  c.protocols = {Protocol::direct};  // parities are read on the device: any count
  EXPECT_NO_THROW(validate_a2a(c, 2, 0, false));
  c.protocols = {Protocol::copy};
  c.graph = 0;  // launched one by one, the host knows every launch's parity
  EXPECT_NO_THROW(validate_a2a(c, 2, 0, false));
}

// auto: copy from 64 MiB where ranks share a device (measured), never across devices (not measured); simple
// instead where a graph could not hold it.
TEST(A2aConfig, AutoPicksCopyForLargeChunksOnASharedDevice) {
  A2aConfig c;
  c.graph = 16;
  const std::size_t big = std::size_t{64} << 20;
  EXPECT_EQ(a2a_protocols(c, big, false, 8), std::vector<Protocol>{Protocol::copy});
  EXPECT_EQ(a2a_protocols(c, big / 4, false, 8), std::vector<Protocol>{Protocol::direct});
  EXPECT_EQ(a2a_protocols(c, big, true, 2), std::vector<Protocol>{Protocol::simple});
  c.graph = 3;
  EXPECT_EQ(a2a_protocols(c, big, false, 8), std::vector<Protocol>{Protocol::simple});
  c.graph = 0;  // launched one by one, any number of verified epochs
  c.verify_epochs = 5;
  EXPECT_EQ(a2a_protocols(c, big, false, 8), std::vector<Protocol>{Protocol::copy});
}

// auto never takes ll: with device-scope signals on a shared device direct beat it at 4 KiB too.
TEST(A2aConfig, AutoNeverPicksLl) {
  A2aConfig c;
  for (bool one_rank_per_device : {false, true})
    for (std::size_t chunk : {std::size_t{4}, std::size_t{4096}, std::size_t{256} << 10})
      EXPECT_EQ(a2a_protocols(c, chunk, one_rank_per_device, one_rank_per_device ? 2 : 8),
                std::vector<Protocol>{Protocol::direct});
}

TEST(A2aConfig, SignalScopeParses) {
  EXPECT_EQ(parse_signal_scope("auto"), SignalScope::auto_select);
  EXPECT_EQ(parse_signal_scope("system"), SignalScope::system);
  EXPECT_EQ(parse_signal_scope("device"), SignalScope::device);
  EXPECT_THROW(parse_signal_scope("gpu"), UsageError);
  EXPECT_THROW(parse_signal_scope(""), UsageError);
}

TEST(A2aConfig, SourceCacheParses) {
  EXPECT_EQ(parse_source_cache("auto"), SourceCache::auto_select);
  EXPECT_EQ(parse_source_cache("normal"), SourceCache::normal);
  EXPECT_EQ(parse_source_cache("evict-first"), SourceCache::evict_first);
  EXPECT_THROW(parse_source_cache("evict_first"), UsageError);
  EXPECT_THROW(parse_source_cache(""), UsageError);
}

// Evict-first only where ranks share a GPU and their sources and receive slots do not fit in its L2: at 8
// ranks on one H200 (50 MiB of L2) 256 KiB stays normal (32 MiB, L2-resident; evict-first measured 8-12%
// slower there) and 1 MiB and up evict first.
TEST(A2aConfig, AutoSourceCacheEvictsFirstOnlyBeyondL2OnASharedGpu) {
  const std::uint64_t l2 = std::uint64_t{50} << 20;
  EXPECT_FALSE(auto_source_evict_first(true, 8, std::size_t{256} << 10, l2));
  EXPECT_TRUE(auto_source_evict_first(true, 8, std::size_t{1} << 20, l2));
  EXPECT_TRUE(auto_source_evict_first(true, 8, std::size_t{64} << 20, l2));
  EXPECT_FALSE(auto_source_evict_first(false, 8, std::size_t{64} << 20, l2));  // one rank per GPU: unmeasured
  EXPECT_FALSE(auto_source_evict_first(true, 8, std::size_t{64} << 20, 0));    // L2 size unknown
  // The boundary: 2 x world^2 x pitch against the L2 (pitch = chunk + 16-byte guard, 256-byte aligned).
  const std::size_t fits = l2 / (2 * 8 * 8) - 16;  // the largest chunk whose pitch is exactly L2 / 128
  EXPECT_EQ(a2a_pitch(fits), l2 / 128);
  EXPECT_FALSE(auto_source_evict_first(true, 8, fits, l2));
  EXPECT_TRUE(auto_source_evict_first(true, 8, fits + 1, l2));
}

// Evict-first loads exist in kernels built for NVIDIA sm_80 and newer only; elsewhere they would be recorded
// for plain loads.
TEST(A2aConfig, CacheHintsFromSm80) {
  for (const char* a : {"sm_80", "sm_86", "sm_90", "sm_90a", "sm_100"})
    EXPECT_TRUE(arch_has_l2_cache_hints(a)) << a;
  for (const char* a : {"sm_75", "sm_70", "gfx942", "host", "", "sm_", "sm_x90"})
    EXPECT_FALSE(arch_has_l2_cache_hints(a)) << a;
}

// Every kernel the GPU engine can launch for a push (detail::a2a_kernel_name) is instantiated by the catalog,
// for an arch with and without cache hints.
TEST(A2aConfig, CatalogInstantiatesEveryPush) {
  for (const char* arch : {"sm_90", "sm_75", "gfx942"}) {
    const auto catalog = kernel_catalog(arch);
    ASSERT_EQ(catalog.at(0).file, "a2a.hip");
    const auto& names = catalog.at(0).instantiations;
    int seen = 0;
    detail::PushSpec s;
    for (Addressing a : {Addressing::ptr, Addressing::lsa})
      for (bool sync : {false, true})
        for (Protocol p : {Protocol::simple, Protocol::direct, Protocol::ll, Protocol::copy})
          for (int unroll : {4, 8})
            for (bool ef : {false, true}) {
              s.addressing = a, s.sync = sync, s.protocol = p, s.unroll = unroll, s.source_evict_first = ef;
              const std::string name = detail::a2a_kernel_name(s);
              EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << arch << " " << name;
              ++seen;
            }
    EXPECT_EQ(seen, 2 * 2 * 4 * 2 * 2);
  }
  detail::PushSpec s;
  s.addressing = Addressing::lsa, s.sync = true, s.protocol = Protocol::direct, s.source_evict_first = true;
  EXPECT_EQ(detail::a2a_kernel_name(s), "a2a_push<1, 1, 4, 1, 1>");
}

namespace {

// p50s of the graph rows of one sweep (a set of mori.a2a/2 files of one session): chunk -> protocol -> runs.
using Sweep = std::map<std::size_t, std::map<std::string, std::vector<double>>>;

Sweep read_sweep(const std::vector<std::string>& files) {
  Sweep s;
  for (const auto& f : files) {
    std::ifstream in(std::string(MORI_RESULTS_DIR) + "/" + f);
    EXPECT_TRUE(in.good()) << f;
    if (!in) continue;
    const Json doc = Json::parse(in);
    for (const auto& r : doc.at("results"))
      if (r.at("graph").get<bool>() && r.at("graph_iters").get<int>() == 16 && r.at("sync") == "device")
        s[r.at("chunk_bytes").get<std::size_t>()][r.at("protocol").get<std::string>()].push_back(
            r.at("time_us").at("p50").get<double>());
  }
  return s;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Within each sweep, at every chunk it measured the protocol auto picks (when that sweep measured it), the
// pick is the fastest median or within 1% of it (the runs of one sweep differ by about that).
void expect_auto_follows(const std::vector<std::string>& files, bool one_rank_per_device) {
  A2aConfig c;
  c.graph = 16;
  const Sweep sweep = read_sweep(files);
  ASSERT_FALSE(sweep.empty());
  for (const auto& [chunk, by] : sweep) {
    const Protocol pick = a2a_protocols(c, chunk, one_rank_per_device, one_rank_per_device ? 2 : 8).at(0);
    const auto it = by.find(to_string(pick));
    if (it == by.end()) continue;  // this sweep did not measure what auto picks here
    double best = 1e300;
    std::string fastest;
    for (const auto& [proto, runs] : by)
      if (median(runs) < best) best = median(runs), fastest = proto;
    EXPECT_LE(median(it->second), 1.01 * best)
        << files.front() << ": " << chunk << " B: auto picks " << to_string(pick) << " ("
        << median(it->second) << " us), " << fastest << " took " << best << " us";
  }
}

}  // namespace

// --protocol auto is a table read off committed sweeps (lib/src/a2a/plan.cpp kCells names them); it must keep
// agreeing with them.
TEST(A2aConfig, AutoFollowsTheCommittedSweeps) {
  expect_auto_follows({"h200/protocol-sweep-scope/w8-programmatic-r1.json",
                       "h200/protocol-sweep-scope/w8-programmatic-r2.json"},
                      false);
  expect_auto_follows({"h200x2/protocol-sweep/launch/w2-programmatic-r1.json",
                       "h200x2/protocol-sweep/launch/w2-programmatic-r2.json"},
                      true);
  expect_auto_follows({"h200x2/protocol-sweep/all/w2-r1.json", "h200x2/protocol-sweep/all/w2-r2.json"}, true);
  expect_auto_follows({"h200x2/protocol-sweep-copy/w2-programmatic-r1.json",
                       "h200x2/protocol-sweep-copy/w2-programmatic-r2.json"},
                      true);
}

// A device is its PCI bus id, not its ordinal: ranks each confined to their own GPU (CUDA_VISIBLE_DEVICES per
// rank) all see ordinal 0, and must not be taken for ranks sharing one GPU (device-scope signals would then
// be wrong).
TEST(A2aPlacement, DevicesAreNamedByBusIdNotOrdinal) {
  DeviceInfo a, b;
  a.pci_bus_id = "0000:19:00.0";
  b.pci_bus_id = "0000:3b:00.0";
  auto two_gpus = detail::device_placement_of(
      {detail::rank_place(0, a, 0, true, false), detail::rank_place(0, b, 0, true, false)}, false);
  EXPECT_FALSE(two_gpus.all_one_device);
  EXPECT_TRUE(two_gpus.one_rank_per_device);
  EXPECT_EQ(two_gpus.max_ranks_per_device, 1);
  auto one_gpu = detail::device_placement_of(
      {detail::rank_place(0, a, 0, true, false), detail::rank_place(0, a, 1, false, false)}, false);
  EXPECT_TRUE(one_gpu.all_one_device);
  EXPECT_EQ(one_gpu.max_ranks_per_device, 2);
  EXPECT_TRUE(one_gpu.any_without_mps);
  // Without a bus id (the host runtime says "none") the ordinal names the device.
  DeviceInfo none;
  none.pci_bus_id = "none";
  EXPECT_NE(detail::device_identity(none, 0), detail::device_identity(none, 1));
  EXPECT_EQ(detail::device_identity(none, 1), detail::device_identity(none, 1));
}

// One source for "same GPU" (docs/mori-a2a.md "Placement"): the node of the load/store team (the
// bootstrap's shared-memory split, after --node-id / MORI_NODE_ID) with the PCI bus id. At 56d7911 the node
// was a hash of the host name, so ranks on one GPU in containers with their own host names (or any other
// disagreement with the team split) were taken as one rank per GPU and skipped the residency rule for
// programmatic launches. The identity now has no host-name input at all: two ranks of one team on the fake
// runtime's one GPU are one device, whatever their host names; ranks of two teams (two nodes) with the same
// bus id are two.
TEST(A2aPlacement, SameGpuIsTheTeamNodeAndTheBusId) {
  mori::symm::testing::FakeRuntime rt;
  const DeviceInfo info = rt.device_info(0);
  const auto one_team = detail::device_placement_of(
      {detail::rank_place(0, info, 0, true, false), detail::rank_place(0, info, 0, true, false)}, false);
  EXPECT_TRUE(one_team.all_one_device);
  EXPECT_FALSE(one_team.one_rank_per_device);
  EXPECT_EQ(one_team.max_ranks_per_device, 2);
  const auto two_nodes = detail::device_placement_of(
      {detail::rank_place(0, info, 0, true, false), detail::rank_place(1, info, 0, true, false)}, false);
  EXPECT_FALSE(two_nodes.all_one_device);
  EXPECT_TRUE(two_nodes.one_rank_per_device);
  // The place a rank sends holds no host name: only the team's node, the device and its facts.
  static_assert(sizeof(detail::RankPlace) <= 64, "a rank's place is its node, device and facts");
}

// Link rates are asked by the two devices' PCI bus ids. At 56d7911 each peer was asked by its own ordinal, 0
// for every rank under per-rank CUDA_VISIBLE_DEVICES, so every peer looked like this rank's device ("same
// device: no link") and the physical limit fell back to HBM alone.
TEST(A2aPlacement, LinkRatesAreAskedByBusId) {
  const char* ids[] = {"0000:19:00.0", "0000:3b:00.0", "0000:4c:00.0", "0000:5d:00.0"};
  std::vector<detail::RankPlace> all;
  for (const char* id : ids) {
    DeviceInfo d;
    d.pci_bus_id = id;
    all.push_back(detail::rank_place(0, d, 0, true, false));  // ordinal 0 everywhere
  }
  std::vector<std::pair<std::string, std::string>> asked;
  const detail::LinkRate rate = [&](const std::string& a, const std::string& b, std::string* why) {
    asked.emplace_back(a, b);
    if (a == b) {
      *why = "same device";
      return 0.0;
    }
    return b == ids[3] ? 150.0 : 450.0;
  };
  std::string why;
  EXPECT_EQ(detail::slowest_link_from(all, 0, rate, &why), 150.0);
  ASSERT_EQ(asked.size(), 3u);
  for (std::size_t i = 0; i < asked.size(); ++i) {
    EXPECT_EQ(asked[i].first, ids[0]);
    EXPECT_EQ(asked[i].second, ids[i + 1]);
  }
  // A peer on this rank's own device is not a link; no peer elsewhere: -1.
  EXPECT_EQ(detail::slowest_link_from({all[0], all[0]}, 0, rate, &why), -1.0);
  EXPECT_EQ(why, "no peer on another device");
}

// MIG instances report their parent GPU's PCI bus id: two ranks on two instances would be one device. They
// are detected (CUDA_VISIBLE_DEVICES names MIG- devices, or NVML says MIG mode is on) and refused with exit 2
// and a message that says why (docs/mori-a2a.md "Placement").
TEST(A2aPlacement, MigInstancesAreDetectedAndRefused) {
  mori::symm::testing::FakeRuntime rt;  // CUDA's platform, both instances at the parent's bus id
  const DeviceInfo info = rt.device_info(0);
  const char* two = "MIG-1f2e3d4c-0000-1111-2222-333344445555,MIG-aa2e3d4c-0000-1111-2222-333344445555";
  EXPECT_TRUE(detail::mig_instance(rt.platform(), two, -1));
  EXPECT_TRUE(detail::mig_instance(rt.platform(), " MIG-1f2e3d4c", -1));
  EXPECT_TRUE(detail::mig_instance(rt.platform(), nullptr, 1));  // NVML: MIG mode on at this bus id
  EXPECT_FALSE(detail::mig_instance(rt.platform(), "GPU-1f2e3d4c,1", 0));
  EXPECT_FALSE(detail::mig_instance(rt.platform(), nullptr, -1));
  EXPECT_FALSE(detail::mig_instance(Platform::host, two, 1));
  const auto pl = detail::device_placement_of(
      {detail::rank_place(0, info, 0, true, true), detail::rank_place(0, info, 0, true, true)}, false);
  EXPECT_EQ(pl.mig_ranks, (std::vector<int>{0, 1}));
  try {
    detail::refuse_mig(pl);
    ADD_FAILURE() << "MIG not refused";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("ranks 0,1 run on MIG instances"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("parent GPU's PCI bus id"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(
      detail::refuse_mig(detail::device_placement_of({detail::rank_place(0, info, 0, true, false)}, false)));
}
