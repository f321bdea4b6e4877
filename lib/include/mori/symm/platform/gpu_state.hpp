// SPDX-License-Identifier: MIT
// What can explain a change in a measurement (docs/json.md, "meta.gpu_state"): each GPU's clocks, power limit
// and draw, temperature, clocks-event (throttle) reasons, the time power and heat held the clocks down, ECC,
// other processes on the GPU, persistence mode and NVLink error counters, read through NVML by the tool
// itself once at its start (the counters only) and again at report time. A fact NVML could not give is null
// in the report with the call and NVML's error name beside it; nothing is made up.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mori/symm/base/json.hpp"

namespace mori::symm {

class Runtime;

// The facts of one reading, in the order of kGpuFactCalls (gpu_state.cpp).
enum class GpuFactId : int {
  sm_mhz,
  mem_mhz,
  sm_max_mhz,
  mem_max_mhz,
  sm_applications_mhz,
  mem_applications_mhz,
  sm_default_applications_mhz,
  mem_default_applications_mhz,
  pstate,
  power_limit_mw,
  power_draw_mw,
  temperature_c,
  clocks_event_reasons,  // the bit mask of nvmlClocksEventReason*
  ecc_enabled,
  ecc_pending,
  ecc_uncorrected_volatile,
  persistence_mode,
  processes,           // the number of compute processes NVML lists
  power_violation_ns,  // accumulated since the driver loaded
  thermal_violation_ns,
  nvlink_replay,  // summed over the active links
  nvlink_crc,     // flit + data CRC, summed over the active links
  count
};
constexpr int kGpuFacts = static_cast<int>(GpuFactId::count);
constexpr int kGpuMaxPids =
    256;  // process ids read per GPU (more: the count is null, NVML_ERROR_INSUFFICIENT_SIZE)

// One fact: its value, or why not. status > 0 is NVML's return code.
struct GpuFact {
  static constexpr std::int32_t kRead = 0;
  static constexpr std::int32_t kNotRead = -1;       // never asked (no start snapshot)
  static constexpr std::int32_t kNoEntryPoint = -2;  // this NVML lacks the call
  static constexpr std::int32_t kNoActiveLink = -3;  // NVLink counters of a GPU with no active link
  std::uint64_t value = 0;
  std::int32_t status = kNotRead;
  bool ok() const { return status == kRead; }
};

// One rank's GPU: fixed size, gathered across the ranks (meta.cpp).
struct GpuReading {
  char pci_bus_id[32] = {};  // "" where the rank has no GPU (host runtime)
  char why[192] = {};        // where found == 0: why NVML could not open the device
  char driver_version[48] = {};
  std::int32_t found = 0;
  std::int32_t rank = 0;
  GpuFact now[kGpuFacts];
  GpuFact start[kGpuFacts];  // the counters at the tool's start (violation times, ECC count, NVLink)
  std::uint32_t pids[kGpuMaxPids] = {};  // the processes NVML lists (now[processes] of them)
  GpuFact& at(GpuFactId f) { return now[static_cast<int>(f)]; }
  const GpuFact& at(GpuFactId f) const { return now[static_cast<int>(f)]; }
  const GpuFact& at_start(GpuFactId f) const { return start[static_cast<int>(f)]; }
};

// The facts read at the tool's start too (counters whose change over the run is what matters).
bool gpu_fact_is_counter(GpuFactId f);

// This rank's GPU (the runtime's device; none on the host runtime) at the tool's start: the counters only, a
// few NVML calls. Never throws, never waits.
GpuReading gpu_state_start(Runtime* rt, int device) noexcept;
// This rank's GPU now, with start's counters kept beside. Never throws, never waits.
GpuReading gpu_state_now(Runtime* rt, int device, const GpuReading& start) noexcept;

// --- the pure part (tests/unit/gpu_state_test.cpp)
// ---------------------------------------------------------------

// Names of the clocks-event (throttle) reasons set in mask ("sw_power_cap", ...; "0x..." for unknown bits).
std::vector<std::string> clocks_event_reason_names(std::uint64_t mask);
// Why a fact is absent: "nvmlDeviceGetPowerUsage: NVML_ERROR_NOT_SUPPORTED" and the like.
std::string gpu_fact_reason(GpuFactId f, std::int32_t status);
// NVML's name of a return code ("NVML_ERROR_NOT_SUPPORTED"; "NVML error N" where unknown).
std::string nvml_error_name(std::int32_t status);

// meta.gpu_state from every rank's reading: one entry per distinct GPU (by PCI bus id), its ranks, and the
// processes on it that are not the job's (job_pids: every rank's pid). Null with *reason where no rank's GPU
// could be read (the host runtime, no NVML).
Json gpu_state_json(const std::vector<GpuReading>& ranks, const std::vector<std::int64_t>& job_pids,
                    std::string* reason);

}  // namespace mori::symm
