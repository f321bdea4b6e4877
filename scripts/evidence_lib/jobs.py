# SPDX-License-Identifier: MIT
"""Running one command for scripts/evidence: under the guard, in its own process group, within a bound (sh, git);
the signals that stop a run and the exception that unwinds it; this boot's id (docs/evidence.md "Where it
writes")."""
import subprocess

from evidence_lib.common import ROOT
from mori_results.guard import STOP_SIGNALS, Interrupted, end_job, guarded  # noqa: F401 (re-exported)
from mori_results.guard import stop_handler as interrupted  # noqa: F401 (re-exported)


def sh(cmd, timeout=60, env=None, cwd=ROOT):
    """(exit code, stdout + stderr); past the timeout the command's process group is killed: exit 124. The command
    runs under scripts/mori_results/guard.py, the leader of its own process group, which kills that group when this script
    dies, SIGKILL included (docs/evidence.md "Where it writes")."""
    try:
        p = subprocess.Popen(guarded(cmd), cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             errors="replace", start_new_session=True)
    except OSError as e:
        return 127, f"{cmd[0]}: {e}\n"
    try:
        out, _ = p.communicate(timeout=timeout)
        return p.returncode, out
    except Interrupted:  # SIGTERM, SIGINT or SIGHUP of this script: the step's job goes with it
        end_job(p.pid)  # its process tree (mpirun's ranks too) and its process group
        p.wait()
        raise
    except subprocess.TimeoutExpired:
        end_job(p.pid)
        try:  # bounded too: a process that left the group may still hold the pipe
            out, _ = p.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            out = ""
        return 124, (out or "") + f"\nevidence: killed after {timeout:.0f} s\n"


def git(*args):
    rc, out = sh(["git", *args], timeout=30)
    return out.strip() if rc == 0 else None


def boot_id():
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip()
    except OSError:
        return None
