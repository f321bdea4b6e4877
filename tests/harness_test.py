# SPDX-License-Identifier: MIT
"""The leftover check counts only what a test itself started: a process of another job on the machine (untagged)
that holds a project socket and a /dev/shm/mori* object is not a leftover; the same held by a process of the test
is. (docs/reliability.md, "Leftover checks").

usage: harness_test.py
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import check, finish, leftovers  # noqa: E402

# Holds an abstract socket named as the library names its own and a /dev/shm/mori* object until stdin closes.
HOLDER = r'''
import os, socket, sys
name = "mori-symm-" + os.urandom(16).hex() + "-0"
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind("\0" + name)
path = "/dev/shm/mori-harness-test-%d" % os.getpid()
fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
print(name, path, flush=True)
sys.stdin.read()
os.close(fd)
os.unlink(path)
'''


def hold(tagged):
    cmd = [sys.executable, "-c", HOLDER]
    env = dict(os.environ)
    env.pop(harness.TAG_VARIABLE, None)
    if tagged:
        env[harness.TAG_VARIABLE] = harness.TAG
    p = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    name, path = p.stdout.readline().split()
    return p, name, path


def release(p):
    p.stdin.close()
    p.wait(timeout=20)


if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
    print(__doc__)
    sys.exit(0)

base = leftovers()
other, name, path = hold(tagged=False)
try:
    left = [sorted(a - b) for a, b in zip(leftovers(), base)]
    check(f"another job's socket {name} and {path} are not this test's leftovers", not any(left), str(left))
finally:
    release(other)

mine, name, path = hold(tagged=True)
try:
    socks, shm = harness.job_sockets(), harness.held_shm(harness.tagged_pids())
    check(f"this test's own process holding {name} and {path} is seen", name in socks and path in shm,
          f"{socks} {shm}")
finally:
    release(mine)
left = [sorted(a - b) for a, b in zip(leftovers(), base)]
check("after the test's own process ended, nothing is left", not any(left), str(left))
finish()
