// SPDX-License-Identifier: MIT
// meta.gpu_state (lib/include/mori/symm/platform/gpu_state.hpp) composed from made-up NVML readings: the
// decoding of the clocks-event reasons, the deltas over the run, the job's own processes left out, and every
// absent fact null with the call and NVML's error name beside it.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "mori/symm/platform/gpu_state.hpp"

using namespace mori::symm;
using F = GpuFactId;

namespace {

constexpr std::int32_t kNotSupported = 3;  // NVML_ERROR_NOT_SUPPORTED
constexpr std::int32_t kNoPermission = 4;  // NVML_ERROR_NO_PERMISSION

void set(GpuReading& r, F f, std::uint64_t v) {
  r.now[static_cast<int>(f)] = {v, GpuFact::kRead};
}
void set_start(GpuReading& r, F f, std::uint64_t v) {
  r.start[static_cast<int>(f)] = {v, GpuFact::kRead};
}
void fail(GpuReading& r, F f, std::int32_t status) {
  r.now[static_cast<int>(f)] = {0, status};
}

// An H200 at work: every fact read, the counters at the start too.
GpuReading h200(const char* pci, int rank) {
  GpuReading r;
  std::strcpy(r.pci_bus_id, pci);
  std::strcpy(r.driver_version, "570.86.15");
  r.found = 1;
  r.rank = rank;
  set(r, F::sm_mhz, 1980);
  set(r, F::mem_mhz, 3201);
  set(r, F::sm_max_mhz, 1980);
  set(r, F::mem_max_mhz, 3201);
  set(r, F::sm_applications_mhz, 1785);
  set(r, F::mem_applications_mhz, 3201);
  set(r, F::sm_default_applications_mhz, 1785);
  set(r, F::mem_default_applications_mhz, 3201);
  set(r, F::pstate, 0);
  set(r, F::power_limit_mw, 700000);
  set(r, F::power_draw_mw, 412345);
  set(r, F::temperature_c, 41);
  set(r, F::clocks_event_reasons, 0x4 | 0x40);  // sw power cap, hw thermal slowdown
  set(r, F::ecc_enabled, 1);
  set(r, F::ecc_pending, 1);
  set(r, F::ecc_uncorrected_volatile, 2);
  set_start(r, F::ecc_uncorrected_volatile, 1);
  set(r, F::persistence_mode, 1);
  set(r, F::processes, 3);
  r.pids[0] = 100;  // this job's rank
  r.pids[1] = 4242;
  r.pids[2] = 101;  // this job's rank
  set_start(r, F::power_violation_ns, 5'000'000'000ull);
  set(r, F::power_violation_ns, 5'250'000'000ull);
  set_start(r, F::thermal_violation_ns, 7);
  set(r, F::thermal_violation_ns, 7);
  set_start(r, F::nvlink_replay, 10);
  set(r, F::nvlink_replay, 13);
  set_start(r, F::nvlink_crc, 0);
  set(r, F::nvlink_crc, 0);
  return r;
}

}  // namespace

TEST(GpuState, ClocksEventReasonsDecodeByName) {
  EXPECT_TRUE(clocks_event_reason_names(0).empty());
  EXPECT_EQ(clocks_event_reason_names(0x4 | 0x40),
            (std::vector<std::string>{"sw_power_cap", "hw_thermal_slowdown"}));
  EXPECT_EQ(clocks_event_reason_names(0x1 | 0x2 | 0x80 | 0x100),
            (std::vector<std::string>{"gpu_idle", "applications_clocks_setting", "hw_power_brake_slowdown",
                                      "display_clock_setting"}));
  // A bit NVML added later is kept, as hex, never dropped.
  EXPECT_EQ(clocks_event_reason_names(0x8 | 0x1000), (std::vector<std::string>{"hw_slowdown", "0x1000"}));
}

TEST(GpuState, ReasonsNameTheCallAndNvmlsError) {
  EXPECT_EQ(nvml_error_name(kNotSupported), "NVML_ERROR_NOT_SUPPORTED");
  EXPECT_EQ(nvml_error_name(999), "NVML_ERROR_UNKNOWN");
  EXPECT_EQ(nvml_error_name(77), "NVML error 77");
  EXPECT_EQ(gpu_fact_reason(F::power_draw_mw, kNoPermission),
            "nvmlDeviceGetPowerUsage: NVML_ERROR_NO_PERMISSION");
  EXPECT_EQ(gpu_fact_reason(F::clocks_event_reasons, GpuFact::kNoEntryPoint),
            "this NVML has no nvmlDeviceGetCurrentClocksEventReasons");
  EXPECT_EQ(gpu_fact_reason(F::nvlink_crc, GpuFact::kNoActiveLink), "no active NVLink");
}

TEST(GpuState, OneEntryPerGpuWithEveryFact) {
  // Ranks 0 and 2 share one GPU (the first rank's reading stands for it), rank 1 has another.
  std::vector<GpuReading> ranks = {h200("00000000:19:00.0", 0), h200("00000000:3B:00.0", 1),
                                   h200("00000000:19:00.0", 2)};
  set(ranks[2], F::sm_mhz, 1);  // not the reading that stands for the GPU
  std::string why;
  const Json j = gpu_state_json(ranks, {100, 101, 102}, &why);
  ASSERT_TRUE(j.is_array()) << j.dump();
  ASSERT_EQ(j.size(), 2u);
  const Json& d = j[0];
  EXPECT_EQ(d["pci_bus_id"], "00000000:19:00.0");
  EXPECT_EQ(d["ranks"], Json::array({0, 2}));
  EXPECT_EQ(j[1]["ranks"], Json::array({1}));
  EXPECT_EQ(d["driver_version"], "570.86.15");
  EXPECT_EQ(d["clocks"]["sm_mhz"], 1980);
  EXPECT_EQ(d["clocks"]["mem_mhz"], 3201);
  EXPECT_EQ(d["clocks"]["sm_max_mhz"], 1980);
  EXPECT_EQ(d["clocks"]["sm_applications_mhz"], 1785);
  EXPECT_EQ(d["clocks"]["mem_default_applications_mhz"], 3201);
  EXPECT_EQ(d["pstate"], 0);
  EXPECT_DOUBLE_EQ(d["power"]["limit_w"].get<double>(), 700.0);
  EXPECT_DOUBLE_EQ(d["power"]["draw_w"].get<double>(), 412.345);
  EXPECT_EQ(d["temperature_c"], 41);
  EXPECT_EQ(d["clocks_event_reasons"], Json::array({"sw_power_cap", "hw_thermal_slowdown"}));
  EXPECT_DOUBLE_EQ(d["violation_ms"]["power"].get<double>(), 250.0);
  EXPECT_DOUBLE_EQ(d["violation_ms"]["thermal"].get<double>(), 0.0);
  EXPECT_EQ(d["ecc"]["enabled"], true);
  EXPECT_EQ(d["ecc"]["pending_enabled"], true);
  EXPECT_EQ(d["ecc"]["uncorrected_volatile"], 2);
  EXPECT_EQ(d["ecc"]["uncorrected_during_run"], 1);
  EXPECT_EQ(d["persistence_mode"], true);
  EXPECT_EQ(d["processes"]["total"], 3);
  EXPECT_EQ(d["processes"]["others"], 1);
  EXPECT_EQ(d["processes"]["other_pids"], Json::array({4242}));
  EXPECT_EQ(d["nvlink_errors"]["replay"], (Json{{"start", 10}, {"end", 13}, {"delta", 3}}));
  EXPECT_EQ(d["nvlink_errors"]["crc"]["delta"], 0);
  // Every fact read: no null and no reason anywhere in the entry.
  std::vector<const Json*> todo = {&d};
  while (!todo.empty()) {
    const Json* o = todo.back();
    todo.pop_back();
    for (const auto& [k, v] : o->items()) {
      EXPECT_FALSE(v.is_null()) << k;
      EXPECT_FALSE(k.size() > 7 && k.compare(k.size() - 7, 7, "_reason") == 0) << k;
      if (v.is_object()) todo.push_back(&v);
    }
  }
}

TEST(GpuState, AnAbsentFactIsNullWithItsReason) {
  GpuReading r = h200("00000000:19:00.0", 0);
  fail(r, F::sm_applications_mhz, kNotSupported);
  fail(r, F::power_draw_mw, GpuFact::kNoEntryPoint);
  fail(r, F::processes, kNoPermission);
  fail(r, F::clocks_event_reasons, kNotSupported);
  r.now[static_cast<int>(F::nvlink_replay)] = {0, GpuFact::kNoActiveLink};
  r.start[static_cast<int>(F::power_violation_ns)] = GpuFact{};  // no reading at the start
  set(r, F::ecc_uncorrected_volatile, 0);                        // below the start's 1
  set(r, F::pstate, 32);                                         // NVML_PSTATE_UNKNOWN
  std::string why;
  const Json d = gpu_state_json({r}, {}, &why)[0];
  EXPECT_TRUE(d["clocks"]["sm_applications_mhz"].is_null());
  EXPECT_EQ(d["clocks"]["sm_applications_mhz_reason"],
            "nvmlDeviceGetApplicationsClock: NVML_ERROR_NOT_SUPPORTED");
  EXPECT_EQ(d["clocks"]["sm_mhz"], 1980);  // the others stay
  EXPECT_TRUE(d["power"]["draw_w"].is_null());
  EXPECT_EQ(d["power"]["draw_w_reason"], "this NVML has no nvmlDeviceGetPowerUsage");
  EXPECT_TRUE(d["processes"].is_null());
  EXPECT_EQ(d["processes_reason"], "nvmlDeviceGetComputeRunningProcesses_v3: NVML_ERROR_NO_PERMISSION");
  EXPECT_TRUE(d["clocks_event_reasons"].is_null());
  EXPECT_EQ(d["clocks_event_reasons_reason"],
            "nvmlDeviceGetCurrentClocksEventReasons: NVML_ERROR_NOT_SUPPORTED");
  EXPECT_TRUE(d["nvlink_errors"]["replay"].is_null());
  EXPECT_EQ(d["nvlink_errors"]["replay_reason"], "no active NVLink");
  EXPECT_TRUE(d["violation_ms"]["power"].is_null());
  EXPECT_EQ(d["violation_ms"]["power_reason"], "at the tool's start: not read");
  EXPECT_TRUE(d["ecc"]["uncorrected_during_run"].is_null());
  EXPECT_NE(d["ecc"]["uncorrected_during_run_reason"].get<std::string>().find("went back"),
            std::string::npos);
  EXPECT_TRUE(d["pstate"].is_null());
  EXPECT_EQ(d["pstate_reason"], "nvmlDeviceGetPerformanceState: P-state unknown");
  // Without the job's pids every process is another's.
  GpuReading p = h200("00000000:19:00.0", 0);
  EXPECT_EQ(gpu_state_json({p}, {}, &why)[0]["processes"]["others"], 3);
}

TEST(GpuState, NoReadingGivesNullWithTheReason) {
  GpuReading host;
  std::strcpy(host.why, "host runtime: no GPU");
  std::string why;
  EXPECT_TRUE(gpu_state_json({host, host}, {1, 2}, &why).is_null());
  EXPECT_EQ(why, "host runtime: no GPU");
  GpuReading absent;
  std::strcpy(absent.pci_bus_id, "00000000:19:00.0");
  std::strcpy(absent.why, "dlopen(libnvidia-ml.so.1) failed: not found");
  EXPECT_TRUE(gpu_state_json({absent}, {1}, &why).is_null());
  EXPECT_EQ(why, "dlopen(libnvidia-ml.so.1) failed: not found");
  // One GPU NVML cannot open beside one it can: an entry naming why, not a made-up reading.
  const Json j = gpu_state_json({h200("00000000:3B:00.0", 0),
                                 [&] {
                                   GpuReading a = absent;
                                   a.rank = 1;
                                   return a;
                                 }()},
                                {}, &why);
  ASSERT_EQ(j.size(), 2u);
  EXPECT_TRUE(j[1]["nvml"].is_null());
  EXPECT_EQ(j[1]["nvml_reason"], "dlopen(libnvidia-ml.so.1) failed: not found");
  EXPECT_FALSE(j[1].contains("clocks"));
}
