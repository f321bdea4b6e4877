#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A launch whose processes did not join one MPI job is refused (docs/setup.md, "Launching").

usage: launcher_test.py BIN_DIR {variables|mpich} -- MPIRUN...

MPICH's mpiexec (Hydra) starting the tools of this build (Open MPI) makes every process a job of one: each must
exit 2 with one line naming the launcher's count and its variable, the world MPI made, the MPI the tools were
built with and the fix, and leave nothing behind (no --json, no socket, no shm object). The same from the
variables each launcher sets (OMPI_COMM_WORLD_SIZE, PMI_SIZE, SLURM_STEP_NUM_TASKS), set by hand on a process
started alone; a value that is not a count is exit 2; a launcher whose count is the world passes, the
innermost launcher's variable wins over an outer one's, except that a job of one under any variable saying more is
refused (naming both). Part "variables" is the latter; part "mpich" the former,
skipped with its reason without mpiexec.mpich (a failure under CI=true: scripts/deps installs it).

Under an MPICH build (MORI_TEST_MPI=MPICH, tests/CMakeLists.txt) part "mpich" checks the reverse: Open MPI's
mpirun (mpirun.openmpi) starting this build's tools is refused the same way, naming OMPI_COMM_WORLD_SIZE and MPICH;
skipped with its reason without Open MPI's launcher.
"""
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: harness.py
import harness  # noqa: E402
from harness import check, finish, skip  # noqa: E402

if "--" not in sys.argv or sys.argv.index("--") != 3 or sys.argv[2] not in ("variables", "mpich"):
    sys.exit("usage: launcher_test.py BIN_DIR {variables|mpich} -- MPIRUN...")
cut = sys.argv.index("--")
BIN = os.path.abspath(sys.argv[1])
PART = sys.argv[2]
MPIRUN = sys.argv[cut + 1:]
TMP = tempfile.mkdtemp(prefix="mori-launcher-")
TOOLS = {"mori-probe": [], "mori-a2a": ["--chunk-kib", "4", "--iters", "2", "--warmup", "1"],
         "mori-teardown-repro": ["--scenario", "all"]}
LAUNCHER_VARS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS")


def clean_env(**extra):
    """This environment without any launcher's variables (CTest may itself run under a launcher), plus extra."""
    e = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARS}
    e.update(extra)
    return e


def run(cmd, env, name, timeout=60):
    out_json = os.path.join(TMP, name + ".json")
    try:
        rc, out, _ = harness.job([*cmd, "--backend", "host", "--timeout-s", "10", "--json", out_json],
                                 env=env, timeout=timeout, cwd=TMP)
    except Exception as e:  # a launch that hangs is a failure of this test, not of the harness
        return -1, f"{type(e).__name__}: {e}", out_json
    return rc, out, out_json


def error_lines(out, tool):
    return [x for x in out.splitlines() if x.startswith(f"{tool}: error")]


def recorded(folder):
    """A shell around one process that writes its exit code into folder (a file per process): a launcher's own
    exit code is one process's, and a launcher may end the others before they print."""
    return ["/bin/sh", "-c", 'st=0; "$@" || st=$?; echo $st > "$0/$$"; exit $st', folder]


def exit_codes(folder):
    return sorted(open(os.path.join(folder, n)).read().strip() for n in os.listdir(folder))


VENDOR = harness.mpi_vendor(MPIRUN)  # the MPI this build's tools were built with
BUILT_WITH = "MPICH" if VENDOR == "MPICH" else "Open MPI"  # as the tools' error line names it


def refused(what, rc, out, out_json, tool, count, variable, world=1, processes=1):
    lines = error_lines(out, tool)
    want = [f"the launcher started {count} processes ({variable}={count}", f"MPI made a job of {world}",
            BUILT_WITH, "docs/setup.md"]
    check(f"{what}: exit 2, one error line per process ({len(lines)} of {processes}) naming {variable}={count}, "
          f"world {world}, the MPI built with and the fix",
          rc == 2 and len(lines) == processes and all(all(w in x for w in want) for x in lines), out)
    check(f"{what}: no --json written", not os.path.exists(out_json), out)


if PART == "variables":
    base = harness.leftovers(TMP)
    # By hand: one process, started alone, with a launcher's variable saying more.
    for variable in LAUNCHER_VARS:
        for tool, args in TOOLS.items():
            rc, out, js = run([os.path.join(BIN, tool), *args], clean_env(**{variable: "3"}), f"{tool}-{variable}")
            refused(f"{tool} alone with {variable}=3", rc, out, js, tool, 3, variable)

    for i, bad in enumerate(("abc", "0", "-4", "4x", "99999999999", "", "\u00e9", " 4")):
        rc, out, js = run([os.path.join(BIN, "mori-probe")], clean_env(PMI_SIZE=bad), f"bad-{i}")
        lines = error_lines(out, "mori-probe")
        check(f"PMI_SIZE={bad!r}: exit 2, one line saying it is not a task count",
              rc == 2 and len(lines) == 1 and "PMI_SIZE is" in lines[0] and "not a task count" in lines[0]
              and not os.path.exists(js), out)

    rc, out, js = run([os.path.join(BIN, "mori-probe")], clean_env(SLURM_STEP_NUM_TASKS="1"), "slurm-one")
    check("a launcher saying 1 task for a job of 1 passes (exit 0, a report)", rc == 0 and os.path.exists(js), out)

    # A job of one while another launcher's variable says more: refused whichever variable comes first (an
    # inherited or hand-set OMPI_COMM_WORLD_SIZE=1 must not hide PMI_SIZE=3), one line naming both.
    for first, other in (("OMPI_COMM_WORLD_SIZE", "PMI_SIZE"), ("PMI_SIZE", "SLURM_STEP_NUM_TASKS")):
        rc, out, js = run([os.path.join(BIN, "mori-probe")], clean_env(**{first: "1", other: "3"}), f"one-{first}")
        lines = error_lines(out, "mori-probe")
        check(f"mori-probe alone with {first}=1 and {other}=3: exit 2, one line naming both, no --json",
              rc == 2 and len(lines) == 1 and f"{other}=3" in lines[0] and f"{first}=1" in lines[0]
              and "MPI made a job of 1" in lines[0] and not os.path.exists(js), out)

    # Under the launcher, its own variable (the innermost launcher: OMPI_COMM_WORLD_SIZE under Open MPI's mpirun,
    # PMI_SIZE, which it sets over the outer one, under MPICH's) wins over an outer launcher's variables. Both
    # launchers pass their own environment on to the ranks they start on this machine.
    e = clean_env(PMI_SIZE="5", SLURM_STEP_NUM_TASKS="7")
    rc, out, js = run([*MPIRUN, "-n", "2", os.path.join(BIN, "mori-a2a"), *TOOLS["mori-a2a"]], e, "inner-wins",
                      timeout=120)
    doc = harness.load_json(js) or {}
    check(f"{os.path.basename(MPIRUN[0])} -n 2 under outer PMI_SIZE=5, SLURM_STEP_NUM_TASKS=7: runs (exit 0, "
          "world 2, wrong 0)", rc == 0 and (doc.get("meta") or {}).get("world") == 2 and doc.get("wrong") == 0, out)

    after = harness.leftovers(TMP)
    check("nothing left behind by the refused jobs (sockets, shm objects, processes)",
          after[0] <= base[0] and after[1] <= base[1] and after[3] <= base[3], str(after))

# The real thing: the other MPI's launcher starting this build's processes. An MPICH build under Open MPI's mpirun
# (its variable OMPI_COMM_WORLD_SIZE; run as root with the OMPI_ALLOW_RUN_AS_ROOT* variables of the test's
# environment).
ompi = shutil.which("mpirun.openmpi") or shutil.which("orterun")
if PART == "mpich" and VENDOR == "MPICH" and ompi is None:
    skip("MPICH build: the reverse check needs Open MPI's launcher (mpirun.openmpi), not found")
elif PART == "mpich" and VENDOR == "MPICH":
    base = harness.leftovers(TMP)
    # Open MPI's mpirun ends the others once one process exits non-zero, so a process still inside MPI_Init may be
    # killed before it prints: told not to (orte_abort_on_non_zero_status 0), it lets each finish, and each
    # process's own exit code is recorded by a shell around it (mpirun then exits 0 for processes that never
    # joined its job, so its own code says nothing). One run as users type it checks mpirun's exit code 2.
    for tool, args in TOOLS.items():
        codes = os.path.join(TMP, f"codes-{tool}")
        os.makedirs(codes)
        each = recorded(codes)
        rc, out, js = run([ompi, "--oversubscribe", "-n", "3", *each, os.path.join(BIN, tool), *args],
                          clean_env(OMPI_MCA_orte_abort_on_non_zero_status="0"), f"ompi-{tool}", timeout=120)
        got = exit_codes(codes)
        refused(f"{os.path.basename(ompi)} -n 3 {tool} (MPICH build)", 2 if got == ["2"] * 3 else -1,
                f"per-process exit codes {got}\n{out}", js,
                tool, 3, "OMPI_COMM_WORLD_SIZE", processes=3)
    rc, out, js = run([ompi, "--oversubscribe", "-n", "3", os.path.join(BIN, "mori-a2a"), *TOOLS["mori-a2a"]],
                      clean_env(), "ompi-as-typed", timeout=120)
    lines = error_lines(out, "mori-a2a")
    check(f"{os.path.basename(ompi)} -n 3 mori-a2a as typed (MPICH build): exit 2 and the refusal printed",
          rc == 2 and 1 <= len(lines) <= 3 and all("OMPI_COMM_WORLD_SIZE=3" in x for x in lines)
          and not os.path.exists(js), out)
    after = harness.leftovers(TMP)
    check("nothing left behind under mpirun.openmpi (sockets, shm objects, processes)",
          after[0] <= base[0] and after[1] <= base[1] and after[3] <= base[3], str(after))
    shutil.rmtree(TMP, ignore_errors=True)
    finish()

# An Open MPI build under MPICH's launcher.
hydra = shutil.which("mpiexec.mpich") or shutil.which("mpiexec.hydra")
if PART == "mpich" and hydra is None:
    why = "mpiexec.mpich not found (Debian/Ubuntu: apt-get install mpich; scripts/deps installs it)"
    if os.environ.get("CI") != "true":
        skip(why)
    check(f"MPICH's launcher present under CI=true: {why}", False)
elif PART == "mpich":
    base = harness.leftovers(TMP)
    # As under mpirun.openmpi above: Hydra told to let every process finish (-disable-auto-cleanup), each
    # process's exit code recorded; one run as typed for the launcher's own exit code.
    for tool, args in TOOLS.items():
        codes = os.path.join(TMP, f"codes-{tool}")
        os.makedirs(codes)
        rc, out, js = run([hydra, "-disable-auto-cleanup", "-n", "3", *recorded(codes), os.path.join(BIN, tool),
                           *args], clean_env(), f"hydra-{tool}", timeout=120)
        got = exit_codes(codes)
        refused(f"{os.path.basename(hydra)} -n 3 {tool}", 2 if got == ["2"] * 3 else -1,
                f"per-process exit codes {got}\n{out}", js, tool, 3, "PMI_SIZE", processes=3)
    # OMPI_COMM_WORLD_SIZE=1 given to every process (-genv) does not make three jobs of one pass.
    codes = os.path.join(TMP, "codes-genv")
    os.makedirs(codes)
    rc, out, js = run([hydra, "-disable-auto-cleanup", "-n", "3", "-genv", "OMPI_COMM_WORLD_SIZE", "1",
                       *recorded(codes), os.path.join(BIN, "mori-a2a"), *TOOLS["mori-a2a"]], clean_env(),
                      "hydra-genv", timeout=120)
    got = exit_codes(codes)
    refused(f"{os.path.basename(hydra)} -n 3 -genv OMPI_COMM_WORLD_SIZE 1 mori-a2a", 2 if got == ["2"] * 3 else -1,
            f"per-process exit codes {got}\n{out}", js, "mori-a2a", 3, "PMI_SIZE", processes=3)
    rc, out, js = run([hydra, "-n", "3", os.path.join(BIN, "mori-a2a"), *TOOLS["mori-a2a"]], clean_env(),
                      "hydra-as-typed", timeout=120)
    lines = error_lines(out, "mori-a2a")
    check(f"{os.path.basename(hydra)} -n 3 mori-a2a as typed: exit 2 and the refusal printed",
          rc == 2 and 1 <= len(lines) <= 3 and all("PMI_SIZE=3" in x for x in lines) and not os.path.exists(js),
          out)
    after = harness.leftovers(TMP)
    check("nothing left behind under mpiexec.mpich (sockets, shm objects, processes)",
          after[0] <= base[0] and after[1] <= base[1] and after[3] <= base[3], str(after))
shutil.rmtree(TMP, ignore_errors=True)
finish()
