// SPDX-License-Identifier: MIT
// The --health verdicts (health.hpp; docs/mori-probe.md "Health"): the peer matrix's pairs against each
// other, NVLink and Xid, the doctor, the short all-to-all, and the summary. The expectations are in
// expectations.cpp, the gathering of the facts in gather.cpp.
#include "mori/symm/health/health.hpp"

#include <algorithm>
#include <cstdio>
#include <map>

#include "mori/symm/a2a/fleet.hpp"
#include "mori/symm/base/enum_names.hpp"
#include "words.hpp"

namespace mori::symm {
namespace {

using detail::pair_name;

std::string num(double v) {
  return detail::health_number(v);
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string pair_where(const PairFact& r) {
  if (r.src_pci.empty() && r.dst_pci.empty() && r.links < 0) return "PCI ids and links unknown";
  std::string s = "PCI " + (r.src_pci.empty() ? std::string("?") : r.src_pci) + " -> " +
                  (r.dst_pci.empty() ? std::string("?") : r.dst_pci);
  if (r.links >= 0)
    s += ", " + std::to_string(r.links) + " NVLink link" + (r.links == 1 ? "" : "s");
  else
    s += ", links unknown";
  return s;
}

struct Metric {
  const char* id;
  const char* unit;
  bool lower_is_better;
  std::optional<double> PairFact::*field;
};
const Metric kMetrics[] = {
    {"pair.write_gbps", "GB/s", false, &PairFact::write_gbps},
    {"pair.read_gbps", "GB/s", false, &PairFact::read_gbps},
    {"pair.latency_us", "us", true, &PairFact::latency_us},
};

// ratio: 1 = as good as the reference, < 1 worse (bandwidth v/ref, latency ref/v).
Verdict by_ratio(double ratio, const OutlierLimits& l, bool latency) {
  if (ratio < l.fail) return latency && !l.latency_can_fail ? Verdict::warn : Verdict::fail;
  return ratio < l.warn ? Verdict::warn : Verdict::pass;
}

std::string limits_words(const OutlierLimits& l, bool latency, const std::string& ref) {
  if (latency)
    return "<= " + num(1 / l.warn) + " x " + ref + " (warn above), <= " + num(1 / l.fail) + " x (" +
           (l.latency_can_fail ? "fail" : "warn") + " above)";
  return ">= " + num(l.warn) + " x " + ref + " (warn below), >= " + num(l.fail) + " x (fail below)";
}

}  // namespace

const char* to_string(Verdict v) noexcept {
  static constexpr EnumName<Verdict> kNames[] = {{Verdict::pass, "pass"},
                                                 {Verdict::warn, "warn"},
                                                 {Verdict::fail, "fail"},
                                                 {Verdict::no_reference, "no_reference"}};
  return enum_name(kNames, v);
}

const char* to_string(NodeLayout p) noexcept {
  static constexpr EnumName<NodeLayout> kNames[] = {{NodeLayout::host, "host runtime"},
                                                    {NodeLayout::shared_device, "ranks sharing one GPU"},
                                                    {NodeLayout::two_devices, "two GPUs"},
                                                    {NodeLayout::several_devices, "several GPUs"}};
  return enum_name(kNames, p);
}

OutlierLimits host_outlier_limits() {
  OutlierLimits l;
  l.warn = 0.25;
  l.fail = 0.05;
  l.latency_can_fail = false;
  l.source = "rule: host runtime (memcpy on shared cores, not performance): 0.25 / 0.05 of the median";
  return l;
}

NodeLayout node_layout_of(int ranks, int distinct_devices, bool host_runtime) noexcept {
  if (host_runtime) return NodeLayout::host;
  if (distinct_devices < ranks) return NodeLayout::shared_device;
  return ranks == 2 ? NodeLayout::two_devices : NodeLayout::several_devices;
}

PairFact pair_fact(const MatrixRow& r) {
  PairFact f;
  f.src = r.src;
  f.dst = r.dst;
  f.addressing = r.addressing();
  f.write_gbps = r.write.gbps.value;
  f.read_gbps = r.read_gbps.value;
  f.latency_us = r.latency_us_p50.value;
  f.copy_engine_gbps = r.write.copy_engine_gbps.value;
  f.verified = r.write.verified;
  f.timed_out = r.timed_out;
  f.write_kernel = r.write.kernel.variant + " (ran " + to_string(r.write.kernel.kernel) + ")";
  return f;
}

std::vector<PairFact> pair_facts(const PeerMatrix& matrix) {
  std::vector<PairFact> out;
  for (const auto& r : matrix.rows) out.push_back(pair_fact(r));
  return out;
}

std::vector<HealthCheck> check_pairs(const std::vector<PairFact>& rows, NodeLayout layout,
                                     const OutlierLimits& limits) {
  std::vector<HealthCheck> out;
  if (rows.empty()) return out;
  // Every write checked and every ping-pong answered.
  std::string wrong, timeouts;
  int n_wrong = 0, n_timeout = 0;
  for (const auto& r : rows) {
    if (!r.verified) wrong += (n_wrong++ ? ", " : "") + pair_name(r);
    if (r.timed_out) timeouts += (n_timeout++ ? ", " : "") + pair_name(r);
  }
  out.push_back({"pair.writes_verified", "every pair", n_wrong ? Verdict::fail : Verdict::pass,
                 static_cast<double>(n_wrong), "count", "0 writes that left wrong bytes",
                 "rule: every write is checked once before it is timed", n_wrong ? "wrong: " + wrong : ""});
  out.push_back({"pair.pingpongs_answered", "every pair", n_timeout ? Verdict::fail : Verdict::pass,
                 static_cast<double>(n_timeout), "count", "0 ping-pongs past their bound",
                 "rule: every bounded wait ends in time", n_timeout ? "timed out: " + timeouts : ""});

  for (const auto& m : kMetrics) {
    const bool latency = m.lower_is_better;
    for (const char* addressing : {"ptr", "lsa"}) {
      std::vector<const PairFact*> have;
      for (const auto& r : rows)
        if (r.addressing == addressing && (r.*m.field).has_value() && *(r.*m.field) > 0) have.push_back(&r);
      if (have.empty()) continue;
      if (layout == NodeLayout::two_devices) {
        // The two directions against each other.
        if (have.size() != 2) {
          for (const auto* r : have)
            out.push_back({m.id, pair_name(*r), Verdict::no_reference, *(r->*m.field), m.unit, "",
                           limits.source, "two GPUs but not both directions measured"});
          continue;
        }
        const double a = *(have[0]->*m.field), b = *(have[1]->*m.field);
        const double ratio = std::min(a, b) / std::max(a, b);
        const PairFact* worse = latency ? (a > b ? have[0] : have[1]) : (a < b ? have[0] : have[1]);
        HealthCheck c{m.id,
                      std::to_string(have[0]->src) + "<->" + std::to_string(have[0]->dst) + " " + addressing,
                      by_ratio(ratio, limits, latency),
                      ratio,
                      "ratio",
                      ">= " + num(limits.warn) + " (warn below), >= " + num(limits.fail) +
                          " (fail below): the worse direction over the better",
                      limits.source,
                      "worse direction " + pair_name(*worse) + " " + num(*(worse->*m.field)) + " " + m.unit +
                          " against " + num(latency ? std::min(a, b) : std::max(a, b)) + "; " +
                          pair_where(*worse)};
        out.push_back(c);
        continue;
      }
      if (have.size() < 2) {
        out.push_back({m.id, pair_name(*have[0]), Verdict::no_reference, *(have[0]->*m.field), m.unit, "",
                       limits.source, "one pair measured: nothing to compare it with"});
        continue;
      }
      std::vector<double> v;
      for (const auto* r : have) v.push_back(*(r->*m.field));
      const double med = median_of(v);
      const std::string ref =
          "the median " + std::string(addressing) + " pair (" + num(med) + " " + m.unit + ")";
      for (const auto* r : have) {
        const double x = *(r->*m.field);
        const double ratio = latency ? med / x : x / med;
        std::string detail = pair_where(*r);
        if (layout == NodeLayout::shared_device || layout == NodeLayout::host)
          detail = "ranks " + std::to_string(r->src) + " and " + std::to_string(r->dst) + " (" +
                   to_string(layout) + "); " + detail;
        out.push_back({m.id, pair_name(*r), by_ratio(ratio, limits, latency), x, m.unit,
                       limits_words(limits, latency, ref), limits.source, detail});
      }
    }
  }
  return out;
}

std::vector<HealthCheck> check_links(const std::vector<DeviceLinks>& devices, int devices_on_node) {
  std::vector<HealthCheck> out;
  const std::string src = "NVML, read before and after the measurement";
  for (const auto& d : devices) {
    const std::string who = d.pci == "host" ? std::string("host runtime") : "GPU " + d.pci;
    if (!d.before.known || !d.after.known) {
      const std::string why = !d.before.known ? d.before.why : d.after.why;
      for (const char* id : {"nvlink.links_up", "nvlink.replay_errors", "nvlink.crc_errors", "xid.events"})
        out.push_back({id, who, Verdict::no_reference, std::nullopt, "count", "", src, why});
      continue;
    }
    {
      HealthCheck c{"nvlink.links_up",
                    who,
                    Verdict::pass,
                    static_cast<double>(d.after.links_up),
                    "count",
                    "every link NVML lists is up",
                    src,
                    ""};
      const int up = d.after.links_up, down = d.after.links_down;
      if (up > 0 && down > 0) {
        c.verdict = Verdict::fail;
        c.detail =
            std::to_string(down) + " link(s) down beside " + std::to_string(up) + " up: a degraded link";
      } else if (d.before.links_up != up) {
        c.verdict = Verdict::fail;
        c.detail = "links up changed during the measurement: " + std::to_string(d.before.links_up) + " -> " +
                   std::to_string(up);
      } else if (up == 0 && down > 0) {
        c.verdict = devices_on_node > 1 ? Verdict::warn : Verdict::no_reference;
        c.detail = "no NVLink link up (" + std::to_string(down) + " listed)" +
                   (devices_on_node > 1 ? ": peers go another way" : ": one GPU on this node needs none");
      } else if (up == 0) {
        c.verdict = Verdict::no_reference;
        c.detail = "this GPU has no NVLink";
      } else {
        c.detail = std::to_string(up) + " link(s) up";
      }
      out.push_back(c);
    }
    const auto counter = [&](const char* id, const std::optional<unsigned long long>& a,
                             const std::optional<unsigned long long>& b) {
      if (!a || !b) {
        out.push_back({id, who, Verdict::no_reference, std::nullopt, "count", "unchanged", src,
                       "NVML could not read this counter"});
        return;
      }
      const double delta = static_cast<double>(*b) - static_cast<double>(*a);
      out.push_back({id, who, delta != 0 ? Verdict::fail : Verdict::pass, delta, "count", "unchanged (0 new)",
                     src, "before " + std::to_string(*a) + ", after " + std::to_string(*b)});
    };
    counter("nvlink.replay_errors", d.before.replay_errors, d.after.replay_errors);
    counter("nvlink.crc_errors", d.before.crc_errors, d.after.crc_errors);
    if (!d.after.xid_events)
      out.push_back({"xid.events", who, Verdict::no_reference, std::nullopt, "count", "0 new", src,
                     "NVML could not watch Xid events"});
    else
      out.push_back({"xid.events", who, *d.after.xid_events ? Verdict::fail : Verdict::pass,
                     static_cast<double>(*d.after.xid_events), "count", "0 new", src, ""});
  }
  return out;
}

std::vector<HealthCheck> check_diagnoses(const Json& diagnoses) {
  int errors = 0;
  std::string ids;
  for (const auto& d : diagnoses)
    if (d.value("severity", std::string()) == "error")
      ids += (errors++ ? ", " : "") + d.value("id", std::string("?"));
  return {{"doctor.no_error", "every rank", errors ? Verdict::fail : Verdict::pass,
           static_cast<double>(errors), "count", "0 diagnoses of severity error",
           "the bring-up doctor (diagnoses[])", errors ? "errors: " + ids : ""}};
}

std::string a2a_subject(const A2aFact& r) {
  if (!r.ran) return r.node.empty() ? "all-to-all" : "all-to-all on " + r.node;
  return "all-to-all " + std::to_string(r.chunk_bytes) + " B " + r.sync + (r.graph ? " graph" : "") +
         " world " + std::to_string(r.world) + (r.node.empty() ? "" : " on " + r.node);
}

std::vector<HealthCheck> check_a2a(const std::vector<A2aFact>& rows) {
  std::vector<HealthCheck> out;
  for (const auto& r : rows) {
    if (!r.error.empty()) {
      out.push_back({"a2a.verified", a2a_subject(r), Verdict::fail, std::nullopt, "count", "wrong 0",
                     "rule: every row verifies its data", "failed: " + r.error});
      continue;
    }
    if (!r.ran) {
      out.push_back({"a2a.verified", a2a_subject(r), Verdict::no_reference, std::nullopt, "count", "wrong 0",
                     "rule: every row verifies its data", "not run: " + r.not_run});
      continue;
    }
    const std::string subject = a2a_subject(r);
    out.push_back({"a2a.verified", subject, r.wrong ? Verdict::fail : Verdict::pass,
                   static_cast<double>(r.wrong), "count", "wrong 0", "rule: every row verifies its data",
                   r.wrong ? std::to_string(r.wrong) + " wrong element(s)" +
                                 (r.wrong_by.empty() ? "" : ", received by " + r.wrong_by)
                           : ""});
  }
  for (std::size_t i = 0; i < out.size(); ++i) out[i].node = rows[i].node;  // one check per fact
  return out;
}

// ---- The fleet
// ---------------------------------------------------------------------------------------------

std::vector<HealthCheck> check_fleet(const std::vector<NodeFacts>& nodes) {
  std::vector<HealthCheck> out;
  if (nodes.size() < 2) return out;
  struct Fact {
    const char* id;
    const char* what;
    std::string (*of)(const NodeFacts&);
  };
  static const Fact kFacts[] = {
      {"fleet.gpu_count", "GPUs", [](const NodeFacts& n) { return std::to_string(n.gpus); }},
      {"fleet.gpu_model", "GPU model", [](const NodeFacts& n) { return n.model; }},
      {"fleet.driver_version", "driver", [](const NodeFacts& n) { return n.driver; }},
      {"fleet.runtime_version", "runtime version", [](const NodeFacts& n) { return n.runtime; }},
      {"fleet.handle_type", "handle type", [](const NodeFacts& n) { return n.handle; }},
  };
  const std::string src = "rule: every node of the job as most nodes are";
  for (const auto& f : kFacts) {
    std::map<std::string, int> count;
    for (const auto& n : nodes) ++count[f.of(n)];
    int most = 0, holders = 0;
    std::string majority;
    for (const auto& [v, c] : count)
      if (c > most)
        most = c, majority = v, holders = 1;
      else if (c == most)
        ++holders;
    if (count.size() == 1) {
      out.push_back({f.id, "every node", Verdict::pass, std::nullopt, "", "the same on every node", src,
                     std::to_string(nodes.size()) + " nodes: " + f.what + " " + majority, ""});
      continue;
    }
    for (const auto& n : nodes) {
      const std::string v = f.of(n);
      if (holders == 1 && v == majority) continue;
      const std::string why =
          holders == 1
              ? std::string(f.what) + " '" + v + "', " + std::to_string(most) + " of " +
                    std::to_string(nodes.size()) + " nodes have '" + majority + "'"
              : std::string(f.what) + " '" + v + "': the nodes disagree and no value holds a majority";
      out.push_back({f.id, "node " + n.node + " (ranks " + n.ranks + ")", Verdict::fail, std::nullopt, "",
                     "the same on every node", src, why, n.node});
    }
  }
  return out;
}

std::vector<HealthCheck> check_fleet_a2a(const std::vector<A2aFact>& nodes, const A2aFleetRules& rules) {
  std::map<int, std::vector<const A2aFact*>> by_size;  // nodes whose all-to-all ran and has a bandwidth
  for (const auto& n : nodes)
    if (n.ran && n.error.empty() && n.agg_bw_gbps && *n.agg_bw_gbps > 0 && !n.node.empty())
      by_size[n.world].push_back(&n);
  const double limit = rules.host_runtime ? rules.host_factor : 1 + rules.slow_margin;
  char lim[32];
  std::snprintf(lim, sizeof(lim), "%.2f", limit);
  const std::string expected = "time <= " + std::string(lim) + " x the nodes' lower median";
  const std::string src = rules.host_runtime
                              ? "rule: mori-a2a's slow_team, " + std::string(lim) + " x on the host runtime"
                              : "rule: mori-a2a's slow_team, the median x (1 + --slow-margin)";
  std::vector<HealthCheck> out;
  for (const auto& [size, group] : by_size) {
    if (group.size() < 2) continue;
    std::vector<double> t;
    for (const auto* n : group) t.push_back(1.0 / *n->agg_bw_gbps);
    std::sort(t.begin(), t.end());
    const double median = t[(t.size() - 1) / 2];  // the lower median, as mori-a2a's fleet line
    bool any = false;
    for (const auto* n : group) {
      const double ratio = (1.0 / *n->agg_bw_gbps) / median;
      if (ratio <= limit) continue;
      any = true;
      char why[160];
      std::snprintf(why, sizeof(why), "all-to-all %.2f GB/s, %.2f x the time of the nodes' lower median",
                    *n->agg_bw_gbps, ratio);
      out.push_back({"fleet.a2a_slow", "node " + n->node + ", team of " + std::to_string(size),
                     rules.host_runtime ? Verdict::warn : Verdict::fail, ratio, "ratio", expected, src, why,
                     n->node});
    }
    if (!any)
      out.push_back({"fleet.a2a_slow", std::to_string(group.size()) + " nodes of " + std::to_string(size),
                     Verdict::pass, std::nullopt, "ratio", expected, src, "no node slower than its siblings",
                     ""});
  }
  return out;
}

std::vector<NodeHealth> node_health(const std::vector<NodeFacts>& nodes,
                                    const std::vector<HealthCheck>& checks) {
  std::vector<NodeHealth> out;
  for (const auto& n : nodes) {
    NodeHealth h{n.node, n.ranks, n.gpus, Verdict::pass, {}};
    bool warned = false;
    for (const auto& c : checks) {
      if (c.node != n.node) continue;
      if (c.verdict == Verdict::fail) {
        h.verdict = Verdict::fail;
        if (std::find(h.failing.begin(), h.failing.end(), c.id) == h.failing.end()) h.failing.push_back(c.id);
      }
      warned = warned || c.verdict == Verdict::warn;
    }
    if (h.verdict != Verdict::fail && warned) h.verdict = Verdict::warn;
    out.push_back(h);
  }
  return out;
}

std::string format_node_health(const std::vector<NodeHealth>& nodes) {
  std::string s = "  node                             ranks        GPUs  verdict  failing checks\n";
  for (const auto& n : nodes) {
    char buf[160];
    std::snprintf(buf, sizeof(buf), "  %-32s %-12s %4d  %-7s  ", n.node.c_str(), n.ranks.c_str(), n.gpus,
                  to_string(n.verdict));
    std::string failing;
    for (const auto& id : n.failing) failing += (failing.empty() ? "" : ", ") + id;
    s += buf + (failing.empty() ? std::string("-") : failing) + "\n";
  }
  return s;
}

Json to_json(const NodeHealth& n) {
  return {{"node", n.node},
          {"ranks", n.ranks},
          {"gpus", n.gpus},
          {"verdict", to_string(n.verdict)},
          {"failing", n.failing}};
}

std::vector<std::string> failing_nodes(const std::vector<NodeHealth>& nodes) {
  std::vector<std::string> out;
  for (const auto& n : nodes)
    if (n.verdict == Verdict::fail) out.push_back(n.node);
  return out;
}

// ---- Summary
// -----------------------------------------------------------------------------------------------

bool has_failure(const std::vector<HealthCheck>& checks) noexcept {
  for (const auto& c : checks)
    if (c.verdict == Verdict::fail) return true;
  return false;
}

Json to_json(const HealthCheck& c) {
  return {{"id", c.id},
          {"subject", c.subject},
          {"verdict", to_string(c.verdict)},
          {"measured", c.measured ? Json(*c.measured) : Json(nullptr)},
          {"unit", c.unit},
          {"expected", c.expected},
          {"source", c.source},
          {"detail", c.detail},
          {"node", c.node.empty() ? Json(nullptr) : Json(c.node)}};
}

Json to_json(const std::vector<HealthCheck>& checks) {
  Json a = Json::array();
  for (const auto& c : checks) a.push_back(to_json(c));
  return a;
}

std::string format_health(const std::vector<HealthCheck>& checks) {
  std::string s;
  std::map<std::string, std::map<std::string, int>> counts;
  std::vector<std::string> order;
  for (const auto& c : checks) {
    if (!counts.count(c.id)) order.push_back(c.id);
    ++counts[c.id][to_string(c.verdict)];
    if (c.verdict == Verdict::pass) continue;
    // Hosts first: a check of one node of several names the node before its subject.
    std::string line = "  " + std::string(to_string(c.verdict)) + "  " + c.id + "  " +
                       (c.node.empty() || c.subject.rfind("node " + c.node, 0) == 0 ? "" : c.node + ": ") +
                       c.subject;
    if (c.measured) line += ": " + num(*c.measured) + " " + c.unit;
    if (!c.expected.empty()) line += ", expected " + c.expected;
    if (!c.source.empty()) line += " [" + c.source + "]";
    if (!c.detail.empty()) line += "\n        " + c.detail;
    s += line + "\n";
  }
  for (const auto& id : order) {
    std::string line = "  " + id + ":";
    for (const char* v : {"pass", "warn", "fail", "no_reference"})
      if (int n = counts[id][v]) line += " " + std::to_string(n) + " " + v;
    s += line + "\n";
  }
  return s;
}

}  // namespace mori::symm
