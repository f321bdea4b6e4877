// SPDX-License-Identifier: MIT
// What setting up a job costs each rank, step by step (docs/json.md, "meta.setup"): wall time, this thread's
// CPU time, and counted operations (messages posted, datagrams, descriptors, VMM calls, records checked), so
// that the growth of each step with the world can be read without the scheduler of an oversubscribed host in
// the way. Every tool's report carries the maximum over ranks of each step.
//
//   { SetupStep s(Setup::map); ... count_setup_ops(n); }   // timed and counted into "map"
#pragma once

#include <array>
#include <cstdint>

#include "mori/symm/base/json.hpp"

namespace mori::symm {

class Bootstrap;

// The setup steps, in the order a job takes them.
enum class Setup : int {
  bootstrap,      // MPI communicator, node keys, teams
  options_check,  // every rank runs the same tool, revision and options; descriptor limits
  allocation,     // the local allocation: create, reserve, map, access, zero
  handle_export,  // export of the local handle (fd or fabric blob)
  exchange,       // requests allgathered and validated, handles exchanged (fds) and imported
  reserve,        // the flat span's address range
  map,            // every team member's memory mapped into its slot
  access,         // access set on every slot
  teardown,       // the default ordered teardown
  count_
};
constexpr int kSetupSteps = static_cast<int>(Setup::count_);
const char* setup_name(Setup s) noexcept;

// Times the enclosed code into step s (nested scopes: the innermost step counts, the outer one pauses).
// Never throws.
class SetupStep {
 public:
  explicit SetupStep(Setup s) noexcept;
  ~SetupStep();
  SetupStep(const SetupStep&) = delete;
  SetupStep& operator=(const SetupStep&) = delete;

 private:
  Setup step_;
  int outer_;
  double wall0_, cpu0_;
};

// Adds n operations to the step running now (nothing outside a step).
void count_setup_ops(std::uint64_t n) noexcept;

// This process's totals per step so far: seconds of wall and CPU time, operations, scopes entered.
struct SetupTotals {
  std::array<double, kSetupSteps> wall_s{}, cpu_s{};
  std::array<std::uint64_t, kSetupSteps> ops{}, scopes{};
};
SetupTotals setup_totals() noexcept;

// Collective: {world, steps: [{step, wall_s, cpu_s, ops, rank}]}, each the maximum over ranks (rank: the rank
// of the largest wall time), for every step that some rank ran.
Json gather_setup_cost(Bootstrap& boot);
// The same for this rank alone (a report written after a bound expired, when peers may not answer).
Json local_setup_cost(int rank, int world);

}  // namespace mori::symm
