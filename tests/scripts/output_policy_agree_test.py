#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The output-file policy written once: the tools' --json check and writer (lib/src/base/files.cpp, through
check_output_path in lib/src/tool/tool.cpp) are the source, and the scripts' check (check_output_file in
scripts/mori_results/files.py) must give the same verdict on every kind of path. Each case is built in a folder of
its own; check_output_file is asked first, then `mori-probe --backend host --json PATH` runs on it: exit 0 with a
regular file at PATH is "accept", exit 2 with one line "mori-probe: ..." on stderr is "refuse", anything else is
"exit N" (a disagreement either way). A refusal must leave the case's folder as it was; an acceptance must leave no
temporary file. Fails on any disagreement, printing the table of verdicts.

usage: output_policy_agree_test.py MORI_PROBE
"""
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/: harness.py
ROOT = os.path.dirname(TESTS)
sys.path.insert(0, TESTS)
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from harness import check, finish  # noqa: E402
from mori_results.errors import Usage  # noqa: E402
from mori_results.files import check_output_file  # noqa: E402


def touch(path):
    with open(path, "w", encoding="utf-8") as f:
        f.write("{}\n")
    return path


def link(d, target, name="link"):
    os.symlink(target, os.path.join(d, name))
    return os.path.join(d, name)


def folder(d, name="sub"):
    os.mkdir(os.path.join(d, name))
    return os.path.join(d, name)


def unix_socket(d):
    path = os.path.join(d, "sock")
    if len(os.fsencode(path)) >= 100:
        print(f"SKIP case 'a unix socket': {path} is too long for a socket address")
        return None
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.bind(path)
    return path


def read_only_new(d):
    if os.geteuid() == 0:
        print("SKIP case 'a new name in a read-only folder': running as root, which may write into any folder")
        return None
    ro = folder(d, "ro")
    os.chmod(ro, 0o555)
    return os.path.join(ro, "new.json")


def loop(d):
    link(d, "b", "a")
    link(d, "a", "b")
    return os.path.join(d, "a")


# (case, builder: the case's folder -> the path to ask about, None = skipped with a printed reason).
CASES = [
    ("a regular file", lambda d: touch(os.path.join(d, "f.json"))),
    ("a new name", lambda d: os.path.join(d, "new.json")),
    ("a new name under a missing folder", lambda d: os.path.join(d, "missing", "new.json")),
    ("a new name under a regular file", lambda d: os.path.join(touch(os.path.join(d, "f")), "new.json")),
    ("a folder", folder),
    ("a FIFO", lambda d: os.mkfifo(os.path.join(d, "fifo")) or os.path.join(d, "fifo")),
    ("/dev/null", lambda d: "/dev/null"),
    ("a unix socket", unix_socket),
    ("a symlink to a regular file", lambda d: link(d, touch(os.path.join(d, "f.json")))),
    ("a symlink to a folder", lambda d: link(d, folder(d))),
    ("a new name through a symlink to a folder", lambda d: os.path.join(link(d, folder(d)), "new.json")),
    ("a dangling symlink", lambda d: link(d, os.path.join(d, "nothing.json"))),
    ("a symlink loop", loop),
    ("a new name under a symlink loop", lambda d: os.path.join(loop(d), "new.json")),
    ("a symlink to /dev/null", lambda d: link(d, "/dev/null")),
    ("a regular file + trailing slash", lambda d: touch(os.path.join(d, "f.json")) + "/"),
    ("a new name + trailing slash", lambda d: os.path.join(d, "new") + "/"),
    ("an empty string", lambda d: ""),
    ("a new name with a non-UTF-8 byte", lambda d: os.path.join(d, os.fsdecode(b"caf\xe9.json"))),
    ("a new name in a read-only folder", read_only_new),
]


def snapshot(d):
    """Every entry under d (links not followed): relative name -> (type, inode, size, mtime)."""
    out = {}
    for top, dirs, names in os.walk(d):
        for n in dirs + names:
            p = os.path.join(top, n)
            st = os.lstat(p)
            out[os.path.relpath(p, d)] = (stat.S_IFMT(st.st_mode), st.st_ino, st.st_size, st.st_mtime_ns)
    return out


def python_verdict(path):
    try:
        check_output_file(path, "--json")
    except Usage as e:
        return "refuse", str(e)
    return "accept", "accepted"


def cxx_verdict(probe, path, d, cwd):
    """(verdict, what the tool said, problems: what a refusal changed or an acceptance left behind)."""
    before = snapshot(d)
    p = subprocess.run([probe, "--backend", "host", "--json", path], cwd=cwd, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, timeout=60)
    said = [s for s in p.stderr.decode(errors="replace").splitlines() if s.startswith("mori-probe:")]
    after = snapshot(d)
    temporaries = [n for n in after if ".mori-json-" in n]
    if p.returncode == 2 and len(said) == 1:
        changed = sorted(n for n in set(before) | set(after) if before.get(n) != after.get(n))
        return "refuse", said[0], [f"changed by a refused call: {changed}"] if changed else []
    if p.returncode == 0:
        left = [f"temporary files left: {temporaries}"] if temporaries else []
        return "accept", "accepted", left + ([] if os.path.isfile(path.rstrip("/")) else ["no regular file there"])
    return f"exit {p.returncode}", " | ".join(said) or p.stderr.decode(errors="replace")[-300:], []


def run_case(probe, top, i, name, build):
    """-> (case, C++ verdict, Python verdict), None where skipped; the case's folder removed after."""
    d = os.path.join(top, f"case{i}")
    os.mkdir(d)
    try:
        path = build(d)
        if path is None:
            return None
        py, py_said = python_verdict(path)
        cxx, cxx_said, problems = cxx_verdict(probe, path, d, top)
    finally:
        for sub, _, _ in os.walk(d):
            os.chmod(sub, 0o755)
        shutil.rmtree(d)
    shown = repr(path) if path and path.isprintable() and path.isascii() else ascii(path)
    check(f"{name}: C++ and Python agree ({cxx})", cxx == py,
          f"  path: {shown}\n  C++ ({cxx}): {cxx_said}\n  Python ({py}): {py_said}")
    if problems:
        check(f"{name}: nothing created where refused, nothing left where accepted", False, "\n".join(problems))
    return name, cxx, py


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[-1])
    probe = os.path.abspath(sys.argv[1])
    with tempfile.TemporaryDirectory(prefix="mori-output-policy-") as top:
        rows = [r for i, (name, build) in enumerate(CASES) if (r := run_case(probe, top, i, name, build))]
    width = max(len(r[0]) for r in rows)
    print(f"\n{'case':<{width}}  {'C++':<8}  {'Python':<8}  agree")
    for name, cxx, py in rows:
        print(f"{name:<{width}}  {cxx:<8}  {py:<8}  {'yes' if cxx == py else 'NO'}")
    finish()


if __name__ == "__main__":
    main()
