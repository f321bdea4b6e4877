#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The files the tools read and write (docs/reliability.md, "Files the tools read and write"), through the real
tools on the host runtime: kernel sources, includes and journals that are not regular files or are too large, a
report lost on stdout, a replaced report's mode, a JIT cache removed under a running job, a relative
XDG_CACHE_HOME.

usage: files_test.py BIN_DIR KERNEL_DIR [--nvrtc] MPIRUN...
--nvrtc: this build has the CUDA headers and NVRTC, so kernels can be compiled (the JIT cache cases need it).
Every path a case uses lies in a fresh temporary folder made here and removed at the end.
"""
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: harness.py
import harness  # noqa: E402
from harness import check, finish  # noqa: E402

if any(a in ("-h", "--help") for a in sys.argv[1:]) or len(sys.argv) < 3:
    print(__doc__.strip())
    sys.exit(0 if len(sys.argv) >= 2 else 2)

BIN, KDIR = sys.argv[1], sys.argv[2]
NVRTC = len(sys.argv) > 3 and sys.argv[3] == "--nvrtc"
MPIRUN = sys.argv[4:] if NVRTC else sys.argv[3:]
PROBE = os.path.join(BIN, "mori-probe")
A2A = os.path.join(BIN, "mori-a2a")
TD = os.path.join(BIN, "mori-teardown-repro")
PRECOMPILE = ["--backend", "host", "--jit-precompile", "--archs", "sm_90", "--timeout-s", "3"]


def run(cmd, env=None, timeout=60, cwd=None, stdout=subprocess.PIPE):
    """(exit code, stdout + stderr text, seconds); a command still running at `timeout` is killed (code -1)."""
    e = dict(os.environ, **(env or {}))
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, env=e, stdout=stdout, stderr=subprocess.PIPE if stdout is not subprocess.PIPE
                         else subprocess.STDOUT, cwd=cwd, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        rc = -1
    text = (out or b"").decode(errors="replace") + (err or b"").decode(errors="replace")
    if rc == -1:
        text += f"\n(did not end within {timeout} s)"
    return rc, text, time.monotonic() - t0


def kernel_copy(tmp, name):
    """A copy of the kernel folder, for MORI_KERNEL_DIR."""
    d = os.path.join(tmp, name)
    shutil.copytree(KDIR, d)
    return d


def errors(out):
    return [line for line in out.splitlines() if ": error (" in line]


def one_error(out, *words):
    """Exactly one error line (per process), and it holds every word."""
    errs = errors(out)
    return len(errs) >= 1 and all(all(w in e for w in words) for e in errs)


def journal_dir(tmp, name):
    d = os.path.join(tmp, name)
    os.makedirs(d)
    return d


def fd_stdout(cmd, fd, env=None, timeout=60):
    """Runs cmd with `fd` as its stdout (stderr captured); (exit code, stderr text)."""
    e = dict(os.environ, **(env or {}))
    p = subprocess.Popen(cmd, env=e, stdout=fd, stderr=subprocess.PIPE, start_new_session=True)
    try:
        err = p.communicate(timeout=timeout)[1]
        return p.returncode, err.decode(errors="replace")
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        return -1, p.communicate()[1].decode(errors="replace") + f"\n(did not end within {timeout} s)"


with tempfile.TemporaryDirectory() as tmp:
    env = {"MORI_JIT_CACHE_DIR": os.path.join(tmp, "cache")}

    # ---- 1. The one reader: kernel sources and includes --------------------------------------------------------
    k = kernel_copy(tmp, "k-fifo")
    os.unlink(os.path.join(k, "a2a.hip"))
    os.mkfifo(os.path.join(k, "a2a.hip"))
    rc, out, dt = run([PROBE, *PRECOMPILE], env={**env, "MORI_KERNEL_DIR": k}, timeout=20)
    check("a kernel source that is a FIFO: exit 2 at once, naming the file and what it is",
          rc == 2 and dt < 15 and one_error(out, "a2a.hip", "a FIFO"), out)
    rc, out, dt = run([*MPIRUN, "-n", "2", PROBE, *PRECOMPILE], env={**env, "MORI_KERNEL_DIR": k}, timeout=40)
    check("a kernel source that is a FIFO, 2 ranks: exit 2, both ranks name it",
          rc == 2 and len([e for e in errors(out) if "a2a.hip" in e and "a FIFO" in e]) == 2, out)

    k = kernel_copy(tmp, "k-zero")
    os.unlink(os.path.join(k, "a2a.hip"))
    os.symlink("/dev/zero", os.path.join(k, "a2a.hip"))
    rc, out, dt = run([PROBE, *PRECOMPILE], env={**env, "MORI_KERNEL_DIR": k}, timeout=20)
    check("a kernel source linked to /dev/zero: exit 2 at once, naming the device",
          rc == 2 and dt < 15 and one_error(out, "a2a.hip", "a character device", "/dev/zero"), out)

    k = kernel_copy(tmp, "k-dir")
    os.unlink(os.path.join(k, "a2a.hip"))
    os.mkdir(os.path.join(k, "a2a.hip"))
    rc, out, _ = run([PROBE, *PRECOMPILE], env={**env, "MORI_KERNEL_DIR": k}, timeout=60)
    check("a kernel source that is a folder: exit 2 naming the file, no compiler error",
          rc == 2 and one_error(out, "a2a.hip", "a folder") and "identifier" not in out, out)

    k = kernel_copy(tmp, "k-big")
    with open(os.path.join(k, "a2a.hip"), "ab") as f:
        f.truncate(5 << 20)  # sparse: 5 MiB, more than a kernel source may hold
    rc, out, _ = run([PROBE, *PRECOMPILE], env={**env, "MORI_KERNEL_DIR": k}, timeout=60)
    check("a kernel source over 4 MiB: exit 2 naming the file and the cap",
          rc == 2 and one_error(out, "a2a.hip", "EFBIG", "4 MiB"), out)

    k = kernel_copy(tmp, "k-include")
    with open(os.path.join(k, "a2a.hip"), "a") as f:
        f.write('\n#include "extra.h"\n')
    os.mkfifo(os.path.join(k, "extra.h"))
    rc, out, dt = run([PROBE, *PRECOMPILE], env={**env, "MORI_KERNEL_DIR": k}, timeout=20)
    check("an include of a kernel source that is a FIFO: exit 2 naming the include",
          rc == 2 and dt < 15 and one_error(out, "extra.h", "a FIFO"), out)

    # ---- 1. The one reader: teardown journals (mori-teardown-repro --summarize) --------------------------------
    d = journal_dir(tmp, "j-fifo")
    os.mkfifo(os.path.join(d, "rank-0.journal"))
    rc, out, dt = run([TD, "--backend", "host", "--timeout-s", "3", "--summarize", d], timeout=20)
    check("a journal that is a FIFO: exit 2 at once, naming the file",
          rc == 2 and dt < 15 and one_error(out, "rank-0.journal", "a FIFO"), out)
    d = journal_dir(tmp, "j-zero")
    os.symlink("/dev/zero", os.path.join(d, "rank-0.journal"))
    rc, out, dt = run([TD, "--backend", "host", "--timeout-s", "3", "--summarize", d], timeout=20)
    check("a journal linked to /dev/zero: exit 2 at once, naming the device",
          rc == 2 and dt < 15 and one_error(out, "rank-0.journal", "/dev/zero"), out)
    d = journal_dir(tmp, "j-big")
    with open(os.path.join(d, "rank-0.journal"), "wb") as f:
        f.write(b"O\tordered\t1\n")
        f.truncate(65 << 20)
    rc, out, _ = run([TD, "--backend", "host", "--timeout-s", "3", "--summarize", d], timeout=20)
    check("a journal over 64 MiB: exit 2 naming the file and the cap",
          rc == 2 and one_error(out, "rank-0.journal", "EFBIG", "64 MiB"), out)

    # ---- 2. The one checked writer: stdout ---------------------------------------------------------------------
    good = journal_dir(tmp, "j-good")
    with open(os.path.join(good, "rank-0.journal"), "wb") as f:
        f.write(b"O\tordered\t1\nD\tordered\n")
    tools = {
        "mori-probe": [PROBE, "--backend", "host", "--json", "-"],
        "mori-a2a": [A2A, "--backend", "host", "--chunk-kib", "4", "--iters", "2", "--warmup", "1", "--json", "-"],
        "mori-teardown-repro": [TD, "--backend", "host", "--summarize", good, "--json", "-"],
    }
    with open("/dev/full", "wb") as full:
        for name, cmd in tools.items():
            rc, err = fd_stdout(cmd, full)
            check(f"{name} --json - to /dev/full: exit 3, one line naming ENOSPC",
                  rc == 3 and len(errors(err)) == 1 and "ENOSPC" in err and "stdout" in err, err)
        # Under MPICH stdout is flushed before the tool's own check (finish_stdout), so the failed write's errno is
        # gone and the tool names EIO (docs/setup.md, "Launching"). Still exit 3 naming the lost write.
        errno_of_write = "EIO" if harness.mpi_vendor(MPIRUN) == "MPICH" else "ENOSPC"
        rc, err = fd_stdout([PROBE, "--backend", "host"], full)
        check(f"mori-probe's table to /dev/full: exit 3 naming {errno_of_write}",
              rc == 3 and f"write(stdout) failed: {errno_of_write}" in err, err)
        rc, err = fd_stdout([PROBE, "--help"], full)
        check(f"mori-probe --help to /dev/full: exit 3 naming {errno_of_write}",
              rc == 3 and f"write(stdout) failed: {errno_of_write}" in err, err)

    rc, out, _ = run(["sh", "-c", '"$0" "$@" >&-', *tools["mori-probe"]])
    check("--json - with stdout closed: exit 3, one line saying so",
          rc == 3 and len(errors(out)) == 1 and "stdout is closed" in out, out)
    rc, out, _ = run(["sh", "-c", '"$0" "$@" >&-', PROBE, "--backend", "host"])
    check("the table with stdout closed: exit 3", rc == 3 and "stdout is closed" in out, out)

    r, w = os.pipe()
    os.close(r)  # a pipe whose reader is gone before the tool starts
    for name, cmd in tools.items():
        rc, err = fd_stdout(cmd, w)
        check(f"{name} --json - into a closed pipe: exit 3 naming EPIPE (not killed by SIGPIPE)",
              rc == 3 and len(errors(err)) == 1 and "EPIPE" in err, err)
    os.close(w)

    # ---- 2b. --json onto what is not a regular file or a new name: exit 2 before the run, left as it was -------
    rc, out, _ = run([PROBE, "--backend", "host", "--json", "/dev/full"])
    check("--json /dev/full: exit 2 up front, one line naming the device, nothing written",
          rc == 2 and one_error(out, "'/dev/full' is a character device") and "ENOSPC" not in out, out)
    targets = os.path.join(tmp, "targets")
    os.mkdir(targets)
    loop = os.path.join(targets, "l1")
    os.symlink("l2", loop)
    os.symlink("l1", os.path.join(targets, "l2"))
    fifo = os.path.join(targets, "fifo")
    os.mkfifo(fifo)
    for what, path, text in [("a symlink loop", loop, "symlink loop"), ("a FIFO without a reader", fifo, "a FIFO")]:
        for name, cmd in [("mori-probe", [PROBE, "--backend", "host", "--json", path]),
                          ("mori-a2a, 2 ranks", [*MPIRUN, "-n", "2", A2A, "--backend", "host", "--chunk-kib", "4",
                                                  "--json", path])]:
            rc, out, dt = run(cmd, timeout=60)
            check(f"{name} --json onto {what}: exit 2 before the run (no table, no a2a row), naming it",
                  rc == 2 and one_error(out, text) and "chunk" not in out and "dev name" not in out, out)
    check("the loop and the FIFO are as they were, nothing left beside them",
          os.path.islink(loop) and os.readlink(loop) == "l2" and stat.S_ISFIFO(os.lstat(fifo).st_mode)
          and sorted(os.listdir(targets)) == ["fifo", "l1", "l2"], repr(os.listdir(targets)))
    if os.geteuid() == 0 and os.access("/proc", os.W_OK):
        rc, out, _ = run([PROBE, "--backend", "host", "--json", "/proc/version"])
        check("--json /proc/version (root: /proc says writable, takes no file): exit 2 up front naming the folder",
              rc == 2 and one_error(out, "the folder '/proc'", "takes no new file") and "dev name" not in out, out)
    else:
        print("note: not root: the /proc/version case (a folder that says writable and takes no file) left out")
    # ---- 2c. --json through another user's symlink in a sticky world-writable folder (as /tmp): refused ----------
    # The kernel's protected_symlinks rule, kept by the writer whatever the kernel's setting (docs/reliability.md).
    if os.geteuid() == 0:
        sticky = os.path.join(tmp, "sticky")
        os.mkdir(sticky)
        os.chmod(sticky, 0o1777)
        victim, created = os.path.join(tmp, "victim.json"), os.path.join(tmp, "created.json")
        with open(victim, "w") as f:
            f.write("keep\n")
        a2a = [*MPIRUN, "-n", "2", A2A, "--backend", "host", "--chunk-kib", "4", "--timeout-s", "20", "--json"]
        for what, target in [("a new name", created), ("an existing file", victim)]:
            link = os.path.join(sticky, "to-" + what.split()[-1])
            os.symlink(target, link)
            os.lchown(link, 65534, 65534)
            rc, out, _ = run([*a2a, link], timeout=60)
            check(f"mori-a2a --json through uid 65534's symlink in a sticky folder to {what}: exit 2 up front, "
                  "naming the link, the target not created or changed",
                  rc == 2 and one_error(out, "sticky world-writable folder", link) and "chunk" not in out
                  and not os.path.exists(created) and open(victim).read() == "keep\n", out)
        rc, out, _ = run([TD, "--backend", "host", "--summarize", journal_dir(tmp, "j-sticky"), "--json",
                          os.path.join(sticky, "to-file")])
        check("mori-teardown-repro --summarize --json through that link: exit 2, the target unchanged",
              rc == 2 and one_error(out, "sticky world-writable folder") and open(victim).read() == "keep\n", out)
        plain = os.path.join(tmp, "plain")
        os.mkdir(plain)
        os.symlink(victim, os.path.join(plain, "link"))
        rc, out, _ = run([*a2a, os.path.join(plain, "link")], timeout=60)
        check("root's own symlink to a file in a folder that is not sticky: followed, the file gets the report",
              rc == 0 and os.path.islink(os.path.join(plain, "link"))
              and json.load(open(victim))["schema"].startswith("mori.a2a/"), out)
        os.symlink(created, os.path.join(plain, "dangling"))
        rc, out, _ = run([*a2a, os.path.join(plain, "dangling")], timeout=60)
        check("root's own dangling symlink: exit 2 up front, nothing created through it",
              rc == 2 and one_error(out, "dangling symlink") and not os.path.exists(created), out)
    else:
        harness.not_run("--json through another user's symlink in a sticky folder", "needs root (os.lchown)")
    rc, out, _ = run(tools["mori-probe"])
    check("--json - to a working stdout: exit 0 and the document", rc == 0 and '"schema": "mori.probe/' in out, out)

    # ---- 4. A replaced report keeps its mode; a hard link keeps the old content --------------------------------
    report = os.path.join(tmp, "r.json")
    with open(report, "w") as f:
        f.write("old\n")
    os.chmod(report, 0o600)
    rc, out, _ = run([PROBE, "--backend", "host", "--json", report])
    mode = stat.S_IMODE(os.stat(report).st_mode)
    check("--json over a 0600 file: replaced, still 0600",
          rc == 0 and mode == 0o600 and json.load(open(report))["schema"].startswith("mori.probe/"),
          out + f"\nmode {oct(mode)}")
    os.chmod(report, 0o640)
    linked = os.path.join(tmp, "r-link.json")
    os.link(report, linked)
    with open(report, "w") as f:
        f.write("old\n")
    rc, out, _ = run([PROBE, "--backend", "host", "--json", report])
    check("--json over a hard-linked file: the name gets the report (0640 kept), the other link the old bytes",
          rc == 0 and open(linked).read() == "old\n" and stat.S_IMODE(os.stat(report).st_mode) == 0o640
          and os.stat(report).st_nlink == 1, out)
    fresh = os.path.join(tmp, "new.json")
    old_umask = os.umask(0o022)
    os.umask(old_umask)
    rc, out, _ = run([PROBE, "--backend", "host", "--json", fresh])
    check("--json to a new name: 0644 less the umask",
          rc == 0 and stat.S_IMODE(os.stat(fresh).st_mode) == 0o644 & ~old_umask, out)

    # ---- 5. A relative XDG_CACHE_HOME is ignored ---------------------------------------------------------------
    cwd = os.path.join(tmp, "cwd")
    os.mkdir(cwd)
    rc, out, _ = run([PROBE, *PRECOMPILE], cwd=cwd, timeout=60,
                     env={"HOME": os.path.join(tmp, "no-home"), "XDG_CACHE_HOME": "rel-cache",
                          "MORI_JIT_CACHE_DIR": "", "MORI_DISABLE_JIT": "1"})
    check("a relative XDG_CACHE_HOME: ignored (no cache folder under the working folder), and said",
          not os.path.exists(os.path.join(cwd, "rel-cache")) and "XDG_CACHE_HOME 'rel-cache'" in out, out)

    # ---- 3. The JIT cache removed under a running job ----------------------------------------------------------
    if NVRTC:
        cache = os.path.join(tmp, "vanishing", "c")
        e = dict(os.environ, MORI_JIT_CACHE_DIR=cache, MORI_JIT_VERBOSE="1")
        p = subprocess.Popen([PROBE, "--backend", "host", "--jit-precompile", "--archs", "sm_90", "--timeout-s",
                              "60"], env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             start_new_session=True)
        seen = []
        try:
            deadline = time.monotonic() + 240
            for line in iter(p.stdout.readline, b""):
                seen.append(line.decode(errors="replace"))
                if "jit: compiling a2a.hip" in seen[-1]:
                    # While a2a.hip compiles. The other kernel files compile beside it and may be adding their lock
                    # files as the folder goes: rmtree is tried again until the folder is gone.
                    for _ in range(50):
                        shutil.rmtree(os.path.join(tmp, "vanishing"), ignore_errors=True)
                        if not os.path.exists(os.path.join(tmp, "vanishing")):
                            break
                        time.sleep(0.01)
                    break
                if time.monotonic() > deadline:
                    break
            rest = p.communicate(timeout=240)[0].decode(errors="replace")
            rc = p.returncode
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            rest, rc = p.communicate()[0].decode(errors="replace"), -1
        out = "".join(seen) + rest
        # --jit-precompile exists to fill the cache: a cache gone while it compiles is a failure it names (exit 3).
        check("the JIT cache removed while compiling: a warning, then exit 3 naming the entry not in the cache",
              rc == 3 and re.search(r"warning.*jit: could not publish", out, re.I) is not None
              and re.search(r"JIT_CACHE_UNUSABLE.*not in the cache", out) is not None, out)
    else:
        print("note: no NVRTC in this build; the JIT cache case is left out")

finish()
