#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""No MPI call leaves a team inside a timed loop (docs/mori-a2a.md "Timed loops and MPI"), counted: every rank of
mori-a2a (host runtime) runs under the test-only MPI profiling library mpi_count_shim.cpp (LD_PRELOAD), which counts
the MPI calls between the tools' MPI_Pcontrol(1, step) and MPI_Pcontrol(0) and the largest communicator they used.

  - 2 simulated nodes of 4 (world 8, teams of 4) and one node of 4: every rank wrote its counts; every timed loop
    closed, none nested; no call in any loop used a communicator larger than the team; the device-synchronised rows
    and every push_only loop made no MPI call at all; the host-synchronised rows' loops made calls (their barrier,
    within the team: the counter sees calls), each of them MPI_Ibarrier or MPI_Test/MPI_Testall.
  - The counter wraps every MPI function that lib/ and apps/ call (a function it missed would go uncounted).

usage: timed_mpi_calls_test.py BIN_DIR SHIM_LIBRARY SOURCE_DIR MPIRUN...
"""
import os
import re
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: harness.py
from harness import check, finish, job, with_env  # noqa: E402

if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
    print(__doc__)
    sys.exit(0)
BIN, SHIM, SRC, MPIRUN = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
A2A = os.path.join(BIN, "mori-a2a")
BARRIER_CALLS = {"MPI_Ibarrier", "MPI_Test", "MPI_Testall"}

# The counter wraps every MPI function the sources call.
called = set()
for top in ("lib", "apps"):
    for root, _, files in os.walk(os.path.join(SRC, top)):
        for name in files:
            if name.endswith((".cpp", ".hpp")):
                with open(os.path.join(root, name), encoding="utf-8") as f:
                    called |= set(re.findall(r"\b(MPI_[A-Z][a-z_]+)\s*\(", f.read()))
with open(os.path.join(SRC, "tests", "mpi", "mpi_count_shim.cpp"), encoding="utf-8") as f:
    wrapped = set(re.findall(r"^int (MPI_[A-Z][a-z_]+)\(", f.read(), re.M))
check("the counter wraps every MPI function lib/ and apps/ call",
      called and called <= wrapped and "MPI_Pcontrol" in called, f"not wrapped: {sorted(called - wrapped)}")


def counted(sizes):
    """mori-a2a on len(sizes) simulated nodes of sizes[i] ranks under the counter; (exit code, output, {rank: (world,
    [(step, calls, largest communicator, {name: calls}), ...], unclosed)})."""
    tmp = tempfile.mkdtemp(prefix="mori-timed-mpi-")
    asan = os.environ.get("ASAN_OPTIONS", "")
    env = [f"LD_PRELOAD={SHIM}", f"MORI_MPI_COUNT_DIR={tmp}",
           # a preloaded library comes before the sanitizer build's runtime; ASan accepts that when told
           f"ASAN_OPTIONS={asan + ':' if asan else ''}verify_asan_link_order=0"]
    side = [A2A, "--backend", "host", "--timeout-s", "60", "--chunk-kib", "64", "--iters", "20",
            "--json", os.path.join(tmp, "a2a.json")]
    cmd = list(MPIRUN)
    for i, n in enumerate(sizes):
        node = "node" + "ABCDEFGH"[i]
        cmd += ([":"] if i else []) + ["-n", str(n), *with_env([f"MORI_NODE_ID={node}", *env], side)]
    rc, out, _ = job(cmd, timeout=240)
    ranks = {}
    for name in os.listdir(tmp):
        m = re.fullmatch(r"rank(\d+)\.txt", name)
        if not m:
            continue
        with open(os.path.join(tmp, name)) as f:
            lines = f.read().splitlines()
        world = int(lines[0].split()[1]) if lines and lines[0].startswith("world ") else -1
        loops, unclosed = [], False
        for ln in lines[1:]:
            parts = ln.split("\t")
            if parts[0] == "unclosed":
                unclosed = True
                continue
            calls = dict((kv.split("=")[0], int(kv.split("=")[1])) for kv in parts[3].split())
            loops.append((parts[0], int(parts[1]), int(parts[2]), calls))
        ranks[int(m.group(1))] = (world, loops, unclosed)
    return rc, out, ranks


for sizes in ((4, 4), (4,)):
    world, team = sum(sizes), sizes[0]
    what = f"{len(sizes)} node(s) of {team}, world {world}"
    rc, out, ranks = counted(sizes)
    loops = [(r, lp) for r, (_, lps, _) in sorted(ranks.items()) for lp in lps]
    check(f"{what}: exit 0, every rank wrote its counts, every timed loop closed, none nested",
          rc == 0 and sorted(ranks) == list(range(world)) and all(w == world for w, _, _ in ranks.values())
          and not any(u for _, _, u in ranks.values()) and loops
          and not any(lp[0].startswith("nested:") for _, lp in loops), out[-3000:] + str(ranks)[:2000])
    steps = {lp[0] for _, lp in loops}
    device = [(r, lp) for r, lp in loops if ".device." in lp[0]]
    host = [(r, lp) for r, lp in loops if ".host." in lp[0] and not lp[0].endswith(".push_only")]
    check(f"{what}: every rank timed the same loops, both synchronisations among them ({len(steps)} loops)",
          all({lp[0] for lp in lps} == steps for _, lps, _ in ranks.values()) and device and host, sorted(steps))
    check(f"{what}: no call in a timed loop used a communicator larger than the team ({team})",
          all(lp[2] <= team for _, lp in loops), [(r, lp) for r, lp in loops if lp[2] > team][:10])
    check(f"{what}: the device-synchronised rows' loops and every push_only loop made no MPI call",
          all(lp[1] == 0 for r, lp in device) and all(lp[1] == 0 for r, lp in loops if lp[0].endswith(".push_only")),
          [(r, lp) for r, lp in loops if lp[1] and (".device." in lp[0] or lp[0].endswith(".push_only"))][:10])
    check(f"{what}: the host-synchronised rows' loops made their barrier's calls alone, within the team",
          all(lp[1] > 0 and lp[2] == team and set(lp[3]) <= BARRIER_CALLS for r, lp in host),
          [(r, lp) for r, lp in host if not (lp[1] > 0 and lp[2] == team and set(lp[3]) <= BARRIER_CALLS)][:10])
finish()
