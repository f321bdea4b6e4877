#!/usr/bin/env bash
# The one-H200 call at revision 62b660f62428ed3eddfa1b7498d50a10afb58684 (a copy of the clean tree without .git): build, the A/A and A/B runs of
# scripts/perf-check --ab under the A/B rule (8 ranks under MPS, 256 KiB, 10 interleaved runs a side; the B side
# with every rank's kernel 500 ns slower: MORI_FAULT=a2a.slow-kernel:*, MORI_FAULT_DELAY_NS=500), then the
# distinct-GPU plan test (gpu.distinct-policy).

# SPDX-License-Identifier: MIT
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
REV=62b660f62428ed3eddfa1b7498d50a10afb58684
O=$OUT/r; mkdir -p $O
(time MORI_BUILD_DIR=build scripts/build -DCMAKE_BUILD_TYPE=Release -DMORI_GIT_REV=$REV -DMORI_GIT_CLEAN=ON) > $O/build.txt 2>&1 || { tail -30 $O/build.txt; exit 3; }
eval "$(scripts/mps start)"
CMD=(-- mpirun --oversubscribe -n 8 {bin}/mori-a2a --chunk-kib 256 --json {json})
timeout 170 python3 scripts/perf-check --ab $REV --baseline-bin build/bin --current-bin build/bin --runs 10 --json $O/aa.json "${CMD[@]}" > $O/aa.txt 2>&1; echo "A/A exit $?"
timeout 170 python3 scripts/perf-check --ab $REV --baseline-bin build/bin --current-bin build/bin --runs 10 --current-env 'MORI_FAULT=a2a.slow-kernel:*' --current-env MORI_FAULT_DELAY_NS=500 --json $O/ab.json "${CMD[@]}" > $O/ab.txt 2>&1; echo "A/B exit $?"
scripts/mps stop
grep -h "graph16\|perf-check:" $O/aa.txt $O/ab.txt
(cd build && timeout 330 ctest -R gpu.distinct-policy --output-on-failure) > $O/gpu-distinct-policy.txt 2>&1; echo "distinct-policy exit $?"; tail -5 $O/gpu-distinct-policy.txt
