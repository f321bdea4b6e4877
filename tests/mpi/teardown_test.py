#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""mori-teardown-repro on the host runtime with real mpirun jobs.

usage: teardown_test.py BIN_DIR MPIRUN...
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: harness.py
import harness  # noqa: E402
from harness import check, finish  # noqa: E402
import tempfile

BIN = sys.argv[1]
MPIRUN = sys.argv[2:]
TOOL = os.path.join(BIN, "mori-teardown-repro")



def job(n, args, env=None):
    return harness.tool_job(MPIRUN, n, TOOL, args, env)


def summarize(d):
    out = d + ".json"
    p = subprocess.run([TOOL, "--backend", "host", "--summarize", d, "--json", out], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=60)
    return p.returncode, json.load(open(out)) if os.path.exists(out) else None, p.stdout


with tempfile.TemporaryDirectory() as tmp:
    for n in (2, 4):
        d = os.path.join(tmp, f"all-{n}")
        rc, out = job(n, ["--scenario", "all", "--journal-dir", d, "--size", "256K", "--cycles", "5"])
        check(f"all scenarios at {n} ranks: job exit 0", rc == 0, out)
        rc2, doc, out2 = summarize(d)
        got = {s["name"]: (s["outcome"], s["expected"]) for s in doc["scenarios"]} if doc else {}
        check(f"all scenarios at {n} ranks: 11 scenarios, each its expected outcome {got}",
              rc2 == 0 and len(got) == 11 and all(o == e for o, e in got.values())
              and got.get("free-before-unmap", ("",))[0] == "api_error" and got.get("leak", ("",))[0] == "leak",
              out + out2)

    # A crash injected at a named step: the report names the rank and the step.
    d = os.path.join(tmp, "crash")
    rc, out = job(2, ["--scenario", "ordered", "--journal-dir", d], {"MORI_FAULT": "teardown.unmap_slot.crash:1"})
    rc2, doc, out2 = summarize(d)
    s = doc["scenarios"][0] if doc else {}
    check("injected crash: job fails, report says SIGSEGV on rank 1 in step unmap_slot",
          rc != 0 and rc2 == 1 and s.get("outcome") == "crash"
          and "SIGSEGV on rank 1 in step unmap_slot" in s.get("detail", ""), out + out2)

    # A step that hangs: the watchdog names it.
    d = os.path.join(tmp, "hang")
    rc, out = job(2, ["--scenario", "ordered", "--journal-dir", d, "--timeout-s", "2"],
                  {"MORI_FAULT": "teardown.release_slot.hang:0"})
    rc2, doc, out2 = summarize(d)
    s = doc["scenarios"][0] if doc else {}
    check("hang: outcome hang naming the step", s.get("outcome") == "hang" and "release_slot" in s.get("detail", ""),
          out + out2)

    # 200 cycles: no fd and no mapping growth.
    d = os.path.join(tmp, "cycles")
    rc, out = job(2, ["--scenario", "cycles", "--cycles", "200", "--journal-dir", d, "--size", "64K"])
    rc2, doc, out2 = summarize(d)
    ok = rc == 0 and doc is not None
    if ok:
        for r in doc["scenarios"][0]["ranks"]:
            cyc = r["cycles"]
            ok = ok and len(cyc) == 200 and cyc[-1]["fds"] == cyc[0]["fds"] and cyc[-1]["mappings"] == cyc[0]["mappings"] \
                and cyc[-1]["handles"] == cyc[0]["handles"]
    check("200 cycles: fd, handle and mapping counts flat", ok, out + out2)

    # Bad input: exit 2 with one line naming the option, and nothing left behind.
    d = os.path.join(tmp, "bad")
    rc, out = job(2, ["--scenario", "nope", "--journal-dir", d])
    check("unknown scenario: exit 2 naming the option", rc == 2 and "--scenario: unknown 'nope'" in out
          and not os.path.exists(d), out)

finish()
