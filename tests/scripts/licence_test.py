#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The licence (LICENSE, MIT): the LICENSE file names the licence and the copyright holder, and every tracked
source file (C++, HIP, Python, shell, CMake; data, JSON and prose exempt) carries the line
`SPDX-License-Identifier: MIT` in a comment of its own language.

usage: licence_test.py [ROOT]
"""
import os
import re
import subprocess
import sys

TAG = "SPDX-License-Identifier: MIT"
HOLDER = "the mori symmetric-memory tools authors"
CXX = (".cpp", ".hpp", ".h", ".hip", ".cu", ".cpp.in", ".h.in")
HASH = (".py", ".sh", ".cmake")
EXEMPT = ("tests/fixtures/",)


def kind_of(path, root="."):
    """'cxx' (// comments), 'hash' (# comments) or None (not a source file) for a repository path."""
    if path.startswith(EXEMPT):
        return None
    name = os.path.basename(path)
    if path.endswith(CXX):
        return "cxx"
    if path.endswith(HASH) or name == "CMakeLists.txt":
        return "hash"
    try:
        with open(os.path.join(root, path), "rb") as f:
            first = f.readline(200)
    except OSError:
        return None
    if re.match(rb"#!.*\b(bash|sh|python3?)\b", first):
        return "hash"
    return None


def tracked(root):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files"], capture_output=True, text=True, check=True).stdout
        return [f for f in out.split("\n") if f]
    except (OSError, subprocess.CalledProcessError):  # a copy of the tree without .git: every file but builds
        out = []
        for d, ds, fs in os.walk(root):
            ds[:] = [x for x in ds if x not in (".git", "__pycache__") and not x.startswith("build")]
            out += [os.path.relpath(os.path.join(d, f), root) for f in fs]
        return sorted(out)


def main(argv):
    root = os.path.abspath(argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), "..", ".."))
    bad = []
    lic = os.path.join(root, "LICENSE")
    text = open(lic).read() if os.path.isfile(lic) else ""
    if not text.startswith("MIT License") or HOLDER not in text:
        bad.append(f"LICENSE: not the MIT licence of {HOLDER}")
    n = 0
    for rel in tracked(root):
        path = os.path.join(root, rel)
        if not os.path.isfile(path) or os.path.islink(path):
            continue
        k = kind_of(rel, root)
        if not k:
            continue
        n += 1
        mark = ("// " if k == "cxx" else "# ") + TAG
        with open(path, encoding="utf-8", errors="replace") as f:
            if not any(line.strip() == mark for line in f):
                bad.append(f"{rel}: no line '{mark}'")
    for b in bad:
        print(f"licence: {b}")
    print(f"licence: {n} source files, {len(bad)} problem(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
