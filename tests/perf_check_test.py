#!/usr/bin/env python3
"""scripts/perf-check on fixture JSON: each case must give its exit code and say why."""
import copy
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import check, finish  # noqa: E402
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
CHECK = os.path.join(ROOT, "scripts", "perf-check")
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "a2a-host-w4.json")


def run(*args):
    p = subprocess.run([sys.executable, CHECK, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return p.returncode, p.stdout



base = json.load(open(FIXTURE))
with tempfile.TemporaryDirectory() as tmp:
    def write(name, doc):
        p = os.path.join(tmp, name)
        with open(p, "w") as f:
            json.dump(doc, f) if not isinstance(doc, str) else f.write(doc)
        return p

    def scaled(bw_factor, first_only=True):
        d = copy.deepcopy(base)
        for i, r in enumerate(d["results"]):
            if first_only and i:
                continue
            for k in ("total_bw_gbps", "agg_bw_gbps", "algbw_gbps", "busbw_gbps"):
                r[k] *= bw_factor
            r["time_us"]["p50"] /= bw_factor
        return d

    # A baseline with a tight spread, so that only the tolerance decides.
    tight = copy.deepcopy(base)
    for r in tight["results"]:
        r["time_us"]["p95"] = r["time_us"]["p50"] * 1.01
    b = write("base.json", tight)

    rc, out = run(b, write("same.json", tight))
    check("identical runs: exit 0", rc == 0 and "0 slower" in out, out)
    rc, out = run(b, write("drop.json", scaled(0.90)))
    check("10% bandwidth drop: exit 1 naming the metric", rc == 1 and "total_bw_gbps" in out and "SLOWER" in out, out)
    rc, out = run(b, write("small.json", scaled(0.97)))
    check("3% change inside the 5% tolerance: exit 0", rc == 0, out)
    noisy = copy.deepcopy(tight)
    noisy["results"][0]["time_us"]["p95"] = noisy["results"][0]["time_us"]["p50"] * 1.20
    rc, out = run(write("noisy-base.json", noisy), write("drop2.json", scaled(0.90)))
    check("10% drop inside a noisy baseline's 20% spread: exit 0", rc == 0, out)
    rc, out = run(b, write("faster.json", scaled(1.5)))
    check("faster: exit 0, verdict FASTER", rc == 0 and "FASTER" in out, out)
    fewer = copy.deepcopy(tight)
    fewer["results"] = fewer["results"][1:]
    rc, out = run(b, write("missing.json", fewer))
    check("missing result: exit 1, MISSING", rc == 1 and "MISSING" in out, out)
    rc, out = run(b, os.path.join(tmp, "missing.json"), "--allow-missing")
    check("missing result with --allow-missing: exit 0", rc == 0 and "MISSING" in out, out)
    wrong = copy.deepcopy(tight)
    wrong["results"][1]["wrong"] = 3
    rc, out = run(b, write("wrong.json", wrong))
    check("wrong > 0: exit 1", rc == 1 and "3 wrong" in out, out)
    bad = write("bad.json", "{not json")
    rc, out = run(b, bad)
    check("malformed JSON: exit 2 naming the file and the reason", rc == 2 and "bad.json" in out and "Expecting" in out, out)
    rc, out = run(b, write("shape.json", {"schema": "mori.a2a/1", "meta": {}}))
    check("a2a document without results: exit 2", rc == 2 and "not a valid mori.a2a document" in out, out)
    j = os.path.join(tmp, "verdicts.json")
    rc, out = run(b, os.path.join(tmp, "drop.json"), "--json", j)
    v = json.load(open(j)) if os.path.exists(j) else {}
    check("--json verdicts", rc == 1 and v.get("slower", 0) >= 1 and v.get("passed") is False, out)
    rc, out = run(b, b, "--tolerance", "-1")
    check("bad --tolerance: exit 2", rc == 2, out)

finish()
