#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "mori/symm/a2a.hpp"
#include "mori/symm/detail/a2a_engine.hpp"
#include "mori/symm/detail/placement.hpp"
#include "mori/symm/error.hpp"
#include "mori/symm/jit.hpp"
#include "mori/symm/json.hpp"

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
  EXPECT_EQ(a2a_protocols(c, big, false), std::vector<Protocol>{Protocol::copy});
  EXPECT_EQ(a2a_protocols(c, big / 4, false), std::vector<Protocol>{Protocol::direct});
  EXPECT_EQ(a2a_protocols(c, big, true), std::vector<Protocol>{Protocol::simple});
  c.graph = 3;
  EXPECT_EQ(a2a_protocols(c, big, false), std::vector<Protocol>{Protocol::simple});
  c.graph = 0;  // launched one by one, any number of verified epochs
  c.verify_epochs = 5;
  EXPECT_EQ(a2a_protocols(c, big, false), std::vector<Protocol>{Protocol::copy});
}

// auto never takes ll: with device-scope signals on a shared device direct beat it at 4 KiB too.
TEST(A2aConfig, AutoNeverPicksLl) {
  A2aConfig c;
  for (bool one_rank_per_device : {false, true})
    for (std::size_t chunk : {std::size_t{4}, std::size_t{4096}, std::size_t{256} << 10})
      EXPECT_EQ(a2a_protocols(c, chunk, one_rank_per_device), std::vector<Protocol>{Protocol::direct});
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
    const Protocol pick = a2a_protocols(c, chunk, one_rank_per_device).at(0);
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

// --protocol auto is a table read off committed sweeps (lib/src/a2a/config.cpp names them); it must keep
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
  using detail::RankPlace;
  DeviceInfo a, b;
  a.pci_bus_id = "0000:19:00.0";
  b.pci_bus_id = "0000:3b:00.0";
  const std::uint64_t host = 7;
  auto two_gpus = detail::placement_of(
      {RankPlace{host, detail::device_identity(a, 0), 1}, RankPlace{host, detail::device_identity(b, 0), 1}},
      false);
  EXPECT_FALSE(two_gpus.all_one_device);
  EXPECT_TRUE(two_gpus.one_rank_per_device);
  EXPECT_EQ(two_gpus.max_ranks_per_device, 1);
  auto one_gpu = detail::placement_of(
      {RankPlace{host, detail::device_identity(a, 0), 1}, RankPlace{host, detail::device_identity(a, 1), 0}},
      false);
  EXPECT_TRUE(one_gpu.all_one_device);
  EXPECT_EQ(one_gpu.max_ranks_per_device, 2);
  EXPECT_TRUE(one_gpu.any_without_mps);
  // Without a bus id (the host runtime says "none") the ordinal names the device.
  DeviceInfo none;
  none.pci_bus_id = "none";
  EXPECT_NE(detail::device_identity(none, 0), detail::device_identity(none, 1));
  EXPECT_EQ(detail::device_identity(none, 1), detail::device_identity(none, 1));
}
