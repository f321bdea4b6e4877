#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The test-only fault point a2a.slow-kernel on the host runtime (docs/perf-check.md "A/B").

usage: fault_slow_kernel_test.py BIN_DIR MPIRUN...

MORI_FAULT=a2a.slow-kernel:RANK with MORI_FAULT_DELAY_NS=N makes every push of that rank N ns slower (on a GPU
each block of the kernel waits before its final signal; the host runtime's push sleeps). A functional check of
the fault, not a performance assertion: with a 20 ms delay the p50 of a row is at least most of 20 ms and above its
p50 without the fault (host-runtime rows take well under a millisecond), the run is still correct, and meta.faults says the point
fired on that rank only. A bad delay, or the point without one, is a usage error (exit 2 naming the variable)
before any rank does anything.
"""
import os
import sys
import tempfile

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/: harness.py, fixtures/
sys.path.insert(0, TESTS)
from harness import check, finish, job, load_json  # noqa: E402

if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
    print(__doc__)
    sys.exit(0)
BIN = os.path.abspath(sys.argv[1])
MPIRUN = sys.argv[2:]
A2A = os.path.join(BIN, "mori-a2a")
DELAY_NS = 20_000_000
ROW = ["--backend", "host", "--chunk-kib", "64", "--addressing", "ptr", "--sync", "device", "--warmup", "2",
       "--iters", "20", "--timeout-s", "30"]


def a2a(tmp, name, env, n=2):
    path = os.path.join(tmp, f"{name}.json")
    rc, out, _ = job([*MPIRUN, "-n", str(n), A2A, *ROW, "--json", path], env=env, timeout=120)
    return rc, out, load_json(path)


def p50s(doc):
    return [r["time_us"]["p50"] for r in (doc or {}).get("results", []) if r.get("time_us")]


with tempfile.TemporaryDirectory() as tmp:
    rc, out, plain = a2a(tmp, "plain", {})
    check("without the fault: exit 0, rows measured", rc == 0 and plain and p50s(plain), out)
    slow_env = {"MORI_FAULT": "a2a.slow-kernel:0", "MORI_FAULT_DELAY_NS": str(DELAY_NS)}
    rc, out, slow = a2a(tmp, "slow", slow_env)
    check("a2a.slow-kernel:0 with 20 ms: exit 0, no wrong element", rc == 0 and slow and slow.get("wrong") == 0, out)
    a, b = p50s(plain), p50s(slow)
    # The row's p50 with the delay is at least most of it and above the row's p50 without: not "grows by most of
    # it", since a loaded machine can slow the run without the fault to milliseconds too (seen under MPICH: 3.6 ms).
    check("every row's p50 with the fault is most of the delay or more (at least 0.9 x 20 ms), and above its p50 "
          "without; no timed bound otherwise",
          a and len(a) == len(b) and all(y >= 0.9 * DELAY_NS / 1e3 and y > x for x, y in zip(a, b)),
          f"p50 without {a}, with {b} (us)\n{out}")
    faults = ((slow or {}).get("meta") or {}).get("faults")
    check("meta.faults: the point fired on rank 0 only; meta.env records the delay",
          faults == [{"point": "a2a.slow-kernel", "rank": "0", "fired_on": [0]}]
          and slow["meta"]["env"].get("MORI_FAULT_DELAY_NS") == str(DELAY_NS), f"{faults}\n{out}")

    for value in ("0", "-5", "abc", "1e3", "10000000001", "99999999999999999999999"):
        rc, out, doc = a2a(tmp, "bad", {"MORI_FAULT": "a2a.slow-kernel:0", "MORI_FAULT_DELAY_NS": value}, n=1)
        check(f"MORI_FAULT_DELAY_NS={value}: exit 2 naming the variable, no report",
              rc == 2 and "MORI_FAULT_DELAY_NS" in out and doc is None, out)
    rc, out, doc = a2a(tmp, "unset", {"MORI_FAULT": "a2a.slow-kernel:0"}, n=1)
    check("a2a.slow-kernel without MORI_FAULT_DELAY_NS: exit 2 naming it",
          rc == 2 and "MORI_FAULT_DELAY_NS" in out and "a2a.slow-kernel" in out and doc is None, out)
    rc, out, doc = a2a(tmp, "max", {"MORI_FAULT_DELAY_NS": "10000000000"}, n=1)
    check("MORI_FAULT_DELAY_NS=10000000000 (10 s, the largest) is accepted", rc == 0 and doc, out)

finish()
