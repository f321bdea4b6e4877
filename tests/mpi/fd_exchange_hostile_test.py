#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The POSIX-fd exchange against another local user and against a rank short of descriptors (docs/reliability.md,
"Hostile senders"; docs/setup.md, "Large jobs").

1. A squatter of another uid (nobody) reads /proc/net/unix in a loop and binds every project socket name it sees,
   and every name it can derive from them by the old pattern (mori-symm-<nonce>-<rank> for ranks 0..63), before
   and while a 16-rank posix_fd job sets up its window. Abstract names carry no permission check: a name known
   before its owner binds it can be taken. The job must still succeed (each rank binds a name with a random key
   of its own, and the names travel over MPI). The job and the squatter run in a network namespace of their own
   (abstract sockets are per namespace), so that the squatter never touches another job on this machine.
2. 4 ranks under `prlimit --nofile=N` (N = 40..48) with 8 windows of divergent-order: the descriptors the run
   holds are not there. The job must fail within the bound with a typed error that names the shortage (the
   preflight's exit 2, or EMFILE, exit 3) instead of waiting out --timeout-s and blaming its peers ("no fd
   arrived", exit 4).

usage: fd_exchange_hostile_test.py BIN_DIR MPIRUN...
"""
import os
import shlex
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: harness.py
import harness  # noqa: E402
from harness import check, finish, not_run  # noqa: E402

BIN = os.path.abspath(sys.argv[1])
MPIRUN = sys.argv[2:]
WIN = os.path.join(BIN, "..", "tests", "mpi", "window-mpi-test")
TD = os.path.join(BIN, "mori-teardown-repro")
TMP = tempfile.mkdtemp(prefix="mori-fdx-")
os.chmod(TMP, 0o755)

# Binds every name it can read or derive, keeps them all, prints each one it took; "ready" once it runs.
SQUATTER = r'''
import os, re, socket, sys, time
pattern = re.compile(r"@(mori-symm-([0-9a-f]{32})-\d+(?:-[0-9a-f]+)?)$", re.M)
held, tried = [], set()
def take(name):
    if name in tried:
        return
    tried.add(name)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        s.bind("\0" + name)
        held.append(s)
        print("took", name, flush=True)
    except OSError:
        s.close()
print("ready uid", os.getuid(), flush=True)
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    with open("/proc/net/unix") as f:
        text = f.read()
    for name, nonce in pattern.findall(text):
        for r in range(64):
            take(f"mori-symm-{nonce}-{r}")
        take(name)
'''


def squatted_job():
    """16 ranks of window-mpi-test (posix_fd) in a network namespace of their own, with the squatter (nobody)
    started first; returns (exit code, job output, squatter output, seconds)."""
    sq = os.path.join(TMP, "squatter.py")
    with open(sq, "w") as f:
        f.write(SQUATTER)
    os.chmod(sq, 0o644)
    sq_out = os.path.join(TMP, "squatter.out")
    job = [*MPIRUN, "-n", "16", WIN, "--backend", "host", "--timeout-s", "30", "--handle-type", "posix_fd"]
    # The squatter runs at a higher priority than the ranks: on a loaded machine it must still be quick.
    script = (f"ip link set lo up || exit 99; : > {sq_out}; chmod 666 {sq_out}; "
              f"nice -n -10 setpriv --reuid=65534 --regid=65534 --clear-groups {shlex.quote(sys.executable)} "
              f"{sq} 120 > {sq_out} 2>&1 & sq=$!; "
              f"for i in $(seq 200); do grep -q ready {sq_out} && break; sleep 0.05; done; "
              f"{shlex.join(job)}; rc=$?; kill $sq; wait $sq 2>/dev/null; exit $rc")
    # rendezvous.slow (test-only): every rank waits 3 s once bound, so that the squatter surely sees the sockets.
    env = {"TMPDIR": TMP, "MORI_FAULT": "rendezvous.slow:*"}
    rc, out, secs = harness.job(["unshare", "-n", "sh", "-c", script], env, timeout=300, cwd=TMP)
    with open(sq_out) as f:
        return rc, out, f.read(), secs


# ---- 1. a squatter of another uid ---------------------------------------------------------------------------------
if os.geteuid() != 0 or not shutil.which("setpriv") or not shutil.which("unshare") or not shutil.which("ip"):
    not_run("a squatter of another uid does not stop a 16-rank posix_fd job",
            "needs root, setpriv, unshare and ip (a network namespace of its own, a process of uid nobody)")
else:
    rc, out, sq, secs = squatted_job()
    taken = [ln.split()[1] for ln in sq.splitlines() if ln.startswith("took ")]
    # A name with a key can be taken only once its rank closed its socket (at the end of the window).
    keyed = [n for n in taken if n.count("-") == 4]
    print(f"time: 16 ranks with the squatter: {secs:.1f} s; the squatter took {len(taken) - len(keyed)} names "
          f"derived from the nonce and {len(keyed)} names of closed sockets")
    check("the squatter ran as uid 65534 and saw the job's sockets (it took names derived from them)",
          "ready uid 65534" in sq and len(taken) > 0, sq[-2000:])
    check("a squatter of another uid does not stop a 16-rank posix_fd job (16 ranks wrong 0, exit 0)",
          rc == 0 and out.count("wrong 0") == 16 and "EADDRINUSE" not in out, out + "\nsquatter:\n" + sq[-2000:])

# ---- 2. a rank short of descriptors ------------------------------------------------------------------------------
# MPI_Init of either MPI runs within 36 descriptors (MPICH's UCX was once refused at 32, the old limit here).
# Where the shortage first bites depends on what is open at the start: at one limit a window's allocation
# fails, at another the kernel cannot install a received descriptor (MSG_CTRUNC, which was dropped as
# "truncated" and waited out the bound). Each limit is tried.
for limit in (40, 42, 44, 46, 48):
    jd = os.path.join(TMP, f"journals-{limit}")
    rc, out, secs = harness.job([*MPIRUN, "-n", "4", "prlimit", f"--nofile={limit}", TD, "--backend", "host",
                                 "--handle-type", "posix_fd", "--scenario", "divergent-order", "--windows", "8",
                                 "--timeout-s", "5", "--journal-dir", jd], {"TMPDIR": TMP}, timeout=120, cwd=TMP)
    named = (f"descriptor limit (ulimit -n) is {limit}" in out and "8 window(s)" in out) or "EMFILE" in out
    check(f"4 ranks under ulimit -n {limit}, 8 windows: a typed error naming the shortage (exit {rc}, "
          f"{secs:.1f} s), not a timeout blaming the peers",
          rc in (2, 3) and named and "no fd arrived" not in out, out)

shutil.rmtree(TMP, ignore_errors=True)
finish()
