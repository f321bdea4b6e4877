#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""scripts/compare without a GPU: it and its modules (scripts/compare_lib/) import without torch; nccl-tests' -J
JSON becomes per-peer rows; percentiles are mori-a2a's (held to the C++ tool's own, time-stats-echo, on the same
numbers); speedups never pair a graph row with an eager one; usage errors exit 2.

usage: compare_test.py TIME_STATS_ECHO"""
import copy
import importlib.machinery
import importlib.util
import json
import os
import random
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: harness.py
from harness import check, finish  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SCRIPT = os.path.join(ROOT, "scripts", "compare")
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "nccl-tests-alltoall-w2.json")
ECHO = sys.argv[1]  # time-stats-echo: the C++ timing statistics of its arguments

# The entry point (which puts scripts/ on sys.path) and its modules in scripts/compare_lib/.
loader = importlib.machinery.SourceFileLoader("compare_script", SCRIPT)
spec = importlib.util.spec_from_loader("compare_script", loader)
loader.exec_module(importlib.util.module_from_spec(spec))
from compare_lib.mori_a2a import merge_mori  # noqa: E402
from compare_lib.nccl_tests import nccl_tests_rows  # noqa: E402
from compare_lib.report import exit_code  # noqa: E402
from compare_lib.rows import like_pairs, table  # noqa: E402
from compare_lib.stats import time_stats  # noqa: E402
check("helpers import without torch", "torch" not in sys.modules)


def close(a, b, rel=1e-6):
    return a is not None and b is not None and abs(a - b) <= rel * max(abs(a), abs(b), 1e-12)


# --- nccl-tests -J fixture (-g 2 -R 2 -D 2 -G 16 -n 50, two sizes) ---------------------------------------------
doc = json.load(open(FIXTURE))
rows = nccl_tests_rows(doc)
check("fixture: one row per size", len(rows) == 2, repr(rows))
r0, r1 = rows
check("size is the whole send buffer: chunk_bytes = size / 2 ranks",
      (r0["chunk_bytes"], r1["chunk_bytes"]) == (262144, 4194304), repr((r0["chunk_bytes"], r1["chunk_bytes"])))
check("-R 2 -D 2: addressing nccl-lsa, protocol nccl-lsa-D2",
      r0["addressing"] == "nccl-lsa" and r0["protocol"] == "nccl-lsa-D2", repr(r0))
check("-G 16: graph true, graph_iters = iterations per graph, iters = 50 x 16",
      r0["graph"] is True and r0["graph_iters"] == 50 and r0["iters"] == 800, repr(r0))
check("a mean is one sample, p50 = mean = its time, no min/p95/max",
      r0["samples"] == 1 and r0["time_us"]["p50"] == 5.99 and r0["time_us"]["mean"] == 5.99
      and r0["time_us"]["min"] is None and r0["time_us"]["p95"] is None and r0["time_us"]["max"] is None
      and "mean" in r0["note"], repr(r0))
check("algbw = w*c/t equals nccl-tests' alg_bw, busbw its bus_bw",
      all(close(r["algbw_gbps"], r["nccl_tests"]["alg_bw"]) and close(r["busbw_gbps"], r["nccl_tests"]["bus_bw"])
          for r in rows), repr([(r["algbw_gbps"], r["nccl_tests"]) for r in rows]))
check("total = w*w*c/t, agg = w(w-1)c/t",
      close(r1["total_bw_gbps"], 4 * 4194304 / 17.6e-6 / 1e9) and close(r1["agg_bw_gbps"], 2 * 4194304 / 17.6e-6 / 1e9),
      repr(r1))
check("#wrong 0 -> wrong 0; sync device; source nccl-tests",
      all(r["wrong"] == 0 and r["sync"] == "device" and r["source"] == "nccl-tests" for r in rows))

host = copy.deepcopy(doc)
host["args"] = [a for a in host["args"] if a not in ("-R", "2", "-D")]
host["args"] = ["/x/alltoall_perf", "-b", "524288", "-e", "524288", "-g", "2", "-G", "16", "-c", "1"]
host["results"] = host["results"][:1]
h = nccl_tests_rows(host)[0]
check("host path (no -D): addressing nccl, protocol nccl-host-graph, graph true",
      h["addressing"] == "nccl" and h["protocol"] == "nccl-host-graph" and h["graph"] is True, repr(h))

d1 = copy.deepcopy(doc)
d1["args"][d1["args"].index("-D") + 1] = "1"
d1["results"][0]["out_of_place"]["nwrong"] = 3.0
d1["results"][1]["out_of_place"]["nwrong"] = None
a, b = nccl_tests_rows(d1)
check("-D 1 -> nccl-lsa-D1; #wrong 3 -> wrong 3; a missing check says so",
      a["protocol"] == "nccl-lsa-D1" and a["wrong"] == 3 and b.get("checked") is False, repr((a, b)))

per = copy.deepcopy(doc)
per["config"]["graph"] = 0
per["results"] = per["results"][:1]
per["results"][0]["out_of_place_per_iter"] = {"skipped_iterations": 1, "times_us": [99.0] + [float(x) for x in
                                                                                          range(1, 21)]}
p = nccl_tests_rows(per)[0]
check("-I 1 per-iteration times become the samples (skipped ones left out); graph false",
      p["samples"] == 20 and p["time_us"]["min"] == 1.0 and p["time_us"]["max"] == 20.0
      and close(p["time_us"]["p95"], 19.05) and p["graph"] is False and p["graph_iters"] == 0, repr(p))

bad = copy.deepcopy(doc)
bad["results"][0]["size"] = 524289
try:
    nccl_tests_rows(bad)
    check("a size that is not a multiple of the ranks is refused", False)
except ValueError:
    check("a size that is not a multiple of the ranks is refused", True)

nan = copy.deepcopy(doc)
nan["results"][0]["out_of_place"]["time"] = "nan"
check("nccl-tests' \"nan\" reads as no time", nccl_tests_rows(nan)[0]["time_us"]["p50"] is None)


# --- percentiles: Python's time_stats (scripts/compare_lib/stats.py) against the C++ one (comm/stats.hpp), run -----
# by time-stats-echo on the same numbers: known answers, then random vectors of every length up to 41.
def cpp_stats(v):
    p = subprocess.run([ECHO, *[repr(float(x)) for x in v]], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=30)
    return json.loads(p.stdout) if p.returncode == 0 else {"error": p.stdout}


def same_stats(py, cpp):
    return all(k in cpp and close(py[k], cpp[k], 1e-12) for k in ("min", "p50", "p95", "max", "mean"))


vectors = {(1, 2, 3, 4, 5): (3.0, 4.8), (10, 20): (15.0, 19.5), (7,): (7.0, 7.0), (3, 1, 2, 10): (2.5, 8.95),
           tuple(range(1, 21)): (10.5, 19.05)}
for v, (p50, p95) in vectors.items():
    t, c = time_stats(list(v)), cpp_stats(v)
    check(f"percentiles of {v[:5]}{'...' if len(v) > 5 else ''}: p50 {p50}, p95 {p95}, as the C++ tool computes them",
          close(t["p50"], p50) and close(t["p95"], p95) and same_stats(t, c) and t["min"] == min(v)
          and t["max"] == max(v) and close(t["mean"], sum(v) / len(v)), repr(t) + " C++: " + repr(c))
rng = random.Random(20261206)
randoms = [[rng.lognormvariate(2, 1) for _ in range(n)] for n in range(1, 42)]
differ = [(v, time_stats(v), cpp_stats(v)) for v in randoms]
differ = [d for d in differ if not same_stats(d[1], d[2])]
check(f"percentiles of {len(randoms)} random vectors (1 to 41 samples) equal the C++ tool's", not differ,
      repr(differ[:2]))
check("time-stats-echo refuses what is not a number (exit 2)",
      subprocess.run([ECHO, "1", "x"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 2)


# --- like-for-like pairing ------------------------------------------------------------------------------------
def row(addressing, sync, graph, chunk=262144, p50=10.0, **kw):
    r = {"chunk_bytes": chunk, "addressing": addressing, "sync": sync, "graph": graph, "graph_iters": 16 if graph
         else 0, "protocol": kw.pop("protocol", ""), "time_us": {"p50": p50}, "wrong": 0}
    r.update(kw)
    return r


rows = [row("ptr", "device", True, p50=5.9), row("lsa", "device", True, p50=5.8), row("ptr", "device", False, p50=9),
        row("ptr", "host", False, p50=40), row("nccl", "device", False, protocol="nccl-host", p50=70),
        row("nccl", "device", True, protocol="nccl-host-graph", p50=15), row("nccl-lsa", "device", True,
                                                                          protocol="nccl-lsa-D2", p50=6.0),
        row("torch-symm", "device", True, protocol="push+device-barrier", p50=7.8),
        row("torch-symm", "host", False, protocol="push+host-barrier", p50=50),
        row("nccl", "device", True, chunk=4194304, protocol="nccl-host-graph", p50=26),
        row("torch-symm", "device", True, protocol="push+device-barrier", error="boom")]
pairs = like_pairs(rows)
check("no pair mixes graph and eager", all(m["graph"] == o["graph"] for m, o in pairs), repr(pairs))
check("no pair mixes chunk sizes, none takes an error row",
      all(m["chunk_bytes"] == o["chunk_bytes"] and not o.get("error") for m, o in pairs))
got = sorted((m["addressing"], m["sync"], m["graph"], o["addressing"], o["protocol"]) for m, o in pairs)
want = sorted([(ma, "device", True, oa, op) for ma in ("ptr", "lsa") for oa, op in
               (("nccl", "nccl-host-graph"), ("nccl-lsa", "nccl-lsa-D2"), ("torch-symm", "push+device-barrier"))]
              + [("ptr", s, False, oa, op) for s in ("device", "host") for oa, op in
                 (("nccl", "nccl-host"), ("torch-symm", "push+host-barrier"))])
check("graph pairs: mori graph vs NCCL graph, nccl-lsa, torch-symm graph; eager: mori non-graph vs NCCL eager, "
      "torch-symm host", got == want, "\n".join(map(repr, got)))
check("mori rows are never compared with each other", all(o["addressing"] not in ("ptr", "lsa") for _, o in pairs))
text = table(rows)
check("the table prints the graph speedup 15/5.9 and no graph-vs-eager one",
      "2.54x" in text and "mori ptr device graph16" in text and "11.86x" not in text, text)

# --- merging a mori-a2a document ------------------------------------------------------------------------------
mori = {"schema": "mori.a2a/2", "meta": {"world": 2},
        "results": [dict(row("ptr", "device", True, p50=5.9), push_only_us=4.1, sync_only_us=3.0,
                         ceiling_bw_gbps=900.0, ceiling_kind="peer_copy", physical_bw_gbps=900.0,
                         physical_source="nvlink 18 x 50 GB/s")]}
ext = [row("nccl", "device", True, protocol="nccl-host-graph", p50=15), row("nccl", "device", True, chunk=1 << 20)]
added = merge_mori(ext, mori)
check("mori's reference fields go into the external row of the same chunk, marked references_from",
      ext[0].get("references_from") == "mori-a2a" and ext[0]["push_only_us"] == 4.1
      and ext[0]["physical_source"] == "nvlink 18 x 50 GB/s" and "references_from" not in ext[1], repr(ext))
check("mori's rows are appended", len(added) == 1 and added[0]["addressing"] == "ptr")

# --- exit codes and usage errors (no torch needed) --------------------------------------------------------------
check("exit code: ok 0, wrong 1, error 3",
      exit_code({"results": [row("nccl", "device", True)]}) == 0
      and exit_code({"results": [dict(row("nccl", "device", True), wrong=2)]}) == 1
      and exit_code({"results": [dict(row("nccl", "device", True), error="x")]}) == 3)
with tempfile.TemporaryDirectory() as tmp:
    out = os.path.join(tmp, "c.json")
    for name, args in [("bad size", ["--chunk-kib", "256,0"]), ("non-numeric size", ["--chunk-kib", "4M"]),
                       ("fewer than 20 samples", ["--iters", "5"]),
                       ("missing nccl-tests build", ["--nccl-tests", os.path.join(tmp, "none")]),
                       ("unknown system", ["--systems", "nccl-eager,mpi"]),
                       ("mori JSON of another schema", ["--mori-json", FIXTURE])]:
        pr = subprocess.run([sys.executable, SCRIPT, *args, "--json", out], capture_output=True, text=True,
                            timeout=60)
        check(f"usage error exits 2: {name}", pr.returncode == 2 and "compare:" in pr.stderr,
              pr.stdout + pr.stderr)
finish()
