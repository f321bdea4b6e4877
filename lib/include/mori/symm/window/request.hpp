// SPDX-License-Identifier: MIT
// The fixed-size request every rank publishes at rendezvous, and its collective validation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mori/symm/platform/runtime.hpp"

namespace mori::symm {

struct RendezvousRequest {
  char magic[8];
  std::uint32_t version;
  std::int32_t rank;
  std::uint64_t alloc_bytes;
  std::uint64_t buffer_bytes;
  std::uint64_t signal_bytes;
  std::uint64_t stride;
  std::int32_t device;
  std::int32_t pid;
  std::int32_t handle_type;  // HandleType
  std::int32_t node;
  std::uint64_t host_hash;
  FabricBlob blob;  // fabric path only
};

RendezvousRequest make_request(int rank, std::uint64_t alloc_bytes, std::uint64_t buffer_bytes,
                               std::uint64_t signal_bytes, std::uint64_t stride, int device, HandleType type,
                               int node);

// Every problem found across all ranks' requests, each naming the ranks that differ; empty when consistent.
// Deterministic: every rank computes the same list from the same allgathered data, so every rank fails alike.
std::vector<std::string> validate_requests(const std::vector<RendezvousRequest>& all);

}  // namespace mori::symm
