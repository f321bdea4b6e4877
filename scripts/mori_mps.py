# SPDX-License-Identifier: MIT
"""Placing N ranks on one GPU under a private CUDA MPS daemon: the one implementation (scripts/mps is its command
line; scripts/run-main, scripts/evidence, scripts/faults and tests/gpu/gpu_test.py import it).

Ranks that share a GPU without MPS time-slice their contexts, and their numbers would measure that
(docs/mori-a2a.md). A private daemon has its own pipe and log folders (CUDA_MPS_PIPE_DIRECTORY,
CUDA_MPS_LOG_DIRECTORY) and changes no card setting (no compute mode, clocks or MIG). Every wait is bounded.

    with mori_mps.MpsPlacement(ranks=8, gpu=0, base=folder) as p:   # starts a daemon unless one is active
        subprocess.run([*mpirun, *p.mpirun_args(), tool, ...], env=p.env())
"""
import os
import shutil
import subprocess
import time
from mori_results import env as envvars  # scripts/ is on sys.path wherever this module is imported

CONTROL = "nvidia-cuda-mps-control"
START_S = 5.0  # the daemon answers within this after `-d`
STOP_S = 10.0


class MpsError(Exception):
    """The daemon could not be started (the message says why and where its log is)."""


def default_base():
    return envvars.read("MORI_MPS_DIR") or f"/tmp/mori-mps-{os.getuid()}"


def _control(args, stdin, env, timeout):
    """(exit code, output) of one nvidia-cuda-mps-control command; 127 where it is missing, 124 past timeout."""
    exe = shutil.which(CONTROL)
    if not exe:
        return 127, f"{CONTROL} not found"
    try:
        p = subprocess.run([exe, *args], input=stdin, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=timeout)
        return p.returncode, p.stdout
    except subprocess.TimeoutExpired:
        return 124, f"{CONTROL} {' '.join(args)}: no answer within {timeout} s"
    except OSError as e:
        return 127, f"{CONTROL}: {e}"


class Daemon:
    """A daemon with its pipe and log folders under `base` (default $MORI_MPS_DIR or /tmp/mori-mps-UID)."""

    def __init__(self, base=None):
        self.base = os.path.abspath(base or default_base())
        self.pipe = os.path.join(self.base, "pipe")
        self.log = os.path.join(self.base, "log")

    def env(self):
        return {"CUDA_MPS_PIPE_DIRECTORY": self.pipe, "CUDA_MPS_LOG_DIRECTORY": self.log}

    def _env(self):
        return dict(os.environ, **self.env())

    def running(self):
        if not os.path.exists(os.path.join(self.pipe, "control")):
            return False
        rc, _ = _control([], "get_server_list\n", self._env(), 5)
        return rc == 0

    def start(self):
        """Starts the daemon unless it runs; returns env(). Raises MpsError."""
        if not shutil.which(CONTROL):
            raise MpsError(f"{CONTROL} not found")
        os.makedirs(self.pipe, exist_ok=True)
        os.makedirs(self.log, exist_ok=True)
        os.chmod(self.base, 0o700)
        if not self.running():
            rc, out = _control(["-d"], None, self._env(), 30)
            if rc != 0:
                raise MpsError(f"{CONTROL} -d failed (exit {rc}: {out.strip()}; log: {self.log})")
            end = time.monotonic() + START_S
            while not self.running():
                if time.monotonic() > end:
                    raise MpsError(f"the daemon did not come up within {START_S} s (log: {self.log})")
                time.sleep(0.1)
        return self.env()

    def stop(self):
        """Stops it where it runs; True when it is not running afterwards."""
        if self.running():
            _control([], "quit\n", self._env(), STOP_S)
            end = time.monotonic() + STOP_S
            while self.running() and time.monotonic() < end:
                time.sleep(0.1)
        return not self.running()

    def log_tail(self, chars=2000):
        out = []
        if os.path.isdir(self.log):
            for name in sorted(os.listdir(self.log)):
                try:
                    with open(os.path.join(self.log, name), errors="replace") as f:
                        out.append(f"--- {os.path.join(self.log, name)}\n{f.read()[-chars:]}")
                except OSError:
                    pass
        return "\n".join(out)


def active_daemon():
    """A daemon already answering: the one this process's environment names (CUDA_MPS_PIPE_DIRECTORY), else the one
    `scripts/mps start` starts by default ($MORI_MPS_DIR or /tmp/mori-mps-UID); None where neither answers."""
    pipe = envvars.read("CUDA_MPS_PIPE_DIRECTORY")
    if pipe:
        d = Daemon(os.path.dirname(pipe.rstrip("/")))
        d.pipe, d.log = pipe, envvars.read("CUDA_MPS_LOG_DIRECTORY", d.log)
        if d.running():
            return d
    d = Daemon()
    return d if d.running() else None


class MpsPlacement:
    """An mps_placement (scripts/mori_results/machine.py, where the scripts decide when ranks need one): `ranks`
    ranks on GPU `gpu` under MPS: the daemon the environment names where it answers, else a private one under `base`
    (started by start(), stopped by stop(); a context manager does both)."""

    def __init__(self, ranks, gpu=0, base=None):
        self.ranks, self.gpu = int(ranks), int(gpu)
        self.daemon = active_daemon()
        self.private = self.daemon is None
        if self.private:
            self.daemon = Daemon(base)
        self.started = False

    def describe(self):
        how = "a private MPS daemon" if self.private else "the MPS daemon already active"
        return f"{self.ranks} ranks on GPU {self.gpu} under {how} ({self.daemon.base})"

    def start(self):
        if self.private and not self.daemon.running():
            self.daemon.start()
            self.started = True
        return self

    def stop(self):
        """True where the daemon this mps_placement started is down (or it started none)."""
        return self.daemon.stop() if self.started else True

    def env(self):
        """GPU `gpu` of those this process sees (an entry of CUDA_VISIBLE_DEVICES where it is set), and the daemon."""
        visible = [v for v in envvars.read("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
        gpu = visible[self.gpu].strip() if self.gpu < len(visible) else str(self.gpu)
        return {"CUDA_VISIBLE_DEVICES": gpu, **self.daemon.env()}

    def mpirun_args(self):
        """The launcher's -n and `env VAR=value ...`, which carries the mps_placement to every rank under any launcher
        (Open MPI's mpirun, MPICH's mpiexec, srun; docs/setup.md "Launching"): the tool follows."""
        return ["-n", str(self.ranks), "env", *(f"{k}={v}" for k, v in self.env().items())]

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False


Placement = MpsPlacement  # the name tests/scripts/mps_test.py and tests/gpu/gpu_test.py use
