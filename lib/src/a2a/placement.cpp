// Where the ranks sit (mori/symm/detail/placement.hpp).
#include "mori/symm/detail/placement.hpp"

#include <algorithm>
#include <functional>

namespace mori::symm::detail {

Placement placement_of(const std::vector<RankPlace>& all, bool host_runtime) {
  Placement pl;
  pl.world = static_cast<int>(all.size());
  pl.host_runtime = host_runtime;
  for (const auto& w : all) {
    int same = 0;
    for (const auto& v : all) same += v.host == w.host && v.device == w.device;
    pl.max_ranks_per_device = std::max(pl.max_ranks_per_device, same);
    if (w.host != all[0].host || w.device != all[0].device) pl.all_one_device = false;
    pl.any_without_mps |= !w.mps;
  }
  pl.one_rank_per_device = pl.max_ranks_per_device == 1 && pl.world > 1;
  return pl;
}

std::uint64_t device_identity(const DeviceInfo& d, int ordinal) {
  const bool named = !d.pci_bus_id.empty() && d.pci_bus_id != "none";
  return std::hash<std::string>{}(named ? "pci:" + d.pci_bus_id : "ordinal:" + std::to_string(ordinal));
}

}  // namespace mori::symm::detail
