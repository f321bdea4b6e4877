// SPDX-License-Identifier: MIT
// What mori-probe --health judges, gathered across the measurement (health/gather.hpp; docs/mori-probe.md
// "Health"): NVLink and Xid from NVML before and after, the short all-to-all, and the checks of health.hpp
// over them, the peer matrix and the doctor's diagnoses.
#include "mori/symm/health/gather.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>

#include "mori/symm/a2a/a2a.hpp"
#include "mori/symm/a2a/fleet.hpp"
#include "mori/symm/base/detail/fault.hpp"
#include "mori/symm/base/detail/text.hpp"
#include "mori/symm/base/error.hpp"
#include "mori/symm/bringup/doctor.hpp"
#include "mori/symm/bringup/environment.hpp"
#include "mori/symm/bringup/probe.hpp"
#include "mori/symm/comm/bootstrap.hpp"
#include "mori/symm/platform/detail/nvml.hpp"

namespace mori::symm {
namespace {

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

// The short all-to-all over one load/store team (boot: the team's): one chunk, pointer addressing, device
// sync (host sync where ranks time-slice a GPU). facts: the team's ranks' facts.
std::vector<A2aFact> team_a2a(Bootstrap& boot, Runtime& rt, int device, const std::vector<RankFacts>& facts,
                              const std::optional<HandleType>& handle_type) {
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
    validate_a2a(cfg, boot.world(), host ? 0 : rt.device_info(device).memory_bytes, host);
  } catch (const UsageError& e) {
    f.not_run = e.what();
    return {f};
  }
  A2aBench bench(rt, boot, device, cfg);
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
    x.wrong_ranks = r.wrong_ranks;
    out.push_back(x);
  }
  return out;
}

// One node's all-to-all fact as it rides the job's allgather (fixed size; the team's rank 0 sends it).
struct A2aFactRaw {
  std::int32_t leader = 0, ran = 0, graph = 0, has_bw = 0;
  std::int32_t world = 0;
  std::uint64_t chunk_bytes = 0, wrong = 0;
  double agg_bw_gbps = 0;
  char sync[8] = {};
  char why[232] = {};      // not run: why; failed: the error
  char wrong_by[96] = {};  // the ranks that received wrong elements (cut to fit)
  std::int32_t failed = 0;
};

std::string text_of(const char* s, std::size_t n) {
  return std::string(s, strnlen(s, n));
}

// A job of several nodes: every node runs the short all-to-all within itself, all nodes at once (each on a
// Bootstrap of its own team), and every rank learns every node's fact, one per node in node order. A node
// whose run fails is a failed fact naming the error; the others go on.
std::vector<A2aFact> per_node_a2a(Bootstrap& boot, Runtime& rt, int device,
                                  const std::vector<RankFacts>& facts,
                                  const std::optional<HandleType>& handle_type) {
  const int my_node = boot.node_of(boot.rank());
  std::vector<RankFacts> mine;
  for (const auto& f : facts)
    if (f.node == my_node) mine.push_back(f);
  A2aFact f;
  f.world = boot.team_size();
  try {
    auto team = boot.team_bootstrap("health.a2a.teams");
    const auto rows = team_a2a(*team, rt, device, mine, handle_type);
    f = rows.front();  // one chunk, one sync mode, no graph: one row
  } catch (const UsageError& e) {
    f.not_run = e.what();
  } catch (const TimeoutError&) {
    throw;  // a rank of the team is gone: the job cannot gather the facts either
  } catch (const Error& e) {
    f.error = e.what();
  }
  A2aFactRaw raw;
  raw.leader = boot.team_rank() == 0;
  raw.ran = f.ran;
  raw.failed = !f.error.empty();
  raw.graph = f.graph;
  raw.has_bw = f.agg_bw_gbps.has_value();
  raw.world = f.world;
  raw.chunk_bytes = f.chunk_bytes;
  raw.wrong = f.wrong;
  raw.agg_bw_gbps = f.agg_bw_gbps.value_or(0);
  copy_text(raw.sync, sizeof(raw.sync), f.sync);
  copy_text(raw.why, sizeof(raw.why), f.error.empty() ? f.not_run : f.error);
  copy_text(raw.wrong_by, sizeof(raw.wrong_by), f.wrong ? boot.name_ranks(f.wrong_ranks) : std::string());
  const auto all = boot.allgather_value("health.a2a.nodes", raw);
  std::vector<A2aFact> out;
  for (int r = 0; r < boot.world(); ++r) {
    const A2aFactRaw& x = all[static_cast<std::size_t>(r)];
    if (!x.leader) continue;
    A2aFact n;
    n.node = boot.node_name(r);
    n.ran = x.ran;
    n.graph = x.graph;
    n.world = x.world;
    n.chunk_bytes = x.chunk_bytes;
    n.wrong = x.wrong;
    n.wrong_by = text_of(x.wrong_by, sizeof(x.wrong_by));
    if (x.has_bw) n.agg_bw_gbps = x.agg_bw_gbps;
    n.sync = text_of(x.sync, sizeof(x.sync));
    (x.failed ? n.error : n.not_run) = text_of(x.why, sizeof(x.why));
    out.push_back(n);
  }
  return out;
}

// The short all-to-all: within the job's one load/store team, or within each node at once.
std::vector<A2aFact> health_a2a(Bootstrap& boot, Runtime& rt, int device, const std::vector<RankFacts>& facts,
                                const std::optional<HandleType>& handle_type) {
  if (boot.team_size() != boot.world()) return per_node_a2a(boot, rt, device, facts, handle_type);
  auto rows = team_a2a(boot, rt, device, facts, handle_type);
  for (auto& x : rows)
    if (!x.wrong_ranks.empty()) x.wrong_by = "rank " + boot.name_ranks(x.wrong_ranks);
  return rows;
}

void append(std::vector<HealthCheck>& out, const std::vector<HealthCheck>& more) {
  out.insert(out.end(), more.begin(), more.end());
}

// The peer matrix, per node (load/store team): the pairs against each other and against the expectations.
// Sets *over_nvlink where a pair of this rank's node has NVLink links.
std::vector<HealthCheck> pair_checks(Bootstrap& boot, Runtime& rt, const Json& nodes,
                                     const PeerMatrix& matrix, const std::vector<RankFacts>& facts,
                                     const Expectations& expectations, bool* over_nvlink) {
  const bool host = rt.platform() == Platform::host;
  std::vector<HealthCheck> out;
  std::map<int, std::vector<PairFact>> by_node;
  for (auto r : pair_facts(matrix)) {
    const auto& s = facts[static_cast<std::size_t>(r.src)];
    const auto& d = facts[static_cast<std::size_t>(r.dst)];
    if (!host) {
      r.src_pci = s.pci_bus_id;
      r.dst_pci = d.pci_bus_id;
    }
    if (s.node == boot.node_of(boot.rank())) r.links = links_between(rt, s, d);
    *over_nvlink = *over_nvlink || r.links > 0;
    by_node[s.node].push_back(r);
  }
  for (const auto& [node, rows] : by_node) {
    const std::size_t first = out.size();
    int ranks = 0;
    std::set<std::string> gpus;
    for (const auto& f : facts)
      if (f.node == node) ++ranks, gpus.insert(f.pci_bus_id);
    const auto layout = node_layout_of(ranks, static_cast<int>(gpus.size()), host);
    append(out, check_pairs(rows, layout, host ? host_outlier_limits() : OutlierLimits{}));
    const auto& src = facts[static_cast<std::size_t>(rows.front().src)];
    append(out, check_expectations(rows, device_name(nodes, node, src.device), host, expectations));
    if (boot.num_nodes() > 1)  // hosts first: each check of this node names it
      for (std::size_t i = first; i < out.size(); ++i) out[i].node = boot.node_name(rows.front().src);
  }
  return out;
}

// NVLink and Xid per GPU (each GPU once), each named by its node on a job of several nodes.
std::vector<HealthCheck> link_checks(Bootstrap& boot, const std::vector<RankFacts>& facts,
                                     const std::vector<HealthGather::RankLinks>& before,
                                     const std::vector<HealthGather::RankLinks>& after) {
  std::set<std::string> seen;
  std::map<int, int> gpus_on_node;
  std::vector<std::size_t> first_rank;  // of each GPU
  for (std::size_t r = 0; r < before.size(); ++r) {
    if (!seen.insert(std::string(facts[r].host) + "/" + before[r].pci).second) continue;
    ++gpus_on_node[facts[r].node];
    first_rank.push_back(r);
  }
  std::vector<HealthCheck> out;
  for (const std::size_t r : first_rank) {
    auto checks =
        check_links({{before[r].pci, before[r].links, after[r].links}}, gpus_on_node[facts[r].node]);
    if (boot.num_nodes() > 1)
      for (auto& c : checks) c.node = boot.node_name(static_cast<int>(r));
    append(out, checks);
  }
  return out;
}

// What each rank says of its node, as it rides the allgather (fixed size).
struct NodeFactRaw {
  std::int32_t gpus = 0;
  char model[64] = {};
  char driver[48] = {};
  char runtime[48] = {};
  char handle[16] = {};
};

// Adds text to the ", "-joined list if it is not there yet.
void add_distinct(std::string& list, const std::string& text) {
  if ((", " + list + ", ").find(", " + text + ", ") == std::string::npos)
    list += (list.empty() ? "" : ", ") + text;
}

// The handle type this rank's windows use (the user's choice, else the one every step of which works: the
// probe's choice); "none" where no handle type works.
std::string chosen_handle(Runtime& rt, int device, const std::optional<HandleType>& choice) {
  try {
    return to_string(resolve_handle_type(rt, device, choice));
  } catch (const Error&) {
    return "none";
  }
}

// Collective: every node's facts, in the order of its first rank. The test-only faults health.gpu-count (one
// device fewer), health.driver-version (the driver reads "fault-injected") and health.handle-type (likewise
// the handle type chosen) make a node differ (docs/reliability.md).
std::vector<NodeFacts> gather_node_facts(Bootstrap& boot, Runtime& rt, int device,
                                         const std::optional<HandleType>& handle_type) {
  NodeFactRaw mine;
  mine.gpus = rt.device_count() - (detail::fault_armed("health.gpu-count", boot.rank()) ? 1 : 0);
  copy_text(mine.model, sizeof(mine.model), rt.device_info(device).name);
  copy_text(
      mine.driver, sizeof(mine.driver),
      detail::fault_armed("health.driver-version", boot.rank()) ? "fault-injected" : rt.driver_version());
  copy_text(mine.runtime, sizeof(mine.runtime), rt.runtime_version());
  copy_text(mine.handle, sizeof(mine.handle),
            detail::fault_armed("health.handle-type", boot.rank()) ? "fault-injected"
                                                                   : chosen_handle(rt, device, handle_type));
  const auto all = boot.allgather_value("health.fleet.facts", mine);
  std::map<int, std::size_t> index;  // node -> out
  std::map<int, std::vector<int>> ranks;
  std::vector<NodeFacts> out;
  for (int r = 0; r < boot.world(); ++r) {
    const NodeFactRaw& x = all[static_cast<std::size_t>(r)];
    const int node = boot.node_of(r);
    if (!index.count(node)) {
      index[node] = out.size();
      out.push_back({boot.node_name(r), "", 0, "", "", "", ""});
    }
    NodeFacts& n = out[index[node]];
    ranks[node].push_back(r);
    n.gpus = std::max(n.gpus, static_cast<int>(x.gpus));
    add_distinct(n.model, text_of(x.model, sizeof(x.model)));
    add_distinct(n.driver, text_of(x.driver, sizeof(x.driver)));
    add_distinct(n.runtime, text_of(x.runtime, sizeof(x.runtime)));
    add_distinct(n.handle, text_of(x.handle, sizeof(x.handle)));
  }

  for (auto& [node, i] : index) out[i].ranks = detail::rank_ranges(ranks[node]);
  return out;
}

}  // namespace

HealthGather::HealthGather(Bootstrap& boot, Runtime& rt, int device) : boot_(boot), rt_(rt), device_(device) {
  if (rt.platform() != Platform::host)
    xid_ = std::make_unique<detail::XidWatch>(rt.device_info(device).pci_bus_id);
  before_ = read_all("health.links.before", nullptr);
}

HealthGather::~HealthGather() = default;

std::vector<HealthGather::RankLinks> HealthGather::read_all(const char* name, detail::XidWatch* xid) {
  std::vector<RankLinks> out;
  for (const auto& r : boot_.allgather_value(name, read_links(rt_, device_, xid)))
    out.push_back({r.pci, snapshot(r)});
  return out;
}

std::vector<HealthCheck> HealthGather::finish(const Json& report, const PeerMatrix& matrix,
                                              const std::vector<RankFacts>& facts,
                                              const std::optional<HandleType>& handle_type,
                                              const Expectations& expectations) {
  A2aFact timed_out;
  timed_out.not_run = "the peer matrix timed out";
  timed_out.world = boot_.world();
  const auto a2a = matrix.timed_out() ? std::vector<A2aFact>{timed_out}
                                      : health_a2a(boot_, rt_, device_, facts, handle_type);
  const auto after = read_all("health.links.after", xid_.get());
  const bool host = rt_.platform() == Platform::host;
  std::vector<HealthCheck> out = check_diagnoses(report["diagnoses"]);
  bool over_nvlink = false;
  append(out, pair_checks(boot_, rt_, report["nodes"], matrix, facts, expectations, &over_nvlink));
  append(out, link_checks(boot_, facts, before_, after));
  append(out, check_a2a(a2a));
  nodes_ = gather_node_facts(boot_, rt_, device_, handle_type);
  append(out, check_fleet(nodes_));
  A2aFleetRules rules;
  rules.host_runtime = host;
  append(out, check_fleet_a2a(a2a, rules));
  std::set<std::string> gpus;
  for (const auto& f : facts) gpus.insert(std::string(f.host) + "/" + f.pci_bus_id);
  const std::string ic = host                         ? "host"
                         : gpus.size() < facts.size() ? "same-device"
                         : over_nvlink                ? "nvlink"
                                                      : "peer";
  append(out, check_a2a_expectations(a2a, device_name(report["nodes"], facts[0].node, facts[0].device), ic,
                                     expectations));
  return out;
}

}  // namespace mori::symm
