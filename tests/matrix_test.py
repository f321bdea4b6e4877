#!/usr/bin/env python3
"""mori-probe --matrix on the host runtime under mpirun: every ordered pair, both addressings, positive values.

usage: matrix_test.py BIN_DIR VALIDATE_JSON MPIRUN...
"""
import json
import os
import subprocess
import sys
import tempfile

BIN, VALIDATE, MPIRUN = sys.argv[1], sys.argv[2], sys.argv[3:]
failures = []


def run(np, extra):
    out = os.path.join(tempfile.mkdtemp(prefix="mori-matrix-"), "m.json")
    cmd = list(MPIRUN) + ["-n", str(np), os.path.join(BIN, "mori-probe"), "--backend", "host", "--timeout-s", "30",
                          "--matrix", "--matrix-mib", "2", "--rounds", "200", "--json", out] + extra
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    if p.returncode != 0:
        failures.append(f"np {np} {extra}: exit {p.returncode}\n{p.stdout}")
        return None, p.stdout
    v = subprocess.run([sys.executable, VALIDATE, "--require", out], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    if v.returncode != 0:
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
cmd = list(MPIRUN) + ["-n", "2", "-x", "MORI_FAULT=matrix.no-pong:1", os.path.join(BIN, "mori-probe"), "--backend",
                      "host", "--timeout-s", "3", "--matrix", "--matrix-mib", "1", "--rounds", "10", "--json", out]
p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
if p.returncode != 4 or "TIMEOUT" not in p.stdout:
    failures.append(f"no-pong: exit {p.returncode} (expected 4)\n{p.stdout}")
else:
    with open(out) as f:
        rows = json.load(f)["matrix"]["rows"]
    bad = [r for r in rows if r.get("status") == "timeout"]
    if not bad or any(r["latency_us_p50"] is not None for r in bad) or any(r["src"] != 0 for r in bad):
        failures.append(f"no-pong: rows {rows}")
    else:
        print(f"ok   no-pong: exit 4, {len(bad)} timed-out rows from rank 0")
for f in failures:
    print("FAIL", f)
sys.exit(1 if failures else 0)
