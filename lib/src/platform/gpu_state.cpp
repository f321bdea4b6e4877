// SPDX-License-Identifier: MIT
// meta.gpu_state (docs/json.md): the readings (through NVML, platform/gpu/nvml.cpp) and their JSON. The JSON
// is composed from the fixed-size readings alone, so that tests/unit/gpu_state_test.cpp can hold it to
// made-up ones.
#include "mori/symm/platform/gpu_state.hpp"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <set>

#include "mori/symm/platform/detail/nvml.hpp"
#include "mori/symm/platform/runtime.hpp"

namespace mori::symm {
namespace {

using F = GpuFactId;

// The NVML call behind each fact, in the order of GpuFactId.
constexpr const char* kGpuFactCalls[kGpuFacts] = {
    "nvmlDeviceGetClockInfo",
    "nvmlDeviceGetClockInfo",
    "nvmlDeviceGetMaxClockInfo",
    "nvmlDeviceGetMaxClockInfo",
    "nvmlDeviceGetApplicationsClock",
    "nvmlDeviceGetApplicationsClock",
    "nvmlDeviceGetDefaultApplicationsClock",
    "nvmlDeviceGetDefaultApplicationsClock",
    "nvmlDeviceGetPerformanceState",
    "nvmlDeviceGetEnforcedPowerLimit",
    "nvmlDeviceGetPowerUsage",
    "nvmlDeviceGetTemperature",
    "nvmlDeviceGetCurrentClocksEventReasons",
    "nvmlDeviceGetEccMode",
    "nvmlDeviceGetEccMode",
    "nvmlDeviceGetTotalEccErrors",
    "nvmlDeviceGetPersistenceMode",
    "nvmlDeviceGetComputeRunningProcesses_v3",
    "nvmlDeviceGetViolationStatus",
    "nvmlDeviceGetViolationStatus",
    "nvmlDeviceGetNvLinkErrorCounter",
    "nvmlDeviceGetNvLinkErrorCounter",
};

// nvmlClocksEventReason* bits, lowest first (NVML's header; UserDefinedClocks, the locked clocks of
// `nvidia-smi -lgc`, shares the bit of ApplicationsClocksSetting).
constexpr const char* kReasonNames[] = {
    "gpu_idle",
    "applications_clocks_setting",
    "sw_power_cap",
    "hw_slowdown",
    "sync_boost",
    "sw_thermal_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
    "display_clock_setting",
};

constexpr std::uint64_t kPstateUnknown = 32;  // NVML_PSTATE_UNKNOWN

void copy(char* dst, std::size_t n, const std::string& s) {
  std::snprintf(dst, n, "%s", s.c_str());
}

// obj[key] = the fact's value through conv, or null with obj[key + "_reason"] beside it.
template <class Conv>
void put(Json& obj, const std::string& key, const GpuFact& f, F id, Conv conv) {
  if (f.ok()) {
    obj[key] = conv(f.value);
  } else {
    obj[key] = nullptr;
    obj[key + "_reason"] = gpu_fact_reason(id, f.status);
  }
}

void put(Json& obj, const std::string& key, const GpuFact& f, F id) {
  put(obj, key, f, id, [](std::uint64_t v) { return Json(v); });
}

// A counter over the run: {start, end, delta}, or null with the reason.
void put_delta(Json& obj, const std::string& key, const GpuReading& r, F id, double scale = 1) {
  const GpuFact &s = r.at_start(id), &e = r.at(id);
  std::string why;
  if (!s.ok())
    why = "at the tool's start: " + gpu_fact_reason(id, s.status);
  else if (!e.ok())
    why = gpu_fact_reason(id, e.status);
  else if (e.value < s.value)
    why = "the counter went back during the run (" + std::to_string(s.value) + " -> " +
          std::to_string(e.value) + "): the driver was reloaded?";
  if (!why.empty()) {
    obj[key] = nullptr;
    obj[key + "_reason"] = why;
    return;
  }
  if (scale == 1)
    obj[key] = {{"start", s.value}, {"end", e.value}, {"delta", e.value - s.value}};
  else
    obj[key] = static_cast<double>(e.value - s.value) * scale;
}

Json device_entry(const GpuReading& r, const std::vector<int>& ranks,
                  const std::set<std::int64_t>& job_pids) {
  Json d = {{"pci_bus_id", r.pci_bus_id}, {"ranks", ranks}};
  if (!r.found) {
    d["nvml"] = nullptr;
    d["nvml_reason"] = r.why;
    return d;
  }
  d["driver_version"] = r.driver_version[0] ? Json(r.driver_version) : Json(nullptr);
  Json clocks = Json::object();
  put(clocks, "sm_mhz", r.at(F::sm_mhz), F::sm_mhz);
  put(clocks, "mem_mhz", r.at(F::mem_mhz), F::mem_mhz);
  put(clocks, "sm_max_mhz", r.at(F::sm_max_mhz), F::sm_max_mhz);
  put(clocks, "mem_max_mhz", r.at(F::mem_max_mhz), F::mem_max_mhz);
  put(clocks, "sm_applications_mhz", r.at(F::sm_applications_mhz), F::sm_applications_mhz);
  put(clocks, "mem_applications_mhz", r.at(F::mem_applications_mhz), F::mem_applications_mhz);
  put(clocks, "sm_default_applications_mhz", r.at(F::sm_default_applications_mhz),
      F::sm_default_applications_mhz);
  put(clocks, "mem_default_applications_mhz", r.at(F::mem_default_applications_mhz),
      F::mem_default_applications_mhz);
  d["clocks"] = clocks;
  GpuFact pstate = r.at(F::pstate);
  if (pstate.ok() && pstate.value >= kPstateUnknown) pstate.status = 999;  // NVML_PSTATE_UNKNOWN
  put(d, "pstate", pstate, F::pstate);
  auto watts = [](std::uint64_t mw) { return Json(static_cast<double>(mw) / 1000.0); };
  Json power = Json::object();
  put(power, "limit_w", r.at(F::power_limit_mw), F::power_limit_mw, watts);
  put(power, "draw_w", r.at(F::power_draw_mw), F::power_draw_mw, watts);
  d["power"] = power;
  put(d, "temperature_c", r.at(F::temperature_c), F::temperature_c);
  put(d, "clocks_event_reasons", r.at(F::clocks_event_reasons), F::clocks_event_reasons,
      [](std::uint64_t mask) { return Json(clocks_event_reason_names(mask)); });
  Json violation = Json::object();
  put_delta(violation, "power", r, F::power_violation_ns, 1e-6);
  put_delta(violation, "thermal", r, F::thermal_violation_ns, 1e-6);
  d["violation_ms"] = violation;
  auto flag = [](std::uint64_t v) { return Json(v != 0); };
  Json ecc = Json::object();
  put(ecc, "enabled", r.at(F::ecc_enabled), F::ecc_enabled, flag);
  put(ecc, "pending_enabled", r.at(F::ecc_pending), F::ecc_pending, flag);
  put(ecc, "uncorrected_volatile", r.at(F::ecc_uncorrected_volatile), F::ecc_uncorrected_volatile);
  put_delta(ecc, "uncorrected_during_run", r, F::ecc_uncorrected_volatile);
  if (ecc["uncorrected_during_run"].is_object())
    ecc["uncorrected_during_run"] = ecc["uncorrected_during_run"]["delta"];
  d["ecc"] = ecc;
  put(d, "persistence_mode", r.at(F::persistence_mode), F::persistence_mode, flag);
  const GpuFact& procs = r.at(F::processes);
  if (procs.ok()) {
    Json others = Json::array();
    for (std::uint64_t i = 0; i < std::min<std::uint64_t>(procs.value, kGpuMaxPids); ++i)
      if (!job_pids.count(r.pids[i])) others.push_back(r.pids[i]);
    d["processes"] = {{"total", procs.value}, {"others", others.size()}, {"other_pids", others}};
  } else {
    put(d, "processes", procs, F::processes);
  }
  Json nvlink = Json::object();
  put_delta(nvlink, "replay", r, F::nvlink_replay);
  put_delta(nvlink, "crc", r, F::nvlink_crc);
  d["nvlink_errors"] = nvlink;
  return d;
}

GpuReading no_gpu(const std::string& why) {
  GpuReading r;
  copy(r.why, sizeof(r.why), why);
  return r;
}

// This rank's GPU through NVML, or why not.
GpuReading read_state(Runtime* rt, int device, bool counters_only) noexcept {
  try {
    if (!rt || rt->platform() == Platform::host) return no_gpu("host runtime: no GPU");
    GpuReading r;
    detail::nvml_read_state(rt->device_info(device).pci_bus_id, counters_only, r);
    return r;
  } catch (const std::exception& e) {
    return no_gpu(std::string("the device's PCI bus id: ") + e.what());
  }
}

}  // namespace

bool gpu_fact_is_counter(GpuFactId f) {
  return f == F::power_violation_ns || f == F::thermal_violation_ns || f == F::ecc_uncorrected_volatile ||
         f == F::nvlink_replay || f == F::nvlink_crc;
}

GpuReading gpu_state_start(Runtime* rt, int device) noexcept {
  GpuReading r = read_state(rt, device, true);
  for (int i = 0; i < kGpuFacts; ++i) {
    r.start[i] = gpu_fact_is_counter(static_cast<GpuFactId>(i)) ? r.now[i] : GpuFact{};
    r.now[i] = GpuFact{};
  }
  return r;
}

GpuReading gpu_state_now(Runtime* rt, int device, const GpuReading& start) noexcept {
  GpuReading r = read_state(rt, device, false);
  if (std::string(start.pci_bus_id) == r.pci_bus_id)
    std::copy(std::begin(start.start), std::end(start.start), std::begin(r.start));
  return r;
}

std::vector<std::string> clocks_event_reason_names(std::uint64_t mask) {
  std::vector<std::string> names;
  constexpr int kKnown = static_cast<int>(std::size(kReasonNames));
  for (int b = 0; b < kKnown; ++b)
    if (mask >> b & 1) names.emplace_back(kReasonNames[b]);
  const std::uint64_t unknown = mask >> kKnown << kKnown;
  if (unknown) {
    char hex[24];
    std::snprintf(hex, sizeof(hex), "0x%llx", static_cast<unsigned long long>(unknown));
    names.emplace_back(hex);
  }
  return names;
}

std::string nvml_error_name(std::int32_t status) {
  static const char* const kNames[] = {
      "NVML_SUCCESS",
      "NVML_ERROR_UNINITIALIZED",
      "NVML_ERROR_INVALID_ARGUMENT",
      "NVML_ERROR_NOT_SUPPORTED",
      "NVML_ERROR_NO_PERMISSION",
      "NVML_ERROR_ALREADY_INITIALIZED",
      "NVML_ERROR_NOT_FOUND",
      "NVML_ERROR_INSUFFICIENT_SIZE",
      "NVML_ERROR_INSUFFICIENT_POWER",
      "NVML_ERROR_DRIVER_NOT_LOADED",
      "NVML_ERROR_TIMEOUT",
      "NVML_ERROR_IRQ_ISSUE",
      "NVML_ERROR_LIBRARY_NOT_FOUND",
      "NVML_ERROR_FUNCTION_NOT_FOUND",
      "NVML_ERROR_CORRUPTED_INFOROM",
      "NVML_ERROR_GPU_IS_LOST",
      "NVML_ERROR_RESET_REQUIRED",
      "NVML_ERROR_OPERATING_SYSTEM",
      "NVML_ERROR_LIB_RM_VERSION_MISMATCH",
      "NVML_ERROR_IN_USE",
      "NVML_ERROR_MEMORY",
      "NVML_ERROR_NO_DATA",
  };
  if (status >= 0 && status < static_cast<std::int32_t>(std::size(kNames))) return kNames[status];
  if (status == 999) return "NVML_ERROR_UNKNOWN";
  return "NVML error " + std::to_string(status);
}

std::string gpu_fact_reason(GpuFactId f, std::int32_t status) {
  const int i = static_cast<int>(f);
  const std::string call = i >= 0 && i < kGpuFacts ? kGpuFactCalls[i] : "NVML";
  switch (status) {
    case GpuFact::kRead:
      return {};
    case GpuFact::kNotRead:
      return "not read";
    case GpuFact::kNoEntryPoint:
      return "this NVML has no " + call;
    case GpuFact::kNoActiveLink:
      return "no active NVLink";
    default:
      if (f == F::pstate && status == 999) return call + ": P-state unknown";
      return call + ": " + nvml_error_name(status);
  }
}

Json gpu_state_json(const std::vector<GpuReading>& ranks, const std::vector<std::int64_t>& job_pids,
                    std::string* reason) {
  const std::set<std::int64_t> pids(job_pids.begin(), job_pids.end());
  std::vector<std::string> order;  // PCI bus ids in the order of their first rank
  for (const auto& r : ranks)
    if (r.pci_bus_id[0] && std::find(order.begin(), order.end(), r.pci_bus_id) == order.end())
      order.emplace_back(r.pci_bus_id);
  bool any_found = false;
  for (const auto& r : ranks) any_found = any_found || r.found;
  if (!any_found) {
    *reason = "no GPU reading";
    for (const auto& r : ranks)
      if (r.why[0]) {
        *reason = r.why;
        break;
      }
    return nullptr;
  }
  Json out = Json::array();
  for (const auto& pci : order) {
    std::vector<int> on;
    const GpuReading* pick = nullptr;
    for (const auto& r : ranks) {
      if (pci != r.pci_bus_id) continue;
      on.push_back(r.rank);
      if (!pick || (!pick->found && r.found)) pick = &r;  // the first rank's reading that NVML could give
    }
    out.push_back(device_entry(*pick, on, pids));
  }
  return out;
}

}  // namespace mori::symm
