#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Every executable file in scripts/ answers --help and -h with its usage and exit 0, doing nothing else.

scripts_help_test.py [SCRIPT...]   (default: every executable regular file in scripts/, found at run time)

Each script runs twice (--help, then -h) from a copy of scripts/ (with the top-level CMakeLists.txt) in a temporary
tree, so that a script that does work anyway writes nothing into the real one; from an empty temporary working
folder, bounded in time, with stand-ins first on
the PATH for the commands that would start work (mpirun, cmake, ctest, a compiler, nvidia-smi, apt-get, torchrun,
the MPS control daemon): a stand-in that is called records its name and fails. A script passes when it exits 0,
prints something, calls none of the stand-ins, and leaves the temporary folder empty and the source tree as it was
(every file of the copy and of the real tree outside .git and the build folders: same names, sizes and
modification times). The message names the
script, the flag and what went wrong. README.md, "Scripts": "every script answers --help and -h".
"""
import os
import shutil
import stat
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
SCRIPTS = os.path.join(ROOT, "scripts")
# Commands whose call means the script started real work instead of printing its usage.
WORK = ["mpirun", "mpiexec", "orterun", "cmake", "ctest", "ninja", "make", "c++", "g++", "gcc", "clang++", "nvcc",
        "hipcc", "mpicxx", "nvidia-smi", "nvidia-cuda-mps-control", "apt-get", "apt", "dpkg", "torchrun", "pip",
        "pip3", "rocm-smi", "srun", "git-clone"]
TIMEOUT_S = 30


def executables():
    out = []
    for name in sorted(os.listdir(SCRIPTS)):
        path = os.path.join(SCRIPTS, name)
        st = os.lstat(path)
        if stat.S_ISREG(st.st_mode) and st.st_mode & 0o111:
            out.append(name)
    return out


def tree_state(root=ROOT):
    """(path -> (size, mtime_ns)) of every file of a source tree outside .git and build folders."""
    state = {}
    for top, dirs, files in os.walk(root):
        rel = os.path.relpath(top, root)
        if rel == ".":
            dirs[:] = [d for d in dirs if d != ".git" and not d.startswith("build")]
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        for f in files:
            p = os.path.join(top, f)
            try:
                st = os.lstat(p)
            except FileNotFoundError:
                continue
            state[os.path.relpath(p, root)] = (st.st_size, st.st_mtime_ns)
    return state


def make_stand_ins(folder, log):
    for name in WORK:
        p = os.path.join(folder, name)
        with open(p, "w") as f:
            f.write(f"#!/bin/sh\necho {name} >> '{log}'\necho 'stand-in {name}: called during --help' >&2\nexit 1\n")
        os.chmod(p, 0o755)


def check(name, flag, bin_dir, log, copy):
    problems = []
    before = tree_state()
    before_copy = tree_state(copy)
    with tempfile.TemporaryDirectory(prefix="mori-help-cwd-") as cwd:
        env = dict(os.environ)
        env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
        env.pop("MORI_BUILD_DIR", None)
        try:
            p = subprocess.run([os.path.join(copy, "scripts", name), flag], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=TIMEOUT_S, text=True,
                               errors="replace", start_new_session=True)
        except subprocess.TimeoutExpired:
            return [f"did not end within {TIMEOUT_S} s"]
        left = os.listdir(cwd)
    after = tree_state()
    after_copy = tree_state(copy)
    if p.returncode != 0:
        problems.append(f"exit {p.returncode}, expected 0 (stderr: {p.stderr.strip()[-300:]!r})")
    if not (p.stdout + p.stderr).strip():
        problems.append("printed nothing")
    if os.path.exists(log):
        with open(log) as f:
            called = sorted(set(f.read().split()))
        os.unlink(log)
        problems.append("started work: called " + ", ".join(called))
    if left:
        problems.append("wrote in its working folder: " + ", ".join(sorted(left)[:5]))
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    changed += sorted(k for k in set(before_copy) | set(after_copy) if before_copy.get(k) != after_copy.get(k))
    if changed:
        problems.append("wrote in the tree: " + ", ".join(sorted(set(changed))[:5]))
    return problems


def main(argv):
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    names = argv or executables()
    if not names:
        print("FAIL: no executable file in scripts/")
        return 1
    failed = 0
    with tempfile.TemporaryDirectory(prefix="mori-help-bin-") as bin_dir, \
            tempfile.TemporaryDirectory(prefix="mori-help-tree-") as copy:
        log = os.path.join(bin_dir, "called.log")
        make_stand_ins(bin_dir, log)
        shutil.copytree(SCRIPTS, os.path.join(copy, "scripts"), symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy2(os.path.join(ROOT, "CMakeLists.txt"), copy)
        for name in names:
            for flag in ("--help", "-h"):
                problems = check(name, flag, bin_dir, log, copy)
                if problems:
                    failed += 1
                    print(f"FAIL: scripts/{name} {flag}: " + "; ".join(problems))
                else:
                    print(f"ok: scripts/{name} {flag}")
    print(f"{len(names)} scripts, {failed} failure(s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
