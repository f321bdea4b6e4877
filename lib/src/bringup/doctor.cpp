// SPDX-License-Identifier: MIT
#include "mori/symm/bringup/doctor.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>
#include <type_traits>

#include "mori/symm/base/detail/text.hpp"
#include "mori/symm/base/error.hpp"
#include "mori/symm/base/fds.hpp"

namespace mori::symm {
namespace {

using S = Severity;

const std::vector<CatalogEntry> kCatalog = {
    {"vmm_unsupported", S::error, "the device reports no virtual memory management support",
     "use a GPU and driver with VMM (CUDA >= 10.2 driver, HIP with "
     "hipDeviceAttributeVirtualMemoryManagementSupported)"},
    {"no_usable_handle_type", S::error, "neither posix_fd nor fabric handles work on the device",
     "see the failing step in the probe table; check the driver version and the container's device mounts"},
    {"fabric_no_imex_channel", S::warning,
     "fabric create refused and no IMEX channel exists under /dev/nvidia-caps-imex-channels",
     "create a channel (nvidia-imex, or mknod /dev/nvidia-caps-imex-channels/channel0 c <major> 0) and pass "
     "it "
     "into the container; posix_fd still works within one node"},
    {"fabric_caps_missing_in_container", S::warning,
     "fabric create refused inside a container that has no /dev/nvidia-caps*",
     "map /dev/nvidia-caps and /dev/nvidia-caps-imex-channels into the container (--device or CDI spec)"},
    {"fabric_manager_not_ready", S::warning,
     "NVML reports the GPU fabric registration as not completed or failed",
     "start nvidia-fabricmanager (and nvidia-imex across nodes), wait for state COMPLETED, check its log"},
    {"fabric_create_refused", S::warning,
     "fabric create refused although IMEX channel and fabric state look fine",
     "check the IMEX channel permissions (owner uid/gid) and that the IMEX domain includes this node"},
    {"fabric_attribute_lies", S::warning, "the driver's handle-type attribute disagrees with what works",
     "trust the probe, not the attribute: pass --handle-type explicitly or let the tools choose by probing"},
    {"pid_namespace_mismatch", S::error, "ranks of one node run in different PID namespaces",
     "start all ranks of a node in one PID namespace (one container per node, or --pid=host); the fd "
     "exchange checks the kernel-supplied sender pid and drops every datagram otherwise"},
    {"net_namespace_mismatch", S::error, "ranks of one node run in different network namespaces",
     "share one network namespace per node (--network=host or one pod); abstract UNIX sockets are per netns"},
    {"team_spans_hosts", S::error,
     "one load/store team holds ranks that run on different machines (boot ids)",
     "fix MORI_NODE_ID (or the launcher's node grouping): only ranks of one machine can map each other's "
     "memory"},
    {"hostname_collision", S::warning, "ranks on different machines report the same host name",
     "give every container a distinct host name (--hostname); anything grouping ranks by host name is wrong "
     "here"},
    {"mps_mismatch", S::warning, "ranks of one node disagree on whether an MPS daemon is reachable",
     "export the same CUDA_MPS_PIPE_DIRECTORY to every rank, or run none under MPS"},
    {"gpu_shared_without_mps", S::warning, "several ranks use one GPU without MPS (time-sliced contexts)",
     "start MPS (nvidia-cuda-mps-control -d) or run one rank per GPU"},
    {"exclusive_process_mode", S::error, "several ranks use one GPU in exclusive compute mode without MPS",
     "nvidia-smi -c DEFAULT on that GPU, or start MPS, or run one rank per GPU"},
    {"compute_prohibited", S::error, "the GPU's compute mode is PROHIBITED",
     "nvidia-smi -i <gpu> -c DEFAULT"},
    {"fd_limit_low", S::error,
     "RLIMIT_NOFILE is below what the windows need (open + windows x (4 + 2 per peer) + 16)",
     "raise the limit (ulimit -n <hard>, LimitNOFILE= in systemd, --ulimit nofile= in docker)"},
    {"null_peers_outside_team", S::info,
     "ranks on other nodes have null peer pointers (outside the load/store team)",
     "address peers through the LSA team (lsa_size) only; reach other nodes through a network transport"},
    {"peer_unreachable", S::error, "a device could not write to a peer's memory through a mapping",
     "check peer access (nvidia-smi topo -m, P2P in the BIOS / ACS, IOMMU passthrough)"},
    {"access_grant_slows_owner", S::warning,
     "granting a peer access to an allocation cut the owner's own bandwidth on it",
     "grant peer access only to ranks that need it; keep hot local buffers outside the symmetric window"},
};

using detail::join_ranks;
using detail::rank_ranges;

Diagnosis make(const char* id, std::vector<int> ranks, std::string evidence, int device = -1) {
  const std::string name(id);  // a named string: GCC 13 warns of a reference bound through a temporary
  const CatalogEntry& e = catalog_entry(name);
  return {id, e.severity, std::move(ranks), device, std::move(evidence), e.fix};
}

// Ranks grouped by a value, as "ranks 0,1 have A; rank 2 has B".
template <class Key>
std::string describe_groups(const std::map<Key, std::vector<int>>& groups, const std::string& what) {
  std::string s;
  for (const auto& [k, ranks] : groups) {
    if (!s.empty()) s += "; ";
    std::string v;
    if constexpr (std::is_same_v<Key, std::string>)
      v = k;
    else
      v = std::to_string(k);
    s += (ranks.size() > 1 ? "ranks " : "rank ") + join_ranks(ranks) + " " + what + " " + v;
  }
  return s;
}

template <class Key, class F>
void check_team_agrees(const std::vector<RankFacts>& ranks, F key, const char* id, const std::string& what,
                       std::vector<Diagnosis>& out) {
  std::map<int, std::map<Key, std::vector<int>>> by_node;
  for (const auto& r : ranks) by_node[r.node][key(r)].push_back(r.rank);
  for (const auto& [node, groups] : by_node) {
    if (groups.size() < 2) continue;
    std::vector<int> all;
    for (const auto& g : groups) all.insert(all.end(), g.second.begin(), g.second.end());
    std::sort(all.begin(), all.end());
    out.push_back(make(id, all, "node " + std::to_string(node) + ": " + describe_groups(groups, what)));
  }
}

void check_hostnames(const std::vector<RankFacts>& ranks, std::vector<Diagnosis>& out) {
  std::map<std::string, std::map<std::string, std::vector<int>>> by_host;
  for (const auto& r : ranks) by_host[r.host][r.boot_id].push_back(r.rank);
  for (const auto& [host, boots] : by_host) {
    if (boots.size() < 2) continue;
    std::vector<int> all;
    for (const auto& b : boots) all.insert(all.end(), b.second.begin(), b.second.end());
    std::sort(all.begin(), all.end());
    out.push_back(make("hostname_collision", all,
                       "host name '" + host + "' on " + std::to_string(boots.size()) +
                           " machines: " + describe_groups(boots, "boot id")));
  }
}

void check_gpu_sharing(const std::vector<RankFacts>& ranks, std::vector<Diagnosis>& out) {
  std::map<std::pair<std::string, std::string>, std::vector<const RankFacts*>> by_gpu;
  for (const auto& r : ranks)
    if (r.gpu) by_gpu[{r.boot_id, r.pci_bus_id}].push_back(&r);
  for (const auto& [key, users] : by_gpu) {
    std::vector<int> rk, no_mps;
    for (auto* u : users) {
      rk.push_back(u->rank);
      if (!u->mps) no_mps.push_back(u->rank);
    }
    const int mode = users.front()->compute_mode;
    const int dev = users.front()->device;
    const std::string gpu = "GPU " + key.second + " (device " + std::to_string(dev) + ")";
    if (mode == 2) out.push_back(make("compute_prohibited", rk, gpu + " is in compute mode PROHIBITED", dev));
    if (users.size() < 2 || no_mps.empty()) continue;
    const std::string shared =
        gpu + " is used by ranks " + join_ranks(rk) + "; ranks " + join_ranks(no_mps) + " see no MPS daemon";
    if (mode == 1 || mode == 3)
      out.push_back(
          make("exclusive_process_mode", rk,
               shared + " and the compute mode is " + (mode == 3 ? "EXCLUSIVE_PROCESS" : "EXCLUSIVE_THREAD"),
               dev));
    else
      out.push_back(make("gpu_shared_without_mps", rk, shared, dev));
  }
}

// The tools' preflight rule (fds_needed, base/fds.hpp) for each rank: its team, its descriptors open at the
// start, `windows` windows at once.
void check_fd_limits(const std::vector<RankFacts>& ranks, int windows, std::vector<Diagnosis>& out) {
  std::map<int, int> team;
  for (const auto& r : ranks) ++team[r.node];
  std::map<std::uint64_t, std::vector<int>> low;
  std::uint64_t most = 0;
  for (const auto& r : ranks) {
    const std::uint64_t need = fds_needed(team[r.node], windows, r.open_fds);
    if (r.nofile_soft >= need) continue;
    low[r.nofile_soft].push_back(r.rank);
    most = std::max(most, need);
  }
  if (low.empty()) return;
  std::vector<int> all;
  for (const auto& l : low) all.insert(all.end(), l.second.begin(), l.second.end());
  std::sort(all.begin(), all.end());
  out.push_back(make("fd_limit_low", all,
                     describe_groups(low, "have RLIMIT_NOFILE") + "; " + std::to_string(windows) +
                         " window(s) need up to " + std::to_string(most) +
                         " (open at the start + windows x (4 + 2 per peer) + 16)"));
}

void check_teams(const std::vector<RankFacts>& ranks, std::vector<Diagnosis>& out) {
  std::map<int, std::vector<int>> nodes;
  std::map<int, std::string> names;  // a node's name as users know it (host or node id), where the facts say
  for (const auto& r : ranks) {
    nodes[r.node].push_back(r.rank);
    const std::string name(r.node_name, strnlen(r.node_name, sizeof(r.node_name)));
    if (!name.empty()) names.emplace(r.node, name);
  }
  if (nodes.size() < 2) return;
  std::string s;
  for (const auto& [n, rk] : nodes) {
    const auto it = names.find(n);
    s += (s.empty() ? "" : "; ") + (it != names.end() ? it->second : "node " + std::to_string(n)) +
         ": ranks " + rank_ranges(rk);
  }
  out.push_back(make("null_peers_outside_team", {},
                     std::to_string(nodes.size()) + " load/store teams (" + s +
                         "); peer pointers to ranks of other teams are null"));
}

std::string normalized(const std::string& s) {
  std::string o;
  for (char c : s)
    if (std::isalnum(static_cast<unsigned char>(c)))
      o += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return o;
}

// The step at which a handle type failed, and its status; {"", ""} if none failed.
std::pair<std::string, std::string> failed_step(const HandleProbe& h) {
  for (const auto& s : h.steps)
    if (!s.status.ok()) return {s.step, s.status.error()};
  return {};
}

}  // namespace

const char* to_string(Severity s) noexcept {
  switch (s) {
    case Severity::error:
      return "error";
    case Severity::warning:
      return "warning";
    case Severity::info:
      return "info";
  }
  return "?";
}

const std::vector<CatalogEntry>& diagnosis_catalog() {
  return kCatalog;
}

const CatalogEntry& catalog_entry(const std::string& id) {
  for (const auto& e : kCatalog)
    if (id == e.id) return e;
  throw UsageError("unknown diagnosis id '" + id + "'");
}

std::vector<Diagnosis> diagnose_ranks(const std::vector<RankFacts>& ranks, int windows) {
  std::vector<Diagnosis> out;
  auto pidns = [](const RankFacts& r) { return std::string("pid:[") + std::to_string(r.pid_ns) + "]"; };
  auto netns = [](const RankFacts& r) { return std::string("net:[") + std::to_string(r.net_ns) + "]"; };
  auto boot = [](const RankFacts& r) { return std::string(r.host) + " boot " + r.boot_id; };
  auto mps = [](const RankFacts& r) { return std::string(r.mps ? "an MPS daemon" : "no MPS daemon"); };
  check_team_agrees<std::string>(ranks, pidns, "pid_namespace_mismatch", "in", out);
  check_team_agrees<std::string>(ranks, netns, "net_namespace_mismatch", "in", out);
  check_team_agrees<std::string>(ranks, boot, "team_spans_hosts", "on", out);
  check_team_agrees<std::string>(ranks, mps, "mps_mismatch", "see", out);
  check_hostnames(ranks, out);
  check_gpu_sharing(ranks, out);
  check_fd_limits(ranks, windows, out);
  check_teams(ranks, out);
  sort_diagnoses(out);
  return out;
}

std::vector<Diagnosis> diagnose_device(const DeviceProbe& p, Platform platform, const DeviceEnv& env,
                                       int rank) {
  std::vector<Diagnosis> out;
  if (platform == Platform::host) return out;
  const int dev = p.info.index;
  const std::string d = "device " + std::to_string(dev) + " (" + p.info.pci_bus_id + ")";
  if (!p.info.vmm_supported) out.push_back(make("vmm_unsupported", {rank}, d + ": VMM attribute 0", dev));
  const bool fallback = p.posix_fd.usable;
  if (!p.posix_fd.usable && !p.fabric.usable) {
    auto [fs, fst] = failed_step(p.posix_fd);
    auto [bs, bst] = failed_step(p.fabric);
    out.push_back(make(
        "no_usable_handle_type", {rank},
        d + ": posix_fd failed at " + fs + " -> " + fst + "; fabric failed at " + bs + " -> " + bst, dev));
  }
  if (p.attribute_disagrees)
    out.push_back(make("fabric_attribute_lies", {rank},
                       d + ": fabric attribute " + std::to_string(p.fabric.attribute) + ", fabric usable " +
                           (p.fabric.usable ? "yes" : "no") + "; posix_fd attribute " +
                           std::to_string(p.posix_fd.attribute) + ", usable " +
                           (p.posix_fd.usable ? "yes" : "no"),
                       dev));
  const bool fm_known = env.fabric_state >= 0;
  const bool fm_bad =
      fm_known && env.fabric_state != 0 &&
      (env.fabric_state != 3 || (!env.fabric_status.empty() && env.fabric_status != "SUCCESS"));
  const std::string fm = fm_known ? "NVML fabric state " + std::to_string(env.fabric_state) + ", status " +
                                        (env.fabric_status.empty() ? "unknown" : env.fabric_status)
                                  : "NVML fabric state unknown";
  auto [step, status] = failed_step(p.fabric);
  const std::string n = normalized(status);
  const bool refused = step == "create" && (n.find("NOTPERMITTED") != std::string::npos ||
                                            n.find("INVALIDVALUE") != std::string::npos ||
                                            n.find("NOTSUPPORTED") != std::string::npos);
  auto push = [&](const char* id, const std::string& why) {
    auto x = make(id, {rank}, d + ": " + why, dev);
    if (!fallback) x.severity = Severity::error;
    out.push_back(x);
  };
  if (refused) {
    const std::string saw = "fabric create -> " + status + "; ";
    if (env.in_container && !env.caps_present)
      push("fabric_caps_missing_in_container", saw + "in a container without /dev/nvidia-caps");
    else if (fm_bad)
      push("fabric_manager_not_ready", saw + fm);
    else if (!env.imex_channel_present)
      push("fabric_no_imex_channel", saw + "no channel under /dev/nvidia-caps-imex-channels; " + fm);
    else
      push("fabric_create_refused", saw + "an IMEX channel exists; " + fm);
  } else if (fm_bad) {
    push("fabric_manager_not_ready", fm);
  }
  return out;
}

std::vector<Diagnosis> diagnose_deep(const Json& deep, int rank) {
  std::vector<Diagnosis> out;
  if (!deep.is_object()) return out;
  for (const auto& p : deep.value("pairs", Json::array()))
    if (!p.value("reachable", true))
      out.push_back(make("peer_unreachable", {rank},
                         "device " + std::to_string(p["accessor"].get<int>()) + " -> memory of device " +
                             std::to_string(p["owner"].get<int>()) + ": " +
                             p.value("status", std::string("?")),
                         p["owner"].get<int>()));
  for (const auto& p : deep.value("access_grant_penalty", Json::array())) {
    if (p["granted_to"].is_null()) continue;
    for (const char* k : {"write", "read"}) {
      const double before = p.value(std::string(k) + "_gbps_before", 0.0);
      const double after = p.value(std::string(k) + "_gbps_after", 0.0);
      if (before > 0 && after < 0.5 * before)
        out.push_back(make("access_grant_slows_owner", {rank},
                           "owner device " + std::to_string(p["owner"].get<int>()) + " " + k + " bandwidth " +
                               std::to_string(static_cast<int>(before)) + " -> " +
                               std::to_string(static_cast<int>(after)) + " GB/s after granting device " +
                               std::to_string(p["granted_to"].get<int>()),
                           p["owner"].get<int>()));
    }
  }
  return out;
}

void sort_diagnoses(std::vector<Diagnosis>& d) {
  std::stable_sort(d.begin(), d.end(), [](const Diagnosis& a, const Diagnosis& b) {
    return a.severity != b.severity ? a.severity < b.severity : a.id < b.id;
  });
}

bool has_error(const std::vector<Diagnosis>& d) noexcept {
  return std::any_of(d.begin(), d.end(), [](const Diagnosis& x) { return x.severity == Severity::error; });
}

Json to_json(const Diagnosis& d) {
  return {{"id", d.id},
          {"severity", to_string(d.severity)},
          {"ranks", d.ranks},
          {"device", d.device < 0 ? Json(nullptr) : Json(d.device)},
          {"evidence", d.evidence},
          {"fix", d.fix}};
}

Diagnosis diagnosis_from_json(const Json& j) {
  Diagnosis d;
  d.id = j.at("id").get<std::string>();
  const auto sev = j.at("severity").get<std::string>();
  d.severity = sev == "error" ? Severity::error : sev == "warning" ? Severity::warning : Severity::info;
  d.ranks = j.at("ranks").get<std::vector<int>>();
  d.device = j.at("device").is_null() ? -1 : j.at("device").get<int>();
  d.evidence = j.at("evidence").get<std::string>();
  d.fix = j.at("fix").get<std::string>();
  return d;
}

Json to_json(const std::vector<Diagnosis>& d) {
  Json a = Json::array();
  for (const auto& x : d) a.push_back(to_json(x));
  return a;
}

std::string format_diagnoses(const std::vector<Diagnosis>& d) {
  std::string s;
  for (const auto& x : d) {
    char head[160];
    std::snprintf(head, sizeof(head), "  %-7s %s", to_string(x.severity), x.id.c_str());
    s += head;
    if (!x.ranks.empty()) s += (x.ranks.size() > 1 ? " (ranks " : " (rank ") + join_ranks(x.ranks) + ")";
    s += ": " + x.evidence + "\n          fix: " + x.fix + "\n";
  }
  return s;
}

}  // namespace mori::symm
