// SPDX-License-Identifier: MIT
// Private to the all-to-all driver: the facts its plan depends on, gathered once over the job before the
// window is made (docs/mori-a2a.md "The plan"), and the refusals that need them.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "mori/symm/a2a/plan.hpp"
#include "mori/symm/a2a/types.hpp"
#include "mori/symm/platform/runtime.hpp"
#include "test_hooks.hpp"

namespace mori::symm {
class Bootstrap;
}

namespace mori::symm::detail {

struct A2aSetup {
  A2aFacts facts;            // where the ranks sit, the device, cache hints, the occupancy
  bool time_sliced = false;  // ranks share a GPU without MPS
  std::string jit_arch;      // the arch the kernels are built for (CUDA); "" elsewhere
  std::string plan_note;     // the plan's note on the tables it reads (a2a_table_note); "" when none
};

// Collective over boot: where the ranks sit (one allgather), the slowest NVLink path where each rank has its
// own GPU, whether every rank's kernels take cache hints; then the refusals (MIG, time slicing without
// --allow-time-slicing, what the plan refuses) and, on the job's rank 0, the plan's note (a team of another
// node whose note differs is named in mori-a2a's fleet report). resident_blocks: the engine's occupancy
// (A2aFacts), asked only once the engine exists. Throws UsageError.
A2aSetup gather_a2a_setup(Runtime& rt, Bootstrap& boot, int device, const DeviceInfo& info,
                          const A2aConfig& cfg, const A2aTestHooks& hooks,
                          std::function<long(const PushSpec&)> resident_blocks);

// Two parity buffers of world staging slots for the largest chunk the ll protocol runs at; 0 if none.
std::uint64_t a2a_ll_staging_bytes(const A2aConfig& cfg, const DevicePlacement& placement, int world);

}  // namespace mori::symm::detail
