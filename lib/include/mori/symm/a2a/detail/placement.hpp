// SPDX-License-Identifier: MIT
// Where the ranks of an all-to-all sit: which share a device, whether MPS serves them, the links between
// devices. Read once at start (one allgather, lib/src/a2a/a2a.cpp) and used by every choice that depends on
// it: the signal scope, programmatic launches, the automatic protocol and blocks per peer, the physical
// limit (docs/mori-a2a.md "Placement").
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "mori/symm/platform/runtime.hpp"

namespace mori::symm::detail {

// One rank's whereabouts. "Same GPU" has one source: the node of the load/store team (Bootstrap::node_of,
// MPI's shared-memory split after any --node-id / MORI_NODE_ID), then the device named physically (a hash of
// its PCI bus id where the runtime reports one). Host names are no part of it: containers on one machine may
// each have their own. An ordinal is not a device either: with CUDA_VISIBLE_DEVICES set per rank every
// rank's device is ordinal 0.
struct RankPlace {
  std::int32_t node = 0;
  std::int32_t mps = 0;
  std::uint64_t device = 0;
  std::int32_t mig = 0;  // this rank's device is a MIG instance (mig_instance)
  char pci[28] = {};     // the PCI bus id, for link rates ("" where none)
};

// Where the ranks sit, from one allgather at start.
struct DevicePlacement {
  int world = 1;
  bool host_runtime = false;
  bool all_one_device = true;
  bool one_rank_per_device = false;
  int max_ranks_per_device = 1;
  bool any_without_mps = false;
  std::vector<int> mig_ranks;    // ranks on a MIG instance (refused: refuse_mig)
  std::vector<RankPlace> ranks;  // every rank's, in rank order
  double link_gbps = 0;          // per direction, per device, 0 = unknown
  std::string link_source = "NVLink not read";
};

// This rank's RankPlace: `node` from the bootstrap's team split, the device from its info.
RankPlace rank_place(int node, const DeviceInfo& d, int ordinal, bool mps, bool mig);
// From every rank's RankPlace, in rank order.
DevicePlacement device_placement_of(const std::vector<RankPlace>& all, bool host_runtime);
// The physical name of a device for RankPlace: its PCI bus id, or its ordinal where the runtime reports none.
std::uint64_t device_identity(const DeviceInfo& d, int ordinal);

// Whether this rank's device is a MIG instance: CUDA's runtime only, where CUDA_VISIBLE_DEVICES names a
// "MIG-" device or NVML reports MIG mode enabled on the GPU at its PCI bus id (with MIG on, CUDA sees only
// instances). `nvml_mig_mode`: NVML's current MIG mode of that GPU (1 on, 0 off, -1 unknown).
bool mig_instance(Platform platform, const char* cuda_visible_devices, int nvml_mig_mode);
// Throws UsageError (exit 2) naming the ranks on MIG instances, if any: an instance reports its parent GPU's
// PCI bus id, so ranks on two instances would be taken for ranks sharing one GPU (device-scope signals, the
// shared-GPU rules). MIG settings are never changed by the tools.
void refuse_mig(const DevicePlacement& pl);

// The slowest link from rank `me` to any peer on another device of its node, in GB/s per direction, asked by
// the two devices' PCI bus ids; 0 where a peer's path has no known rate (the reason in *why), -1 where no
// peer is on another device. `rate(from_pci, to_pci, why)` returns 0 with a reason when unknown.
using LinkRate = std::function<double(const std::string&, const std::string&, std::string*)>;
double slowest_link_from(const std::vector<RankPlace>& all, int me, const LinkRate& rate, std::string* why);

}  // namespace mori::symm::detail
