// SPDX-License-Identifier: MIT
// A timed loop marked for an MPI profiling library (timed_region.hpp).
#include "mori/symm/comm/timed_region.hpp"

#include <mpi.h>

#include "mori/symm/comm/bootstrap.hpp"

namespace mori::symm {

TimedRegion::TimedRegion(const std::string& step) : step_(step) {
  MORI_CHECK_MPI(MPI_Pcontrol(1, step_.c_str()));
}

TimedRegion::~TimedRegion() {
  MORI_WARN_MPI(MPI_Pcontrol(0));
}

}  // namespace mori::symm
