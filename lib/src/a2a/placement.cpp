// SPDX-License-Identifier: MIT
// Where the ranks sit (mori/symm/a2a/detail/placement.hpp).
#include "mori/symm/a2a/detail/placement.hpp"

#include <algorithm>
#include <cstring>
#include <functional>

#include "mori/symm/base/detail/text.hpp"
#include "mori/symm/base/error.hpp"

namespace mori::symm::detail {

RankPlace rank_place(int node, const DeviceInfo& d, int ordinal, bool mps, bool mig) {
  RankPlace p;
  p.node = node;
  p.mps = mps ? 1 : 0;
  p.device = device_identity(d, ordinal);
  p.mig = mig ? 1 : 0;
  if (!d.pci_bus_id.empty() && d.pci_bus_id != "none")
    std::strncpy(p.pci, d.pci_bus_id.c_str(), sizeof(p.pci) - 1);
  return p;
}

DevicePlacement device_placement_of(const std::vector<RankPlace>& all, bool host_runtime) {
  DevicePlacement pl;
  pl.world = static_cast<int>(all.size());
  pl.host_runtime = host_runtime;
  for (std::size_t r = 0; r < all.size(); ++r) {
    const auto& w = all[r];
    int same = 0;
    for (const auto& v : all) same += v.node == w.node && v.device == w.device;
    pl.max_ranks_per_device = std::max(pl.max_ranks_per_device, same);
    if (w.node != all[0].node || w.device != all[0].device) pl.all_one_device = false;
    pl.any_without_mps |= !w.mps;
    if (w.mig) pl.mig_ranks.push_back(static_cast<int>(r));
  }
  pl.one_rank_per_device = pl.max_ranks_per_device == 1 && pl.world > 1;
  pl.ranks = all;
  return pl;
}

std::uint64_t device_identity(const DeviceInfo& d, int ordinal) {
  const bool named = !d.pci_bus_id.empty() && d.pci_bus_id != "none";
  return std::hash<std::string>{}(named ? "pci:" + d.pci_bus_id : "ordinal:" + std::to_string(ordinal));
}

bool mig_instance(Platform platform, const char* cuda_visible_devices, int nvml_mig_mode) {
  if (platform != Platform::cuda) return false;
  if (nvml_mig_mode == 1) return true;
  const std::string v = cuda_visible_devices ? cuda_visible_devices : "";
  for (std::size_t pos = 0; pos <= v.size();) {
    std::size_t end = std::min(v.find(',', pos), v.size());
    std::size_t b = pos;
    while (b < end && v[b] == ' ') ++b;
    if (v.compare(b, 4, "MIG-") == 0) return true;
    pos = end + 1;
  }
  return false;
}

void refuse_mig(const DevicePlacement& pl) {
  if (pl.mig_ranks.empty()) return;
  throw UsageError(
      "mori-a2a: ranks " + join_ranks(pl.mig_ranks) +
      " run on MIG instances, which this tool does not support: an instance reports its parent GPU's PCI "
      "bus id, so ranks on two instances cannot be told from ranks sharing one GPU (device-scope signals "
      "and the shared-GPU rules would be wrong). Run on whole GPUs (the tools never change MIG settings)");
}

double slowest_link_from(const std::vector<RankPlace>& all, int me, const LinkRate& rate, std::string* why) {
  double mine = -1;  // -1: no peer on another device yet; 0: a path of unknown rate
  *why = "no peer on another device";
  const auto& self = all[static_cast<std::size_t>(me)];
  for (std::size_t q = 0; q < all.size() && mine != 0; ++q) {
    const auto& p = all[q];
    if (static_cast<int>(q) == me || p.node != self.node || p.device == self.device) continue;
    const double v = rate(std::string(self.pci, strnlen(self.pci, sizeof(self.pci))),
                          std::string(p.pci, strnlen(p.pci, sizeof(p.pci))), why);
    mine = mine < 0 ? v : std::min(mine, v);
  }
  return mine;
}

}  // namespace mori::symm::detail
