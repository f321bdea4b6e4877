// SPDX-License-Identifier: MIT
// Builds without NVIDIA headers (host-only or AMD): no NVML.
#include <cstdio>

#include "mori/symm/platform/detail/nvml.hpp"

namespace mori::symm::detail {

NvmlInfo nvml_info() {
  NvmlInfo i;
  i.why = "built without NVIDIA support";
  return i;
}

NvmlDevice nvml_device(const std::string&) {
  NvmlDevice d;
  d.why = "built without NVIDIA support";
  return d;
}

void nvml_read_state(const std::string& pci_bus_id, bool, GpuReading& r) noexcept {
  std::snprintf(r.pci_bus_id, sizeof(r.pci_bus_id), "%s", pci_bus_id.c_str());
  std::snprintf(r.why, sizeof(r.why), "%s", "built without NVIDIA support");
}

}  // namespace mori::symm::detail

namespace mori::symm::detail {

XidWatch::XidWatch(const std::string&) noexcept : why_("built without NVIDIA support") {}
XidWatch::~XidWatch() = default;
std::optional<int> XidWatch::events(std::string* why) noexcept {
  *why = why_;
  return std::nullopt;
}

}  // namespace mori::symm::detail
