#!/usr/bin/env python3
"""scripts/render-results on fixture JSON (tests/fixtures, trimmed from real H200 runs; never results/).

Checks the like-for-like rules on the rendered page: speedup lines exist, each pairs like modes only (graph vs
graph, eager vs eager) and its ratio is the two times it names; nccl-tests rows say "mean of N"; the per-group
tables carry push/sync alone, the ceiling and the L2 flag; a mori.a2a/1 document still renders. Then a
generator below derives a doctored copy of a real fixture whose ceiling is beaten by 20 %, and the page must
flag it as a broken ceiling (and the real fixtures must not be flagged).
"""
import copy
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import check, finish  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
RENDER = os.path.join(ROOT, "scripts", "render-results")
FIX = os.path.join(ROOT, "tests", "fixtures")


def render(folder):
    p = subprocess.run([sys.executable, RENDER, "--results", folder], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    page = open(os.path.join(folder, "README.md")).read() if os.path.exists(os.path.join(folder, "README.md")) else ""
    return p.returncode, p.stdout, page


def doctor_broken_ceiling(src, dst, factor=1.2):
    """A copy of a real document whose first row's ceiling is the row's own total / factor (a ceiling beaten)."""
    d = json.load(open(src))
    r = d["results"][0]
    r["ceiling_bw_gbps"] = r["total_bw_gbps"] / factor
    r["ceiling_ratio"] = factor
    with open(dst, "w") as f:
        json.dump(d, f)
    return r


with tempfile.TemporaryDirectory() as tmp:
    real = os.path.join(tmp, "real")
    for sub, names in (("h200x2", ["h200-a2a-w2-r1.json", "h200-a2a-w2-r2.json", "h200-compare-w2.json"]),
                       ("h200", ["h200-a2a-1gpu-w8-r1.json"]), ("host", ["a2a-host-w4.json"]), ("old", ["a2a-host-w4-v1.json"])):
        os.makedirs(os.path.join(real, sub))
        for n in names:
            shutil.copy(os.path.join(FIX, n), os.path.join(real, sub, n))
    rc, out, page = render(real)
    check("render exits 0", rc == 0 and page, out)
    check("one table per device, device count and world",
          "2 devices, world 2, mori.a2a/2" in page and "1 device, world 8 (MPS), mori.a2a/2" in page, page[:2000])
    check("tables carry push alone, sync alone, ceiling kind and physical limit",
          "push alone us" in page and "sync alone us" in page and "copy_engine" in page and "physical GB/s" in page,
          page[:2000])
    check("the L2 flag is shown for an L2-resident row", re.search(r"\| 256 KiB \|.*\| L2 \|", page) is not None,
          page[:3000])
    check("a mori.a2a/1 document still renders", "world 4, mori.a2a/1" in page, page[:3000])
    check("a host-runtime /2 document renders its host_memcpy ceiling", "host_memcpy" in page, page[:3000])
    check("nccl-tests rows are marked as a mean", "(mean of 800)" in page, page)
    check("real fixtures: no broken ceiling", "BROKEN CEILING" not in page, page)
    speedups = [line for line in page.splitlines() if line.startswith("- speedup,")]
    check("like-mode speedup lines are present, graph and eager",
          any(line.startswith("- speedup, graph vs graph:") for line in speedups)
          and any(line.startswith("- speedup, eager vs eager:") for line in speedups), "\n".join(speedups))
    bad = []
    for line in speedups:
        modes = re.findall(r"\[(graph|eager)\]", line)
        head = re.match(r"- speedup, (graph|eager) vs (graph|eager):", line)
        m = re.search(r"\] ([0-9.]+)(?: \(mean of \d+\))? us vs .*\] ([0-9.]+)(?: \(mean of \d+\))? us: ([0-9.]+)x", line)
        ok = (head and head.group(1) == head.group(2) and len(modes) == 2 and modes[0] == modes[1] == head.group(1)
              and m and abs(float(m.group(2)) / float(m.group(1)) - float(m.group(3))) < 0.02)
        if not ok:
            bad.append(line)
    check("no speedup pairs a graph run with an eager one, and each ratio is the two times it names",
          not bad, "\n".join(bad))

    doctored = os.path.join(tmp, "doctored")
    shutil.copytree(real, doctored)
    os.remove(os.path.join(doctored, "README.md"))
    row = doctor_broken_ceiling(os.path.join(FIX, "h200-a2a-w2-r1.json"),
                                os.path.join(doctored, "h200x2", "h200-a2a-w2-r1.json"))
    rc, out, page = render(doctored)
    head = page.split("## ", 1)[0]
    check("a ceiling beaten by 20% is flagged loudly at the top of the page",
          rc == 0 and "BROKEN CEILING" in head and "h200x2/h200-a2a-w2-r1.json" in head
          and f"total {row['total_bw_gbps']:.0f} GB/s" in head, head)
    check("... and in its table row", page.count("**BROKEN CEILING**") >= 1, page)

    # Tuning runs stay out of the tables: copies of the 8-rank fixture, 10x slower, that pin --source-cache,
    # --unroll or --signal-scope or ran other kernel sources; the table must still be the real run's alone.
    side = os.path.join(tmp, "side")
    os.makedirs(os.path.join(side, "h200"))
    src = os.path.join(FIX, "h200-a2a-1gpu-w8-r1.json")
    shutil.copy(src, os.path.join(side, "h200", "real.json"))
    pins = {"cache": ("config", "source_cache", "normal"), "unroll": ("config", "unroll", 8),
            "scope": ("config", "signal_scope", "system"), "kernels": ("env", "MORI_KERNEL_DIR", "/tmp/k")}
    for name, (where, key, value) in pins.items():
        d = json.load(open(src))
        (d.setdefault("config", {}) if where == "config" else d["meta"].setdefault("env", {}))[key] = value
        for r in d["results"]:
            r["time_us"]["p50"] *= 10
        with open(os.path.join(side, "h200", f"{name}.json"), "w") as f:
            json.dump(d, f)
    rc, out, page = render(side)
    runs = [line.rstrip(" |").rsplit("|", 1)[-1].strip() for line in page.splitlines()
            if re.match(r"\| \d+ (KiB|MiB) \| (ptr|lsa) \|", line)]
    check(f"runs pinning --source-cache, --unroll, --signal-scope or with MORI_KERNEL_DIR stay out of the tables "
          f"(runs column: {sorted(set(runs))})", rc == 0 and runs and set(runs) == {"1"}, page[:3000])

finish()
