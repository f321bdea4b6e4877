#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""mori-a2a on the host runtime with real mpirun jobs: verification, its mutants, tails, references.

usage: a2a_test.py BIN_DIR MPIRUN...
"""
import json
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: harness.py
import harness  # noqa: E402
from harness import check, finish  # noqa: E402
import tempfile

BIN = sys.argv[1]
MPIRUN = sys.argv[2:]
TOOL = os.path.join(BIN, "mori-a2a")
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def job(n, args, env=None):
    return harness.tool_job(MPIRUN, n, TOOL, args, env)



# The reports are kept here for the schema test (schema.a2a_host), which needs the optional python jsonschema.
KEEP = os.environ.get("MORI_TEST_KEEP_JSON")
if KEEP:
    shutil.rmtree(KEEP, ignore_errors=True)
    os.makedirs(KEEP)


with tempfile.TemporaryDirectory() as tmp:
    for n in (2, 4):
        for ht in ("posix_fd", "fabric"):
            j = os.path.join(tmp, f"a2a-{n}-{ht}.json")
            rc, out = job(n, ["--chunk-kib", "64,256", "--handle-type", ht, "--iters", "5", "--json", j])
            doc = json.load(open(j)) if os.path.exists(j) else None
            ok = rc == 0 and doc is not None and doc["wrong"] == 0 and doc["wrong_ranks"] == [] \
                and len(doc["results"]) == 8 \
                and {r["addressing"] for r in doc["results"]} == {"ptr", "lsa"} \
                and {r["sync"] for r in doc["results"]} == {"host", "device"} \
                and all(r["wrong"] == 0 and r["total_bw_gbps"] > 0 for r in doc["results"]) \
                and doc["meta"]["handle_type"] == ht and doc["meta"]["world"] == n
            check(f"{n} ranks, {ht}: every element right, both addressing models and syncs", ok, out)
            if KEEP and doc:
                shutil.copy(j, KEEP)

    # The verification's own mutants at 4 ranks with device sync: each must fail with exit 1 and wrong > 0.
    for fault in ("a2a.no-barrier:*", "a2a.no-barrier:0", "a2a.stale:1", "a2a.overrun:2"):
        j = os.path.join(tmp, "mutant.json")
        if os.path.exists(j):
            os.unlink(j)
        rc, out = job(4, ["--chunk-kib", "256", "--iters", "3", "--sync", "device", "--json", j],
                      {"MORI_FAULT": fault})
        doc = json.load(open(j)) if os.path.exists(j) else None
        # Stale and overrun data reach every receiver. A missing barrier is a race: which ranks read too early
        # depends on timing (rank 0 alone, seen under ASan), so the named ranks need only be the ones counted.
        named = doc["wrong_ranks"] if doc else []
        want = [0, 1, 2, 3] if "no-barrier" not in fault else named
        check(f"mutant {fault}: exit 1, wrong > 0, the ranks that received them named",
              rc == 1 and doc is not None and doc["wrong"] > 0 and named == want and named
              and set(named) <= {0, 1, 2, 3} and named == sorted(named)
              and f"wrong element(s), received by rank {','.join(map(str, named))}" in out, out)

    # Sizes that are not multiples of 16 bytes (tails), 3 ranks: right; an overrun past a 49-byte chunk is seen.
    j = os.path.join(tmp, "tails.json")
    rc, out = job(3, ["-b", "1", "-e", "100", "-f", "7", "--iters", "3", "--json", j])
    doc = json.load(open(j)) if os.path.exists(j) else None
    check("tails: 1, 7, 49 bytes verified right", rc == 0 and doc is not None and doc["wrong"] == 0
          and sorted({r["chunk_bytes"] for r in doc["results"]}) == [1, 7, 49], out)
    rc, out = job(3, ["-b", "49", "-e", "49", "--iters", "3", "--sync", "device", "--json", j],
                  {"MORI_FAULT": "a2a.overrun:0"})
    doc = json.load(open(j)) if os.path.exists(j) else None
    check("tail overrun: exit 1, wrong > 0", rc == 1 and doc is not None and doc["wrong"] > 0, out)

    # The four device-sync protocols side by side (simple, direct, ll, copy), tails included: every row right,
    # and every mutant caught under each protocol (the ll protocol has its own receive path, flags in the data).
    j = os.path.join(tmp, "protocols.json")
    rc, out = job(4, ["--chunk-kib", "1,64", "--protocol", "all", "--sync", "device", "--iters", "3", "--json", j])
    doc = json.load(open(j)) if os.path.exists(j) else None
    rows = doc["results"] if doc else []
    check("--protocol all, 4 ranks: simple, direct, ll and copy rows, every element right, ll sync alone measured",
          rc == 0 and {r["protocol"] for r in rows} == {"simple", "direct", "ll", "copy"} and len(rows) == 16
          and all(r["wrong"] == 0 for r in rows)
          and all(r["sync_only_us"] > 0 for r in rows if r["protocol"] == "ll"), out)
    rc, out = job(3, ["-b", "1", "-e", "100", "-f", "7", "--protocol", "ll", "--sync", "device", "--iters", "3",
                      "--json", j])
    doc = json.load(open(j)) if os.path.exists(j) else None
    check("ll tails: 1, 7, 49 bytes verified right", rc == 0 and doc is not None and doc["wrong"] == 0
          and sorted({r["chunk_bytes"] for r in doc["results"]}) == [1, 7, 49], out)
    for proto in ("simple", "direct", "ll", "copy"):
        for fault in ("a2a.no-barrier:0", "a2a.stale:1", "a2a.overrun:2"):
            if os.path.exists(j):
                os.unlink(j)
            rc, out = job(4, ["--chunk-kib", "64", "--protocol", proto, "--sync", "device", "--iters", "3",
                              "--json", j], {"MORI_FAULT": fault})
            doc = json.load(open(j)) if os.path.exists(j) else None
            check(f"{proto} protocol, mutant {fault}: exit 1, wrong > 0",
                  rc == 1 and doc is not None and doc["wrong"] > 0
                  and {r["protocol"] for r in doc["results"]} == {proto}, out)
    rc, out = job(2, ["--protocol", "ll,fast"])
    lines = [l for l in out.splitlines() if "mori-a2a: error" in l]
    check("--protocol ll,fast: exit 2 on both ranks naming the unknown value",
          rc == 2 and len(lines) == 2 and all("--protocol: unknown value 'fast'" in l for l in lines), out)

    # Every row carries its references (whether the ceiling bounds the figure is a measurement, checked on the
    # committed GPU results, not a timed assertion here).
    j = os.path.join(tmp, "refs.json")
    rc, out = job(2, ["--chunk-kib", "1024", "--iters", "20", "--json", j])
    doc = json.load(open(j)) if os.path.exists(j) else None
    rows = doc["results"] if doc else []
    check("references: push alone, sync alone, ceiling with two rounds, physical source, verified epochs",
          rc == 0 and rows and all(r["push_only_us"] > 0 and r["sync_only_us"] > 0 and r["samples"] >= 20
                                  and {c["round"] for c in r["ceilings"]} == {1, 2}
                                  and r["physical_source"] and r["verified_epochs"] >= 2 for r in rows), out)

    # Soak: 30 cycles of window -> verified run -> teardown; fds, handles and mappings end where they started.
    j = os.path.join(tmp, "cycles.json")
    rc, out = job(4, ["--chunk-kib", "64", "--iters", "3", "--warmup", "1", "--cycles", "30", "--json", j])
    doc = json.load(open(j)) if os.path.exists(j) else None
    cyc = doc.get("cycles", []) if doc else []
    check("30 cycles: every one verified, fds flat, no handle or mapping left",
          rc == 0 and len(cyc) == 30 and all(c["wrong"] == 0 and c["handles"] == 0 and c["mappings"] == 0
                                              for c in cyc) and cyc[0]["fds"] == cyc[-1]["fds"], out)

    for args, msg in [(["--cycles", "0"], "--cycles: must be in 1..100000"),
                      (["--verify-epochs", "1"], "--verify-epochs: must be in 2..64"),
                      (["--skew-us", "5000000"], "--skew-us: must be -1 (the default) or in [0, 1000000]")]:
        rc, out = job(2, args)
        lines = [l for l in out.splitlines() if "mori-a2a: error" in l]
        check(f"bad {' '.join(args)}: exit 2 on both ranks, one line naming the option",
              rc == 2 and len(lines) == 2 and all(msg in l for l in lines), out)

finish()
