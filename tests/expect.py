#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Runs a command and checks its exit code and output: the harness for tests that must fail in a given way.

expect.py --code 2 [--code 3] [--grep REGEX --count N] [--absent REGEX] [--within S] -- command ...
--count N: at least N matches of REGEX in the output (e.g. one per rank), counted line by line, several on one line
where a launcher joined two ranks' lines. --within: the command must end in S seconds.
"""
import argparse
import re
import subprocess
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--code", type=int, action="append", required=True)
    ap.add_argument("--grep", action="append", default=[])
    ap.add_argument("--count", type=int, action="append", default=[])
    ap.add_argument("--absent", action="append", default=[])
    ap.add_argument("--within", type=float, default=120)
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=a.within, text=True)
    except subprocess.TimeoutExpired as e:
        out = e.output.decode() if isinstance(e.output, bytes) else (e.output or "")
        print(out)
        print(f"FAIL: did not end within {a.within} s")
        return 1
    dt = time.monotonic() - t0
    print(p.stdout)
    ok = True
    if p.returncode not in a.code:
        print(f"FAIL: exit code {p.returncode}, expected {a.code}")
        ok = False
    lines = p.stdout.splitlines()
    for i, rx in enumerate(a.grep):
        want = a.count[i] if i < len(a.count) else 1
        n = sum(1 for line in lines for _ in re.finditer(rx, line))
        if n < want:
            print(f"FAIL: {n} match(es) of /{rx}/, expected at least {want}")
            ok = False
    for rx in a.absent:
        if any(re.search(rx, line) for line in lines):
            print(f"FAIL: output matches /{rx}/")
            ok = False
    print(f"{'PASS' if ok else 'FAIL'}: exit {p.returncode} after {dt:.1f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
