// SPDX-License-Identifier: MIT
// The environment a report was taken in (meta.environment), and the per-rank facts the doctor compares.
//
// Test-only overrides (never set them in production): MORI_TEST_HOSTNAME and MORI_TEST_BOOT_ID replace the
// host name and boot id this rank reports to the doctor, to simulate two machines on one; MORI_TEST_NET_NS
// replaces the network namespace id (a rank under `unshare --net` cannot reach mpirun's PMIx server, which
// speaks TCP only).
#pragma once

#include <string>
#include <vector>

#include "mori/symm/base/json.hpp"
#include "mori/symm/bringup/doctor.hpp"
#include "mori/symm/platform/runtime.hpp"

namespace mori::symm {

class Bootstrap;

// This process's facts (rt may be null: no runtime, then gpu = 0 and pci "none").
RankFacts local_rank_facts(Runtime* rt, int device, int rank, int node);

// Collective: every rank's facts, by rank. Without a bootstrap, this rank's alone.
std::vector<RankFacts> gather_rank_facts(Bootstrap* boot, Runtime* rt, int device);

// What the node around `device` looks like: IMEX channels, /dev/nvidia-caps, container, NVML fabric state.
DeviceEnv device_env(Runtime& rt, int device);

// meta.environment: kernel, fd limit, namespaces, boot id, container hints, MPS, NVML, per-device PCI id,
// compute mode, NVLink topology and fabric registration of this node's devices, and the ranks' facts.
Json environment_json(Runtime* rt, const std::vector<RankFacts>& ranks);

// Physical NVLink rate between two devices of this node in GB/s per direction (links x rate), or null with
// the reason in *why. Peers behind NVSwitches get the device's total.
Json link_gbps(Runtime& rt, int from, int to, std::string* why);
// The same between two devices named by PCI bus id, as every rank can name its peers' devices (an ordinal is
// not a device: with CUDA_VISIBLE_DEVICES set per rank every rank's device is ordinal 0).
Json link_gbps_by_pci(const std::string& from_pci_bus_id, const std::string& to_pci_bus_id, std::string* why);

// Collective: the cheap checks (namespaces, boot ids, host names, MPS, GPU sharing, compute mode, fd limit
// for `windows` windows). The result is also kept for this bootstrap, so that a failing window rendezvous
// can print it (log_kept_diagnoses).
std::vector<Diagnosis> cheap_diagnoses(Bootstrap& boot, Runtime* rt, int device, int windows);

// Logs the diagnoses that cheap_diagnoses kept for `boot` (errors and warnings); nothing when none were kept.
void log_kept_diagnoses(const Bootstrap& boot) noexcept;

}  // namespace mori::symm
