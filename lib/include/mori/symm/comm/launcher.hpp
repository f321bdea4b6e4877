// SPDX-License-Identifier: MIT
// The process launcher (mpirun, mpiexec, srun) and the MPI job it started: a tool built against one MPI and
// started by another MPI's launcher, or by srun with a PMI plugin its MPI does not speak, runs every process
// as a job of its own. check_launcher_world refuses that before any traffic (docs/setup.md, "Launching").
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace mori::symm {

// What the launcher says it started, from the variables it sets in every process's environment.
struct LauncherClaim {
  std::string variable;  // the variable read, e.g. "PMI_SIZE"
  std::string launcher;  // who sets it, in words: "Open MPI's mpirun", "a PMI launcher (...)", "srun"
  std::uint64_t tasks = 0;
};

// The innermost launcher's claim: OMPI_COMM_WORLD_SIZE (Open MPI's launcher), then PMI_SIZE (PMI-1/2: Hydra,
// srun --mpi=pmi2), then SLURM_STEP_NUM_TASKS (srun; an allocation's own SLURM_NTASKS is not read: a job step
// may start fewer tasks). An inner launcher started from an outer one's process sets its variable too, so the
// first found wins. nullopt when none is set. Throws UsageError for a value that is not a count (1 to 2^24,
// decimal digits only).
std::optional<LauncherClaim> launcher_claim();

// The MPI library this process runs, first line of MPI_Get_library_version ("Open MPI v4.1.4, ...").
// After MPI_Init.
std::string mpi_library_version();

// Throws UsageError (exit 2, one line: both numbers, the likely cause, the fix) when the launcher's claim is
// not `mpi_world`; a job of one is refused too where any launcher's variable, not only the innermost, says
// more (naming both). Local: every process of a mismatched launch reads the same variables, so all refuse alike.
void check_launcher_world(int mpi_world);

}  // namespace mori::symm
