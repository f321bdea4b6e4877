// SPDX-License-Identifier: MIT
// The bring-up doctor: named causes (diagnoses) computed from observed facts.
//
// Every function here is pure: facts in, diagnoses out, so each cause can be produced in a unit test with
// fakes. Gathering the facts (namespaces, boot id, NVML, ...) lives in environment.hpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mori/symm/base/json.hpp"
#include "mori/symm/bringup/probe.hpp"

namespace mori::symm {

enum class Severity { error, warning, info };
const char* to_string(Severity s) noexcept;

struct Diagnosis {
  std::string id;
  Severity severity = Severity::info;
  std::vector<int> ranks;  // global ranks involved (empty: not rank-specific)
  int device = -1;         // device index on the ranks' node, -1 where not device-specific
  std::string evidence;    // what was observed
  std::string fix;         // what to do about it
};

struct CatalogEntry {
  const char* id;
  Severity severity;  // the usual severity; some causes are downgraded when a fallback works
  const char* cause;  // one line
  const char* fix;
};

// Every diagnosis the doctor can produce.
const std::vector<CatalogEntry>& diagnosis_catalog();
const CatalogEntry& catalog_entry(const std::string& id);  // throws UsageError for an unknown id

// What one rank observes about its process and node; fixed size, so that it rides one allgather.
struct RankFacts {
  char host[64];
  char boot_id[40];
  char pci_bus_id[32];            // the rank's device ("none" on the host runtime)
  char node_name[64];             // the node as users name it (Bootstrap::node_name); "" = unknown
  std::uint64_t pid_ns = 0;       // inode of /proc/self/ns/pid; 0 = unknown
  std::uint64_t net_ns = 0;       // inode of /proc/self/ns/net; 0 = unknown
  std::uint64_t nofile_soft = 0;  // RLIMIT_NOFILE
  std::uint64_t nofile_hard = 0;
  std::int32_t rank = 0;
  std::int32_t node = 0;  // the bootstrap's node (load/store team) index
  std::int32_t device = 0;
  std::int32_t gpu = 0;            // 1 = a GPU runtime, 0 = the host runtime
  std::int32_t mps = 0;            // 1 = an MPS control daemon is reachable
  std::int32_t compute_mode = -1;  // NVML: 0 default, 1 exclusive thread, 2 prohibited, 3 exclusive process
  std::int32_t open_fds = -1;      // descriptors open at the start (open_fds_at_start); -1 = unknown
};

// Cross-rank checks: namespaces, boot ids, host names, MPS, GPU sharing, compute mode, fd limits, teams.
std::vector<Diagnosis> diagnose_ranks(const std::vector<RankFacts>& ranks, int windows);

// What the node around a device looks like (gathered by environment.cpp, faked by tests).
struct DeviceEnv {
  bool imex_channel_present = false;  // /dev/nvidia-caps-imex-channels holds a channel
  bool caps_present = false;          // /dev/nvidia-caps exists
  bool in_container = false;
  int fabric_state =
      -1;  // NVML GPU fabric state (0 n/a, 1 not started, 2 in progress, 3 completed); -1 unknown
  std::string fabric_status;  // NVML status of a completed registration ("SUCCESS" or an error); "" unknown
};

// Per-device checks over a probe result: VMM, handle types, fabric refusals and their likely cause.
std::vector<Diagnosis> diagnose_device(const DeviceProbe& p, Platform platform, const DeviceEnv& env,
                                       int rank);

// Checks over `mori-probe --deep` data of one node (pairs and access_grant_penalty as probe_deep writes
// them).
std::vector<Diagnosis> diagnose_deep(const Json& deep, int rank);

// Errors first, then warnings, then info; within a severity by id.
void sort_diagnoses(std::vector<Diagnosis>& d);
bool has_error(const std::vector<Diagnosis>& d) noexcept;

Json to_json(const Diagnosis& d);
Diagnosis diagnosis_from_json(const Json& j);
Json to_json(const std::vector<Diagnosis>& d);

// "  error   fd_limit_low (ranks 0,1): evidence\n          fix: ...\n" per diagnosis; "" when none.
std::string format_diagnoses(const std::vector<Diagnosis>& d);

}  // namespace mori::symm
