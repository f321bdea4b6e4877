#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""scripts/perf-check --ab on the host runtime: real mori-a2a jobs, both sides interleaved in one job.

usage: perf_check_ab_test.py BIN_DIR MPIRUN...

No timed assertion: the host runtime's times say nothing about the code. What is checked is the mechanics: the
runs alternate A B / B A, every run's report is gated (baseline = one side's runs), the worktree of the baseline
revision is made and always removed (also when its build fails: exit 3), usage errors exit 2 before anything
runs, and a current side whose reports say it is a thousand times slower (a wrapper that doctors the real report,
made below; beyond any allowance the host runtime's noise can give two runs, where 2x was judged CANNOT_JUDGE on a
busy 2-core machine) fails the gate; so does a current side given the test-only fault a2a.slow-kernel by
--current-env (from a copy of the scripts without .git, where REV is taken as stated), and a malformed
--current-env is exit 2.

In a tree without .git (a release tarball, a GPU machine's copy) REV is taken as stated there too, and the checks
that need git (the baseline built in a worktree, a failing baseline build, a REV that is not a commit) are printed
NOT RUN: the others run, then the test exits 77 (skipped). Under CI=true a tree without git fails.
"""
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/: harness.py, fixtures/
sys.path.insert(0, TESTS)
from harness import check, finish, git_checkout, not_run  # noqa: E402

ROOT = os.path.dirname(TESTS)
CHECK = os.path.join(ROOT, "scripts", "perf-check")
BIN = os.path.abspath(sys.argv[1])
MPIRUN = sys.argv[2:]
GIT = git_checkout(ROOT)
NO_GIT = f"needs a git checkout; {ROOT} has no .git"
A2A = ["-n", "2", "{bin}/mori-a2a", "--backend", "host", "--chunk-kib", "64", "--iters", "20", "--timeout-s", "30",
       "--json", "{json}"]
A2A_ONE_ROW = A2A[:-2] + ["--addressing", "ptr", "--sync", "device", "--warmup", "2", "--json", "{json}"]


def perf(*args, timeout=600, script=CHECK):
    try:
        p = subprocess.run([sys.executable, script, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return None, "timed out"
    return p.returncode, p.stdout


def worktrees():
    out = subprocess.run(["git", "-C", ROOT, "worktree", "list"], stdout=subprocess.PIPE, text=True).stdout
    return [line for line in out.splitlines() if "mori-ab-" in line or "baseline-tree" in line]


with tempfile.TemporaryDirectory() as tmp:
    j = os.path.join(tmp, "ab.json")
    keep = os.path.join(tmp, "keep")
    rc, out = perf("--ab", "HEAD", "--baseline-bin", BIN, "--current-bin", BIN, "--runs", "2", "--keep", keep,
                   "--json", j, "--", *MPIRUN, *A2A)
    v = json.load(open(j)) if os.path.exists(j) else {}
    order = (v.get("ab") or {}).get("order")
    check("A/B of one build against itself: both sides ran, interleaved A B / B A, and were gated",
          rc in (0, 1) and order == ["baseline:1", "current:1", "current:2", "baseline:2"]
          and v.get("schema") == "mori.perf-check/4" and v.get("verdicts") and v.get("wrong") == 0, out)
    check("--keep keeps both sides' reports",
          sorted(os.listdir(os.path.join(keep, "runs", "baseline"))) == ["run-1.json", "run-2.json"]
          and sorted(os.listdir(os.path.join(keep, "runs", "current"))) == ["run-1.json", "run-2.json"], out)

    # The worktree path: a stand-in build that links the tools already built (the real one is scripts/build).
    stub = f"sh -c 'mkdir -p build && ln -s {BIN} build/bin'"
    name = "A/B with the baseline built in a git worktree: gated, and the worktree removed afterwards"
    if GIT:
        rc, out = perf("--ab", "HEAD", "--build-cmd", stub, "--current-bin", BIN, "--runs", "2", "--", *MPIRUN,
                       *A2A)
        check(name, rc in (0, 1) and "A/B" in out and "order baseline:1 current:1 current:2 baseline:2" in out
              and not worktrees(), out + "\n".join(worktrees()))
    else:
        not_run(name, NO_GIT)
    name = "a failing baseline build: exit 3 naming it, the worktree removed"
    if GIT:
        rc, out = perf("--ab", "HEAD", "--build-cmd", "false", "--current-bin", BIN, "--", *MPIRUN, *A2A)
        check(name, rc == 3 and "building" in out and not worktrees(), out)
    else:
        not_run(name, NO_GIT)

    # A current side whose reports say it is a thousand times slower must fail the gate (the allowance of two noisy
    # host-runtime runs has read over 590 %: a factor of 2 is then rightly CANNOT_JUDGE). The wrapper keeps its
    # descriptors open for the tool: MPICH's launcher hands each rank its PMI connection as an inherited fd (PMI_FD).
    slow_bin = os.path.join(tmp, "slow-bin")
    os.makedirs(slow_bin)
    wrapper = os.path.join(slow_bin, "mori-a2a")
    with open(wrapper, "w") as f:
        f.write(f"""#!{sys.executable}
import json, subprocess, sys
rc = subprocess.run([{os.path.join(BIN, 'mori-a2a')!r}, *sys.argv[1:]], close_fds=False).returncode
path = sys.argv[sys.argv.index("--json") + 1]
try:
    d = json.load(open(path))
except (OSError, ValueError):
    sys.exit(rc)
for r in d["results"]:
    r["time_us"]["p50"] *= 1000
    r["total_bw_gbps"] /= 1000
json.dump(d, open(path, "w"))
sys.exit(rc)
""")
    os.chmod(wrapper, os.stat(wrapper).st_mode | stat.S_IXUSR)
    rc, out = perf("--ab", "HEAD", "--baseline-bin", BIN, "--current-bin", slow_bin, "--runs", "2", "--",
                   *MPIRUN, *A2A)
    check("a current side a thousand times slower fails the A/B gate: exit 1, SLOWER", rc == 1 and "SLOWER" in out,
          out)

    # The fault point as the treatment of one side (MORI_FAULT is part of the row identity: A/B leaves it out of
    # both sides', so the rows are compared), run from a copy of the scripts without .git, as on a GPU machine
    # that gets the files only: REV is then taken as stated.
    bare = os.path.join(tmp, "no-git")
    shutil.copytree(os.path.join(ROOT, "scripts"), os.path.join(bare, "scripts"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    bare_check = os.path.join(bare, "scripts", "perf-check")
    j = os.path.join(tmp, "slow.json")
    delay = ["--current-env", "MORI_FAULT=a2a.slow-kernel:0", "--current-env", "MORI_FAULT_DELAY_NS=20000000"]
    rc, out = perf("--ab", "HEAD", "--baseline-bin", BIN, "--current-bin", BIN, *delay, "--runs", "2", "--json", j,
                   "--", *MPIRUN, *A2A_ONE_ROW, script=bare_check)
    v = json.load(open(j)) if os.path.exists(j) else {}
    verdicts = v.get("verdicts") or []
    # (time_p50_us: the host runtime's noise can give an allowance over 100 %, which no drop in bandwidth exceeds)
    p50 = [x for x in verdicts if x.get("metric") == "time_p50_us"]
    check("A/B, the current side slowed by MORI_FAULT=a2a.slow-kernel:0 (20 ms): exit 1, every row's p50 SLOWER, "
          "the fault printed beside them",
          rc == 1 and p50 and all(x.get("verdict") == "SLOWER" for x in p50)
          and "meta differs" in out and "a2a.slow-kernel:0" in out, out)
    check("the side's env is recorded in the JSON; REV taken as stated without .git",
          (v.get("ab") or {}).get("current_env") == {"MORI_FAULT": "a2a.slow-kernel:0",
                                                       "MORI_FAULT_DELAY_NS": "20000000"}
          and v["ab"].get("baseline_env") == {} and v["ab"].get("revision") == "HEAD"
          and v["ab"].get("revision_checked") is False and "taken as stated" in out, out)
    rc, out = perf("--ab", "HEAD", "--current-bin", BIN, "--", *MPIRUN, *A2A, script=bare_check)
    check("without .git and without --baseline-bin: exit 2 naming .git", rc == 2 and ".git" in out, out)
    for bad in (["--current-env", "FOO"], ["--baseline-env", "1X=2"], ["--current-env", "=1"],
                ["--current-env", "A=1", "--current-env", "A=2"]):
        rc, out = perf("--ab", "HEAD", "--baseline-bin", BIN, "--current-bin", BIN, *bad, "--", *MPIRUN, *A2A)
        check(f"{' '.join(bad)}: exit 2 naming the option, before anything runs",
              rc == 2 and bad[0] in out and "order" not in out, out)
    rc, out = perf(os.path.join(ROOT, "results"), os.path.join(ROOT, "results"), "--current-env", "A=1")
    check("--current-env without --ab: exit 2", rc == 2 and "--ab" in out, out)

    rc, out = perf("--ab", "HEAD", "--current-bin", BIN, "--", *MPIRUN, "-n", "2", "{bin}/mori-a2a")
    check("a command without {json}: exit 2 before anything runs", rc == 2 and "{json}" in out, out)
    name = "a revision that is not a commit: exit 2"
    if GIT:
        rc, out = perf("--ab", "no-such-revision", "--current-bin", BIN, "--", *MPIRUN, *A2A)
        check(name, rc == 2 and "no-such-revision" in out and "not a commit" in out, out)
    else:  # without .git any REV is refused for want of --baseline-bin (checked above), never resolved
        not_run(name, NO_GIT)

finish()
