// SPDX-License-Identifier: MIT
// The plan replayed from what a GPU run recorded (docs/mori-a2a.md "The plan", "Replaying a GPU run"): for
// each case of results/expectations/a2a-plan.json that has a committed evidence run (results/<machine>/<rev>/
// with its manifest), the newest such run's mori-a2a reports (meta: platform, ranks, their devices, PCI bus
// ids and MPS, env, plan_policy, the JIT's arch; config) and probe report (the device's multiprocessors and
// memory) give the plan its facts, and every row the run recorded must be what the plan of this tree gives:
// protocol, blocks per peer, unroll, launch, signal scope, source cache. The one fact no report records is
// the driver's occupancy of each push kernel (the residency rule reads it, lib/src/a2a/plan.cpp); it is
// computed here from this tree's kernels, compiled by NVRTC for the recorded arch (no GPU needed): the
// register count and static shared memory of each kernel image and the arch's limits. So a change of the
// plan, of the automatic tables or of a kernel's occupancy that changes what a GPU would run fails here.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "mori/symm/a2a/detail/engine.hpp"
#include "mori/symm/a2a/detail/placement.hpp"
#include "mori/symm/a2a/plan.hpp"
#include "mori/symm/base/json.hpp"
#include "mori/symm/jit/jit.hpp"

using namespace mori::symm;
namespace fs = std::filesystem;

namespace {

constexpr unsigned kThreads = 512;  // the push kernels' block (lib/src/a2a/plan.cpp kThreads)

Json read_json(const fs::path& p) {
  std::ifstream in(p);
  if (!in) return Json();
  return Json::parse(in, nullptr, false);
}

// Per kernel symbol of an NVIDIA code image (ELF): registers per thread (.nv.info EIATTR_REGCOUNT) and static
// shared bytes (.nv.shared.<symbol>).
struct KernelResources {
  int registers = -1;
  std::uint64_t shared = 0;
};

template <class T>
T at(const std::vector<char>& img, std::uint64_t off) {
  T v{};
  if (off + sizeof(T) <= img.size()) std::memcpy(&v, img.data() + off, sizeof(T));
  return v;
}

std::string cstr(const std::vector<char>& img, std::uint64_t off) {
  std::string s;
  while (off < img.size() && img[off]) s += img[off++];
  return s;
}

std::map<std::string, KernelResources> kernel_resources(const std::vector<char>& img) {
  std::map<std::string, KernelResources> out;
  if (img.size() < 64 || std::memcmp(img.data(),
                                     "\x7f"
                                     "ELF",
                                     4) != 0)
    return out;
  struct Section {
    std::string name;
    std::uint32_t type;
    std::uint64_t off, size;
    std::uint32_t link;
  };
  const auto shoff = at<std::uint64_t>(img, 0x28);
  const auto shentsize = at<std::uint16_t>(img, 0x3A), shnum = at<std::uint16_t>(img, 0x3C),
             shstrndx = at<std::uint16_t>(img, 0x3E);
  std::vector<Section> secs;
  std::vector<std::uint32_t> names;
  for (unsigned i = 0; i < shnum; ++i) {
    const std::uint64_t h = shoff + std::uint64_t{i} * shentsize;
    names.push_back(at<std::uint32_t>(img, h));
    secs.push_back({"", at<std::uint32_t>(img, h + 4), at<std::uint64_t>(img, h + 24),
                    at<std::uint64_t>(img, h + 32), at<std::uint32_t>(img, h + 40)});
  }
  if (shstrndx >= secs.size()) return out;
  for (std::size_t i = 0; i < secs.size(); ++i) secs[i].name = cstr(img, secs[shstrndx].off + names[i]);
  std::vector<std::string> symbols;
  for (const auto& s : secs)
    if (s.type == 2 && s.link < secs.size())  // SHT_SYMTAB
      for (std::uint64_t e = 0; e + 24 <= s.size; e += 24)
        symbols.push_back(cstr(img, secs[s.link].off + at<std::uint32_t>(img, s.off + e)));
  for (const auto& s : secs) {
    if (s.name.rfind(".nv.shared.", 0) == 0) out[s.name.substr(11)].shared = s.size;
    if (s.name != ".nv.info" && s.name.rfind(".nv.info.", 0) != 0) continue;
    // Attributes: format byte, attribute byte, then a 16-bit value or (format 4) a 16-bit size and data.
    for (std::uint64_t p = s.off; p + 2 <= s.off + s.size;) {
      const auto fmt = static_cast<unsigned char>(img[p]), attr = static_cast<unsigned char>(img[p + 1]);
      if (fmt == 4) {
        const auto size = at<std::uint16_t>(img, p + 2);
        if (attr == 0x2f && size >= 8) {  // EIATTR_REGCOUNT: symbol index, registers
          const auto sym = at<std::uint32_t>(img, p + 4);
          if (sym < symbols.size())
            out[symbols[sym]].registers = static_cast<int>(at<std::uint32_t>(img, p + 8));
        }
        p += 4 + size;
      } else {
        p += fmt == 2 || fmt == 3 ? 4 : 2;
      }
    }
  }
  return out;
}

// Resident blocks of `kThreads` per multiprocessor, as the driver's occupancy query computes them, for the
// archs of the committed runs: sm_90 (65536 registers and 64 warps per multiprocessor, registers allocated
// per warp in units of 256, at most 32 blocks, 228 KiB of shared memory with 1 KiB reserved per block).
// -1: an arch this does not know.
long blocks_per_multiprocessor(const std::string& arch, const KernelResources& k) {
  if (arch != "sm_90" || k.registers < 0) return -1;
  const long warps = kThreads / 32;
  const long regs_per_warp = (k.registers * 32 + 255) / 256 * 256;
  const long by_regs = regs_per_warp ? 65536 / regs_per_warp / warps : 32;
  const long by_warps = 64 / warps;
  const long shared = static_cast<long>((k.shared + 127) / 128 * 128) + 1024;
  const long by_shared = 233472 / shared;
  return std::min({by_regs, by_warps, by_shared, 32L});
}

// This tree's a2a kernels for `arch`, compiled once (or from the cache of MORI_JIT_CACHE_DIR).
struct Kernels {
  std::map<std::string, std::string> lowered;  // instantiation -> symbol
  std::map<std::string, KernelResources> resources;
};
const Kernels& kernels_for(const std::string& arch) {
  static std::map<std::string, Kernels> all;
  auto it = all.find(arch);
  if (it != all.end()) return it->second;
  Jit jit(arch, "cuda");
  const CompiledKernels c = jit.get(kernel_catalog(arch).at(0));  // a2a.hip
  return all[arch] = Kernels{c.lowered, kernel_resources(c.image)};
}

// How near a case's GPU is to the report's: 0 the model (match.device), 1 the same arch, 2 the same vendor.
int nearness(const Json& m, const Json& meta) {
  if (!m.contains("device")) return 0;
  bool arch = false;
  for (const auto& r : meta.at("ranks")) {
    if (r.value("device_name", "").find(m.at("device").get<std::string>()) != std::string::npos) return 0;
    arch = arch || (m.contains("arch") && r.value("arch", "") == m.at("arch").get<std::string>());
  }
  return arch ? 1 : 2;
}

// The case of the table the report is checked against (scripts/mori_results/plan_check.py
// find_case_nearest): the first that fits on the GPU model, else on the arch, else on the platform.
const Json* case_of(const Json& table, const Json& doc) {
  const Json& meta = doc.at("meta");
  std::string placement;
  for (const auto& r : doc.at("results")) {
    const std::string p = r.value("placement", "");
    if (!placement.empty() && p != placement) return nullptr;
    placement = p;
  }
  const Json* best = nullptr;
  int best_level = 3;
  for (const auto& c : table.at("cases")) {
    const Json& m = c.at("match");
    if (m.contains("platform") && m.at("platform") != meta.value("platform", "")) continue;
    if (m.value("placement", "") != placement) continue;
    if (m.contains("world") && m.at("world") != meta.value("world", 0)) continue;
    if (m.value("plan_policy", "placement") != meta.value("plan_policy", "placement")) continue;
    if (const int level = nearness(m, meta); level < best_level) {
      best = &c;
      best_level = level;
    }
  }
  return best;
}

// One committed evidence run's mori-a2a report (no fault armed) with the case it matches.
struct RecordedRun {
  fs::path folder, report;
  std::string started, case_name;
  Json doc, probe;
};

// A case and the GPU model its run was on: an H100's run checked against the H200's case (the nearest) does
// not hide the H200's own run.
std::string run_key(const RecordedRun& r) {
  const Json& ranks = r.doc.at("meta").at("ranks");
  return r.case_name + "|" + (ranks.empty() ? "" : ranks.at(0).value("device_name", ""));
}

std::vector<RecordedRun> newest_run_per_case(const Json& table) {
  std::vector<RecordedRun> all;
  std::map<std::string, std::string> newest;  // case and GPU model -> the newest run's start
  for (const auto& e : fs::recursive_directory_iterator(MORI_RESULTS_DIR)) {
    if (e.path().filename() != "manifest.json") continue;
    if (fs::relative(e.path(), MORI_RESULTS_DIR).begin()->string() == "lab") continue;
    const Json m = read_json(e.path());
    if (!m.is_object() || m.value("schema", "") != "mori.evidence/1") continue;
    const fs::path folder = e.path().parent_path();
    const Json probe = read_json(folder / "probe.json");
    if (!probe.is_object()) continue;
    for (const auto& f : fs::directory_iterator(folder)) {
      if (f.path().extension() != ".json" || f.path().filename() == "manifest.json") continue;
      Json doc = read_json(f.path());
      if (!doc.is_object() || !doc.contains("meta") || doc.at("meta").value("tool", "") != "mori-a2a")
        continue;
      if (!doc.at("meta").value("faults", Json::array()).empty() || doc.at("results").empty()) continue;
      const Json* c = case_of(table, doc);
      if (!c) continue;
      all.push_back({folder, f.path(), m.value("started", ""), c->at("name").get<std::string>(),
                     std::move(doc), probe});
      std::string& n = newest[run_key(all.back())];
      n = std::max(n, all.back().started);
    }
  }
  std::vector<RecordedRun> out;
  for (auto& r : all)
    if (r.started == newest.at(run_key(r))) out.push_back(std::move(r));
  return out;
}

// The L2 of a device, which no committed report records; the figure its runtime reports.
std::uint64_t l2_bytes_of(const std::string& device_name) {
  if (device_name.find("H200") != std::string::npos) return std::uint64_t{50} << 20;
  if (device_name.find("H100") != std::string::npos) return std::uint64_t{50} << 20;
  return 0;
}

// The plan's facts from a report and the probe report of the same run.
A2aFacts facts_of(const RecordedRun& run) {
  const Json& meta = run.doc.at("meta");
  std::map<int, Json> env_rank;
  for (const auto& r : meta.at("environment").at("ranks")) env_rank[r.at("rank").get<int>()] = r;
  std::map<std::string, Json> probe_device;
  for (const auto& n : run.probe.at("nodes"))
    for (const auto& d : n.at("devices")) probe_device[d.at("pci_bus_id").get<std::string>()] = d;
  std::vector<detail::RankPlace> all;
  A2aFacts f;
  f.platform = meta.value("platform", "") == "cuda" ? Platform::cuda : Platform::host;
  for (const auto& r : meta.at("ranks")) {
    const Json& e = env_rank.at(r.at("rank").get<int>());
    const std::string pci = e.at("pci_bus_id").get<std::string>();
    DeviceInfo d;
    d.name = r.at("device_name").get<std::string>();
    d.arch = r.at("arch").get<std::string>();
    d.pci_bus_id = pci;
    d.l2_bytes = l2_bytes_of(d.name);
    if (probe_device.count(pci)) {
      d.multiprocessors = probe_device.at(pci).at("multiprocessors").get<int>();
      d.memory_bytes = probe_device.at(pci).at("memory_bytes").get<std::uint64_t>();
    }
    all.push_back(detail::rank_place(r.at("node").get<int>(), d, r.at("device").get<int>(),
                                     e.value("mps", false), false));
    if (all.size() == 1) f.device = d;
  }
  f.placement = detail::device_placement_of(all, f.platform == Platform::host);
  const std::string arch = meta.at("jit").at("arch").get<std::string>();
  f.cache_hints = arch_has_l2_cache_hints(arch);
  const Json env = meta.value("env", Json::object());
  const std::string share = env.value("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "");
  f.mps_thread_share = !share.empty() && std::atof(share.c_str()) < 100;
  f.distinct_policy = meta.value("plan_policy", "placement") == "distinct_gpus";
  const int sms = f.device.multiprocessors;
  f.resident_blocks = [arch, sms](const detail::PushSpec& s) -> long {
    const Kernels& k = kernels_for(arch);
    const auto sym = k.lowered.find(detail::a2a_kernel_name(s));
    if (sym == k.lowered.end() || !k.resources.count(sym->second)) return 0;
    return std::max(blocks_per_multiprocessor(arch, k.resources.at(sym->second)), 0L) * sms;
  };
  return f;
}

// The options of a report (its config) that the plan reads.
A2aConfig config_of(const Json& c) {
  A2aConfig cfg;
  cfg.graph = c.value("graph", 0);
  cfg.protocols = parse_protocols(c.value("protocol", "auto"));
  cfg.blocks_per_peer = c.value("blocks_per_peer", 0);
  cfg.unroll = c.value("unroll", 0);
  cfg.overlap_launch = c.value("launch", "programmatic") != "plain";
  cfg.signal_scope = parse_signal_scope(c.value("signal_scope", "auto"));
  cfg.source_cache = parse_source_cache(c.value("source_cache", "auto"));
  return cfg;
}

const Json& plan_table() {
  static const Json t = read_json(MORI_A2A_PLAN_TABLE);
  return t;
}

}  // namespace

// The occupancy this test computes is the driver's where the committed run's kernels are known: every
// sm_90 push kernel of 32 registers holds 4 blocks of 512 threads per multiprocessor, 40 holds 3.
TEST(A2aPlanReplay, OccupancyFromRegisters) {
  EXPECT_EQ(blocks_per_multiprocessor("sm_90", {32, 1028}), 4);
  EXPECT_EQ(blocks_per_multiprocessor("sm_90", {40, 1028}), 3);
  EXPECT_EQ(blocks_per_multiprocessor("sm_90", {56, 1028}), 2);
  EXPECT_EQ(blocks_per_multiprocessor("sm_90", {64, 0}), 2);
  EXPECT_EQ(blocks_per_multiprocessor("sm_80", {32, 0}), -1);
}

// Every row of the newest committed evidence run of each case, replayed through this tree's plan.
TEST(A2aPlanReplay, CommittedGpuRunsReplayUnchanged) {
  ASSERT_TRUE(plan_table().is_object()) << MORI_A2A_PLAN_TABLE;
  const std::vector<RecordedRun> runs = newest_run_per_case(plan_table());
  ASSERT_FALSE(runs.empty()) << "no committed evidence run (results/*/<rev>/manifest.json) matches a case";
  int rows = 0;
  for (const RecordedRun& run : runs) {
    const std::string report = fs::relative(run.report, MORI_RESULTS_DIR).string();
    const A2aFacts f = facts_of(run);
    const std::string arch = run.doc.at("meta").at("jit").at("arch").get<std::string>();
    ASSERT_NE(blocks_per_multiprocessor(arch, {32, 0}), -1)
        << report << ": no occupancy figures for " << arch;
    ASSERT_GT(f.device.multiprocessors, 0) << report << ": the probe report has no device of the ranks";
    ASSERT_GT(f.device.l2_bytes, 0u) << report << ": no L2 figure for " << f.device.name << " (l2_bytes_of)";
    std::printf("replaying %s (case %s, %zu rows)\n", report.c_str(), run.case_name.c_str(),
                run.doc.at("results").size());
    const A2aConfig cfg = config_of(run.doc.at("config"));
    const Json& results = run.doc.at("results");
    for (std::size_t i = 0; i < results.size(); ++i) {
      const Json& r = results[i];
      const auto chunk = r.at("chunk_bytes").get<std::size_t>();
      const bool device_sync = r.at("sync") == "device";
      const Addressing a = r.at("addressing") == "lsa" ? Addressing::lsa : Addressing::ptr;
      const std::vector<Protocol> given = parse_protocols(r.at("protocol").get<std::string>());
      ASSERT_EQ(given.size(), 1u) << report;
      const std::string what = report + " (case " + run.case_name + ") row " + std::to_string(i) +
                               " (chunk " + std::to_string(chunk) + " B, " +
                               r.at("addressing").get<std::string>() + ", sync " +
                               r.at("sync").get<std::string>() + (r.value("graph", false) ? ", graph" : "") +
                               ", " + r.at("protocol").get<std::string>() + ")";
      const A2aChunkPlan plan = a2a_chunk_plan(cfg, f, chunk);
      if (device_sync) {
        EXPECT_NE(std::find(plan.protocols.begin(), plan.protocols.end(), given[0]), plan.protocols.end())
            << what << ": the plan's protocols do not include the row's";
      }
      const detail::PushSpec s = a2a_push_plan(cfg, f, a, device_sync, chunk, given[0]);
      EXPECT_EQ(s.blocks_per_peer, r.at("blocks_per_peer").get<int>()) << what << ": blocks_per_peer";
      EXPECT_EQ(s.unroll, r.at("unroll").get<int>()) << what << ": unroll";
      EXPECT_EQ(s.overlap ? "programmatic" : "plain", r.at("launch").get<std::string>())
          << what << ": launch";
      EXPECT_EQ(!device_sync     ? "none"
                : s.device_scope ? "device"
                                 : "system",
                r.at("signal_scope").get<std::string>())
          << what << ": signal_scope";
      EXPECT_EQ(given[0] == Protocol::copy ? "none"
                : s.source_evict_first     ? "evict_first"
                                           : "normal",
                r.at("source_cache").get<std::string>())
          << what << ": source_cache";
      if (r.contains("table_world")) {
        EXPECT_EQ(plan.table_world, r.at("table_world").get<int>()) << what << ": table_world";
      }
      if (r.contains("table_device")) {
        EXPECT_EQ(plan.table_device, r.at("table_device").get<std::string>()) << what << ": table_device";
      }
      ++rows;
    }
  }
  EXPECT_GT(rows, 0);
}
