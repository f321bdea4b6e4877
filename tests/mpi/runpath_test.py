#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The RUNPATH (or RPATH) of every tool and of the library holds no empty entry and no relative one (docs/reliability.md,
"Libraries the tools load"): the loader reads an empty entry, and a relative one, from the current folder. Each
tool is then started (--version) from a folder holding a junk file under the name of every library it needs: it
must not load any of them.

usage: runpath_test.py BIN_DIR LIBRARY...
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: harness.py
from harness import check, finish, skip  # noqa: E402

TOOLS = ["mori-a2a", "mori-probe", "mori-teardown-repro"]
BIN = sys.argv[1]
FILES = [os.path.join(BIN, t) for t in TOOLS] + sys.argv[2:]
if not shutil.which("readelf"):
    skip("readelf (binutils) is not on the PATH")


def dynamic(path):
    """(search-path entries or None, needed libraries) of an ELF file, from readelf -d."""
    out = subprocess.run(["readelf", "-d", path], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         check=False).stdout
    paths = re.findall(r"\((?:RUNPATH|RPATH)\)\s+Library r(?:un)?path: \[(.*)\]", out)
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.*)\]", out)
    return (paths[0].split(":") if paths else None), needed, out


def anchored(entry):
    return entry.startswith("/") or entry.startswith("$ORIGIN") or entry.startswith("${ORIGIN}")


for f in FILES:
    entries, needed, out = dynamic(f)
    name = os.path.basename(f)
    check(f"{name}: readelf reads it and it needs libraries", bool(needed), out)
    if entries is None:
        print(f"note: {name} has no RUNPATH or RPATH")
        continue
    check(f"{name}: no empty entry in its RUNPATH {':'.join(entries)!r}", all(entries), out)
    check(f"{name}: every entry absolute or $ORIGIN-relative", all(anchored(e) for e in entries if e), out)

with tempfile.TemporaryDirectory(prefix="mori-runpath-") as cwd:
    junk = set()
    for f in FILES:
        junk |= set(dynamic(f)[1])
    for lib in junk:
        with open(os.path.join(cwd, lib), "w") as fh:
            fh.write("not a library\n")
    for t in TOOLS:
        p = subprocess.run([os.path.abspath(os.path.join(BIN, t)), "--version"], cwd=cwd, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, errors="replace", timeout=60)
        check(f"{t} --version from a folder of junk files named {', '.join(sorted(junk))[:80]}...: exit 0",
              p.returncode == 0 and t in p.stdout, p.stdout)
finish()
