#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""scripts/perf-check on fixture JSON: each case must give its exit code and say why.

Fixtures (tests/fixtures/README.md): h200-a2a-w2-r1.json (mori.a2a/2, trimmed from a real 2xH200 run),
h200-compare-w2.json (mori.a2a/2 from scripts/compare: NCCL, nccl-tests, torch SymmetricMemory and copied mori
rows), a2a-host-w4.json (mori.a2a/2 from the host runtime) and a2a-host-w4-v1.json (mori.a2a/1, kept to show that
old baselines stay readable).
"""
import copy
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: harness.py
from harness import check, finish  # noqa: E402
import shutil
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
CHECK = os.path.join(ROOT, "scripts", "perf-check")
FIX = os.path.join(ROOT, "tests", "fixtures")
FIXTURE = os.path.join(FIX, "h200-a2a-w2-r1.json")
COMPARE = os.path.join(FIX, "h200-compare-w2.json")
V1 = os.path.join(FIX, "a2a-host-w4-v1.json")
HOST = os.path.join(FIX, "a2a-host-w4.json")


def run(*args):
    """perf-check's exit code and output; (None, "timed out") where it hangs (a FIFO, a device)."""
    try:
        p = subprocess.run([sys.executable, CHECK, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=60)
    except subprocess.TimeoutExpired:
        return None, "timed out"
    return p.returncode, p.stdout


base = json.load(open(FIXTURE))
assert base["schema"] == "mori.a2a/2"
v1 = json.load(open(V1))
assert v1["schema"] == "mori.a2a/1"
cmp_doc = json.load(open(COMPARE))
with tempfile.TemporaryDirectory() as tmp:
    def write(name, doc):
        p = os.path.join(tmp, name)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            json.dump(doc, f) if not isinstance(doc, str) else f.write(doc)
        return p

    def tighten(doc):
        d = copy.deepcopy(doc)
        for r in d["results"]:
            if r["time_us"].get("p50") is not None and r["time_us"].get("p95") is not None:
                r["time_us"]["p95"] = r["time_us"]["p50"] * 1.01
        return d

    # A baseline with a tight spread, so that only the tolerance decides.
    tight = tighten(base)
    # The row slowed below: the first device-sync row (a host-sync row is not judged from one run, below).
    DEV = next(i for i, r in enumerate(tight["results"]) if r["sync"] == "device")
    HOSTSYNC = next(i for i, r in enumerate(tight["results"]) if r["sync"] == "host")

    def scaled(bw_factor, first_only=True, doc=tight, at=DEV):
        d = copy.deepcopy(doc)
        for i, r in enumerate(d["results"]):
            if first_only and i != at:
                continue
            for k in ("total_bw_gbps", "agg_bw_gbps", "algbw_gbps", "busbw_gbps"):
                r[k] *= bw_factor
            r["time_us"]["p50"] /= bw_factor
        return d

    b = write("base.json", tight)
    rc, out = run(b, write("same.json", tight))
    check("identical runs: exit 0", rc == 0 and "0 slower" in out, out)
    rc, out = run(b, write("drop.json", scaled(0.90)))
    check("10% bandwidth drop: exit 1 naming the metric", rc == 1 and "total_bw_gbps" in out and "SLOWER" in out, out)
    first = tight["results"][DEV]
    check("the key names the protocol", any(first["protocol"] in line and "SLOWER" in line for line in out.splitlines()),
          out)
    rc, out = run(b, write("small.json", scaled(0.97)))
    check("3% change inside the 5% tolerance: exit 0", rc == 0, out)
    noisy = copy.deepcopy(tight)
    noisy["results"][DEV]["time_us"]["p95"] = noisy["results"][DEV]["time_us"]["p50"] * 1.30
    rc, out = run(write("noisy-base.json", noisy), write("drop2.json", scaled(0.90)))
    check("10% drop inside half a noisy baseline's 30% p95/p50 spread: exit 0", rc == 0, out)
    rc, out = run(b, write("faster.json", scaled(1.5)))
    check("faster: exit 0, verdict FASTER", rc == 0 and "FASTER" in out, out)
    # A host-sync row: its time includes a host barrier that now and then holds a whole run back (two runs of one
    # evidence job differ by 34 % beyond the row's spread: docs/perf-check.md "The allowance"), so one run cannot
    # judge a 10 % change of it; a change beyond 40 % plus its spread is still SLOWER.
    rc, out = run(b, write("host-drop.json", scaled(0.90, at=HOSTSYNC)))
    check("host-sync row 10% slower against one run: exit 0, CANNOT_JUDGE naming the host barrier, not SAME",
          rc == 0 and "0 slower" in out and "(40.0 %: a host barrier in its time)" in out
          and any("host-sync" in ln and "CANNOT_JUDGE" in ln for ln in out.splitlines())
          and not any("host-sync" in ln and ln.rstrip().endswith("SAME") for ln in out.splitlines()), out)
    rc, out = run(b, write("host-half.json", scaled(0.5, at=HOSTSYNC)))
    check("host-sync row 2x slower against one run: exit 1, SLOWER",
          rc == 1 and any("host-sync" in ln and "SLOWER" in ln for ln in out.splitlines()), out)
    fewer = copy.deepcopy(tight)
    fewer["results"] = fewer["results"][1:]
    rc, out = run(b, write("missing.json", fewer))
    check("missing result: exit 1, MISSING", rc == 1 and "MISSING" in out, out)
    rc, out = run(b, os.path.join(tmp, "missing.json"), "--allow-missing")
    check("missing result with --allow-missing: exit 0", rc == 0 and "MISSING" in out, out)
    other = copy.deepcopy(tight)
    other["results"][DEV]["protocol"] = "simple" if first["protocol"] != "simple" else "direct"
    rc, out = run(b, write("protocol.json", other))
    check("same row under another protocol is not like for like: exit 1, MISSING", rc == 1 and "MISSING" in out, out)
    wrong = copy.deepcopy(tight)
    wrong["results"][1]["wrong"] = 3
    rc, out = run(b, write("wrong.json", wrong))
    check("wrong > 0: exit 1", rc == 1 and "3 wrong" in out, out)

    # push_only_us / sync_only_us: lower is better, optional.
    push = copy.deepcopy(tight)
    push["results"][DEV]["push_only_us"] *= 1.3
    rc, out = run(b, write("push.json", push), "--metric", "push_only_us", "--metric", "sync_only_us")
    check("push alone 30% slower: exit 1 naming push_only_us", rc == 1 and "push_only_us" in out and "SLOWER" in out, out)
    rc, out = run(b, write("push2.json", push), "--metric", "sync_only_us")
    check("sync alone unchanged: exit 0", rc == 0 and "sync_only_us" in out, out)

    # mori.a2a/1: readable, compared only with /1.
    v1p = write("v1/base.json", v1)
    rc, out = run(v1p, v1p)
    check("/1 baseline against /1 run: exit 0", rc == 0 and "0 slower" in out, out)
    rc, out = run(v1p, v1p, "--metric", "push_only_us")
    check("/1 rows have no push alone: n/a, exit 0", rc == 0 and "n/a" in out, out)
    rc, out = run(v1p, b)
    check("/1 baseline against a /2 run only: nothing like to compare, exit 2", rc == 2 and "mori.a2a/1" in out, out)
    write("mixed/v1.json", v1)
    write("mixed/v2.json", tight)
    rc, out = run(os.path.join(tmp, "mixed"), b)
    check("/1 and /2 baselines against a /2 run: /1 skipped with a note, exit 0",
          rc == 0 and "mori.a2a/1 skipped" in out, out)

    # Other systems: never gated unless --include-external.
    tcmp = tighten(cmp_doc)
    slow_ext = copy.deepcopy(tcmp)
    for r in slow_ext["results"]:
        if r["addressing"] == "nccl-lsa":
            r["total_bw_gbps"] *= 0.5
            r["time_us"]["p50"] *= 2
    write("cur/a2a.json", tight)
    write("cur/compare.json", slow_ext)
    write("bas/a2a.json", tight)
    write("bas/compare.json", tcmp)
    rc, out = run(os.path.join(tmp, "bas"), os.path.join(tmp, "cur"))
    check("slower NCCL rows are not gated by default: exit 0 with a note",
          rc == 0 and "not gated" in out and "copied into a comparison" in out
          and not any(line.startswith("/2") and "nccl" in line for line in out.splitlines()), out)
    rc, out = run(os.path.join(tmp, "bas"), os.path.join(tmp, "cur"), "--include-external", "--metric", "time_p95_us")
    check("--include-external: one-sample nccl-tests rows have no p95 (n/a), no crash",
          rc == 0 and "n/a" in out and "nccl-lsa" in out, out)
    rc, out = run(os.path.join(tmp, "bas"), os.path.join(tmp, "cur"), "--include-external")
    check("--include-external gates them: exit 1 naming nccl-lsa SLOWER",
          rc == 1 and any("nccl-lsa" in line and "SLOWER" in line for line in out.splitlines()), out)
    only_ext = write("only-compare.json", tcmp)
    rc, out = run(only_ext, only_ext)
    check("a comparison document alone, nothing gated: exit 2", rc == 2 and "nothing to compare" in out, out)

    rc, out = run(HOST, HOST, "--metric", "push_only_us", "--metric", "sync_only_us", "--metric", "time_p95_us")
    check("host-runtime /2 run (no physical limit) against itself: exit 0", rc == 0 and "0 slower" in out, out)
    rc, out = run(HOST, b)
    check("host baseline against an H200 run: exit 2, one line naming both machines (not a screen of MISSING)",
          rc == 2 and "other machines" in out and "MISSING" not in out, out)

    bad = write("bad.json", "{not json")
    rc, out = run(b, bad)
    check("malformed JSON: exit 2 naming the file and the reason", rc == 2 and "bad.json" in out and "Expecting" in out, out)
    rc, out = run(b, write("shape.json", {"schema": "mori.a2a/2", "meta": {}}))
    check("a2a document without results: exit 2", rc == 2 and "not a valid mori.a2a/2 document" in out, out)
    j = os.path.join(tmp, "verdicts.json")
    rc, out = run(b, os.path.join(tmp, "drop.json"), "--json", j)
    v = json.load(open(j)) if os.path.exists(j) else {}
    check("--json verdicts", rc == 1 and v.get("slower", 0) >= 1 and v.get("passed") is False, out)
    rc, out = run(b, b, "--tolerance", "-1")
    check("bad --tolerance: exit 2", rc == 2, out)

# ---- hostile and malformed inputs (issue: "The gate misses real regressions and passes broken runs") -----------
with tempfile.TemporaryDirectory() as tmp:
    def put(name, text):
        p = os.path.join(tmp, name)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(text)
        return p

    good = put("good.json", json.dumps(base))

    def with_row(field, value, doc=base):
        d = copy.deepcopy(doc)
        d["results"][0][field] = value
        return json.dumps(d)

    for v in (7, -7):
        rc, out = run(good, put(f"wrong{v}.json", with_row("wrong", v)))
        want = 1 if v > 0 else 2
        check(f'a current row with "wrong": {v} fails with exit {want}, never PASS',
              rc == want and "PASS" not in out and (v > 0 or f"wrong{v}.json" in out and "negative" in out), out)
    # A row with an error is not gated, but its wrong elements still fail the run.
    errd = copy.deepcopy(base)
    errd["results"][0]["error"] = "the row failed"
    errd["results"][0]["wrong"] = 3
    rc, out = run("--allow-missing", good, put("errored-wrong.json", json.dumps(errd)))
    check("a current row with an error and wrong elements: exit 1, never PASS", rc == 1 and "PASS" not in out, out)
    rc, out = run(good, put("wrong-frac.json", with_row("wrong", 7.5)))
    check('"wrong": 7.5 (a fractional count): exit 2 naming the file and the field',
          rc == 2 and "wrong-frac.json" in out and "results[0].wrong" in out, out)
    rc, out = run(good, put("wrong-str.json", with_row("wrong", "0")))
    check('"wrong": "0" (a string): exit 2', rc == 2 and "wrong-str.json" in out and "PASS" not in out, out)
    rc, out = run(good, put("wrong-inf.json", with_row("wrong", 0).replace('"wrong": 0', '"wrong": Infinity', 1)))
    check('{"wrong": Infinity}: exit 2 naming the file, no traceback',
          rc == 2 and "wrong-inf.json" in out and "Infinity" in out and "Traceback" not in out, out)
    rc, out = run(good, put("nan.json", json.dumps(base).replace('"p50": ', '"p50": NaN, "x": ', 1)))
    check("a NaN anywhere: exit 2", rc == 2 and "nan.json" in out and "NaN" in out, out)
    rc, out = run(good, put("huge.json", with_row("total_bw_gbps", 1).replace('"total_bw_gbps": 1', '"total_bw_gbps": 1e400', 1)))
    check("1e400 (a number that overflows to infinity): exit 2", rc == 2 and "huge.json" in out and "not finite" in out, out)
    zero = copy.deepcopy(base)
    for r in zero["results"]:
        for k in ("total_bw_gbps", "agg_bw_gbps", "algbw_gbps", "busbw_gbps"):
            r[k] = 0
        r["time_us"]["p50"] = 0
    slow100 = copy.deepcopy(base)
    for r in slow100["results"]:
        r["time_us"]["p50"] *= 100
        r["total_bw_gbps"] /= 100
    rc, out = run(put("zero.json", json.dumps(zero)), put("slow100.json", json.dumps(slow100)))
    check("a baseline whose bandwidths and p50 are 0: exit 2 naming it, not a pass",
          rc == 2 and "zero.json" in out and "PASS" not in out, out)
    deep = put("deep.json", "[" * 100000 + "]" * 100000)
    rc, out = run(good, deep)
    check("100,000-deep nesting: exit 2 naming the file and the depth, no traceback",
          rc == 2 and "deep.json" in out and "deep" in out and "Traceback" not in out, out)
    rc, out = run(good, put("list.json", json.dumps([base])))
    check("a document that is a list: exit 2", rc == 2 and "list.json" in out and "array" in out, out)
    rc, out = run(good, put("cut.json", json.dumps(base)[:5000]))
    check("a truncated file: exit 2 naming it as truncated", rc == 2 and "cut.json" in out and "truncated" in out, out)
    rc, out = run(good, good, "--json", "/nonexistent-dir/x.json")
    check("--json /nonexistent-dir/x.json: exit 2 before any verdict",
          rc == 2 and "/nonexistent-dir" in out and "PASS" not in out and "FAIL" not in out, out)
    rc, out = run(good, os.path.join(tmp, "no-such-folder"))
    check("a missing CURRENT folder: exit 2", rc == 2 and "no-such-folder" in out, out)
    fifo_dir = os.path.join(tmp, "fifo")
    os.makedirs(fifo_dir)
    os.mkfifo(os.path.join(fifo_dir, "x.json"))
    rc, out = run(good, fifo_dir)
    check("a folder holding a FIFO x.json: exit 2 naming it, no hang", rc == 2 and "x.json" in out and "FIFO" in out, out)
    zdir = os.path.join(tmp, "zero-link")
    os.makedirs(zdir)
    os.symlink("/dev/zero", os.path.join(zdir, "z.json"))
    rc, out = run(good, zdir)
    check("a *.json linked to /dev/zero: exit 2, no MemoryError", rc == 2 and "z.json" in out and "device" in out, out)
    mutant = copy.deepcopy(base)
    mutant["meta"]["env"]["MORI_FAULT"] = "a2a.no-barrier"
    for r in mutant["results"]:
        r["wrong"] = 12
    put("withmutant/a2a.json", json.dumps(base))
    put("withmutant/mutant.json", json.dumps(mutant))
    rc, out = run(good, os.path.join(tmp, "withmutant"))
    check("a verification mutant's wrong elements in an evidence folder are not a failure (skipped with a note)",
          rc == 0 and "verification mutant" in out and "0 wrong" in out, out)
    two = copy.deepcopy(base)
    two["meta"]["git_revision"] = "0123456"
    put("tworev/a.json", json.dumps(base))
    put("tworev/b.json", json.dumps(two))
    rc, out = run(os.path.join(tmp, "tworev"), good)
    check("a baseline holding two revisions of one configuration: exit 2 (runs pool only within one revision)",
          rc == 2 and "revisions" in out, out)

# ---- the gate on committed 1 x H200 data (results/h200, 8 ranks on one GPU under MPS, one revision) ------------
R1 = os.path.join(ROOT, "results", "h200", "a2a-w8-r1.json")
R2 = os.path.join(ROOT, "results", "h200", "a2a-w8-r2.json")
if os.path.exists(R1) and os.path.exists(R2):
    with tempfile.TemporaryDirectory() as tmp:
        for b_, c_ in ((R1, R2), (R2, R1)):
            rc, out = run(b_, c_)
            check(f"another run of the same revision is not flagged ({os.path.basename(c_)} against "
                  f"{os.path.basename(b_)}): exit 0", rc == 0 and "0 slower" in out, out)
        slow = json.load(open(R1))
        hit = 0
        for r in slow["results"]:
            if r["chunk_bytes"] == 256 << 10 and r["graph"]:
                r["time_us"]["p50"] *= 1.10
                for k in ("total_bw_gbps", "agg_bw_gbps", "algbw_gbps", "busbw_gbps"):
                    r[k] /= 1.10
                hit += 1
        slow["meta"]["driver_version"] = "13010"
        sp = os.path.join(tmp, "slow.json")
        with open(sp, "w") as f:
            json.dump(slow, f)
        rc, out = run(R1, sp)
        flagged = [ln for ln in out.splitlines() if "256 KiB" in ln and "graph16" in ln and "SLOWER" in ln]
        check(f"a 10% slowdown of the {hit} graph rows at 256 KiB is flagged against a one-run baseline: exit 1",
              rc == 1 and hit == 2 and len(flagged) == 2 * hit, out)
        check("... with what differs in meta printed beside it (the driver)",
              "meta differs: driver_version: '13000' -> '13010'" in out, out)
        rc, out = run(R2, sp)
        check("... and against the other run as baseline", rc == 1 and "SLOWER" in out, out)
        repo = os.path.join(tmp, "repo")
        os.makedirs(os.path.join(repo, "results", "h200"))
        os.makedirs(os.path.join(repo, "results", "baselines"))
        shutil.copy(R1, os.path.join(repo, "results", "h200"))
        bfile = os.path.join(repo, "results", "baselines", "h200.json")
        with open(bfile, "w") as f:
            json.dump({"schema": "mori.baseline/1", "evidence": ["results/h200/a2a-w8-r1.json"]}, f)
        rc, out = run(bfile, sp)
        check("a mori.baseline/1 file stands for the evidence it names: the slowdown is flagged",
              rc == 1 and len([ln for ln in out.splitlines() if "SLOWER" in ln]) == 2 * hit, out)
        with open(bfile, "w") as f:
            json.dump({"schema": "mori.baseline/1", "evidence": ["/etc/passwd"]}, f)
        rc, out = run(bfile, sp)
        check("a baseline naming a path outside results/: exit 2", rc == 2 and "results/" in out, out)
        both = os.path.join(tmp, "two-runs")
        os.makedirs(both)
        shutil.copy(R1, both)
        shutil.copy(R2, both)
        j = os.path.join(tmp, "v.json")
        rc, out = run(both, sp, "--json", j)
        v = json.load(open(j))
        g = [x for x in v["verdicts"] if x["identity"]["chunk_bytes"] == 256 << 10 and x["identity"]["graph"]
             and x["metric"] == "time_p50_us"]
        check("a two-run baseline: its allowance is at least 3x the spread across the runs, floor 3%, and the "
              "slowdown is still flagged",
              rc == 1 and v["schema"] == "mori.perf-check/4" and v["exit_code"] == 1 and len(g) == 2
              and all(x["baseline_runs"] == 2 and x["allowance"] >= max(0.03, 3 * x["spread_across_runs"]) - 1e-12
                      and x["verdict"] == "SLOWER" for x in g), json.dumps(g, indent=1)[:3000])

finish()
