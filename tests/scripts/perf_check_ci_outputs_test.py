#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""scripts/perf-check's outputs for a CI system (docs/ci.md): --junit FILE (JUnit XML, one test case per verdict:
SLOWER and MISSING fail, CANNOT_JUDGE is skipped with its reason, wrong elements a failing case), --markdown FILE
(a job summary table, failures first), and a baseline of another machine refused in one line naming both (exit 2,
not a screen of MISSING rows). On the committed 2 x H200 fixture (tests/fixtures/h200-a2a-w2-r1.json), its spread
tightened so that the margin alone decides.

usage: perf_check_ci_outputs_test.py
"""
import copy
import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: harness.py
from harness import check, finish  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
CHECK = os.path.join(ROOT, "scripts", "perf-check")
FIX = os.path.join(ROOT, "tests", "fixtures")


def run(*args):
    p = subprocess.run([sys.executable, CHECK, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=60)
    return p.returncode, p.stdout


base = json.load(open(os.path.join(FIX, "h200-a2a-w2-r1.json")))
for r in base["results"]:
    if r["time_us"].get("p50") is not None and r["time_us"].get("p95") is not None:
        r["time_us"]["p95"] = r["time_us"]["p50"] * 1.01
DEV = next(i for i, r in enumerate(base["results"]) if r["sync"] == "device")

with tempfile.TemporaryDirectory() as tmp:
    def write(name, doc):
        p = os.path.join(tmp, name)
        with open(p, "w") as f:
            json.dump(doc, f)
        return p

    slow = copy.deepcopy(base)
    r = slow["results"][DEV]
    for k in ("total_bw_gbps", "agg_bw_gbps", "algbw_gbps", "busbw_gbps"):
        r[k] *= 0.5
    r["time_us"]["p50"] *= 2
    b, c = write("base.json", base), write("slow.json", slow)
    junit, md = os.path.join(tmp, "gate.xml"), os.path.join(tmp, "gate.md")
    rc, out = run(b, c, "--junit", junit, "--markdown", md)
    check("a 2x slower device-sync row: exit 1", rc == 1 and "SLOWER" in out, out)
    try:
        suite = ET.parse(junit).getroot().find("testsuite")
    except (OSError, ET.ParseError) as e:
        suite = None
        out += f"\n{e}"
    cases = suite.findall("testcase") if suite is not None else []
    failed = [x for x in cases if x.find("failure") is not None]
    skipped = [x for x in cases if x.find("skipped") is not None]
    verdict_lines = [ln for ln in out.splitlines() if ln.rstrip().endswith(("SAME", "SLOWER", "FASTER", "MISSING",
                                                                          "CANNOT_JUDGE"))]
    check(f"JUnit: one test case per verdict and one for wrong elements ({len(cases)} cases, "
          f"{len(verdict_lines)} verdicts)", suite is not None and len(cases) == len(verdict_lines) + 1, out)
    check("JUnit: the SLOWER verdicts fail, naming the metric and the change; the counts agree",
          len(failed) == sum("SLOWER" in ln for ln in verdict_lines) > 0
          and all("SLOWER" in x.find("failure").get("message") for x in failed)
          and suite.get("failures") == str(len(failed)) and suite.get("skipped") == str(len(skipped)),
          ET.tostring(suite).decode()[:3000] if suite is not None else out)
    text = open(md).read() if os.path.exists(md) else ""
    rows = [ln for ln in text.splitlines() if ln.startswith("| ") and not ln.startswith("| verdict")
            and not ln.startswith("| ---")]
    check("Markdown: FAIL, one table row per verdict, the slower ones first and in bold",
          text.startswith("## perf-check: FAIL") and len(rows) == len(verdict_lines)
          and rows[0].startswith("| **SLOWER**"), text[:3000])

    rc, out = run(b, write("same.json", base), "--junit", junit, "--markdown", md)
    suite = ET.parse(junit).getroot().find("testsuite")
    check("identical runs: exit 0, no failing case, Markdown PASS",
          rc == 0 and suite.get("failures") == "0" and open(md).read().startswith("## perf-check: PASS"), out)

    few = copy.deepcopy(base)
    for x in few["results"]:
        x["samples"] = 5
    rc, out = run(write("few.json", few), write("few2.json", few), "--junit", junit)
    suite = ET.parse(junit).getroot().find("testsuite")
    sk = [x.find("skipped") for x in suite.findall("testcase") if x.find("skipped") is not None]
    check("CANNOT_JUDGE (too few samples): skipped cases that say why, not passes or failures",
          rc == 0 and sk and all(s.get("message", "").startswith("cannot judge: ") for s in sk)
          and suite.get("failures") == "0", ET.tostring(suite).decode()[:2000])

    gone = copy.deepcopy(base)
    gone["results"] = [x for i, x in enumerate(gone["results"]) if i != DEV]
    rc, out = run(b, write("gone.json", gone), "--junit", junit)
    suite = ET.parse(junit).getroot().find("testsuite")
    check("a configuration missing from the current run: a failing case",
          rc == 1 and any("missing" in (x.find("failure").get("message") if x.find("failure") is not None else "")
                          for x in suite.findall("testcase")), out)
    rc, out = run(b, write("gone.json", gone), "--junit", junit, "--allow-missing")
    suite = ET.parse(junit).getroot().find("testsuite")
    check("... with --allow-missing: skipped with its reason, exit 0", rc == 0 and suite.get("failures") == "0", out)

    odd = copy.deepcopy(base)
    for x in odd["meta"].get("ranks", []):
        x["device_name"] = "GPU\x01 | <b>&"
    rc, out = run(write("odd-b.json", odd), write("odd-c.json", odd), "--junit", junit, "--markdown", md)
    try:
        ET.parse(junit)
        parsed = True
    except ET.ParseError as e:
        parsed, out = False, out + f"\n{e}"
    check("a device name with a control byte, a bar and markup: the XML still parses, the Markdown table holds",
          rc == 0 and parsed and all(ln.count(" | ") == 7 for ln in open(md).read().splitlines() if ln.startswith("| "))
          and "\\|" in open(md).read(), out + open(md).read()[:2000])

    rc, out = run(b, os.path.join(FIX, "a2a-host-w4.json"), "--junit", junit)
    lines = [ln for ln in out.splitlines() if ln.strip()]
    check("a baseline of another machine: exit 2, one line naming both machines, no MISSING rows",
          rc == 2 and len(lines) == 1 and "other machines" in out and "H200" in out and "host" in out
          and "MISSING" not in out, out)
    rc, out = run(b, c, "--junit", os.path.join(tmp, "no", "such", "dir.xml"))
    check("--junit into a folder that does not exist: exit 2 before any work", rc == 2 and "--junit" in out, out)
finish()
