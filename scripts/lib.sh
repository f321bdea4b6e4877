# SPDX-License-Identifier: MIT
# Shared by the bash scripts, which source it from the repository root (`. scripts/lib.sh`); not run by itself.
# shellcheck shell=bash

# mpirun may run as root (containers, CI) unless the caller says otherwise.
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1}
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}

# mori_gpu_build LOG_DIR [JOBS]: configures and builds the GPU tools into build-gpu (Release, no tests; the
# revision from $MORI_GIT_REV where set), logging to LOG_DIR/cmake.log and LOG_DIR/build.log. On failure: prints
# the build log's tail and returns 1.
mori_gpu_build() {
  local log=$1 jobs=${2:-$(nproc)}
  if cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DMORI_BUILD_TESTS=OFF \
    ${MORI_GIT_REV:+-DMORI_GIT_REV=$MORI_GIT_REV} >"$log/cmake.log" 2>&1 &&
    cmake --build build-gpu -j "$jobs" >"$log/build.log" 2>&1; then
    return 0
  fi
  tail -30 "$log/build.log"
  return 1
}
