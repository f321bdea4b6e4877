// SPDX-License-Identifier: MIT
// A timed loop as an MPI profiling library sees it (docs/mori-a2a.md "Timed loops and MPI"): MPI_Pcontrol(1,
// step) where the loop starts, MPI_Pcontrol(0) where it ends. Without a profiling library both calls do
// nothing. A profiler that counts what runs between them (mpiP, the suite's tests/mpi/mpi_count_shim.cpp)
// sees the timed loops alone: the tools call no MPI there but the host-synchronised rows' barrier within the
// team.
#pragma once

#include <string>

namespace mori::symm {

class TimedRegion {
 public:
  // step names the loop (the second argument of MPI_Pcontrol(1, ...), a C string). Throws ApiError.
  explicit TimedRegion(const std::string& step);
  // MPI_Pcontrol(0); a failure is a warning, never thrown.
  ~TimedRegion();
  TimedRegion(const TimedRegion&) = delete;
  TimedRegion& operator=(const TimedRegion&) = delete;

 private:
  std::string step_;
};

}  // namespace mori::symm
