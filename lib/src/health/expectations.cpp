// SPDX-License-Identifier: MIT
// The --health expectations (health.hpp, "Expectations"; docs/mori-probe.md "Health"): the committed and the
// site's files (results/expectations/*.json, schema mori.expectations/1), parsed, merged, and each measured
// figure judged against the entry of its device, interconnect and check.
#include <algorithm>
#include <cmath>
#include <set>

#include "mori/symm/base/error.hpp"
#include "mori/symm/health/health.hpp"
#include "words.hpp"

namespace mori::symm {
namespace {

using detail::pair_name;

std::string num(double v) {
  return detail::health_number(v);
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
    auto c = judge("expect.a2a_agg_bw_gbps", a2a_subject(r), r.agg_bw_gbps, "GB/s",
                   find_expectation(e, device_name, interconnect, "a2a_agg_bw_gbps", r.world, r.chunk_bytes));
    c.detail = device_name + " over " + interconnect + (c.detail.empty() ? "" : "; " + c.detail);
    out.push_back(c);
  }
  return out;
}

}  // namespace mori::symm
