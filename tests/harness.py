# SPDX-License-Identifier: MIT
"""The harness the Python test scripts share: each check prints PASS/FAIL (with the output of a failing one), and
finish() prints "N passed, N failed" and exits 1 on any failure, 77 (skipped) where a check could not run here
(not_run); MPI jobs and what they leave behind."""
import glob
import json
import os
import re
import subprocess
import sys
import time

_checks, _failures, _not_run = [], [], []

# CI always has what the tests need (a clone, scripts/deps' packages): there a check left out is a failure.
ON_CI = os.environ.get("CI") == "true"


def load_json(path):
    """The JSON document at path, or None where it is missing or not JSON."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def check(name, ok, out="", tail=3000):
    _checks.append(name)
    print(f"{'PASS' if ok else 'FAIL'}: {name}")
    if not ok:
        print(out[-tail:])
        _failures.append(name)


def not_run(name, reason):
    """A check that cannot run here (e.g. one that needs a git checkout, in a copy of the tree without .git): printed
    as "NOT RUN: name: reason"; finish() then exits 77 (skipped), so that a test that ran only part of its checks
    is never reported as passed. Under CI=true it is a failed check instead."""
    if ON_CI:
        check(f"{name} (not run: {reason}; CI=true)", False)
        return
    print(f"NOT RUN: {name}: {reason}")
    _not_run.append((name, reason))


def finish():
    print(f"{len(_checks) - len(_failures)} passed, {len(_failures)} failed"
          + (f", {len(_not_run)} not run" if _not_run else ""))
    if _failures or not _checks:
        sys.exit(1)
    if _not_run:
        reasons = sorted({r for _, r in _not_run})
        skip(f"{len(_not_run)} check(s) not run here ({'; '.join(reasons)}); the other {len(_checks)} passed")
    sys.exit(0)


def git_checkout(root):
    """Whether root is a git checkout whose HEAD git reads (a .git folder, or the .git file of a worktree), as the
    scripts tell it (scripts/mori_results/ab.py, scripts/evidence). A copy of the tree without .git (a release
    tarball, a GPU machine's copy of the working tree) is not; under CI=true, which always has a clone, that is a
    failed check."""
    ok = False
    if os.path.exists(os.path.join(root, ".git")):
        try:
            ok = subprocess.run(["git", "-C", root, "rev-parse", "--verify", "--quiet", "HEAD"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60).returncode == 0
        except (OSError, subprocess.SubprocessError):
            ok = False
    if not ok and ON_CI:
        check(f"{root} is a git checkout (CI=true: CI always has a clone)", False)
    return ok


STAND_IN_REVISION = "0" * 40  # stated where the build recorded no revision (its reports then say "unknown")


def evidence_revision(bin_dir):
    """What scripts/evidence is told in a tree without .git (docs/evidence.md: --revision COMMIT, --tree-clean):
    the commit and clean state the tools in bin_dir recorded at build time (`mori-a2a --version`, read by
    scripts/mori_results/tools.py; docs/reliability.md "Revisions"), or a stand-in commit, not clean, where the
    build recorded none (built without .git and without -DMORI_GIT_REV). -> (commit, clean, arguments); prints
    what it states and where from."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))
    from mori_results.tools import tools_revision
    built, built_clean, _ = tools_revision(bin_dir)
    commit, clean = built or STAND_IN_REVISION, bool(built) and built_clean is True
    args = ["--revision", commit, *(["--tree-clean"] if clean else [])]
    print(f"no .git: stating {' '.join(args)} to scripts/evidence ("
          + (f"from {bin_dir}/mori-a2a --version)" if built else "a stand-in: the build recorded no revision)"))
    return commit, clean, args


SKIP_RETURN_CODE = 77  # what CTest reports as skipped (SKIP_RETURN_CODE 77 on the test); never counted as passed


def skip(reason):
    """Ends a test that cannot run here as skipped, with the reason on the first line of its output."""
    print(f"SKIPPED: {reason}")
    sys.exit(SKIP_RETURN_CODE)


# ---- MPI jobs and what they leave behind ------------------------------------------------------------------------
# Every job gets a tag in its environment (inherited by mpirun's ranks), so that a leftover is counted only when a
# process of this test holds it: tests of other builds may run on the same machine at the same time.
TAG_VARIABLE = "SYMM_TESTTAG"
TAG = f"{os.getpid()}-{time.time_ns()}"


def job(cmd, env=None, timeout=240, cwd=None):
    """Runs cmd (an mpirun line or a tool) with the test's tag; returns (exit code, output, seconds)."""
    e = dict(os.environ, **(env or {}), **{TAG_VARIABLE: TAG})
    t0 = time.monotonic()
    p = subprocess.run(cmd, env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout,
                       cwd=cwd)
    return p.returncode, p.stdout, time.monotonic() - t0


def start_job(cmd, env=None, cwd=None):
    """Starts cmd with the test's tag and returns its Popen (output piped, text), for a test that acts on a running
    job."""
    e = dict(os.environ, **(env or {}), **{TAG_VARIABLE: TAG})
    return subprocess.Popen(cmd, env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=cwd)


# ---- The launcher (docs/setup.md, "Launching") --------------------------------------------------------------------
# tests/CMakeLists.txt passes the launcher line of the MPI found and names that MPI in MORI_TEST_MPI (OpenMPI or
# MPICH); a script run by hand without it asks the launcher.
RANK_VARIABLES = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID")  # innermost launcher first


def mpi_vendor(mpirun):
    """"OpenMPI" or "MPICH": the MPI of the build the tests run (and so of the launcher mpirun[0])."""
    vendor = os.environ.get("MORI_TEST_MPI")
    if vendor in ("OpenMPI", "MPICH"):
        return vendor
    try:
        text = subprocess.run([mpirun[0], "--version"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        text = ""
    return "MPICH" if "HYDRA" in text or "MPICH" in text else "OpenMPI"


def with_env(assignments, cmd):
    """cmd (a program and its arguments under a launcher) run with VAR=value assignments, for any launcher: the
    launcher starts `env VAR=value ... cmd` (instead of Open MPI's -x or Hydra's -env)."""
    return ["env", *assignments, *cmd] if assignments else list(cmd)


def rank_of(environ):
    """The rank a launcher gave a process, from its environment ({name: value}, str or bytes keys), or None."""
    for name in RANK_VARIABLES:
        for key in (name, name.encode()):
            if key in environ:
                try:
                    return int(environ[key])
                except ValueError:
                    return None
    return None


def tool_job(mpirun, n, tool, args, env=None, timeout_s=20):
    """n ranks of a tool on the host runtime with --timeout-s; returns (exit code, output)."""
    rc, out, _ = job([*mpirun, "-n", str(n), tool, "--backend", "host", "--timeout-s", str(timeout_s), *args], env)
    return rc, out


def tagged_pids():
    pids = set()
    needle = f"{TAG_VARIABLE}={TAG}".encode()
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


def held_shm(pids):
    """/dev/shm/mori* objects the given processes hold open or mapped."""
    held = set()
    for pid in pids:
        links = []
        for fd in glob.glob(f"/proc/{pid}/fd/*"):
            try:
                links.append(os.readlink(fd))
            except OSError:
                continue
        try:
            with open(f"/proc/{pid}/maps") as f:
                links += [line.split(None, 5)[5] for line in f.read().splitlines() if len(line.split(None, 5)) == 6]
        except OSError:
            pass
        held.update(p.split(" (deleted)")[0] for p in links if p.startswith("/dev/shm/mori"))
    return held


def settle(timeout=10.0):
    """Waits (at most timeout seconds) until no process of this test is left: on a loaded machine the ranks of a
    job that just ended may take a moment to go. Returns the pids still there."""
    deadline = time.monotonic() + timeout
    pids = tagged_pids()
    while pids and time.monotonic() < deadline:
        time.sleep(0.1)
        pids = tagged_pids()
    return pids


def job_sockets():
    """The project sockets (mori-symm-<nonce>-<rank>-<key>) that this test's running processes hold."""
    held = _held_sockets(tagged_pids())
    socks = set()
    with open("/proc/net/unix") as f:
        for line in f.read().splitlines()[1:]:
            m = re.search(r"@(mori-symm-[0-9a-f]+-\d+(?:-[0-9a-f]+)?)", line)
            if m and line.split()[6] in held:
                socks.add(m.group(1))
    return socks


def leftovers(tmp=None):
    """(project sockets held by this test's processes, /dev/shm/mori* objects they hold, files under tmp, this
    test's live processes). Only what the test itself started counts: its tagged processes and what they hold, so
    that two suites, or a user's job, on one machine never fail each other. Compare two calls: what a job added is
    the difference."""
    pids = settle()
    socks = job_sockets()
    shm = held_shm(pids)
    files = set(glob.glob(os.path.join(tmp, "**", "*"), recursive=True)) if tmp else set()
    return socks, shm, files, {str(p) for p in pids}
