// Builds without NVIDIA headers (host-only or AMD): no NVML.
#include "mori/symm/detail/nvml.hpp"

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

}  // namespace mori::symm::detail
