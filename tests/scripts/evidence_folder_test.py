#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""scripts/evidence writes only regular files into its folder and takes its job with it (docs/evidence.md "Where it
writes"): with --resume, a step's NAME.txt replaced by a symlink to a file outside the folder, or by a FIFO, is
exit 2, one line naming it, before any step runs (the outside file untouched, no hang); --resume on a folder that
holds no run is exit 2 and makes nothing; an unbalanced quote in MORI_MPIRUN is exit 2, one line, before anything
is made; SIGKILL to scripts/evidence, which runs no cleanup of its own, still ends the running step's job (its
process group, through the parent-death signal of scripts/mori_results/guard.py).

usage: evidence_folder_test.py BIN_DIR MPIRUN...
"""
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/: harness.py
sys.path.insert(0, TESTS)
from harness import check, evidence_revision, finish, git_checkout  # noqa: E402

BIN, MPIRUN = os.path.abspath(sys.argv[1]), sys.argv[2:]
ROOT = os.path.dirname(TESTS)
EVIDENCE = os.path.join(ROOT, "scripts", "evidence")
ENV = dict(os.environ, MORI_MPIRUN=shlex.join(MPIRUN))
TMP = tempfile.mkdtemp(prefix="mori-evidence-folder-test-")
COMMON = ["--preset", "host", "--backend", "host", "--bin", BIN, "--allow-dirty"]
if not git_checkout(ROOT):
    COMMON += evidence_revision(BIN)[2]


def run(args, env=None, timeout=120):
    try:
        p = subprocess.run([sys.executable, EVIDENCE, *COMMON, *args], cwd=ROOT, env=env or ENV,
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired as e:
        return None, (e.output or b"").decode(errors="replace") + f"\n(did not end within {timeout} s)"
    return p.returncode, p.stdout


def one_line_2(rc, out, *texts):
    ls = [ln for ln in out.splitlines() if ln.strip()]
    return rc == 2 and len(ls) == 1 and all(t in ls[0] for t in texts) and "Traceback" not in out


def run_folder(out_dir):
    """The one run folder under out_dir (lab/host/<rev>-dirty, or host/<rev>)."""
    found = [r for r, _, fs in os.walk(out_dir) if "manifest.json" in fs]
    return found[0] if len(found) == 1 else None


def running(mark):
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if mark.encode() in f.read():
                    pids.append(int(pid))
        except OSError:
            pass
    return pids


try:
    # A folder cut short by its deadline: manifest.json, no step run (what --resume continues).
    out_dir = os.path.join(TMP, "results")
    rc, out = run(["--out", out_dir, "--deadline-s", "5"])
    folder = run_folder(out_dir)
    check("a run cut short by its deadline leaves a folder to resume (exit 4)", rc == 4 and folder is not None, out)

    # ---- a step's NAME.txt replaced by a symlink to a file outside the folder ----------------------------------
    outside = os.path.join(TMP, "outside.txt")
    with open(outside, "w") as f:
        f.write("not evidence's\n")
    log = os.path.join(folder, "probe.txt")
    os.symlink(outside, log)
    rc, out = run(["--out", out_dir, "--resume", "--steps", "probe"])
    with open(outside) as f:
        kept = f.read() == "not evidence's\n"
    check("--resume with probe.txt a symlink to a file outside the folder: exit 2, one line naming it, the file "
          "outside untouched, no step run",
          one_line_2(rc, out, "probe.txt", "a symlink") and kept and os.path.islink(log)
          and not json.load(open(os.path.join(folder, "manifest.json")))["steps"], out)
    os.unlink(log)

    # ---- ... and by a FIFO: refused, never opened (no hang) ---------------------------------------------------
    os.mkfifo(log)
    t0 = time.monotonic()
    rc, out = run(["--out", out_dir, "--resume", "--steps", "probe"], timeout=60)
    check("--resume with probe.txt a FIFO: exit 2 at once, one line naming it, still a FIFO",
          one_line_2(rc, out, "probe.txt", "a FIFO") and time.monotonic() - t0 < 50
          and os.path.exists(log) and not os.path.isfile(log), out)
    os.unlink(log)

    # ---- --resume on a folder that holds no run --------------------------------------------------------------
    nothing = os.path.join(TMP, "nothing")
    rc, out = run(["--out", nothing, "--resume"])
    check("--resume where no run was started: exit 2, one line saying so, nothing made",
          one_line_2(rc, out, "--resume", "no run to continue") and not os.path.exists(nothing), out)

    # ---- MORI_MPIRUN that a shell could not split --------------------------------------------------------------
    bad = os.path.join(TMP, "bad-launcher")
    rc, out = run(["--out", bad], env=dict(ENV, MORI_MPIRUN="mpirun -x 'FOO"))
    check("MORI_MPIRUN with an unbalanced quote: exit 2, one line naming it, nothing made",
          one_line_2(rc, out, "MORI_MPIRUN") and not os.path.exists(bad), out)

    # ---- SIGKILL: the running step's job ends with evidence ---------------------------------------------------
    # A launcher whose first act is a long sleep under a name of its own, so that SIGKILL finds the run inside its
    # first step; the sleep and the launcher are the step's process group, which must not outlive evidence.
    mark = os.path.join(TMP, "marked-sleep")
    shutil.copy(shutil.which("sleep"), mark)
    slow = os.path.join(TMP, "slow-launcher")
    with open(slow, "w") as f:
        f.write(f"#!/bin/sh\n{shlex.quote(mark)} 300\nexec {shlex.join(MPIRUN)} \"$@\"\n")
    os.chmod(slow, 0o755)
    private_tmp = os.path.join(TMP, "tmpdir")  # the killed run's /tmp/mori-evidence-* stays there
    os.makedirs(private_tmp)
    p = subprocess.Popen([sys.executable, EVIDENCE, *COMMON, "--out", os.path.join(TMP, "killed")], cwd=ROOT,
                         env=dict(ENV, MORI_MPIRUN=slow, TMPDIR=private_tmp), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    end = time.monotonic() + 60
    while not running(mark) and time.monotonic() < end and p.poll() is None:
        time.sleep(0.2)
    started = bool(running(mark))
    p.kill()  # SIGKILL: no handler, no finally-block runs in evidence
    p.communicate(timeout=30)
    end = time.monotonic() + 15
    while running(mark) and time.monotonic() < end:
        time.sleep(0.2)
    left = running(mark)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    check("SIGKILL to evidence during a step: the step's job (launcher and all) ends within 15 s",
          started and not left, f"started={started} left={left}")
finally:
    shutil.rmtree(TMP, ignore_errors=True)
finish()
