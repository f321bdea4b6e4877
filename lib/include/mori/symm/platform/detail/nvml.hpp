// SPDX-License-Identifier: MIT
// NVML, loaded at run time (dlopen "libnvidia-ml.so.1") where present: what the driver knows about a GPU that
// the CUDA driver API does not say (compute mode, NVLink topology and error counters, fabric registration,
// Xid events). Every fact that could not be read carries the reason instead.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mori/symm/platform/gpu_state.hpp"

namespace mori::symm::detail {

struct NvmlInfo {
  bool available = false;
  std::string why;  // when not available
  std::string driver_version;
};

struct NvlinkPeer {
  std::string remote_pci_bus_id;
  std::string remote_type;  // "gpu", "switch", "ibmnpu", "unknown"
  int links = 0;
};

struct NvmlDevice {
  bool found = false;
  std::string why;                  // when not found
  std::uint32_t pci_device_id = 0;  // device id << 16 | vendor id
  int compute_mode = -1;            // 0 default, 1 exclusive thread, 2 prohibited, 3 exclusive process
  int mig_mode = -1;  // current MIG mode: 1 enabled, 0 disabled, -1 unknown (never changed here)
  // NVLink: active links grouped by remote end; link_mbps per link and direction (0 = unknown).
  bool nvlink_known = false;
  std::string nvlink_why;
  int nvlink_active = 0;
  int nvlink_inactive = 0;  // links NVML lists whose state is not active
  std::uint32_t link_mbps = 0;
  std::vector<NvlinkPeer> nvlink;
  // Error counters summed over the active links (mori-probe --health); nullopt where one could not be read.
  std::optional<unsigned long long> replay_errors;  // NVML_NVLINK_ERROR_DL_REPLAY
  std::optional<unsigned long long> crc_errors;     // NVML_NVLINK_ERROR_DL_CRC_FLIT + _CRC_DATA
  // GPU fabric registration (fabric manager / IMEX domains).
  bool fabric_known = false;
  std::string fabric_why;
  int fabric_state = -1;      // 0 not supported, 1 not started, 2 in progress, 3 completed
  std::string fabric_status;  // "SUCCESS" or NVML's error string
  std::uint32_t clique_id = 0;
  std::string cluster_uuid;
};

NvmlInfo nvml_info();
NvmlDevice nvml_device(const std::string& pci_bus_id);

// Fills r (found, why, driver_version and r.now) for the GPU at pci_bus_id (meta.gpu_state, gpu_state.hpp):
// every fact, or with counters_only the counters alone (gpu_fact_is_counter), a few calls. Never throws.
void nvml_read_state(const std::string& pci_bus_id, bool counters_only, GpuReading& r) noexcept;

// Critical Xid events of one GPU from the moment of construction (an NVML event set); never throws.
class XidWatch {
 public:
  explicit XidWatch(const std::string& pci_bus_id) noexcept;
  ~XidWatch();
  XidWatch(const XidWatch&) = delete;
  XidWatch& operator=(const XidWatch&) = delete;
  // Events seen so far (drained without waiting), or nullopt with the reason where they cannot be watched.
  std::optional<int> events(std::string* why) noexcept;

 private:
  void* set_ = nullptr;
  std::string why_;
  int seen_ = 0;
};

}  // namespace mori::symm::detail
