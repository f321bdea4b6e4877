#!/usr/bin/env python3
"""mori-a2a on the host runtime with real mpirun jobs: verification, corruption, bad arguments.

usage: a2a_test.py BIN_DIR MPIRUN...
"""
import json
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import check, finish  # noqa: E402
import tempfile

BIN = sys.argv[1]
MPIRUN = sys.argv[2:]
TOOL = os.path.join(BIN, "mori-a2a")
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def job(n, args, env=None):
    e = dict(os.environ, **(env or {}))
    p = subprocess.run([*MPIRUN, "-n", str(n), TOOL, "--backend", "host", "--timeout-s", "20", *args], env=e,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=240)
    return p.returncode, p.stdout



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
            ok = rc == 0 and doc is not None and doc["wrong"] == 0 and len(doc["results"]) == 8 \
                and {r["addressing"] for r in doc["results"]} == {"ptr", "lsa"} \
                and {r["sync"] for r in doc["results"]} == {"host", "device"} \
                and all(r["wrong"] == 0 and r["total_bw_gbps"] > 0 for r in doc["results"]) \
                and doc["meta"]["handle_type"] == ht and doc["meta"]["world"] == n
            check(f"{n} ranks, {ht}: every element right, both addressing models and syncs", ok, out)
            if KEEP and doc:
                shutil.copy(j, KEEP)

    # One element corrupted on purpose on rank 1: exit 1 and exactly that count, per configuration.
    j = os.path.join(tmp, "corrupt.json")
    rc, out = job(2, ["--chunk-kib", "64", "--iters", "2", "--sync", "host", "--addressing", "ptr", "--json", j],
                  {"MORI_FAULT": "a2a.corrupt:1"})
    doc = json.load(open(j)) if os.path.exists(j) else None
    check("corrupted element: exit 1, wrong == 1", rc == 1 and doc is not None and doc["wrong"] == 1
          and doc["results"][0]["wrong"] == 1 and "1 wrong element" in out, out)

    bad = [
        (["--chunk-kib", "0"], "chunk size: must be > 0"),
        (["--chunk-kib", "-4"], "--chunk-kib: '-4' is not a size"),
        (["-b", "100", "-e", "100"], "not a multiple of 16"),
        (["--chunk-kib", "99999999999"], "exceeds 16 GiB"),
        (["--addressing", "flat"], "--addressing: unknown value 'flat'"),
        (["--sync", "host", "--graph", "4"], "--graph: needs --sync device"),
        (["--iters", "0"], "--iters: must be in 1..1000000"),
        (["--chunk-kib", "abc"], "is not a size"),
        (["--timeout-s", "0"], "--timeout-s: must be in (0, 86400]"),
        (["--json", "/nonexistent-dir/x.json"], "--json: folder '/nonexistent-dir' does not exist"),
        (["--handle-type", "dmabuf"], "--handle-type: unknown value 'dmabuf'"),
        (["--backend", "tpu"], "--backend: unknown value 'tpu'"),
        (["-b", "1M"], "-b/-e: give both"),
        (["--blocks-per-peer", "70000"], "--blocks-per-peer: must be in 0..65535"),
    ]
    for args, msg in bad:
        rc, out = job(2, args)
        lines = [l for l in out.splitlines() if "mori-a2a: error" in l]
        check(f"bad {' '.join(args)}: exit 2 on both ranks, one line naming the option",
              rc == 2 and len(lines) == 2 and all(msg in l for l in lines), out)

finish()
