#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""scripts/perf-check on every pair of committed reruns (docs/perf-check.md "What one baseline run cannot judge").

Every mori.a2a document under results/ (lab/ aside: explorations of modified trees, whose revision does not name the
code) is grouped by its revision, machine (platform and GPU models: one revision's evidence on an H100 and on an
H200 are two groups, which perf-check would refuse to compare), world and command (meta.argv without the tool's
path and the --json path, and meta.env); every ordered pair of one group is gated, one run as BASELINE and the other as CURRENT. Each must pass:
exit 0, no SLOWER, no MISSING; what the gate cannot judge from one run is CANNOT_JUDGE with its reason. Then, for
every one of those runs that holds 256 KiB graph rows, a copy of it with those rows 10 % slower must fail against it
(exit 1, each of those rows SLOWER on time_p50_us; its total_bw_gbps, 9.1 % lower, SLOWER too where the row's
allowance is below 9.1 %): the gate that passes reruns still sees a 10 % slowdown.
usage: perf_check_reruns_test.py
"""
import copy
import itertools
import json
import os
import subprocess
import sys
import tempfile

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/: harness.py, fixtures/
ROOT = os.path.dirname(TESTS)
sys.path.insert(0, TESTS)
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from harness import check, finish  # noqa: E402
from mori_results.documents import load_documents  # noqa: E402

PERF = os.path.join(ROOT, "scripts", "perf-check")
RESULTS = os.path.join(ROOT, "results")


def command(meta):
    argv = list(meta.get("argv") or [])[1:]
    out, skip = [], False
    for a in argv:
        if skip:
            skip = False
        elif a == "--json":
            skip = True
        else:
            out.append(a)
    return out


def groups():
    by = {}
    for d in load_documents([RESULTS], accept=["mori.a2a"], skip_folders=("schema", "lab")):
        meta = d.doc["meta"]
        gpus = sorted({str(r.get("device_name")) for r in meta.get("ranks") or [] if isinstance(r, dict)})
        key = json.dumps([d.tag, meta.get("git_revision"), meta.get("platform"), gpus, meta.get("world"),
                          command(meta), meta.get("env")], sort_keys=True)
        by.setdefault(key, []).append(d)
    return [v for v in by.values() if len(v) > 1]


def perf(base, cur, out_json):
    p = subprocess.run([sys.executable, PERF, base, cur, "--json", out_json], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=120)
    try:
        with open(out_json) as f:
            v = json.load(f)
    except (OSError, ValueError):
        v = {}
    return p.returncode, p.stdout, v


def rel(p):
    return os.path.relpath(p, ROOT)


found = groups()
pairs = [(a, b) for g in found for a, b in itertools.permutations(g, 2)]
names = {(rel(a.path), rel(b.path)) for a, b in pairs}
named = [("results/h200/protocol-sweep-scope/w8-programmatic-r1.json",
          "results/h200/protocol-sweep-scope/w8-programmatic-r2.json"),
         ("results/h200x2/protocol-sweep/all/w2-r2.json", "results/h200x2/protocol-sweep/all/w2-r1.json")]
check(f"{len(found)} groups of committed reruns found ({len(pairs)} ordered pairs), among them two known rerun "
      "pairs (h200 protocol-sweep-scope, h200x2 protocol-sweep)", len(pairs) >= 2 and all(n in names for n in named),
      "\n".join(sorted(map(str, names))))

slowed = 0
with tempfile.TemporaryDirectory(prefix="mori-reruns-") as tmp:
    for i, (a, b) in enumerate(pairs):
        j = os.path.join(tmp, f"v{i}.json")
        rc, out, v = perf(a.path, b.path, j)
        verdicts = v.get("verdicts") or []
        bad = [x["result"] + " " + x["metric"] + " " + x["verdict"] for x in verdicts
               if x["verdict"] in ("SLOWER", "MISSING")]
        unjudged = [x for x in verdicts if x["verdict"] == "CANNOT_JUDGE"]
        check(f"{rel(b.path)} against {rel(a.path)}: exit 0, nothing SLOWER or MISSING, every CANNOT_JUDGE with "
              f"its reason ({len(unjudged)} of {len(verdicts)})",
              rc == 0 and verdicts and not bad and v.get("cannot_judge") == len(unjudged)
              and all(x.get("why") for x in unjudged) and f"{len(unjudged)} cannot judge" in out,
              "\n".join(bad) + "\n" + out[-4000:])

    # Each run as the baseline of a copy of itself with its 256 KiB graph rows 10 % slower.
    for i, b in enumerate(sorted({d.path: d for g in found for d in g}.values(), key=lambda d: d.path)):
        doc = copy.deepcopy(b.doc)
        hit = 0
        for r in doc["results"]:
            if r.get("chunk_bytes") == 256 << 10 and r.get("graph") and r.get("addressing") in ("ptr", "lsa"):
                r["time_us"] = {k: (x * 1.10 if isinstance(x, (int, float)) else x) for k, x in r["time_us"].items()}
                for k in ("total_bw_gbps", "agg_bw_gbps", "algbw_gbps", "busbw_gbps"):
                    if isinstance(r.get(k), (int, float)):
                        r[k] /= 1.10
                hit += 1
        if not hit:
            continue
        slowed += 1
        sp = os.path.join(tmp, f"slow{i}.json")
        with open(sp, "w") as f:
            json.dump(doc, f)
        rc, out, v = perf(b.path, sp, os.path.join(tmp, f"s{i}.json"))
        graph256 = [x for x in v.get("verdicts") or [] if x["identity"]["chunk_bytes"] == 256 << 10
                    and x["identity"]["graph"] and x["identity"]["system"] == "mori-a2a"]
        check(f"{rel(b.path)} against a copy with its {hit} 256 KiB graph row(s) 10 % slower: exit 1, each row's "
              "p50 SLOWER (and its bandwidth where the allowance is below the 9.1 % drop)",
              rc == 1 and len(graph256) == 2 * hit
              and all(x["verdict"] == "SLOWER" for x in graph256 if x["metric"] == "time_p50_us")
              and all(x["verdict"] == "SLOWER" for x in graph256 if x["allowance"] < 1 - 1 / 1.10),
              "\n".join(f"{x['result']} {x['metric']} {x['verdict']} delta {x['delta']} allowance {x['allowance']}"
                        for x in graph256) + "\n" + out[-2000:])
    check("the slowdown was tried on at least one committed run", slowed > 0)

    # Every --json written above is a valid mori.perf-check/4 (where python jsonschema is installed; without it
    # validate-json still parses each file and says so).
    p = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "validate-json"), tmp], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=120)
    check("every verdict file validates against results/schema/perf-check.schema.json",
          p.returncode == 0 and "invalid" not in p.stdout and "perf-check/3" not in p.stdout, p.stdout[-3000:])

    # What it cannot judge, and why, on the two pairs the issue names.
    rc, out, v = perf(os.path.join(ROOT, named[0][0]), os.path.join(ROOT, named[0][1]), os.path.join(tmp, "n0.json"))
    eager64 = [x for x in v.get("verdicts") or [] if x["identity"]["chunk_bytes"] == 64 << 10
               and not x["identity"]["graph"] and x["identity"]["protocol"] == "direct"]
    check("the 64 KiB eager direct row (p95/p50 23 % within the baseline run): CANNOT_JUDGE, too noisy for one run, "
          "naming --ab",
          eager64 and all(x["verdict"] == "CANNOT_JUDGE" and "--ab" in x["why"] and "noisy" in x["why"]
                          for x in eager64) and "cannot judge: too noisy" in out, out[-3000:])
    rc, out, v = perf(os.path.join(ROOT, named[1][1]), os.path.join(ROOT, named[1][0]), os.path.join(tmp, "n1.json"))
    check("w2-r2 against w2-r1 (one ran under MPS, the other not): every row CANNOT_JUDGE naming MPS, none MISSING",
          v.get("verdicts") and all(x["verdict"] == "CANNOT_JUDGE" and "MPS" in x["why"] for x in v["verdicts"])
          and v.get("missing") == 0 and rc == 0, out[-3000:])
finish()
