// mori-probe: per-device capability report; the handle type is chosen by trying it.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <set>

#include "mori/symm/a2a/a2a.hpp"
#include "mori/symm/base/error.hpp"
#include "mori/symm/base/files.hpp"
#include "mori/symm/base/report.hpp"
#include "mori/symm/bringup/doctor.hpp"
#include "mori/symm/bringup/environment.hpp"
#include "mori/symm/bringup/probe.hpp"
#include "mori/symm/comm/bootstrap.hpp"
#include "mori/symm/health/health.hpp"
#include "mori/symm/jit/jit.hpp"
#include "mori/symm/matrix/matrix.hpp"
#include "mori/symm/platform/detail/nvml.hpp"
#include "mori/symm/tool/tool.hpp"

using namespace mori::symm;

namespace {

namespace fs = std::filesystem;

struct Options {
  bool deep = false;
  double deep_mib = 256;
  bool jit_precompile = false;
  std::string archs;
  std::uint64_t wall_clock_khz = 0;  // --jit-precompile, AMD: 0 = the device's where it is of the arch
  bool list_diagnoses = false;
  bool strict = false;
  int windows = 16;
  bool matrix = false;
  double matrix_mib = 64;
  MatrixOptions mx;
  std::string write_kernel = "auto";
  std::string write_blocks = "auto";
  bool health = false;
  std::string handle_type = "auto";  // --matrix / --health: the window's
  std::string expect;                // --expect FILE: a site's expectations on top of ours
  bool expect_only = false;          // --expect-only: the site's file in place of ours
  Expectations expectations;         // what --health judges against (read while validating the options)
};

int list_catalog(ToolEnv& env) {
  if (!env.is_root()) return 0;
  std::printf("%-34s %-8s %s\n", "id", "severity", "cause / fix");
  for (const auto& e : diagnosis_catalog())
    std::printf("%-34s %-8s %s\n%44s fix: %s\n", e.id, to_string(e.severity), e.cause, "", e.fix);
  return 0;
}

// The device and deep checks of the node this rank probed.
Json node_diagnoses(ToolEnv& env, const std::vector<DeviceProbe>& probes, const Json& node) {
  std::vector<Diagnosis> d;
  for (const auto& p : probes) {
    auto x = diagnose_device(p, env.rt->platform(), device_env(*env.rt, p.info.index), env.boot->rank());
    d.insert(d.end(), x.begin(), x.end());
  }
  if (node.contains("deep")) {
    auto x = diagnose_deep(node["deep"], env.boot->rank());
    d.insert(d.end(), x.begin(), x.end());
  }
  return to_json(d);
}

// Every node's device checks plus the cross-rank checks, errors first.
std::vector<Diagnosis> all_diagnoses(const Json& nodes, const std::vector<RankFacts>& facts, int windows) {
  auto d = diagnose_ranks(facts, windows);
  for (const auto& n : nodes)
    for (const auto& j : n["diagnoses"]) d.push_back(diagnosis_from_json(j));
  sort_diagnoses(d);
  return d;
}

// Every kernel of the catalog for every arch asked for; needs no GPU.
int precompile(ToolEnv& env, const Options& o) {
  std::string archs = o.archs;
  if (archs.empty())
    if (const char* a = std::getenv("MORI_GPU_ARCHS"); a && *a) archs = a;
  if (archs.empty() && env.rt->platform() != Platform::host) archs = env.rt->device_info(env.device).arch;
  if (archs.empty())
    throw UsageError("--jit-precompile: name the archs with --archs or MORI_GPU_ARCHS (e.g. sm_90)");
  // The whole list is checked before anything is compiled or created: a bad entry anywhere is exit 2 naming
  // every bad entry, with no cache folder left behind (docs/mori-probe.md).
  const std::string source = o.archs.empty() && archs != o.archs ? "MORI_GPU_ARCHS" : "--archs";
  std::vector<std::string> list, bad;
  for (std::size_t pos = 0; pos <= archs.size();) {
    const std::size_t end = std::min(archs.find(',', pos), archs.size());
    list.push_back(archs.substr(pos, end - pos));
    pos = end + 1;
  }
  for (std::size_t i = 0; i < list.size(); ++i) {
    std::string why = arch_name_problem(list[i]);
    if (why.empty() && std::find(list.begin(), list.begin() + static_cast<std::ptrdiff_t>(i), list[i]) !=
                           list.begin() + static_cast<std::ptrdiff_t>(i))
      why = "a repeat";
    if (!why.empty()) bad.push_back("'" + list[i] + "' is " + why);
  }
  if (!bad.empty()) {
    std::string names;
    for (const auto& b : bad) names += (names.empty() ? "" : ", ") + b;
    throw UsageError(source + ": " + names + " (in '" + archs + "'; nothing was compiled)");
  }
  // The AMD kernels' clock (docs/amd.md, `%globaltimer`): --wall-clock-khz, else this device's rate where the
  // arch is its own, else the prelude's 100 MHz.
  std::uint64_t own_khz = 0;
  std::string own_arch;
  if (env.rt->platform() == Platform::amd) {
    const DeviceInfo info = env.rt->device_info(env.device);
    own_khz = info.wall_clock_khz;
    own_arch = info.arch;
  }
  // Every arch's cache folder before the first compile: a cache that cannot be used fails the run (exit 3,
  // naming why), since compiling in memory would fill nothing.
  std::vector<std::unique_ptr<Jit>> jits;
  for (const auto& arch : list) {
    const std::uint64_t khz = o.wall_clock_khz ? o.wall_clock_khz : arch == own_arch ? own_khz : 0;
    jits.push_back(std::make_unique<Jit>(arch, arch.rfind("sm_", 0) == 0 ? "cuda" : "amd", khz));
    if (jits.back()->cache_dir().empty())
      throw ApiError("--jit-precompile " + arch, __FILE__, __LINE__, "JIT_CACHE_UNUSABLE",
                     jits.back()->memory_reason());
  }
  Json out = Json::array();
  for (auto& jp : jits) {
    Jit& jit = *jp;
    const std::string& arch = jit.arch();
    Json instantiations = Json::object();
    for (const auto& spec : kernel_catalog(arch)) {
      jit.get(spec);
      instantiations[spec.file] = spec.instantiations.size();
      // In the cache, or the run failed: a publish that failed or a folder that went away is a warning to a
      // job, but here it means nothing was precompiled.
      const auto& got = jit.stats().back();
      std::error_code ec;
      if (jit.cache_dir().empty() ||
          !std::filesystem::exists(jit.cache_dir() + "/" + got.key + "/manifest", ec))
        throw ApiError("--jit-precompile " + arch + " " + spec.file, __FILE__, __LINE__, "JIT_CACHE_UNUSABLE",
                       "the entry " + got.key + " is not in the cache" +
                           (jit.memory_reason().empty() ? "" : ": " + jit.memory_reason()));
      if (env.is_root()) {
        const auto& st = jit.stats().back();
        std::printf("%-8s %-10s %-9s %8.1f ms  key %s  (%zu instantiations)\n", arch.c_str(),
                    spec.file.c_str(), st.source.c_str(), st.ms, st.key.c_str(), spec.instantiations.size());
      }
    }
    // What this arch does not get, by design (docs/amd.md "Which kernels exist for which vendor").
    Json left_out = Json::array();
    for (const auto& k : kernels_left_out(arch)) {
      left_out.push_back({{"file", k.file}, {"instantiation", k.instantiation}, {"needs", k.needs}});
      if (env.is_root())
        std::printf("%-8s %-10s left out: %s (needs %s)\n", arch.c_str(), k.file.c_str(),
                    k.instantiation.c_str(), k.needs.c_str());
    }
    Json arch_doc = jit.stats_json();
    arch_doc["instantiations"] = instantiations;
    arch_doc["left_out"] = left_out;
    arch_doc["wall_clock_khz"] = jit.wall_clock_khz() ? Json(jit.wall_clock_khz()) : Json(nullptr);
    out.push_back(arch_doc);
  }
  if (env.is_root() && !env.common.json.empty()) {
    Json doc;
    doc["schema"] = "mori.probe/1";
    doc["meta"] = make_meta(env, "");
    doc["config"] = {{"jit_precompile", true}, {"archs", archs}};
    doc["nodes"] = Json::array();
    doc["jit_precompile"] = out;
    write_json(env.common.json, doc);
  }
  return 0;
}

std::string gib(std::uint64_t b) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f GiB", static_cast<double>(b) / (1ull << 30));
  return buf;
}

std::string attr(const Json& a) {
  return a.is_null() ? "-" : (a.get<bool>() ? "1" : "0");
}

void print_table(const Json& nodes) {
  for (const auto& node : nodes) {
    std::printf("node %s (%s runtime)\n", node["host"].get<std::string>().c_str(),
                node["runtime"].get<std::string>().c_str());
    if (node.contains("gpu_unavailable"))
      std::printf("  note: %s\n", node["gpu_unavailable"].get<std::string>().c_str());
    std::printf("  %-3s %-28s %-7s %4s %10s %4s %9s  %-14s %-14s %-9s\n", "dev", "name", "arch", "SMs",
                "memory", "vmm", "gran", "posix_fd a/use", "fabric a/use", "chosen");
    for (const auto& d : node["devices"]) {
      const auto& fd = d["handle_types"]["posix_fd"];
      const auto& fab = d["handle_types"]["fabric"];
      std::printf(
          "  %-3d %-28.28s %-7s %4d %10s %4s %7zuKi  %-14s %-14s %-9s\n", d["index"].get<int>(),
          d["name"].get<std::string>().c_str(), d["arch"].get<std::string>().c_str(),
          d["multiprocessors"].get<int>(), gib(d["memory_bytes"].get<std::uint64_t>()).c_str(),
          d["vmm_supported"].get<bool>() ? "yes" : "no",
          d["granularity"]["recommended"].get<std::size_t>() / 1024,
          (attr(fd["attribute"]) + " / " + (fd["usable"].get<bool>() ? "yes" : "no")).c_str(),
          (attr(fab["attribute"]) + " / " + (fab["usable"].get<bool>() ? "yes" : "no")).c_str(),
          d["chosen_handle_type"].is_null() ? "none" : d["chosen_handle_type"].get<std::string>().c_str());
      std::printf(
          "      reason: %s%s\n", d["reason"].get<std::string>().c_str(),
          d["attribute_disagrees"].get<bool>() ? "  [driver attribute disagrees with what works]" : "");
      for (const char* t : {"posix_fd", "fabric"}) {
        std::string line;
        for (const auto& s : d["handle_types"][t]["steps"])
          line += s["step"].get<std::string>() + "=" + s["status"].get<std::string>() + " ";
        std::printf("      %-8s %s\n", t, line.c_str());
      }
      std::printf("      uncached: %s; IMEX channel: %s\n", d["uncached"]["note"].get<std::string>().c_str(),
                  d["imex_channel"].get<std::string>().c_str());
    }
    if (node.contains("deep")) {
      for (const auto& p : node["deep"]["pairs"])
        std::printf("  reach %d -> %d: %s\n", p["accessor"].get<int>(), p["owner"].get<int>(),
                    p["status"].get<std::string>().c_str());
      for (const auto& p : node["deep"]["access_grant_penalty"]) {
        if (p["granted_to"].is_null())
          std::printf("  owner %d local bandwidth: write %.0f GB/s, read %.0f GB/s (%s)\n",
                      p["owner"].get<int>(), p["write_gbps_before"].get<double>(),
                      p["read_gbps_before"].get<double>(), p["note"].get<std::string>().c_str());
        else
          std::printf("  owner %d after granting %d: write %.0f -> %.0f GB/s, read %.0f -> %.0f GB/s\n",
                      p["owner"].get<int>(), p["granted_to"].get<int>(), p["write_gbps_before"].get<double>(),
                      p["write_gbps_after"].get<double>(), p["read_gbps_before"].get<double>(),
                      p["read_gbps_after"].get<double>());
      }
    }
  }
}

// ---- --health (docs/mori-probe.md "Health")
// ------------------------------------------------------------------

// One expectations file through the tools' bounded reader (files.hpp; 1 MiB at most); every way it can be
// wrong (absent, not a regular file, too large, unreadable) is a UsageError naming the file.
Expectations read_expectations(const std::string& path) {
  std::string text;
  try {
    text = read_file(path, kExpectations);
  } catch (const FileError& e) {
    throw UsageError(std::string("--expect: ") + e.what());
  }
  Json doc;
  try {
    doc = Json::parse(text);
  } catch (const std::exception& e) {
    throw UsageError("--expect: " + path + ": not JSON: " + e.what());
  }
  return parse_expectations(doc, path);
}

// The committed expectations: installed next to the tools, else in the source tree; "" when neither exists.
std::string default_expectations_path() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path p = exe.parent_path().parent_path() / "share" / "mori" / "expectations" / "default.json";
    if (fs::exists(p, ec)) return p.string();
  }
#ifdef MORI_SOURCE_EXPECTATIONS
  if (fs::exists(MORI_SOURCE_EXPECTATIONS, ec)) return MORI_SOURCE_EXPECTATIONS;
#endif
  return "";
}

// One device's NVLink state as it rides an allgather (fixed size).
struct LinkRaw {
  char pci[32] = {};
  char why[160] = {};
  std::int32_t known = 0, up = 0, down = 0;
  std::int32_t replay_known = 0, crc_known = 0, xid_known = 0, xid = 0;
  std::uint64_t replay = 0, crc = 0;
};

void copy_text(char* dst, std::size_t n, const std::string& s) {
  std::snprintf(dst, n, "%s", s.c_str());
}

LinkRaw read_links(Runtime& rt, int device, detail::XidWatch* xid) {
  LinkRaw r;
  if (rt.platform() == Platform::host) {
    copy_text(r.pci, sizeof(r.pci), "host");
    copy_text(r.why, sizeof(r.why), "host runtime: no NVML");
    return r;
  }
  const std::string pci = rt.device_info(device).pci_bus_id;
  copy_text(r.pci, sizeof(r.pci), pci);
  const auto nv = detail::nvml_device(pci);
  if (!nv.found || !nv.nvlink_known) {
    copy_text(r.why, sizeof(r.why), nv.found ? nv.nvlink_why : nv.why);
    return r;
  }
  r.known = 1;
  r.up = nv.nvlink_active;
  r.down = nv.nvlink_inactive;
  if (nv.replay_errors) r.replay_known = 1, r.replay = *nv.replay_errors;
  if (nv.crc_errors) r.crc_known = 1, r.crc = *nv.crc_errors;
  if (xid) {
    std::string why;
    if (auto n = xid->events(&why)) r.xid_known = 1, r.xid = *n;
  }
  return r;
}

LinkSnapshot snapshot(const LinkRaw& r) {
  LinkSnapshot s;
  s.known = r.known != 0;
  s.why = r.why;
  s.links_up = r.up;
  s.links_down = r.down;
  if (r.replay_known) s.replay_errors = r.replay;
  if (r.crc_known) s.crc_errors = r.crc;
  if (r.xid_known) s.xid_events = r.xid;
  return s;
}

// NVLink links between the GPUs of two ranks of this rank's node (-1 unknown), from the link rate NVML gives.
int links_between(Runtime& rt, const RankFacts& a, const RankFacts& b) {
  if (rt.platform() == Platform::host) return -1;
  std::string why;
  const Json g = link_gbps(rt, a.device, b.device, &why);
  if (g.is_null()) return why.rfind("no active NVLink", 0) == 0 ? 0 : -1;
  const auto nv = detail::nvml_device(a.pci_bus_id);
  return nv.link_mbps ? static_cast<int>(std::lround(g.get<double>() / (nv.link_mbps / 1000.0))) : -1;
}

std::string device_name(const Json& nodes, int node, int device) {
  for (const auto& n : nodes)
    if (n["node"] == node)
      for (const auto& d : n["devices"])
        if (d["index"] == device) return d["name"].get<std::string>();
  return "unknown";
}

// The short all-to-all: one chunk, pointer addressing, device sync (host sync where ranks time-slice a GPU).
std::vector<A2aFact> health_a2a(ToolEnv& env, const std::vector<RankFacts>& facts,
                                const std::string& handle_type) {
  auto& boot = *env.boot;
  auto& rt = *env.rt;
  const bool host = rt.platform() == Platform::host;
  A2aFact f;
  f.world = boot.world();
  if (boot.world() < 2) {
    f.not_run = "one rank: no peers";
    return {f};
  }
  std::map<std::string, int> per_gpu;
  bool all_mps = true;
  for (const auto& r : facts) {
    ++per_gpu[std::string(r.host) + "/" + r.pci_bus_id];
    all_mps = all_mps && r.mps == 1;
  }
  bool shared = false;
  for (const auto& [k, n] : per_gpu) shared = shared || n > 1;
  A2aConfig cfg;
  // On the host runtime (CPU copies, no performance) the job moves at most 64 MiB an iteration, world^2
  // chunks, so that a rack-sized job stays cheap; a GPU keeps the 16 MiB its expectations are measured at.
  const std::size_t world2 = static_cast<std::size_t>(boot.world()) * static_cast<std::size_t>(boot.world());
  const std::size_t host_chunk = std::clamp<std::size_t>((std::size_t(64) << 20) / world2 / 16 * 16,
                                                         std::size_t(4) << 10, std::size_t(1) << 20);
  cfg.chunks = {host ? host_chunk : std::size_t(16) << 20};
  cfg.addressing = {Addressing::ptr};
  cfg.syncs = {!host && shared && !all_mps ? SyncMode::host : SyncMode::device};
  cfg.warmup = 2;
  cfg.iters = 20;
  cfg.handle_type = handle_type;
  try {
    validate_a2a(cfg, boot.world(), host ? 0 : rt.device_info(env.device).memory_bytes, host);
  } catch (const UsageError& e) {
    f.not_run = e.what();
    return {f};
  }
  A2aBench bench(rt, boot, env.device, cfg);
  const auto rs = bench.run([](const std::string&) {});
  bench.finish();
  std::vector<A2aFact> out;
  for (const auto& r : rs) {
    A2aFact x;
    x.ran = true;
    x.world = boot.world();
    x.chunk_bytes = r.chunk_bytes;
    x.sync = to_string(r.sync);
    x.graph = r.graph;
    x.agg_bw_gbps = r.agg_bw_gbps;
    x.wrong = r.wrong;
    out.push_back(x);
  }
  return out;
}

// Every check of --health over what was measured.
std::vector<HealthCheck> health_checks(ToolEnv& env, const Options& o, const Json& doc,
                                       const PeerMatrix& matrix, const std::vector<RankFacts>& facts,
                                       const std::vector<LinkRaw>& before, const std::vector<LinkRaw>& after,
                                       const std::vector<A2aFact>& a2a) {
  auto& boot = *env.boot;
  auto& rt = *env.rt;
  const bool host = rt.platform() == Platform::host;
  std::vector<HealthCheck> out = check_diagnoses(doc["diagnoses"]);
  // Peer matrix, per node (load/store team).
  std::map<int, std::vector<PairFact>> by_node;
  bool over_nvlink = false;
  for (auto r : pair_facts(matrix)) {
    const auto& s = facts[static_cast<std::size_t>(r.src)];
    const auto& d = facts[static_cast<std::size_t>(r.dst)];
    if (!host) {
      r.src_pci = s.pci_bus_id;
      r.dst_pci = d.pci_bus_id;
    }
    if (s.node == boot.node_of(boot.rank())) r.links = links_between(rt, s, d);
    over_nvlink = over_nvlink || r.links > 0;
    by_node[s.node].push_back(r);
  }
  for (const auto& [node, rows] : by_node) {
    int ranks = 0;
    std::set<std::string> gpus;
    for (const auto& f : facts)
      if (f.node == node) ++ranks, gpus.insert(f.pci_bus_id);
    const auto placement = placement_of(ranks, static_cast<int>(gpus.size()), host);
    auto x = check_pairs(rows, placement, host ? host_outlier_limits() : OutlierLimits{});
    out.insert(out.end(), x.begin(), x.end());
    const auto& src = facts[static_cast<std::size_t>(rows.front().src)];
    x = check_expectations(rows, device_name(doc["nodes"], node, src.device), host, o.expectations);
    out.insert(out.end(), x.begin(), x.end());
  }
  // NVLink and Xid per GPU (each GPU once).
  std::vector<DeviceLinks> links;
  std::set<std::string> seen;
  int gpus_on_node = 0;
  for (std::size_t r = 0; r < before.size(); ++r) {
    const std::string key = std::string(facts[r].host) + "/" + before[r].pci;
    if (!seen.insert(key).second) continue;
    if (facts[r].node == boot.node_of(boot.rank())) ++gpus_on_node;
    links.push_back({before[r].pci, snapshot(before[r]), snapshot(after[r])});
  }
  auto x = check_links(links, gpus_on_node);
  out.insert(out.end(), x.begin(), x.end());
  x = check_a2a(a2a);
  out.insert(out.end(), x.begin(), x.end());
  std::set<std::string> gpus;
  for (const auto& f : facts) gpus.insert(std::string(f.host) + "/" + f.pci_bus_id);
  const std::string ic = host                         ? "host"
                         : gpus.size() < facts.size() ? "same-device"
                         : over_nvlink                ? "nvlink"
                                                      : "peer";
  x = check_a2a_expectations(a2a, device_name(doc["nodes"], facts[0].node, facts[0].device), ic,
                             o.expectations);
  out.insert(out.end(), x.begin(), x.end());
  return out;
}

int run(ToolEnv& env, const Options& o) {
  auto& boot = *env.boot;
  auto& rt = *env.rt;
  // One report per node: the first rank of each node probes every device of the node.
  std::string mine;
  if (boot.host_local_rank() == 0) {
    Json node;
    node["host"] = boot.hosts()[static_cast<std::size_t>(boot.rank())];
    node["node"] = boot.node_of(boot.rank());
    node["runtime"] = rt.platform() == Platform::host ? "host" : to_string(rt.platform());
    node["driver_version"] = rt.driver_version();
    node["runtime_version"] = rt.runtime_version();
    node["mps_active"] = mps_active();
    if (!env.gpu_unavailable.empty()) node["gpu_unavailable"] = env.gpu_unavailable;
    Json devs = Json::array();
    std::vector<DeviceProbe> probes;
    for (int d = 0; d < rt.device_count(); ++d) {
      probes.push_back(probe_device(rt, d));
      devs.push_back(to_json(probes.back()));
    }
    node["devices"] = devs;
    if (o.deep) node["deep"] = probe_deep(rt, static_cast<std::size_t>(o.deep_mib * (1 << 20)));
    node["diagnoses"] = node_diagnoses(env, probes, node);
    mine = node.dump();
  }
  // Gather the node reports (variable length) to every rank; rank 0 prints.
  const auto facts = gather_rank_facts(&boot, &rt, env.device);
  auto lens = boot.allgather_value("probe.lengths", static_cast<std::uint64_t>(mine.size()));
  std::uint64_t maxlen = 0;
  for (auto l : lens) maxlen = std::max(maxlen, l);
  std::vector<char> buf(maxlen, 0), all(maxlen * lens.size(), 0);
  std::copy(mine.begin(), mine.end(), buf.begin());
  if (maxlen) boot.allgather("probe.reports", buf.data(), all.data(), maxlen);
  Json nodes = Json::array();
  for (std::size_t r = 0; r < lens.size(); ++r)
    if (lens[r]) nodes.push_back(Json::parse(std::string(all.data() + r * maxlen, lens[r])));

  std::string chosen;
  if (!nodes.empty() && !nodes[0]["devices"].empty() &&
      !nodes[0]["devices"][0]["chosen_handle_type"].is_null())
    chosen = nodes[0]["devices"][0]["chosen_handle_type"];
  Json doc;
  doc["schema"] = "mori.probe/1";
  doc["meta"] = make_meta(env, chosen);
  doc["config"] = {{"deep", o.deep}, {"deep_bytes", static_cast<std::uint64_t>(o.deep_mib * (1 << 20))}};
  doc["nodes"] = nodes;
  const auto diagnoses = all_diagnoses(nodes, facts, o.windows);
  doc["diagnoses"] = to_json(diagnoses);
  // --health: NVLink state and Xid events watched across the measurement.
  std::unique_ptr<detail::XidWatch> xid;
  std::vector<LinkRaw> links_before;
  if (o.health) {
    if (rt.platform() != Platform::host)
      xid = std::make_unique<detail::XidWatch>(rt.device_info(env.device).pci_bus_id);
    links_before = boot.allgather_value("health.links.before", read_links(rt, env.device, nullptr));
  }
  PeerMatrix matrix;
  if (o.matrix) {
    auto mx = o.mx;
    mx.bytes = static_cast<std::size_t>(o.matrix_mib * (1 << 20)) / 16 * 16;
    const HandleType ht =
        o.handle_type == "auto" ? choose_handle_type(rt, env.device) : parse_handle_type(o.handle_type);
    matrix = peer_matrix(boot, rt, env.device, ht, mx);
    doc["matrix"] = to_json(matrix);
  }
  const bool timed_out = matrix.timed_out();
  std::vector<HealthCheck> health;
  if (o.health) {
    const auto a2a = timed_out ? std::vector<A2aFact>{{false, "the peer matrix timed out", boot.world(), 0,
                                                       "", false, std::nullopt, 0}}
                               : health_a2a(env, facts, o.handle_type);
    const auto links_after =
        boot.allgather_value("health.links.after", read_links(rt, env.device, xid.get()));
    health = health_checks(env, o, doc, matrix, facts, links_before, links_after, a2a);
    doc["config"]["health"] = {{"expectations", o.expectations.files}};
    doc["health"] = to_json(health);
  }
  // meta was made before the measurement: the GPUs' state after it, and the kernels it loaded (docs/json.md).
  if ((o.matrix || o.health) && !timed_out) refresh_meta(env, doc["meta"]);
  if (env.is_root()) {
    if (env.common.json != "-") {
      print_table(nodes);
      std::printf("diagnoses: %s\n%s", diagnoses.empty() ? "none" : "", format_diagnoses(diagnoses).c_str());
      if (o.matrix) std::printf("%s", format_matrix(matrix).c_str());
      if (o.health) {
        std::printf("health:\n%s", format_health(health).c_str());
        for (const auto& f : o.expectations.files) std::printf("  expectations: %s\n", f.c_str());
        if (o.expectations.files.empty()) std::printf("  expectations: none found\n");
        std::printf("health: %s\n", has_failure(health) ? "FAIL" : "ok (no check failed)");
      }
    }
    if (!env.common.json.empty()) write_json(env.common.json, doc);
  }
  if (timed_out) return static_cast<int>(ExitCode::timeout);
  if (o.health && has_failure(health)) return static_cast<int>(ExitCode::check_failed);
  if (o.matrix && matrix.writes_wrong() > 0) {
    if (env.is_root())
      std::fprintf(stderr,
                   "mori-probe: %zu matrix write(s) left wrong bytes in the peer's slot (WRONG above)\n",
                   matrix.writes_wrong());
    return static_cast<int>(ExitCode::check_failed);
  }
  return o.strict && has_error(diagnoses) ? static_cast<int>(ExitCode::check_failed) : 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  ToolSpec spec;
  spec.name = "mori-probe";
  spec.description =
      "Per-device capability report for symmetric memory: which handle type works, by trying it.";
  spec.declare = [&](CLI::App& app) {
    app.add_flag("--deep", o.deep,
                 "Also map and write between every device pair, and measure the access-grant "
                 "penalty on the owner's local bandwidth");
    app.add_option("--deep-mib", o.deep_mib, "Buffer size for --deep bandwidth, MiB")->capture_default_str();
    app.add_flag("--jit-precompile", o.jit_precompile,
                 "Compile every kernel into the JIT cache for --archs (no GPU needed), instead of probing");
    app.add_flag("--list-diagnoses", o.list_diagnoses, "Print the catalog of diagnoses and exit");
    app.add_flag("--strict", o.strict, "Exit 1 when a diagnosis of severity error is found");
    app.add_option("--windows", o.windows, "Windows per rank the application will create (fd-limit check)")
        ->capture_default_str();
    app.add_flag(
        "--matrix", o.matrix,
        "Peer matrix through a symmetric window: write/read bandwidth and put-with-signal latency for "
        "every ordered pair of ranks of a node");
    app.add_option("--matrix-mib", o.matrix_mib, "Bandwidth transfer size for --matrix, MiB")
        ->capture_default_str();
    app.add_option("--pairs", o.mx.pairs, "--matrix: measure this many sampled pairs (0 = all)")
        ->capture_default_str();
    app.add_option("--rounds", o.mx.rounds, "--matrix: ping-pong round trips per pair")
        ->capture_default_str();
    app.add_option("--iterations", o.mx.iterations, "--matrix: timed transfers per direction")
        ->capture_default_str();
    app.add_option(
           "--write-kernel", o.write_kernel,
           "--matrix: the write kernel, auto|plain|stream|bulk|bulk-tma|all (all: every variant, each "
           "against the copy engine)")
        ->capture_default_str();
    app.add_option("--write-blocks", o.write_blocks,
                   "--matrix: write kernel blocks: auto, a count, or Nx = N per multiprocessor")
        ->capture_default_str();
    app.add_option("--write-unroll", o.mx.write.unroll,
                   "--matrix: plain/stream loads in flight per thread, 4, 8 or 16 (0 = auto)")
        ->capture_default_str();
    app.add_option("--write-tile-kib", o.mx.write.tile_kib,
                   "--matrix: bulk/bulk-tma staging buffer, KiB: 4, 8, 16, 32 or 64 (0 = auto)")
        ->capture_default_str();
    app.add_flag(
        "--health", o.health,
        "Run the probe, the peer matrix and a short all-to-all, then judge them: pass, warn, fail or "
        "no_reference per check (exit 1 when one failed)");
    app.add_option("--expect", o.expect,
                   "--health: a site's expectations file (mori.expectations/1), on top of the committed "
                   "results/expectations/default.json (its entries replace ours of the same device, "
                   "interconnect and check)");
    app.add_flag("--expect-only", o.expect_only,
                 "--health: judge against the --expect file alone, in place of the committed expectations");
    app.add_option(
           "--handle-type", o.handle_type,
           "--matrix/--health: the windows' handle type, auto | posix_fd | fabric (auto: the one this "
           "probe chooses)")
        ->capture_default_str();
    app.add_option("--archs", o.archs,
                   "Archs for --jit-precompile, comma separated (default $MORI_GPU_ARCHS)");
    app.add_option(
           "--wall-clock-khz", o.wall_clock_khz,
           "--jit-precompile, AMD archs: the devices' wall-clock rate, kHz (0 = this device's where the arch "
           "is its own, else 100 MHz)")
        ->capture_default_str();
  };
  spec.validate = [&] {
    if (!(o.matrix_mib >= 1.0 / 1024 && o.matrix_mib <= 65536))
      throw UsageError("--matrix-mib: must be in [1/1024, 65536]");
    if (o.mx.pairs < 0 || o.mx.rounds < 1 || o.mx.rounds > 1000000 || o.mx.iterations < 1 ||
        o.mx.iterations > 10000)
      throw UsageError("--pairs >= 0, --rounds in [1, 1000000], --iterations in [1, 10000]");
    if (o.windows < 1 || o.windows > 1 << 20) throw UsageError("--windows: must be in [1, 1048576]");
    if (!(o.deep_mib >= 2 && o.deep_mib <= 65536)) throw UsageError("--deep-mib: must be in [2, 65536]");
    if (o.wall_clock_khz != 0 && !wall_clock_rate_plausible(o.wall_clock_khz))
      throw UsageError("--wall-clock-khz: must be 0 or in [" + std::to_string(kWallClockMinKhz) + ", " +
                       std::to_string(kWallClockMaxKhz) + "]");
    if (o.wall_clock_khz != 0 && !o.jit_precompile)
      throw UsageError("--wall-clock-khz: only with --jit-precompile");
    o.mx.write.kernel = parse_write_kernel(o.write_kernel);
    parse_write_blocks(o.write_blocks, o.mx.write);
    validate_write_kernel(o.mx.write);
    if (o.handle_type != "auto") parse_handle_type(o.handle_type);
    if ((!o.expect.empty() || o.expect_only) && !o.health) throw UsageError("--expect: only with --health");
    if (o.expect_only && o.expect.empty())
      throw UsageError("--expect-only: give the file with --expect FILE");
    if (o.health) {
      o.matrix = true;
      const std::string ours = o.expect_only ? "" : default_expectations_path();
      if (!ours.empty()) o.expectations = read_expectations(ours);
      if (!o.expect.empty()) o.expectations = merge_expectations(o.expectations, read_expectations(o.expect));
    }
  };
  spec.body = [&](ToolEnv& env) {
    if (o.list_diagnoses) return list_catalog(env);
    return o.jit_precompile ? precompile(env, o) : run(env, o);
  };
  return tool_main(argc, argv, spec);
}
