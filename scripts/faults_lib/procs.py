# SPDX-License-Identifier: MIT
"""The run's processes: every job gets MARK in its environment (inherited by mpirun's ranks), which finds the run's
processes, and only them; short commands; bounded waits on a rank."""
import os
import signal
import subprocess
import time

MARK = "MORI_FAULTS_RUN"
KILL_S = 8  # kill_group: SIGTERM, 3 s, SIGKILL, 5 s


def sh(cmd, timeout=30, env=None):
    """(rc, stdout+stderr) of a short command; rc None if it could not run or ran past the timeout."""
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout,
                           env=env)
        return p.returncode, p.stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, str(e)


def proc_env(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    return dict(kv.split("=", 1) for kv in raw.decode(errors="replace").split("\0") if "=" in kv)


def proc_comm(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return "?"


def gone(pid):
    """True once pid has exited (a zombie counts as gone) or cannot be read."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def marked(value, prefix=False):
    """[(pid, comm, env)] of live processes whose MARK is value (or starts with it), zombies excluded."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid() or gone(d):
            continue
        env = proc_env(d)
        mine = env.get(MARK) if env else None
        if mine is not None and (mine == value or (prefix and mine.startswith(value))):
            out.append((int(d), proc_comm(d), env))
    return out


# The variable each launcher gives a process its rank in, innermost first: Open MPI's mpirun, a PMIx launcher
# (srun --mpi=pmix), a PMI one (MPICH's mpiexec / Hydra, srun --mpi=pmi2), any srun (docs/setup.md "Launching").
RANK_VARIABLES = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID")


def launcher_rank(env):
    """The rank a launcher gave a process, from its environment, or None."""
    for name in RANK_VARIABLES:
        if name in env:
            try:
                return int(env[name])
            except ValueError:
                return None
    return None


def rank_pids(mark, tool="mori-a2a"):
    """{rank: pid} of the tool's processes of one job."""
    found = {}
    for pid, comm, e in marked(mark):
        rank = launcher_rank(e) if comm.startswith(tool[:15]) else None
        if rank is not None:
            found[rank] = pid
    return found


def kill_marked(value, prefix=False):
    for pid, _, _ in marked(value, prefix):
        for sig in (signal.SIGCONT, signal.SIGKILL):
            try:
                os.kill(pid, sig)
            except OSError:
                pass


def kill_group(p):
    """Ends a job's process group: SIGTERM, then SIGKILL; at most KILL_S seconds."""
    if p is None or p.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, 3), (signal.SIGKILL, KILL_S - 3)):
        try:
            os.killpg(p.pid, sig)
        except OSError:
            pass
        try:
            p.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            pass


def wait_for_rank(p, mark, rank, limit):
    """The pid of a rank once it is up, or None (job ended or limit reached)."""
    end = time.monotonic() + limit
    while time.monotonic() < end and p.poll() is None:
        pid = rank_pids(mark).get(rank)
        if pid:
            return pid
        time.sleep(0.05)
    return None


def wait_gone(p, pid, until):
    """Waits (to the monotonic time `until`) while the job runs and pid is alive; True if pid is gone."""
    while p.poll() is None and time.monotonic() < until:
        if gone(pid):
            return True
        time.sleep(0.02)
    return gone(pid)
