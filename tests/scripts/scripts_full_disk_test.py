#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A full file system is a system error in the scripts, never "a step failed" or "malformed input"
(docs/reliability.md "Files the scripts write"): scripts/evidence --out, scripts/evidence --archive after its steps
passed, scripts/scale-sweep --out, scripts/faults --json and scripts/perf-check --json onto a full file system each
exit 3 with one line naming ENOSPC, no traceback, and evidence leaves no folder tree of its own behind.

The full file system is a 64 KiB tmpfs filled up here (mount needs root): where it cannot be mounted the test exits
77 (skipped) naming why; under CI=true (Debian 12, root) that is a failure.

usage: scripts_full_disk_test.py BIN_DIR MPIRUN...
"""
import errno
import os
import shlex
import shutil
import subprocess
import sys
import tempfile

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/: harness.py, fixtures/
sys.path.insert(0, TESTS)
import harness  # noqa: E402
from harness import check, evidence_revision, finish, git_checkout  # noqa: E402

BIN, MPIRUN = os.path.abspath(sys.argv[1]), sys.argv[2:]
ROOT = os.path.dirname(TESTS)
SCRIPTS = os.path.join(ROOT, "scripts")
A2A_DOC = os.path.join(ROOT, "tests", "fixtures", "h200-a2a-w2-r1.json")
ENV = dict(os.environ, MORI_MPIRUN=shlex.join(MPIRUN))
TMP = tempfile.mkdtemp(prefix="mori-full-disk-test-")
FULL = os.path.join(TMP, "full")
EVIDENCE = [sys.executable, os.path.join(SCRIPTS, "evidence"), "--preset", "host", "--backend", "host", "--bin",
            BIN, "--allow-dirty"]
if not git_checkout(ROOT):
    EVIDENCE += evidence_revision(BIN)[2]


def run(cmd, timeout=300):
    p = subprocess.run(cmd, cwd=ROOT, env=ENV, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=timeout)
    return p.returncode, p.stdout


def enospc_line(rc, out, last_only=False):
    """Exit 3, no traceback, and one line naming ENOSPC (the last line where the script printed its progress)."""
    ls = [ln for ln in out.splitlines() if ln.strip()]
    return (rc == 3 and "Traceback" not in out and bool(ls) and "ENOSPC" in ls[-1]
            and (last_only or len(ls) == 1))


def fill(folder):
    """Fills the file system of folder: writes until ENOSPC."""
    with open(os.path.join(folder, "filler"), "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 4096)
        except OSError as e:
            if e.errno != errno.ENOSPC:
                raise


os.makedirs(FULL)
mount = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", FULL], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
if mount.returncode != 0:
    shutil.rmtree(TMP, ignore_errors=True)
    why = f"a 64 KiB tmpfs cannot be mounted here (mount: {mount.stdout.strip()[-200:]})"
    if harness.ON_CI:
        print(f"FAIL: {why}; CI=true (Debian 12, root) can mount one")
        sys.exit(1)
    harness.skip(why)
try:
    fill(FULL)
    rc, out = run([*EVIDENCE, "--out", os.path.join(FULL, "results")])
    check("evidence --out on a full file system: exit 3, one line naming ENOSPC, no folder tree left",
          enospc_line(rc, out) and os.listdir(FULL) == ["filler"], f"{out}\n{os.listdir(FULL)}")

    out_dir = os.path.join(TMP, "results")
    rc, out = run([*EVIDENCE, "--out", out_dir, "--steps", "probe", "--archive", os.path.join(FULL, "e.tar.gz")])
    check("evidence --archive onto a full file system after its steps passed: exit 3, the last line naming "
          "ENOSPC, no archive or temporary file left",
          enospc_line(rc, out, last_only=True) and "probe: ok" in out and os.listdir(FULL) == ["filler"],
          f"{out}\n{os.listdir(FULL)}")

    rc, out = run([sys.executable, os.path.join(SCRIPTS, "scale-sweep"), "--bin", BIN, "--worlds", "2,4,8",
                   "--fit-from", "2", "--out", os.path.join(FULL, "sweep")])
    check("scale-sweep --out on a full file system: exit 3, one line naming ENOSPC", enospc_line(rc, out), out)

    before = sorted(os.listdir(FULL))
    rc, out = run([sys.executable, os.path.join(SCRIPTS, "faults"), "--backend", "host", "--bin", BIN, "--worlds",
                   "2", "--budget-s", "0.1", "--json", os.path.join(FULL, "f.json")])
    check("faults --json onto a full file system: exit 3, the last line naming ENOSPC, no file left",
          enospc_line(rc, out, last_only=True) and sorted(os.listdir(FULL)) == before, out)

    rc, out = run([sys.executable, os.path.join(SCRIPTS, "perf-check"), A2A_DOC, A2A_DOC, "--json",
                   os.path.join(FULL, "p.json")])
    check("perf-check --json onto a full file system: exit 3, the last line naming ENOSPC (not malformed input)",
          enospc_line(rc, out, last_only=True) and "malformed input" not in out
          and not os.path.exists(os.path.join(FULL, "p.json")), out)
finally:
    subprocess.run(["umount", FULL])
    shutil.rmtree(TMP, ignore_errors=True)
finish()
