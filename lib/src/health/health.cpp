#include "mori/symm/health/health.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "mori/symm/base/enum_names.hpp"
#include "mori/symm/base/error.hpp"

namespace mori::symm {
namespace {

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), std::fabs(v) >= 100 ? "%.1f" : "%.3g", v);
  return buf;
}

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

std::string pair_name(const PairFact& r) {
  return std::to_string(r.src) + "->" + std::to_string(r.dst) + " " + r.addressing;
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

bool has_any(const std::vector<std::string>& v, const std::string& name) {
  for (const auto& s : v)
    if (!s.empty() && name.find(s) != std::string::npos) return true;
  return false;
}

const std::set<std::string> kInterconnects = {"nvlink", "peer", "same-device", "host"};
const std::set<std::string> kChecks = {
    "write_gbps",     "read_gbps",      "copy_engine_write_gbps", "write_over_copy_engine",
    "latency_us_p50", "a2a_agg_bw_gbps"};
const std::set<std::string> kSourceKinds = {"evidence", "published", "not_performance"};
const std::set<std::string> kEntryKeys = {"devices", "interconnect", "check",       "min",
                                          "max",     "better",       "world",       "chunk_bytes",
                                          "unit",    "source",       "source_kind", "note"};

}  // namespace

const char* to_string(Verdict v) noexcept {
  static constexpr EnumName<Verdict> kNames[] = {{Verdict::pass, "pass"},
                                                 {Verdict::warn, "warn"},
                                                 {Verdict::fail, "fail"},
                                                 {Verdict::no_reference, "no_reference"}};
  return enum_name(kNames, v);
}

const char* to_string(Placement p) noexcept {
  static constexpr EnumName<Placement> kNames[] = {{Placement::host, "host runtime"},
                                                   {Placement::shared_device, "ranks sharing one GPU"},
                                                   {Placement::two_devices, "two GPUs"},
                                                   {Placement::several_devices, "several GPUs"}};
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

Placement placement_of(int ranks, int distinct_devices, bool host_runtime) noexcept {
  if (host_runtime) return Placement::host;
  if (distinct_devices < ranks) return Placement::shared_device;
  return ranks == 2 ? Placement::two_devices : Placement::several_devices;
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

std::vector<HealthCheck> check_pairs(const std::vector<PairFact>& rows, Placement placement,
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
      if (placement == Placement::two_devices) {
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
        if (placement == Placement::shared_device || placement == Placement::host)
          detail = "ranks " + std::to_string(r->src) + " and " + std::to_string(r->dst) + " (" +
                   to_string(placement) + "); " + detail;
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

std::vector<HealthCheck> check_a2a(const std::vector<A2aFact>& rows) {
  std::vector<HealthCheck> out;
  for (const auto& r : rows) {
    if (!r.ran) {
      out.push_back({"a2a.verified", "all-to-all", Verdict::no_reference, std::nullopt, "count", "wrong 0",
                     "rule: every row verifies its data", "not run: " + r.not_run});
      continue;
    }
    const std::string subject = "all-to-all " + std::to_string(r.chunk_bytes) + " B " + r.sync +
                                (r.graph ? " graph" : "") + " world " + std::to_string(r.world);
    out.push_back({"a2a.verified", subject, r.wrong ? Verdict::fail : Verdict::pass,
                   static_cast<double>(r.wrong), "count", "wrong 0", "rule: every row verifies its data",
                   r.wrong ? std::to_string(r.wrong) + " wrong element(s)" : ""});
  }
  return out;
}

// ---- Expectations
// ------------------------------------------------------------------------------------------

Expectations parse_expectations(const Json& doc, const std::string& name) {
  const auto bad = [&](const std::string& what) { throw UsageError(name + ": " + what); };
  if (!doc.is_object()) bad("not a JSON object");
  if (!doc.contains("schema") || doc["schema"] != "mori.expectations/1")
    bad("schema must be \"mori.expectations/1\"");
  if (!doc.contains("entries") || !doc["entries"].is_array()) bad("entries must be an array");
  Expectations e;
  e.files.push_back(name);
  std::size_t i = 0;
  for (const auto& j : doc["entries"]) {
    const std::string at = "entries[" + std::to_string(i++) + "]";
    if (!j.is_object()) bad(at + " is not an object");
    for (auto it = j.begin(); it != j.end(); ++it)
      if (!kEntryKeys.count(it.key())) bad(at + ": unknown field '" + it.key() + "'");
    Expectation x;
    if (!j.contains("devices") || !j["devices"].is_array() || j["devices"].empty())
      bad(at + ".devices must be a non-empty array of strings");
    for (const auto& d : j["devices"]) {
      if (!d.is_string() || d.get<std::string>().empty()) bad(at + ".devices must hold non-empty strings");
      x.devices.push_back(d.get<std::string>());
    }
    const auto str = [&](const char* key, const std::set<std::string>& allowed) {
      if (!j.contains(key) || !j[key].is_string()) bad(at + "." + key + " must be a string");
      const std::string s = j[key].get<std::string>();
      if (!allowed.empty() && !allowed.count(s))
        bad(at + "." + key + ": '" + s + "' is not one of the known values");
      if (s.empty()) bad(at + "." + key + " must not be empty");
      return s;
    };
    x.interconnect = str("interconnect", kInterconnects);
    x.check = str("check", kChecks);
    x.source = str("source", {});
    x.source_kind = str("source_kind", kSourceKinds);
    for (const char* key : {"min", "max"}) {
      if (!j.contains(key) || j[key].is_null()) continue;
      if (!j[key].is_number() || !std::isfinite(j[key].get<double>()))
        bad(at + "." + key + " must be a number or null");
      (std::string(key) == "min" ? x.min : x.max) = j[key].get<double>();
    }
    if (!x.min && !x.max) bad(at + ": give min, max or both");
    if (x.min && x.max && *x.min > *x.max) bad(at + ": min is above max");
    x.higher_is_better = x.check != "latency_us_p50";
    if (j.contains("better")) {
      const std::string b = str("better", {"higher", "lower"});
      x.higher_is_better = b == "higher";
    }
    for (const char* key : {"world", "chunk_bytes"}) {
      if (!j.contains(key)) continue;
      if (!j[key].is_number_integer() || j[key].get<long long>() < 0)
        bad(at + "." + key + " must be a non-negative integer");
      if (std::string(key) == "world")
        x.world = j[key].get<int>();
      else
        x.chunk_bytes = j[key].get<std::size_t>();
    }
    if (j.contains("note")) x.note = str("note", {});
    if (j.contains("unit")) (void)str("unit", {});
    e.entries.push_back(x);
  }
  return e;
}

Expectations merge_expectations(const Expectations& base, const Expectations& site) {
  Expectations out;
  out.files = base.files;
  out.files.insert(out.files.end(), site.files.begin(), site.files.end());
  const auto overridden = [&](const Expectation& b) {
    for (const auto& s : site.entries)
      if (s.check == b.check && s.interconnect == b.interconnect && s.world == b.world &&
          s.chunk_bytes == b.chunk_bytes)
        for (const auto& d : s.devices)
          if (std::find(b.devices.begin(), b.devices.end(), d) != b.devices.end()) return true;
    return false;
  };
  for (const auto& b : base.entries)
    if (!overridden(b)) out.entries.push_back(b);
  // The site's entries first, so that they win where both would match.
  out.entries.insert(out.entries.begin(), site.entries.begin(), site.entries.end());
  return out;
}

const Expectation* find_expectation(const Expectations& e, const std::string& device_name,
                                    const std::string& interconnect, const std::string& check, int world,
                                    std::size_t chunk_bytes) {
  for (const auto& x : e.entries)
    if (x.check == check && x.interconnect == interconnect && has_any(x.devices, device_name) &&
        (x.world == 0 || x.world == world) && (x.chunk_bytes == 0 || x.chunk_bytes == chunk_bytes))
      return &x;
  return nullptr;
}

std::string interconnect_of(bool host_runtime, const PairFact& r) {
  if (host_runtime) return "host";
  if (!r.src_pci.empty() && r.src_pci == r.dst_pci) return "same-device";
  return r.links > 0 ? "nvlink" : "peer";
}

HealthCheck judge(const std::string& id, const std::string& subject, std::optional<double> value,
                  const std::string& unit, const Expectation* x) {
  HealthCheck c{id, subject, Verdict::no_reference, value, unit, "", "", ""};
  if (!x) {
    c.detail = "no expectation for this device, interconnect and check";
    return c;
  }
  c.source = x->source + " (" + x->source_kind + ")";
  const std::string lo = x->min ? num(*x->min) : "", hi = x->max ? num(*x->max) : "";
  c.expected = x->min && x->max ? "[" + lo + ", " + hi + "] " + unit
               : x->min         ? ">= " + lo + " " + unit
                                : "<= " + hi + " " + unit;
  c.detail = x->note;
  if (!value) {
    c.detail = "not measured";
    return c;
  }
  const double v = *value;
  const auto& bad = x->higher_is_better ? x->min : x->max;   // the bound a sick node falls past
  const auto& good = x->higher_is_better ? x->max : x->min;  // the bound no measurement should pass
  const bool past_bad = bad && (x->higher_is_better ? v < *bad : v > *bad);
  const bool past_good = good && (x->higher_is_better ? v > *good : v < *good);
  if (past_bad) {
    c.verdict = Verdict::fail;
  } else if (past_good) {
    c.verdict = Verdict::warn;
    c.detail =
        "beyond the expected range in the good direction: the expectation or the measurement is wrong" +
        (x->note.empty() ? "" : "; " + x->note);
  } else if (!bad) {
    c.verdict = Verdict::no_reference;
    c.detail = "only the limit it must not pass is known" + (x->note.empty() ? "" : "; " + x->note);
  } else {
    c.verdict = Verdict::pass;
  }
  if (x->source_kind == "not_performance") c.detail = "not performance; " + c.detail;
  return c;
}

std::vector<HealthCheck> check_expectations(const std::vector<PairFact>& rows, const std::string& device_name,
                                            bool host_runtime, const Expectations& e) {
  std::vector<HealthCheck> out;
  for (const auto& r : rows) {
    const std::string ic = interconnect_of(host_runtime, r), subject = pair_name(r);
    const auto add = [&](const char* check, std::optional<double> v, const char* unit) {
      auto c = judge(std::string("expect.") + check, subject, v, unit,
                     find_expectation(e, device_name, ic, check));
      c.detail = device_name + " over " + ic + (c.detail.empty() ? "" : "; " + c.detail);
      out.push_back(c);
      return &out.back();
    };
    add("write_gbps", r.write_gbps, "GB/s");
    add("read_gbps", r.read_gbps, "GB/s");
    add("latency_us_p50", r.latency_us, "us");
    if (r.copy_engine_gbps) {
      add("copy_engine_write_gbps", r.copy_engine_gbps, "GB/s");
      std::optional<double> ratio;
      if (r.write_gbps && *r.copy_engine_gbps > 0) ratio = *r.write_gbps / *r.copy_engine_gbps;
      auto* c = add("write_over_copy_engine", ratio, "ratio");
      c->detail += "; SM write kernel " + (r.write_kernel.empty() ? std::string("?") : r.write_kernel) +
                   " over the copy engine's write of the same bytes, timed interleaved";
    }
  }
  return out;
}

std::vector<HealthCheck> check_a2a_expectations(const std::vector<A2aFact>& rows,
                                                const std::string& device_name,
                                                const std::string& interconnect, const Expectations& e) {
  std::vector<HealthCheck> out;
  for (const auto& r : rows) {
    if (!r.ran) continue;
    const std::string subject = "all-to-all " + std::to_string(r.chunk_bytes) + " B " + r.sync +
                                (r.graph ? " graph" : "") + " world " + std::to_string(r.world);
    auto c = judge("expect.a2a_agg_bw_gbps", subject, r.agg_bw_gbps, "GB/s",
                   find_expectation(e, device_name, interconnect, "a2a_agg_bw_gbps", r.world, r.chunk_bytes));
    c.detail = device_name + " over " + interconnect + (c.detail.empty() ? "" : "; " + c.detail);
    out.push_back(c);
  }
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
          {"detail", c.detail}};
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
    std::string line = "  " + std::string(to_string(c.verdict)) + "  " + c.id + "  " + c.subject;
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
