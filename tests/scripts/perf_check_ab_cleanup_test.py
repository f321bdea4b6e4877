#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""scripts/perf-check --ab leaves nothing behind, however it ends (docs/perf-check.md "A/B"): a run past
--run-timeout-s has its whole process group killed (mpirun and its ranks, not only the launcher); SIGTERM during the
runs ends them the same way, and SIGTERM during the baseline's build removes the registered git worktree; the work
folder (/tmp/mori-ab-*) is removed on every failure; a --keep that is not a folder it can write (a file, a FIFO,
/dev/null, a read-only mount) and a --build-cmd with an unbalanced quote are exit 2, one line, before any work.

The "ranks" are a marker script started by the real launcher (mpirun -n 2 MARKER ...): it sleeps, so that only
the process group's end can stop it; every check looks for that marker in /proc afterwards.

usage: perf_check_ab_cleanup_test.py BIN_DIR MPIRUN...
"""
import os
import signal
import subprocess
import sys
import tempfile
import time

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/: harness.py
sys.path.insert(0, TESTS)
from harness import check, finish, git_checkout, not_run  # noqa: E402

ROOT = os.path.dirname(TESTS)
CHECK = os.path.join(ROOT, "scripts", "perf-check")
BIN = os.path.abspath(sys.argv[1])
MPIRUN = sys.argv[2:]
GIT = git_checkout(ROOT)
TMP = tempfile.mkdtemp(prefix="mori-ab-cleanup-test-")
PRIVATE_TMP = os.path.join(TMP, "tmpdir")  # perf-check's TMPDIR: its /tmp/mori-ab-* land here
os.makedirs(PRIVATE_TMP)
ENV = dict(os.environ, TMPDIR=PRIVATE_TMP)


def marker(name):
    """An executable that sleeps 300 s; its path (in every process's cmdline) finds what is left of it."""
    path = os.path.join(TMP, name)
    with open(path, "w") as f:
        f.write("#!/usr/bin/env python3\nimport time\ntime.sleep(300)\n")
    os.chmod(path, 0o755)
    return path


def running(mark):
    """Pids of the processes whose command line names mark (perf-check itself, which names it in its own command
    line, left out)."""
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read()
            if mark.encode() in cmdline and CHECK.encode() not in cmdline:
                pids.append(int(pid))
        except OSError:
            pass
    return pids


def gone(mark, within=15):
    """Whether every process naming mark ended within `within` seconds; kills what is left (a failed check)."""
    end = time.monotonic() + within
    while running(mark) and time.monotonic() < end:
        time.sleep(0.2)
    left = running(mark)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return not left


def work_folders():
    return [n for n in os.listdir(PRIVATE_TMP) if n.startswith("mori-ab-")]


def worktrees():
    out = subprocess.run(["git", "-C", ROOT, "worktree", "list", "--porcelain"], stdout=subprocess.PIPE,
                         text=True).stdout
    return [ln for ln in out.splitlines() if ln.startswith("worktree ") and PRIVATE_TMP in ln]


def perf(args, timeout=120):
    p = subprocess.run([sys.executable, CHECK, *args], cwd=ROOT, env=ENV, stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
    return p.returncode, p.stdout


def one_line(rc, out, code, *texts):
    ls = [ln for ln in out.splitlines() if ln.strip()]
    return rc == code and len(ls) == 1 and all(t in ls[0] for t in texts) and "Traceback" not in out


def start(args):
    return subprocess.Popen([sys.executable, CHECK, *args], cwd=ROOT, env=ENV, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def wait_for(mark, limit=60):
    end = time.monotonic() + limit
    while not running(mark) and time.monotonic() < end:
        time.sleep(0.2)
    return bool(running(mark))


def stop(p, sig=signal.SIGTERM):
    p.send_signal(sig)
    try:
        return p.communicate(timeout=60)[0]
    except subprocess.TimeoutExpired:
        p.kill()
        return p.communicate()[0] + "\n(did not end within 60 s of the signal)"


AB = ["--ab", "HEAD", "--baseline-bin", BIN, "--current-bin", BIN, "--runs", "2"]
try:
    # ---- a run past --run-timeout-s: its ranks end with it -------------------------------------------------
    ranks = marker("ranks-timeout.py")
    t0 = time.monotonic()
    rc, out = perf([*AB, "--run-timeout-s", "3", "--", *MPIRUN, "-n", "2", ranks, "{bin}", "{json}"])
    ended = gone(ranks)  # looked at (and what is left killed) whatever the exit
    check("a run past --run-timeout-s: exit 3 naming the bound, its ranks (the whole process group) killed, "
          "no work folder left",
          rc == 3 and "--run-timeout-s" in out and time.monotonic() - t0 < 60 and ended
          and not work_folders(), f"{out}\nleft: {work_folders()}")

    # ---- SIGTERM during the runs ---------------------------------------------------------------------------
    ranks = marker("ranks-sigterm.py")
    p = start([*AB, "--run-timeout-s", "300", "--", *MPIRUN, "-n", "2", ranks, "{bin}", "{json}"])
    started = wait_for(ranks)
    time.sleep(1)
    out = stop(p)
    ended = gone(ranks)
    check("SIGTERM during the runs: exit 143 saying so, mpirun and its ranks ended, no work folder left",
          started and p.returncode == 143 and "SIGTERM" in out and ended and not work_folders(),
          f"started={started} rc={p.returncode}\n{out}\nleft: {work_folders()}")

    # ---- a run that fails: its work folder is removed all the same ---------------------------------------
    rc, out = perf([*AB, "--", "sh", "-c", "exit 5", "{bin}", "{json}"])
    check("a run that fails: exit 3, no work folder left", rc == 3 and "exited 5" in out and not work_folders(),
          f"{out}\nleft: {work_folders()}")

    # ---- SIGTERM during the baseline's build: the worktree is removed and unregistered ---------------------
    name = "SIGTERM during the baseline's build: exit 143, the build's process group ended, the worktree " \
           "removed and unregistered, no work folder left"
    if GIT:
        build = marker("build-sigterm.py")
        p = start(["--ab", "HEAD", "--build-cmd", build, "--current-bin", BIN, "--runs", "2", "--", *MPIRUN, "-n",
                   "2", "{bin}/mori-a2a", "--backend", "host", "--json", "{json}"])
        started = wait_for(build)
        registered = bool(worktrees())
        out = stop(p)
        ended, trees, left = gone(build), worktrees(), work_folders()
        for tree in trees:  # what a failed check left registered, removed
            subprocess.run(["git", "-C", ROOT, "worktree", "remove", "--force", "--force", tree.split(" ", 1)[1]])
        check(name, started and registered and p.returncode == 143 and ended and not trees and not left,
              f"started={started} registered={registered} rc={p.returncode}\n{out}\nworktrees: {trees}\n"
              f"left: {left}")
    else:
        not_run(name, f"needs a git checkout; {ROOT} has no .git")

    # ---- bad values: exit 2, one line, before any work --------------------------------------------------
    a_file = os.path.join(TMP, "a-file")
    with open(a_file, "w") as f:
        f.write("keep\n")
    fifo = os.path.join(TMP, "a-fifo")
    os.mkfifo(fifo)
    cmd = ["--", *MPIRUN, "-n", "2", "{bin}/mori-a2a", "--backend", "host", "--json", "{json}"]
    for what, path, text in (("a file", a_file, "a file"), ("a FIFO", fifo, "a FIFO"),
                             ("/dev/null", "/dev/null", "a character device")):
        rc, out = perf([*AB, "--keep", path, *cmd])
        check(f"--keep onto {what}: exit 2, one line naming it, nothing run or made",
              one_line(rc, out, 2, "--keep", text) and not work_folders(), out)
    ro = os.path.join(TMP, "read-only")
    os.makedirs(ro)
    mounted = os.geteuid() == 0 and subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", ro],
                                                   stderr=subprocess.DEVNULL).returncode == 0
    if mounted:
        try:
            rc, out = perf([*AB, "--keep", os.path.join(ro, "keep"), *cmd])
            check("--keep under a read-only mount: exit 2, one line naming it, nothing made",
                  one_line(rc, out, 2, "--keep", "not writable") and not work_folders(), out)
        finally:
            subprocess.run(["umount", ro])
    else:
        not_run("--keep under a read-only mount", "mount -t tmpfs -o ro failed here (not root, or no mount "
                "permission in this container)")
    rc, out = perf([*AB, "--build-cmd", "sh -c 'make", *cmd])
    check("--build-cmd with an unbalanced quote: exit 2, one line naming it, no work folder made",
          one_line(rc, out, 2, "--build-cmd") and not work_folders(), out)
finally:
    subprocess.run(["umount", os.path.join(TMP, "read-only")], stderr=subprocess.DEVNULL)
    subprocess.run(["rm", "-rf", TMP])
finish()
