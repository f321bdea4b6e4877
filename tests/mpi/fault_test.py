#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Fault injection (MORI_FAULT) and hostile senders, with real mpirun jobs on the host runtime.

Faults: a rank exits at each rendezvous step, never binds its socket, loses its send, or dies in the timed
loop. Every other rank must end within --timeout-s + 5 s (exit 4, or the job aborted) and nothing of the job may
remain: no socket, no /dev/shm object, no temp file.
Hostile senders: a process of this user that is not in the job, and one of another uid (nobody), each send a
well-formed datagram carrying an fd to a rank's FdChannel, its name learnt from /proc/net/unix. They must be
rejected with a warning, their fds closed, and the rendezvous must still succeed.

usage: fault_test.py BIN_DIR MPIRUN...
"""
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: harness.py
import harness  # noqa: E402
from harness import check, finish, leftovers  # noqa: E402
import tempfile
import time

BIN = sys.argv[1]
MPIRUN = sys.argv[2:]
WIN = os.path.join(BIN, "..", "tests", "mpi", "window-mpi-test")
A2A = os.path.join(BIN, "mori-a2a")
TIMEOUT = 4



def job(cmd, env, tmp):
    return harness.job([*MPIRUN, "-n", "4", *cmd], dict(env, TMPDIR=tmp), timeout=120, cwd=tmp)


tmp = tempfile.mkdtemp(prefix="mori-fault-")
win = [WIN, "--backend", "host", "--timeout-s", str(TIMEOUT), "--handle-type", "posix_fd"]
faults = [
    ("rendezvous.requests:2", win, "a rank exits before publishing its request"),
    ("rendezvous.nobind.hang:2", win, "a rank never binds its socket"),
    ("rendezvous.bind:2", win, "a rank exits after binding"),
    ("rendezvous.send-lost:2", win, "a rank's sends are lost"),
    ("rendezvous.exchange:2", win, "a rank exits after sending, before receiving"),
    ("rendezvous.mapped:2", win, "a rank exits after mapping, before the last barrier"),
    ("a2a.timed:1", [A2A, "--backend", "host", "--timeout-s", str(TIMEOUT), "--sync", "host", "--iters", "200"],
     "a rank dies in the a2a timed loop (host sync)"),
    ("a2a.timed:1", [A2A, "--backend", "host", "--timeout-s", str(TIMEOUT), "--sync", "device", "--iters", "200"],
     "a rank dies in the a2a timed loop (device barrier)"),
]
base = leftovers(tmp)
for spec, cmd, what in faults:
    rc, out, dt = job(cmd, {"MORI_FAULT": spec}, tmp)
    after = leftovers(tmp)
    left = [sorted(a - b) for a, b in zip(after, base)]
    # mpirun's own start and teardown take about a second on top of the bound.
    ok = rc != 0 and dt <= TIMEOUT + 5 + 2 and not any(left)
    check(f"{what} [{spec}]: job ended (exit {rc}) in {dt:.1f} s, nothing left behind", ok,
          out + f"\nleft behind: {left}")

# Hostile senders: ranks pause 3 s after binding (test-only), while the attackers send.
# The attacker aims at this test's own job: the socket name is the one a process of the test holds (never another
# job's on the same machine), found by the test and passed on the command line.
ATTACKER = r'''
import os, re, socket, sys
name = sys.argv[1]
nonce = re.fullmatch(r"mori-symm-([0-9a-f]{32})-0-[0-9a-f]{32}", name).group(1)
payload = b"MORIFD01" + bytes.fromhex(nonce) + (1).to_bytes(4, "little") + (1).to_bytes(4, "little")
fd = os.open("/dev/null", os.O_RDONLY)
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.connect("\0" + name)
socket.send_fds(s, [payload], [fd])
print("sent to", name, flush=True)
'''


def own_rank0_socket(job_proc, bound_s=10):
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline and job_proc.poll() is None:
        names = [n for n in harness.job_sockets() if re.fullmatch(r"mori-symm-[0-9a-f]{32}-0-[0-9a-f]{32}", n)]
        if names:
            return names[0]
        time.sleep(0.02)
    return None


attacker = os.path.join(tmp, "attacker.py")
with open(attacker, "w") as f:
    f.write(ATTACKER)
os.chmod(tmp, 0o755)
os.chmod(attacker, 0o644)
for who, prefix, why in (("same user, not in the job", [], "is not rank 1's"),
                         ("another uid (nobody)", ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"],
                          "sender uid 65534 is not ours")):
    if prefix and shutil.which("setpriv") is None:
        check(f"hostile sender, {who}: setpriv missing", False)
        continue
    j = harness.start_job([*MPIRUN, "-n", "4", WIN, "--backend", "host", "--timeout-s", "20", "--handle-type",
                           "posix_fd"], {"MORI_FAULT": "rendezvous.slow:*", "TMPDIR": tmp}, cwd=tmp)
    name = own_rank0_socket(j)
    aout = "no socket of this test's job was found"
    if name:
        a = subprocess.run([*prefix, sys.executable, attacker, name], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=30)
        aout = a.stdout
    out = j.communicate(timeout=120)[0]
    rc = j.returncode
    ok = rc == 0 and "sent to" in aout and out.count("wrong 0") == 4 and "dropped a datagram" in out and why in out \
        and "1 fd(s) closed" in out
    check(f"hostile sender, {who}: rejected with a warning, fd closed, rendezvous still succeeds", ok,
          out + "\nattacker: " + aout)
shutil.rmtree(tmp, ignore_errors=True)
finish()
