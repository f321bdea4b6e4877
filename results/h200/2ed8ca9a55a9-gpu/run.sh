#!/usr/bin/env bash
# The one-H200 call at revision 2ed8ca9a55a9b3ff483c066d097594aa4b93d8bc (a copy of the clean tree without .git): build, the A/A and A/B runs of
# scripts/perf-check --ab (8 ranks under MPS, 256 KiB; the B side with MORI_FAULT=a2a.slow-kernel:0 and
# MORI_FAULT_DELAY_NS=500, about 5 % of the graph rows), --health at 4 ranks, ctest -L gpu.

# SPDX-License-Identifier: MIT
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
REV=2ed8ca9a55a9b3ff483c066d097594aa4b93d8bc
O=$OUT/r; mkdir -p $O
(time MORI_BUILD_DIR=build scripts/build -DCMAKE_BUILD_TYPE=Release -DMORI_GIT_REV=$REV -DMORI_GIT_CLEAN=ON) > $O/build.txt 2>&1 || { tail -30 $O/build.txt; exit 3; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,power.limit,clocks_event_reasons.active,ecc.mode.current --format=csv > $O/nvidia-smi.csv
eval "$(scripts/mps start)"
CMD=(-- mpirun --oversubscribe -n 8 {bin}/mori-a2a --chunk-kib 256 --json {json})
timeout 170 python3 scripts/perf-check --ab $REV --baseline-bin build/bin --current-bin build/bin --runs 10 --keep $O/aa --json $O/aa.json "${CMD[@]}" > $O/aa.txt 2>&1; echo "A/A exit $?"
timeout 170 python3 scripts/perf-check --ab $REV --baseline-bin build/bin --current-bin build/bin --runs 10 --current-env MORI_FAULT=a2a.slow-kernel:0 --current-env MORI_FAULT_DELAY_NS=500 --keep $O/ab --json $O/ab.json "${CMD[@]}" > $O/ab.txt 2>&1; echo "A/B exit $?"
timeout 90 mpirun --oversubscribe -n 4 build/bin/mori-probe --health --json $O/health-w4.json > $O/health-w4.txt 2>&1; echo "health exit $?"
scripts/mps stop
(cd build && timeout 200 ctest -L gpu --output-on-failure) > $O/gpu-tests.txt 2>&1; echo "gpu tests exit $?"; tail -12 $O/gpu-tests.txt
