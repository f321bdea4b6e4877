#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""mori-a2a --csv on the host runtime (docs/json.md "CSV"): one line per row with the JSON's row fields, the same
bytes scripts/render-results --csv writes from the same run's JSON (one rule, two writers held to each other),
readable by a spreadsheet's CSV reader; bad output paths refused before any work.

usage: a2a_csv_test.py BIN_DIR RENDER_RESULTS MPIRUN...
"""
import csv
import io
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: harness.py
import harness  # noqa: E402
from harness import check, finish  # noqa: E402

BIN, RENDER, MPIRUN = sys.argv[1], sys.argv[2], sys.argv[3:]
TOOL = os.path.join(BIN, "mori-a2a")


def job(n, args):
    return harness.tool_job(MPIRUN, n, TOOL, args)


with tempfile.TemporaryDirectory() as tmp:
    j, c = os.path.join(tmp, "a2a.json"), os.path.join(tmp, "a2a.csv")
    rc, out = job(2, ["--chunk-kib", "64,256", "--iters", "5", "--json", j, "--csv", c])
    doc = harness.load_json(j)
    text = open(c, newline="").read() if os.path.exists(c) else ""
    check("2 ranks, --json and --csv: exit 0, both written", rc == 0 and doc is not None and text, out)
    rows = list(csv.DictReader(io.StringIO(text, newline=""))) if text else []
    results = doc["results"] if doc else []
    check(f"one CSV line per row ({len(rows)} lines, {len(results)} rows), CRLF line ends",
          len(rows) == len(results) > 0 and text.endswith("\r\n") and text.count("\r\n") == len(results) + 1,
          text[:2000])
    hdr = next(csv.reader(io.StringIO(text, newline=""))) if text else []
    want = ["chunk_bytes", "addressing", "sync", "protocol", "time_us.p50", "time_us.p95", "total_bw_gbps",
            "ceiling_bw_gbps", "table_world", "table_device", "wrong"]
    check("the header names the JSON's row fields, nested ones by their path", all(w in hdr for w in want),
          ",".join(hdr))
    same = all(float(r["time_us.p50"]) == x["time_us"]["p50"] and r["addressing"] == x["addressing"]
               and int(r["chunk_bytes"]) == x["chunk_bytes"] and int(r["wrong"]) == x["wrong"]
               for r, x in zip(rows, results))
    check("each CSV line holds its row's values (p50, addressing, chunk, wrong)", same and rows, text[:2000])
    p = subprocess.run([sys.executable, RENDER, "--csv", j], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    check("render-results --csv of the same JSON writes the same bytes as mori-a2a --csv",
          p.returncode == 0 and p.stdout.decode("utf-8", "replace") == text,
          p.stdout.decode("utf-8", "replace")[:3000] + "\n---\n" + text[:3000])

    # A number whose shortest text (Python's repr, 5.624857142857143) is not the text the C++ writer chose: each
    # writer's CSV keeps the report's own text, so the two never differ by a number's spelling.
    if doc:
        raw = open(j).read()
        odd = re.sub(r'"p50": *[-0-9.eE+]+', '"p50":5.6248571428571434', raw, count=1)
        odd = re.sub(r'"ceilings": *\[[^\]]*\]', '"ceilings":[1E+2,{"gbps":5.6248571428571434}]', odd, count=1)
        oddj = os.path.join(tmp, "odd.json")
        with open(oddj, "w") as f:
            f.write(odd)
        p = subprocess.run([sys.executable, RENDER, "--csv", oddj], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        got = p.stdout.decode("utf-8", "replace")
        check("render-results --csv keeps a number's own text (5.6248571428571434, not repr's 5.624857142857143), "
              "in a field and inside an array", p.returncode == 0 and ",5.6248571428571434," in got
              and '"[1E+2,{""gbps"":5.6248571428571434}]"' in got and "5.624857142857143," not in got, got[:2000])

    fifo = os.path.join(tmp, "fifo")
    os.mkfifo(fifo)
    rc, out = job(1, ["--chunk-kib", "64", "--csv", fifo])
    check("--csv onto a FIFO: exit 2, one line naming the option", rc == 2 and "--csv" in out, out)
    rc, out = job(1, ["--chunk-kib", "64", "--csv", "-", "--json", "-"])
    check("--csv - with --json -: exit 2 (only one can take stdout)", rc == 2 and "only one of them" in out, out)
    d = os.path.join(tmp, "folder")
    os.mkdir(d)
    rc, out = job(1, ["--chunk-kib", "64", "--csv", d])
    check("--csv onto a folder: exit 2", rc == 2 and "--csv" in out, out)
    rc, out = job(1, ["--chunk-kib", "64", "--iters", "3", "--csv", "-"])
    check("--csv -: the CSV on stdout instead of the printed table",
          rc == 0 and "chunk_bytes," in out and "# mori-a2a  world" not in out, out)
    bad = os.path.join(tmp, "not-a2a.json")
    with open(bad, "w") as f:
        json.dump({"schema": "mori.probe/1", "nodes": []}, f)
    p = subprocess.run([sys.executable, RENDER, "--csv", bad], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    check("render-results --csv of a document that is not an a2a report: exit 2, named",
          p.returncode == 2 and b"not a mori.a2a report" in p.stdout, p.stdout.decode()[:500])
finish()
