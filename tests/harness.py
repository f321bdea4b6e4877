"""The harness the Python test scripts share: each check prints PASS/FAIL (with the output of a failing one), and
finish() prints "N passed, N failed" and exits 1 on any failure; MPI jobs and what they leave behind."""
import glob
import os
import re
import subprocess
import sys
import time

_checks, _failures = [], []


def check(name, ok, out="", tail=3000):
    _checks.append(name)
    print(f"{'PASS' if ok else 'FAIL'}: {name}")
    if not ok:
        print(out[-tail:])
        _failures.append(name)


def finish():
    print(f"{len(_checks) - len(_failures)} passed, {len(_failures)} failed")
    sys.exit(1 if _failures or not _checks else 0)


SKIP_RETURN_CODE = 77  # what CTest reports as skipped (SKIP_RETURN_CODE 77 on the test); never counted as passed


def skip(reason):
    """Ends a test that cannot run here as skipped, with the reason on the first line of its output."""
    print(f"SKIPPED: {reason}")
    sys.exit(SKIP_RETURN_CODE)


# ---- MPI jobs and what they leave behind ------------------------------------------------------------------------
# Every job gets a tag in its environment (inherited by mpirun's ranks), so that a leftover is counted only when a
# process of this test holds it: tests of other builds may run on the same machine at the same time.
TAG_VARIABLE = "SYMM_TEST_TAG"
_TAG = f"{os.getpid()}-{time.time_ns()}"


def job(cmd, env=None, timeout=240, cwd=None):
    """Runs cmd (an mpirun line or a tool) with the test's tag; returns (exit code, output, seconds)."""
    e = dict(os.environ, **(env or {}), **{TAG_VARIABLE: _TAG})
    t0 = time.monotonic()
    p = subprocess.run(cmd, env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout,
                       cwd=cwd)
    return p.returncode, p.stdout, time.monotonic() - t0


def tool_job(mpirun, n, tool, args, env=None, timeout_s=20):
    """n ranks of a tool on the host runtime with --timeout-s; returns (exit code, output)."""
    rc, out, _ = job([*mpirun, "-n", str(n), tool, "--backend", "host", "--timeout-s", str(timeout_s), *args], env)
    return rc, out


def _tagged_pids():
    pids = set()
    needle = f"{TAG_VARIABLE}={_TAG}".encode()
    for d in glob.glob("/proc/[0-9]*"):
        try:
            with open(os.path.join(d, "environ"), "rb") as f:
                if needle in f.read().split(b"\0"):
                    pids.add(int(os.path.basename(d)))
        except OSError:
            continue
    return pids - {os.getpid()}


def _held_sockets(pids):
    """Inodes of the sockets the given processes hold."""
    held = set()
    for pid in pids:
        for fd in glob.glob(f"/proc/{pid}/fd/*"):
            try:
                link = os.readlink(fd)
            except OSError:
                continue
            if link.startswith("socket:["):
                held.add(link[8:-1])
    return held


def leftovers(tmp=None):
    """(project sockets held by this test's processes, /dev/shm/mori* entries, files under tmp, this test's live
    processes). Compare two calls: what a job added is the difference."""
    pids = _tagged_pids()
    held = _held_sockets(pids)
    socks = set()
    with open("/proc/net/unix") as f:
        for line in f.read().splitlines()[1:]:
            m = re.search(r"@(mori-symm-[0-9a-f]+-\d+)", line)
            if m and line.split()[6] in held:
                socks.add(m.group(1))
    shm = set(glob.glob("/dev/shm/mori*"))
    files = set(glob.glob(os.path.join(tmp, "**", "*"), recursive=True)) if tmp else set()
    return socks, shm, files, {str(p) for p in pids}
