# SPDX-License-Identifier: MIT
"""A job that ends with the script that started it (docs/evidence.md, "Where it writes"; docs/perf-check.md "A/B").

    python3 scripts/mori_results/guard.py PARENT_PID COMMAND...

The guard is started as the leader of a new process group (start_new_session) and runs COMMAND in that group. It
asks the kernel for SIGTERM when its parent dies (prctl PR_SET_PDEATHSIG; a parent already gone, PARENT_PID no
longer its parent, counts the same), so that a script killed with SIGKILL, which runs no cleanup of its own, still
takes its job with it: on its parent's death, or on SIGTERM, SIGINT or SIGHUP, the guard ends the job (end_job):
every process under it (COMMAND, and mpirun's ranks, which Open MPI starts in process groups of their own) is
stopped, then killed with SIGKILL, and so is its process group. Otherwise it exits as COMMAND did (its exit status,
or the signal that ended it). The scripts start it through guarded() below and end it early through end_job().
"""
import ctypes
import os
import signal
import subprocess
import sys

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>

# The signals that stop a script that runs guarded jobs (perf-check --ab, scripts/evidence): stop_handler turns each
# into Interrupted, so that the script unwinds and every cleanup runs; the script exits 128 + signum.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class Interrupted(BaseException):
    """SIGTERM, SIGINT or SIGHUP: unwinds the script so that every cleanup runs (the running job's process group,
    an MPS daemon, temporary folders); the script exits 128 + signum."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


def stop_handler(signum, frame):
    for sig in STOP_SIGNALS:  # a second signal does not cut the cleanup short
        signal.signal(sig, signal.SIG_IGN)
    raise Interrupted(signum)
STOP = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def guarded(cmd):
    """cmd run under the guard, which ends the job's process group when this process dies: start the result with
    start_new_session=True, and end it early with os.killpg(p.pid, ...)."""
    return [sys.executable, os.path.abspath(__file__), str(os.getpid()), *cmd]


def _children():
    """{parent pid: [child pids]} of every process now (from /proc/PID/stat)."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue  # ended meanwhile
        ppid = int(stat[stat.rindex(b")") + 2:].split()[1])  # after "pid (comm) state"
        out.setdefault(ppid, []).append(int(name))
    return out


def _tree(root):
    children, found, todo = _children(), [], [root]
    while todo:
        pid = todo.pop()
        found += children.get(pid, [])
        todo += children.get(pid, [])
    return found


def _signal_all(pids, sig):
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def end_job(pid):
    """Ends the job of the guard `pid` (or any process tree): every process under it is stopped first (so that none
    forks or is orphaned meanwhile), then it and they are killed with SIGKILL, and so is its process group; a few
    rounds catch a process forked between the look and the stop. The caller still reaps pid."""
    for _ in range(5):
        tree = _tree(pid)
        if not tree:
            break
        _signal_all(tree, signal.SIGSTOP)
        _signal_all(tree, signal.SIGKILL)
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _end_group(signum=None, frame=None):
    end_job(os.getpid())  # this process included, by its process group
    os._exit(128 + (signum or signal.SIGKILL))


def main(argv):
    if len(argv) < 2 or not argv[0].isdigit():
        print("guard.py: usage: PARENT_PID COMMAND...", file=sys.stderr)
        return 2
    for sig in STOP:
        signal.signal(sig, _end_group)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
        print(f"guard.py: prctl(PR_SET_PDEATHSIG): {os.strerror(ctypes.get_errno())}", file=sys.stderr)
        return 3
    if os.getppid() != int(argv[0]):  # the parent died before the request: the kernel will not send it
        _end_group(signal.SIGTERM)
    try:
        p = subprocess.Popen(argv[1:])
    except OSError as e:
        print(f"{argv[1]}: {e.strerror or e}", file=sys.stderr)
        return 127
    rc = p.wait()
    if rc < 0:  # ended by a signal: end the same way, so that the caller reads the same status
        for sig in STOP:
            signal.signal(sig, signal.SIG_DFL)
        if -rc not in (signal.SIGKILL, signal.SIGSTOP):  # those two cannot be caught anyway
            signal.signal(-rc, signal.SIG_DFL)
        os.kill(os.getpid(), -rc)
    return rc if rc >= 0 else 128 - rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
