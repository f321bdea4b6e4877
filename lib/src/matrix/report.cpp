// SPDX-License-Identifier: MIT
// The peer matrix's report (matrix.hpp): its rows' JSON (a value not measured is null with its reason beside
// it) and the table mori-probe prints.
#include <algorithm>
#include <cstdio>
#include <set>
#include <string>

#include "gather.hpp"
#include "mori/symm/matrix/detail/matrix_write.hpp"
#include "mori/symm/matrix/matrix.hpp"

namespace mori::symm {
namespace {

using detail::kNotMeasured;

Json value_or_null(const Measured& m) {
  return m.value ? Json(*m.value) : Json(nullptr);
}

Json ratio_or_null(const std::optional<double>& x) {
  return x ? Json(*x) : Json(nullptr);
}

// A value that was not measured adds its reason under `key`.
void add_reason(Json& j, const char* key, const Measured& m) {
  if (!m.value) j[key] = m.why_not.empty() ? kNotMeasured : m.why_not;
}

}  // namespace

std::optional<double> WriteMeasure::over_copy_engine() const {
  if (!gbps.value || !copy_engine_gbps.value || *copy_engine_gbps.value <= 0) return std::nullopt;
  return *gbps.value / *copy_engine_gbps.value;
}

std::size_t PeerMatrix::writes_wrong() const noexcept {
  std::size_t n = 0;
  for (const auto& r : rows) {
    n += r.write.verified ? 0 : 1;
    for (const auto& v : r.variants) n += v.verified ? 0 : 1;
  }
  return n;
}

bool PeerMatrix::timed_out() const noexcept {
  return std::any_of(rows.begin(), rows.end(), [](const MatrixRow& r) { return r.timed_out; });
}

Json to_json(const MatrixRow& r) {
  Json row = {{"src", r.src},
              {"dst", r.dst},
              {"addressing", r.addressing()},
              {"write_gbps", value_or_null(r.write.gbps)},
              {"write_kernel", to_json(r.write.kernel)},
              {"write_verified", r.write.verified},
              {"read_gbps", value_or_null(r.read_gbps)},
              {"copy_engine_write_gbps", value_or_null(r.write.copy_engine_gbps)},
              {"write_over_copy_engine", ratio_or_null(r.write.over_copy_engine())},
              {"latency_us_p50", value_or_null(r.latency_us_p50)},
              {"link_gbps", value_or_null(r.link_gbps)}};
  add_reason(row, "write_reason", r.write.gbps);
  add_reason(row, "read_reason", r.read_gbps);
  add_reason(row, "copy_engine_reason", r.write.copy_engine_gbps);
  add_reason(row, "latency_reason", r.latency_us_p50);
  add_reason(row, "link_reason", r.link_gbps);
  if (!r.variants.empty()) {
    Json vs = Json::array();
    for (const auto& v : r.variants) {
      Json j = to_json(v.kernel);
      j["write_gbps"] = value_or_null(v.gbps);
      j["copy_engine_write_gbps"] = value_or_null(v.copy_engine_gbps);
      j["write_over_copy_engine"] = ratio_or_null(v.over_copy_engine());
      j["verified"] = v.verified;
      add_reason(j, "write_reason", v.gbps);
      add_reason(j, "copy_engine_reason", v.copy_engine_gbps);
      vs.push_back(j);
    }
    row["write_variants"] = vs;
  }
  if (r.timed_out) row["status"] = "timeout";
  return row;
}

Json to_json(const PeerMatrix& m) {
  Json rows = Json::array();
  for (const auto& r : m.rows) rows.push_back(to_json(r));
  return {{"bytes", m.bytes},
          {"iterations", m.iterations},
          {"rounds", m.rounds},
          {"write_kernel", detail::request_json(m.request)},
          {"writes_wrong", m.writes_wrong()},
          {"rows", rows}};
}

std::string format_matrix(const PeerMatrix& m) {
  const auto num = [](const std::optional<double>& v, const char* fmt) {
    if (!v) return std::string("-");
    char buf[32];
    std::snprintf(buf, sizeof(buf), fmt, *v);
    return std::string(buf);
  };
  const auto line = [](std::string& out, const char* fmt, auto... args) {
    char buf[512];
    std::snprintf(buf, sizeof(buf), fmt, args...);
    out += buf;
  };
  std::string out;
  line(out, "peer matrix (%s MiB, p50 latency of %d round trips / 2):\n",
       num(static_cast<double>(m.bytes) / (1 << 20), "%.1f").c_str(), m.rounds);
  line(out, "  %-9s %-4s %-16s %12s %12s %12s %8s %12s %12s\n", "src->dst", "addr", "write kernel",
       "write GB/s", "read GB/s", "CE write", "write/CE", "lat us", "link GB/s");
  std::set<std::string> notes;
  for (const auto& r : m.rows) {
    const std::string pair = std::to_string(r.src) + "->" + std::to_string(r.dst);
    const Json wk = to_json(r.write.kernel);
    if (wk.contains("fallback"))
      notes.insert(r.write.kernel.variant + ": " + wk["fallback"].get<std::string>());
    line(out, "  %-9s %-4s %-16s %12s %12s %12s %8s %12s %12s%s%s\n", pair.c_str(), r.addressing(),
         r.write.kernel.variant.c_str(), num(r.write.gbps.value, "%.1f").c_str(),
         num(r.read_gbps.value, "%.1f").c_str(), num(r.write.copy_engine_gbps.value, "%.1f").c_str(),
         num(r.write.over_copy_engine(), "%.3f").c_str(), num(r.latency_us_p50.value, "%.1f").c_str(),
         num(r.link_gbps.value, "%.1f").c_str(), r.timed_out ? "  TIMEOUT" : "",
         r.write.verified ? "" : "  WRONG");
  }
  for (const auto& n : notes) out += "  note: " + n + "\n";
  if (m.rows.empty() || m.rows[0].variants.empty()) return out;
  out += "write kernels against the copy engine (CE), timed interleaved:\n";
  line(out, "  %-9s %-4s %-20s %-8s %12s %12s %8s %s\n", "src->dst", "addr", "variant", "ran", "write GB/s",
       "CE GB/s", "write/CE", "check");
  for (const auto& r : m.rows) {
    const std::string pair = std::to_string(r.src) + "->" + std::to_string(r.dst);
    for (const auto& x : r.variants)
      line(out, "  %-9s %-4s %-20s %-8s %12s %12s %8s %s\n", pair.c_str(), r.addressing(),
           x.kernel.variant.c_str(), to_string(x.kernel.kernel), num(x.gbps.value, "%.1f").c_str(),
           num(x.copy_engine_gbps.value, "%.1f").c_str(), num(x.over_copy_engine(), "%.3f").c_str(),
           x.verified ? "ok" : "WRONG");
  }
  return out;
}

}  // namespace mori::symm
