// SPDX-License-Identifier: MIT
// Capability probe by doing (docs/mori-probe.md): for each handle type, record what the driver
// claims, then try every step a window needs, in one process, and choose the handle type from what worked.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "mori/symm/base/json.hpp"
#include "mori/symm/base/outcome.hpp"
#include "mori/symm/platform/runtime.hpp"

namespace mori::symm {

struct ProbeStep {
  std::string step;
  StepStatus status;
  double us = 0;
};

struct HandleProbe {
  HandleType type = HandleType::posix_fd;
  int attribute = -1;  // driver attribute: 1, 0, or -1 where the platform has none
  bool usable = false;
  std::vector<ProbeStep> steps;
  std::size_t granularity_minimum = 0;
  std::size_t granularity_recommended = 0;
};

struct DeviceProbe {
  DeviceInfo info;
  HandleProbe posix_fd;
  HandleProbe fabric;
  std::optional<HandleType> chosen;
  std::string reason;
  bool attribute_disagrees = false;
  std::string imex_channel;  // NVIDIA: "present" / "absent"; other platforms: "n/a"
};

// Runs every step for both handle types on `device`. Never throws for a failing step: the step records the
// error name and the remaining steps of that type are skipped (their resources returned).
DeviceProbe probe_device(Runtime& rt, int device);

// The same, computed once per (runtime, device) and kept; thread-safe.
const DeviceProbe& probe_device_cached(Runtime& rt, int device);

// The decision alone: fabric if every fabric step worked, else posix_fd if every fd step worked, else none.
void decide(DeviceProbe& p);

// The handle type a window should use on `device`; throws ApiError naming the reason when none works.
HandleType choose_handle_type(Runtime& rt, int device);
// The user's choice where given (--handle-type), else choose_handle_type.
HandleType resolve_handle_type(Runtime& rt, int device, const std::optional<HandleType>& choice);

Json to_json(const DeviceProbe& p);

// --deep: load/store reachability between every pair of visible devices found by mapping and writing, and the
// owner's local bandwidth on a VMM allocation before and after granting each peer access to it.
Json probe_deep(Runtime& rt, std::size_t bytes);

}  // namespace mori::symm
