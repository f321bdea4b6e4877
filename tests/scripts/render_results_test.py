#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""scripts/render-results on fixture JSON (tests/fixtures, trimmed from real H200 runs; never results/).

Checks the like-for-like rules on the rendered page: speedup lines exist, each pairs like modes only (graph vs
graph, eager vs eager) and its ratio is the two times it names; nccl-tests rows say "mean of N"; the per-group
tables carry push/sync alone, the ceiling and the L2 flag; a mori.a2a/1 document still renders. Then a
generator below derives a doctored copy of a real fixture whose ceiling is beaten by 20 %, and the page must
flag it as a broken ceiling (and the real fixtures must not be flagged).
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: harness.py
from harness import check, finish  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
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

# ---- bad input: every file is read, and one it cannot read stops the render naming it (exit 2) -----------------
with tempfile.TemporaryDirectory() as tmp:
    def folder(name, extra):
        d = os.path.join(tmp, name)
        os.makedirs(d)
        shutil.copy(os.path.join(FIX, "h200-a2a-w2-r1.json"), d)
        for fname, text in extra.items():
            with open(os.path.join(d, fname), "w") as f:
                f.write(text)
        return d

    d = folder("bad", {"broken.json": "{not json"})
    rc, out, _ = render(d)
    check("one bad file: exit 2 naming it, no traceback", rc == 2 and "broken.json" in out and "Traceback" not in out,
          out)
    text = open(os.path.join(FIX, "h200-a2a-w2-r2.json")).read()
    d = folder("cut", {"a2a-cut.json": text[: len(text) // 2]})
    rc, out, _ = render(d)
    check("a truncated a2a file is named (exit 2), never dropped from the tables silently",
          rc == 2 and "a2a-cut.json" in out and "truncated" in out, out)
    d = folder("list", {"list.json": "[1, 2]"})
    rc, out, _ = render(d)
    check("a document that is a list: exit 2 naming it", rc == 2 and "list.json" in out, out)
    d = folder("neg", {})
    doc = json.loads(text)
    doc["results"][0]["wrong"] = -7
    with open(os.path.join(d, "neg.json"), "w") as f:
        json.dump(doc, f)
    rc, out, _ = render(d)
    check('a row with "wrong": -7: exit 2 naming the file and the field',
          rc == 2 and "neg.json" in out and "results[0].wrong" in out, out)
    d = folder("fifo", {})
    os.mkfifo(os.path.join(d, "x.json"))
    try:
        p = subprocess.run([sys.executable, RENDER, "--results", d], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=60)
        rc, out = p.returncode, p.stdout
    except subprocess.TimeoutExpired:
        rc, out = None, "hung on a FIFO"
    check("a FIFO x.json in the folder: exit 2, no hang", rc == 2 and "x.json" in out and "FIFO" in out, out)

    # Without matplotlib, links to PNGs that exist stay on the page (a stand-in matplotlib that fails to import).
    d = folder("noplot", {})
    with open(os.path.join(d, "old-plot.png"), "wb") as f:
        f.write(b"\x89PNG\r\n")
    with open(os.path.join(d, "README.md"), "w") as f:
        f.write("# Results\n\n![an old plot](old-plot.png)\n\n![gone](missing.png)\n")
    fake = os.path.join(tmp, "no-matplotlib", "matplotlib")
    os.makedirs(fake)
    with open(os.path.join(fake, "__init__.py"), "w") as f:
        f.write("raise ImportError('no matplotlib in this test')\n")
    p = subprocess.run([sys.executable, RENDER, "--results", d], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, env=dict(os.environ, PYTHONPATH=os.path.dirname(fake)))
    page = open(os.path.join(d, "README.md")).read()
    check("without matplotlib a link to a PNG that exists is kept, one to a missing PNG is not",
          p.returncode == 0 and "![an old plot](old-plot.png)" in page and "missing.png" not in page,
          p.stdout + page[-1500:])

# ---- --summary DIR: one evidence folder -------------------------------------------------------------------------------
with tempfile.TemporaryDirectory() as tmp:
    ev = os.path.join(tmp, "h200x2", "rev")
    os.makedirs(ev)
    a2a = json.load(open(os.path.join(FIX, "h200-a2a-w2-r1.json")))
    rev = a2a["meta"]["git_revision"]
    with open(os.path.join(ev, "a2a-sweep-r1.json"), "w") as f:
        json.dump(a2a, f)
    manifest = {"schema": "mori.evidence/1", "revision": rev + "0" * 8, "clean": True, "machine": "h200x2",
                "start_id": "boot-1", "steps": [
                    {"name": "a2a-sweep-r1", "command": ["mori-a2a"], "wall_s": 12.5, "exit_code": 0, "status": "ok",
                     "outputs": ["a2a-sweep-r1.txt", "a2a-sweep-r1.json"]}],
                "skipped": [{"name": "references", "reason": "no nccl-tests"}], "waived": [], "complete": False}
    with open(os.path.join(ev, "manifest.json"), "w") as f:
        json.dump(manifest, f)

    def summarize(folder):
        p = subprocess.run([sys.executable, RENDER, "--summary", folder], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        path = os.path.join(folder, "summary.md")
        return p.returncode, p.stdout, open(path).read() if os.path.exists(path) else ""

    rc, out, md = summarize(ev)
    check("--summary: exit 0, the steps, the skipped step's reason and the run's table",
          rc == 0 and "| a2a-sweep-r1 | ok | 0 | 12.5 |" in md and "references: no nccl-tests" in md
          and "INCOMPLETE" in md and "## mori-a2a on NVIDIA H200" in md and f"revision {rev}" in md, out + md)
    os.remove(os.path.join(ev, "summary.md"))
    other = dict(a2a, meta=dict(a2a["meta"], git_revision="ffffff0"))
    with open(os.path.join(ev, "other.json"), "w") as f:
        json.dump(other, f)
    rc, out, md = summarize(ev)
    check("--summary: a file of another revision in the folder: exit 2 naming it, no summary",
          rc == 2 and "other.json" in out and not md, out)
    os.remove(os.path.join(ev, "other.json"))
    os.remove(os.path.join(ev, "manifest.json"))
    rc, out, md = summarize(ev)
    check("--summary: a folder without manifest.json: exit 2 naming it", rc == 2 and "manifest.json" in out, out)
    rc, out, md = summarize(os.path.join(tmp, "nowhere"))
    check("--summary: a missing folder: exit 2", rc == 2 and "nowhere" in out, out)

# ---- --update-docs / --check-docs: the marked tables are what the generator writes --------------------------------------
with tempfile.TemporaryDirectory() as repo:
    run_rel = "results/h200x2/a2a-w2-r1.json"
    os.makedirs(os.path.join(repo, "results", "h200x2"))
    os.makedirs(os.path.join(repo, "docs"))
    clean = json.load(open(os.path.join(FIX, "h200-a2a-w2-r1.json")))
    clean["meta"]["git_revision"] = "0123456789ab"  # the fixture's tree was modified; a table needs a clean one
    with open(os.path.join(repo, run_rel), "w") as f:
        json.dump(clean, f)
    pub = {"schema": "mori.published/1", "tables": {"headline": {
        "title": "2 × H200", "run": run_rel, "where": {"addressing": "lsa", "sync": "device", "graph": 16},
        "chunks": [262144]}}}
    with open(os.path.join(repo, "results", "published.json"), "w") as f:
        json.dump(pub, f)
    page = "# Title\n\n<!-- mori-results:begin headline -->\nhand-written\n<!-- mori-results:end headline -->\nafter\n"
    for rel in ("README.md", "docs/results.md"):
        with open(os.path.join(repo, rel), "w") as f:
            f.write(page)

    def docs(flag):
        p = subprocess.run([sys.executable, RENDER, flag, "--repo", repo], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        return p.returncode, p.stdout

    rc, out = docs("--check-docs")
    check("--check-docs: a hand-written table between markers differs: exit 1 naming it",
          rc == 1 and "README.md: table 'headline'" in out, out)
    rc, out = docs("--update-docs")
    text = open(os.path.join(repo, "README.md")).read()
    fixture_row = next(r for r in json.load(open(os.path.join(FIX, "h200-a2a-w2-r1.json")))["results"]
                       if r["chunk_bytes"] == 262144 and r["addressing"] == "lsa" and r["sync"] == "device"
                       and r["graph"])
    check("--update-docs writes the table from the one run, outside the markers untouched",
          rc == 0 and text.startswith("# Title\n") and text.endswith("after\n") and "hand-written" not in text
          and f"| 256 KiB | {fixture_row['protocol']} | {fixture_row['time_us']['p50']:.2f} |" in text, out + text)
    rc, out = docs("--check-docs")
    check("--check-docs after --update-docs: exit 0", rc == 0 and "0 not current" in out, out)
    with open(os.path.join(repo, "docs", "results.md"), "w") as f:
        f.write(text.replace(f"{fixture_row['time_us']['p50']:.2f}", "1.00"))
    rc, out = docs("--check-docs")
    check("--check-docs: one number changed by hand in docs/results.md: exit 1 naming it",
          rc == 1 and "docs/results.md: table 'headline'" in out, out)
    with open(os.path.join(repo, "README.md"), "a") as f:
        f.write("<!-- mori-results:begin nosuch -->\n<!-- mori-results:end nosuch -->\n")
    rc, out = docs("--check-docs")
    check("a marker that results/published.json does not list: exit 2 naming it", rc == 2 and "nosuch" in out, out)
    dirty = json.load(open(os.path.join(FIX, "h200-a2a-w2-r1.json")))
    check("the fixture's revision is a modified tree's", dirty["meta"]["git_revision"].endswith("-dirty"))
    with open(os.path.join(repo, run_rel), "w") as f:
        json.dump(dirty, f)
    rc, out = docs("--update-docs")
    check("a run from a dirty tree never reaches a table: exit 2", rc == 2 and "dirty" in out, out)

finish()
