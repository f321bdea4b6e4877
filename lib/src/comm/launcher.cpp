// SPDX-License-Identifier: MIT
#include "mori/symm/comm/launcher.hpp"
#include "mori/symm/base/env.hpp"

#include <mpi.h>

#include <cstdlib>
#include <cstring>

#include "mori/symm/base/error.hpp"
#include "mori/symm/comm/bootstrap.hpp"

namespace mori::symm {

namespace {

constexpr std::uint64_t kMostTasks = std::uint64_t{1} << 24;

struct Source {
  const char* variable;
  const char* launcher;
};

// Innermost first (launcher.hpp).
constexpr Source kSources[] = {
    {"OMPI_COMM_WORLD_SIZE", "Open MPI's mpirun"},
    {"PMI_SIZE", "a PMI launcher (MPICH's mpiexec / Hydra, or srun --mpi=pmi2)"},
    {"SLURM_STEP_NUM_TASKS", "srun"},
};

std::uint64_t parse_tasks(const char* variable, const char* value) {
  std::uint64_t n = 0;
  const std::size_t len = std::strlen(value);
  bool ok = len > 0 && len <= 9;
  for (std::size_t i = 0; ok && i < len; ++i) {
    ok = value[i] >= '0' && value[i] <= '9';
    if (ok) n = n * 10 + static_cast<std::uint64_t>(value[i] - '0');
  }
  if (!ok || n < 1 || n > kMostTasks) {
    std::string shown;
    for (std::size_t i = 0; i < len && i < 32; ++i) {
      const auto c = static_cast<unsigned char>(value[i]);
      shown += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '?';
    }
    throw UsageError(std::string(variable) + " is '" + shown + (len > 32 ? "...'" : "'") +
                     ": not a task count (1 to " + std::to_string(kMostTasks) +
                     "); the launcher sets it, unset it when starting the tool by hand");
  }
  return n;
}

std::string fix_for(const std::string& library) {
  if (library.rfind("Open MPI", 0) == 0)
    return "start the tools with Open MPI's mpirun, or with srun --mpi=pmix";
  if (library.find("MPICH") != std::string::npos)
    return "start the tools with MPICH's mpiexec (mpiexec.mpich, mpiexec.hydra), or with srun --mpi=pmi2";
  return "start the tools with the launcher of the MPI they were built with";
}

}  // namespace

std::optional<LauncherClaim> launcher_claim() {
  for (const auto& s : kSources) {
    const char* v = env_read(s.variable);
    if (!v) continue;
    return LauncherClaim{s.variable, s.launcher, parse_tasks(s.variable, v)};
  }
  return std::nullopt;
}

std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  MORI_CHECK_MPI(MPI_Get_library_version(text, &len));
  std::string s(text, static_cast<std::size_t>(std::max(0, std::min(len, MPI_MAX_LIBRARY_VERSION_STRING))));
  s = s.substr(0, s.find_first_of(",\r\n"));  // "Open MPI v4.1.4", "MPICH Version:      4.0.2"
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\0')) s.pop_back();
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

void check_launcher_world(int mpi_world) {
  auto claim = launcher_claim();
  std::string also;  // the innermost variable, where another launcher's says more than a job of one
  // A job of one under a launcher of several processes is the failure this check exists for, whichever
  // variable comes first: another launcher's variable (inherited from an outer launcher, or set by hand, e.g.
  // mpiexec.mpich -genv OMPI_COMM_WORLD_SIZE 1) must not hide it. Larger jobs keep the innermost rule: an
  // outer launcher may well have started fewer or more tasks (docs/setup.md, "Launching").
  if (claim && mpi_world == 1 && claim->tasks == 1)
    for (const auto& s : kSources) {
      const char* v = env_read(s.variable);
      if (!v || parse_tasks(s.variable, v) == 1) continue;
      also = "; " + claim->variable + "=1 (" + claim->launcher + ") says one, but the launchers disagree";
      claim = LauncherClaim{s.variable, s.launcher, parse_tasks(s.variable, v)};
      break;
    }
  if (!claim || claim->tasks == static_cast<std::uint64_t>(mpi_world)) return;
  const std::string library = mpi_library_version();
  const std::string cause =
      mpi_world == 1 ? "the MPI these tools were built with (" + library +
                           ") did not join the launcher's job, so every process runs as a job of its own"
                     : "MPI (" + library + ") and the launcher disagree about the job";
  throw UsageError("the launcher started " + std::to_string(claim->tasks) + " processes (" + claim->variable +
                   "=" + std::to_string(claim->tasks) + ", set by " + claim->launcher +
                   ") but MPI made a job of " + std::to_string(mpi_world) + also + ": " + cause + "; " +
                   fix_for(library) +
                   ", or rebuild them against the launcher's MPI (docs/setup.md, \"Launching\")");
}

}  // namespace mori::symm
