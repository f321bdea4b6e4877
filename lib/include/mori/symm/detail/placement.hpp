// Where the ranks of an all-to-all sit: which share a device, whether MPS serves them, the links between
// devices. Read once at start (one allgather, lib/src/a2a/a2a.cpp) and used by every choice that depends on
// it: the signal scope, programmatic launches, the automatic protocol and blocks per peer, the physical
// limit.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mori/symm/runtime.hpp"

namespace mori::symm::detail {

// Where the ranks sit, from one allgather at start.
struct Placement {
  int world = 1;
  bool host_runtime = false;
  bool all_one_device = true;
  bool one_rank_per_device = false;
  int max_ranks_per_device = 1;
  bool any_without_mps = false;
  double link_gbps = 0;  // per direction, per device, 0 = unknown
  std::string link_source = "NVLink not read";
};

// One rank's whereabouts. The device is named physically (a hash of its PCI bus id where the runtime reports
// one): an ordinal is not a device, since with CUDA_VISIBLE_DEVICES set per rank every rank's device is
// ordinal 0.
struct RankPlace {
  std::uint64_t host = 0;
  std::uint64_t device = 0;
  std::int32_t mps = 0;
};
// From every rank's RankPlace, in rank order.
Placement placement_of(const std::vector<RankPlace>& all, bool host_runtime);
// The physical name of a device for RankPlace: its PCI bus id, or its ordinal where the runtime reports none.
std::uint64_t device_identity(const DeviceInfo& d, int ordinal);

}  // namespace mori::symm::detail
