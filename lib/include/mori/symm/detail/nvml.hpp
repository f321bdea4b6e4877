// NVML, loaded at run time (dlopen "libnvidia-ml.so.1") where present: what the driver knows about a GPU that
// the CUDA driver API does not say (compute mode, NVLink topology, fabric registration). Every fact that
// could not be read carries the reason instead.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

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
  std::uint32_t link_mbps = 0;
  std::vector<NvlinkPeer> nvlink;
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

}  // namespace mori::symm::detail
