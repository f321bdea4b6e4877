#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""mori-probe --matrix on the host runtime under mpirun: every ordered pair, both addressings, positive values;
the write-kernel options (--write-kernel, --write-blocks, --write-unroll, --write-tile-kib): bad values exit 2
with one line, and the JSON records the request, what ran (the host runtime's memcpy, saying so) and, with
--write-kernel all, every variant.

usage: matrix_test.py BIN_DIR VALIDATE_JSON MPIRUN...
"""
import json
import os
import subprocess
import sys
import tempfile

BIN, VALIDATE, MPIRUN = sys.argv[1], sys.argv[2], sys.argv[3:]
failures = []
SKIPPED = 77  # validate-json --require-or-skip without python jsonschema (a failure under CI=true)


def validate(path):
    """validate-json --require-or-skip on one document; says so when the schema part was skipped."""
    v = subprocess.run([sys.executable, VALIDATE, "--require-or-skip", path], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    if v.returncode == SKIPPED:
        print(f"NOTE: {v.stdout.strip()} ({os.path.basename(path)})")
    return v


def run(np, extra):
    out = os.path.join(tempfile.mkdtemp(prefix="mori-matrix-"), "m.json")
    cmd = list(MPIRUN) + ["-n", str(np), os.path.join(BIN, "mori-probe"), "--backend", "host", "--timeout-s", "30",
                          "--matrix", "--matrix-mib", "2", "--rounds", "200", "--json", out] + extra
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    if p.returncode != 0:
        failures.append(f"np {np} {extra}: exit {p.returncode}\n{p.stdout}")
        return None, p.stdout
    v = validate(out)
    if v.returncode not in (0, SKIPPED):
        failures.append(f"np {np}: schema: {v.stdout}")
    with open(out) as f:
        return json.load(f)["matrix"], p.stdout


def check_rows(np, m, expected_pairs):
    rows = m["rows"]
    got = {(r["src"], r["dst"], r["addressing"]) for r in rows}
    want = {(s, d, a) for (s, d) in expected_pairs for a in ("ptr", "lsa")}
    if got != want or len(rows) != len(want):
        failures.append(f"np {np}: rows {sorted(got)} != {sorted(want)}")
    for r in rows:
        for k in ("write_gbps", "read_gbps", "latency_us_p50"):
            if not isinstance(r[k], (int, float)) or r[k] <= 0:
                failures.append(f"np {np}: {r['src']}->{r['dst']} {r['addressing']} {k} = {r[k]}")
        if r["link_gbps"] is not None or not r.get("link_reason"):
            failures.append(f"np {np}: host runtime row without a null link and its reason: {r}")


for np in (2, 4):
    m, out = run(np, [])
    if m is not None:
        check_rows(np, m, [(s, d) for s in range(np) for d in range(np) if s != d])
        if "src->dst" not in out:
            failures.append(f"np {np}: no matrix table printed")
        print(f"ok   np {np}: {len(m['rows'])} rows")
m, _ = run(4, ["--pairs", "3"])
if m is not None:
    pairs = {(r["src"], r["dst"]) for r in m["rows"]}
    if len(pairs) != 3 or len(m["rows"]) != 6:
        failures.append(f"--pairs 3: {len(pairs)} pairs, {len(m['rows'])} rows")
    else:
        print(f"ok   --pairs 3: {sorted(pairs)}")
# A responder that never answers (test-only fault): the initiator's bounded wait ends, the row says "timeout"
# and the tool exits 4 within the bound.
out = os.path.join(tempfile.mkdtemp(prefix="mori-matrix-"), "t.json")
cmd = list(MPIRUN) + ["-n", "2", "env", "MORI_FAULT=matrix.no-pong:1", os.path.join(BIN, "mori-probe"), "--backend",
                      "host", "--timeout-s", "3", "--matrix", "--matrix-mib", "1", "--rounds", "10", "--json", out]
p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
if p.returncode != 4 or "TIMEOUT" not in p.stdout:
    failures.append(f"no-pong: exit {p.returncode} (expected 4)\n{p.stdout}")
else:
    with open(out) as f:
        rows = json.load(f)["matrix"]["rows"]
    bad = [r for r in rows if r.get("status") == "timeout"]
    if (not bad or any(r["latency_us_p50"] is not None for r in bad) or any(r["src"] != 0 for r in bad)
            or any("timed out at round" not in r.get("latency_reason", "") for r in bad)):
        failures.append(f"no-pong: rows {rows}")
    else:
        print(f"ok   no-pong: exit 4, {len(bad)} timed-out rows from rank 0")


HOST_NOTE = "host runtime: a memcpy stands in for every write kernel"


def check_write_kernel(tag, m, request, variant, requested):
    """Every row names the write kernel that ran: the host runtime's memcpy, with the variant asked for."""
    if m["write_kernel"] != request or m["writes_wrong"] != 0:
        failures.append(f"{tag}: matrix.write_kernel {m['write_kernel']} != {request}, or writes_wrong "
                        f"{m['writes_wrong']} != 0")
    for r in m["rows"]:
        wk = r["write_kernel"]
        want = {"variant": variant, "requested": requested, "kernel": "plain", "blocks": None, "threads": None,
                "unroll": None, "tile_bytes": None, "fallback": HOST_NOTE}
        if wk != want or r["write_verified"] is not True:
            failures.append(f"{tag}: {r['src']}->{r['dst']} {r['addressing']} write_kernel {wk} != {want}, or not "
                            f"verified ({r['write_verified']})")
        if (r["copy_engine_write_gbps"] is not None or r["write_over_copy_engine"] is not None
                or "no copy engine" not in r.get("copy_engine_reason", "")):
            failures.append(f"{tag}: the host runtime has no copy engine (null, with the reason): {r}")
        if (tag != "all") == ("write_variants" in r):
            failures.append(f"{tag}: write_variants {'missing' if tag == 'all' else 'present'}")


m, _ = run(2, [])
if m is not None:
    check_write_kernel("default", m, {"requested": "auto", "blocks": "auto", "unroll": "auto", "tile_kib": "auto"},
                       "plain/4x/u4", "auto")
m, _ = run(2, ["--write-kernel", "stream", "--write-blocks", "96", "--write-unroll", "16"])
if m is not None:
    check_write_kernel("stream", m, {"requested": "stream", "blocks": "96", "unroll": 16, "tile_kib": "auto"},
                       "stream/96/u16", "stream")
m, _ = run(2, ["--write-kernel", "bulk-tma", "--write-blocks", "3x", "--write-tile-kib", "8"])
if m is not None:
    check_write_kernel("bulk-tma", m, {"requested": "bulk-tma", "blocks": "3x", "unroll": "auto", "tile_kib": 8},
                       "bulk-tma/3x/t8k", "bulk-tma")
# all: the rows keep the auto kernel; each row lists every variant (unroll fixed at 8: 2 x 3 grids x 1 unroll for
# plain and stream, 2 x 3 grids x 3 tiles for the bulk kernels), each measured.
m, out = run(2, ["--write-kernel", "all", "--write-unroll", "8"])
if m is not None:
    check_write_kernel("all", m, {"requested": "all", "blocks": "auto", "unroll": 8, "tile_kib": "auto"},
                       "plain/4x/u4", "auto")
    want = {f"{k}/{g}x/u8" for k in ("plain", "stream") for g in (1, 2, 4)} | \
           {f"{k}/{g}x/t{t}k" for k in ("bulk", "bulk-tma") for g in (1, 2, 4) for t in (4, 8, 16)}
    for r in m["rows"]:
        vs = r.get("write_variants", [])
        got = [v["variant"] for v in vs]
        if len(got) != 24 or set(got) != want:
            failures.append(f"all: {r['src']}->{r['dst']} {r['addressing']} variants {got}")
        for v in vs:
            if (v["requested"] != v["variant"].split("/")[0] or v["kernel"] != "plain" or v["fallback"] != HOST_NOTE
                    or v["verified"] is not True
                    or not v["write_gbps"] > 0 or v["copy_engine_write_gbps"] is not None
                    or v["write_over_copy_engine"] is not None):
                failures.append(f"all: variant {v}")
    if "write kernels against the copy engine" not in out or "bulk-tma/2x/t16k" not in out:
        failures.append(f"all: no variant table printed\n{out}")
    else:
        print(f"ok   --write-kernel all: {len(m['rows'])} rows x 24 variants")

# A write that leaves bytes out (test-only fault on rank 0's checked writes): every write of rank 0, the rows' and
# each variant's, is marked wrong, rank 1's are not, and the tool exits 1.
out = os.path.join(tempfile.mkdtemp(prefix="mori-matrix-"), "w.json")
cmd = list(MPIRUN) + ["-n", "2", "env", "MORI_FAULT=matrix.short-write:0", os.path.join(BIN, "mori-probe"),
                      "--backend", "host", "--timeout-s", "30", "--matrix", "--matrix-mib", "1", "--rounds", "10",
                      "--write-kernel", "all", "--write-blocks", "1x", "--write-unroll", "4", "--write-tile-kib", "4",
                      "--json", out]
p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
m = json.load(open(out))["matrix"] if os.path.exists(out) else None
if p.returncode != 1 or m is None or "WRONG" not in p.stdout or "left wrong bytes" not in p.stdout:
    failures.append(f"short-write: exit {p.returncode} (expected 1)\n{p.stdout}")
else:
    checks = [(r["src"], r["write_verified"]) for r in m["rows"]] + \
             [(r["src"], v["verified"]) for r in m["rows"] for v in r["write_variants"]]
    if m["writes_wrong"] != 10 or any(ok != (src == 1) for src, ok in checks):
        failures.append(f"short-write: writes_wrong {m['writes_wrong']} (expected 2 rows x 5 writes), {checks}")
    else:
        print(f"ok   short-write: exit 1, {m['writes_wrong']} wrong writes, all from rank 0")

# Bad values: exit 2 and exactly one error line, naming the option.
BAD = [(["--write-kernel", "fast"], "--write-kernel: unknown value 'fast'"),
       (["--write-blocks", "0"], "--write-blocks: '0' is not auto"),
       (["--write-blocks", "65x"], "--write-blocks: '65x' is not auto"),
       (["--write-blocks", "2y"], "--write-blocks: '2y' is not auto"),
       (["--write-unroll", "3"], "--write-unroll: must be 0 (auto), 4, 8 or 16"),
       (["--write-tile-kib", "128"], "--write-tile-kib: must be 0 (auto), 4, 8, 16, 32 or 64"),
       (["--write-kernel", "bulk", "--write-unroll", "8"], "--write-unroll: applies to plain and stream, not bulk"),
       (["--write-kernel", "plain", "--write-tile-kib", "8"],
        "--write-tile-kib: applies to bulk and bulk-tma, not plain"),
       (["--write-tile-kib", "4"], "not auto (auto runs plain)")]
for args, text in BAD:
    cmd = [os.path.join(BIN, "mori-probe"), "--backend", "host", "--matrix", "--matrix-mib", "1", *args]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    errors = [l for l in p.stdout.splitlines() if "error" in l]
    if p.returncode != 2 or len(errors) != 1 or text not in errors[0]:
        failures.append(f"{args}: exit {p.returncode} (expected 2), error lines {errors} "
                        f"(expected one with {text!r})")
    else:
        print(f"ok   {' '.join(args)}: exit 2, {errors[0]}")
# scripts/matrix-sweep on the host runtime: one job, one mori.matrix-sweep/1 document with a row per (pair,
# addressing, variant) and a summary per variant; no copy engine here, so no verdict.
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sweep_out = tempfile.mkdtemp(prefix="mori-matrix-sweep-")
env = dict(os.environ, MORI_BIN=os.path.abspath(BIN), MPIRUN=" ".join(MPIRUN))
p = subprocess.run([os.path.join(ROOT, "scripts", "matrix-sweep"), "--out", sweep_out, "--", "--backend", "host",
                    "--timeout-s", "30", "--matrix-mib", "1", "--rounds", "20", "--write-blocks", "2x",
                    "--write-unroll", "4", "--write-tile-kib", "8"],
                   env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
doc_path = os.path.join(sweep_out, "matrix-sweep.json")
if p.returncode != 0 or not os.path.exists(doc_path):
    failures.append(f"matrix-sweep: exit {p.returncode}\n{p.stdout}")
else:
    with open(doc_path) as f:
        doc = json.load(f)
    names = [v["variant"] for v in doc["variants"]]
    want = ["plain/2x/u4", "stream/2x/u4", "bulk/2x/t8k", "bulk-tma/2x/t8k"]
    if (doc["schema"] != "mori.matrix-sweep/1" or doc["meta"]["tool"] != "mori-probe" or sorted(names) != sorted(want)
            or len(doc["rows"]) != 2 * 2 * len(want) or any(v["rows"] != 4 for v in doc["variants"])
            or doc["best"] is not None or doc["goal_met"] is not None or doc["config"]["goal"] != 0.95
            or any(r["write_gbps"] <= 0 or r["fallback"] != HOST_NOTE or not r["verified"] for r in doc["rows"])
            or any(v["wrong_rows"] != 0 for v in doc["variants"])):
        failures.append(f"matrix-sweep: document {json.dumps(doc)[:3000]}")
    v = validate(doc_path)
    if v.returncode not in (0, SKIPPED):
        failures.append(f"matrix-sweep: schema: {v.stdout}")
    else:
        print(f"ok   scripts/matrix-sweep: {len(doc['rows'])} rows, variants {names}")
p = subprocess.run([os.path.join(ROOT, "scripts", "matrix-sweep"), "--world", "1"], env=env, stdout=subprocess.PIPE,
                   stderr=subprocess.STDOUT, text=True, timeout=60)
if p.returncode != 2:
    failures.append(f"matrix-sweep --world 1: exit {p.returncode} (expected 2)\n{p.stdout}")
for f in failures:
    print("FAIL", f)
sys.exit(1 if failures else 0)
