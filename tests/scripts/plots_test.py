#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The plots of scripts/render-results, drawn from committed JSON (results/) by the interpreter render-results draws
them with: the first that imports matplotlib of this one, $MORI_PLOT_PYTHON and /usr/bin/python3 (Debian's
python3-matplotlib serves that one only; docs/perf-check.md "Plots").

- all-to-all (one H200, one H100, the 2-GPU protocol sweep whose old plot repeated "lsa device graph"): each line
  is one configuration a user can re-run (addressing, sync, protocol, graph): the lines partition the rows, and a
  line's points are the medians of its configuration's rows and nothing else; no legend label repeats; latency on
  log axes with units; no text drawn outside the figure; PNG at least 800 px wide;
- heatmaps of the committed peer matrices: at least 800 px wide, titles whole, the colour bar says what is one
  colour; on a matrix made here, cells 0.1 % apart are one colour and a link 30 % slower is another;
- scripts/render-results run by this test's interpreter (which may lack matplotlib) writes the PNGs it links.

Skipped (77) with its reason where no interpreter imports matplotlib; under CI=true that is a failure.
usage: plots_test.py            (the test)
       plots_test.py --child DIR (run by the plot interpreter: draws into DIR, prints what the figures show as JSON)
"""
import dataclasses
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RESULTS = os.path.join(ROOT, "results")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
A2A = {"h200": ["h200/252e9411024a/a2a-r1.json", "h200/252e9411024a/a2a-r2.json"],
       "h100": ["h100/9ba7a842f444/a2a-r1.json", "h100/9ba7a842f444/a2a-r2.json"],
       "h200x2": ["h200x2/protocol-sweep/all/" + n for n in ("w2-r1.json", "w2-r2.json", "ll-w2-b8.json",
                                                             "ll-w2-b16.json")]}
MATRICES = ["h200x2/matrix-sweep/probe.json", "h200/health/health-w4.json"]


def outside(fig):
    """What is drawn (partly) outside the figure, clipped in the PNG: each axes with its title, labels, tick
    labels and legend (its tight box), and the figure's title."""
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    w, h = fig.bbox.width, fig.bbox.height
    boxes = [(ax.get_title() or ax.get_ylabel() or "an axes", ax.get_tightbbox(r)) for ax in fig.axes]
    boxes += [(t.get_text(), t.get_window_extent(r)) for t in fig.texts if t.get_text().strip()]
    title = getattr(fig, "_suptitle", None)  # matplotlib 3.6 (Debian 12) has no get_suptitle()
    if title is not None:
        boxes.append((title.get_text(), title.get_window_extent(r)))
    return [name for name, b in boxes if b.x0 < -1 or b.y0 < -1 or b.x1 > w + 1 or b.y1 > h + 1]


def legend_labels(fig):
    return [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]


# The options a run may pin and their defaults (docs/mori-a2a.md): a pinned one is part of what a user re-runs.
PINNABLE = {"blocks_per_peer": ("--blocks-per-peer", 0), "unroll": ("--unroll", 0),
            "launch": ("--launch", "programmatic"), "signal_scope": ("--signal-scope", "auto"),
            "source_cache": ("--source-cache", "auto")}


def partition(rows, lines):
    """Problems where the lines (configuration -> {chunk: p50}) are not exactly the rows' configurations: each row
    (with its document's config) must be on exactly one line, the one naming its addressing, sync, protocol,
    graph iterations and the options its run pinned (no more, no fewer); each point the median of its chunk's rows."""
    problems, got = [], {i: {} for i in range(len(lines))}
    for r, config in rows:
        fields = {f.name: getattr(r, f.name) for f in dataclasses.fields(r)}
        fields["graph"] = (r.graph_iters or 0) if r.graph else 0
        pinned = {opt: config[k] for k, (opt, default) in PINNABLE.items()
                  if config.get(k, default) not in (default, None)}
        hits = [i for i, (cfg, _) in enumerate(lines)
                if {f: v for f, v in cfg if f.startswith("--")} == pinned
                and all(fields.get(f) == v for f, v in cfg
                        if not f.startswith("--") and f not in ("kernel_dir", "fault", "system"))]
        if len(hits) != 1:
            problems.append(f"row {r.chunk_bytes} {r.addressing} {r.sync} {r.protocol} "
                            f"graph {fields['graph']} {pinned}: on {len(hits)} lines")
        for i in hits:
            got[i].setdefault(r.chunk_bytes, []).append(r.p50)
    for i, (cfg, pts) in enumerate(lines):
        want = {c: statistics.median(v) for c, v in got[i].items()}
        if sorted(want) != sorted(pts) or any(abs(want[c] - pts[c]) > 1e-9 * max(1, want[c]) for c in want):
            problems.append(f"line {cfg}: points {pts} but its rows give {want}")
    return problems


def child(out):
    from mori_results.a2a import load_run
    from mori_results.documents import load_document
    from mori_results.plots import a2a_figure, matrix_figure, matrix_title, pyplot, run_options, save, MATRIX_KEYS
    from mori_results.tables import a2a_groups
    plt = pyplot()
    report = {"a2a": [], "matrix": []}
    for name, paths in A2A.items():
        runs = [load_run(load_document(os.path.join(RESULTS, p))) for p in paths]
        config = {id(row): run.config for run in runs for row in run.rows}
        groups = a2a_groups(runs)
        for k, (g, rows) in enumerate(sorted(groups.items(), key=lambda kv: str(kv[0]))):
            fig, shown = a2a_figure(plt, g, rows, run_options(runs))
            lat = fig.axes[0]
            lines = [(json.loads(ln.get_gid()), dict(zip(ln.get_xdata(), ln.get_ydata()))) for ln in lat.get_lines()]
            png = os.path.join(out, f"a2a-{name}-{k}.png")
            report["a2a"].append({
                "name": f"{name} {g}", "labels": legend_labels(fig), "lines": len(shown),
                "problems": partition([(r, config[id(r)]) for rs in rows.values() for r in rs], lines),
                "scales": [lat.get_xscale(), lat.get_yscale()], "axis_labels": [lat.get_xlabel(), lat.get_ylabel()],
                "outside": outside(fig), "png": png})
            save(plt, fig, png)
    for path in MATRICES:
        m = load_document(os.path.join(RESULTS, path)).doc["matrix"]
        for key, label, unit, higher in MATRIX_KEYS:
            fig, info = matrix_figure(plt, m, key, matrix_title(os.path.join(RESULTS, path), RESULTS, m, label),
                                      label, higher, unit)
            png = os.path.join(out, f"matrix-{path.replace('/', '-')}-{key}.png")
            report["matrix"].append({"name": f"{path} {key}", "title": fig.axes[0].get_title(),
                                     "bar": fig.axes[1].get_ylabel(), "outside": outside(fig), "png": png})
            save(plt, fig, png)
    # A 4-rank matrix made here: cells 0.1 % around 365 GB/s, one at +1.5 %, and the link 2 -> 3 30 % slower.
    rows = [{"src": s, "dst": d, "addressing": "ptr", "write_gbps": 365.0 * (1 + 0.001 * ((s + d) % 2)),
             "read_gbps": None, "latency_us_p50": None, "link_gbps": None}
            for s in range(4) for d in range(4) if s != d]
    rows[1]["write_gbps"] = 365.0 * 1.015
    slow = next(r for r in rows if (r["src"], r["dst"]) == (2, 3))
    slow["write_gbps"] = 365.0 * 0.7
    fig, info = matrix_figure(plt, {"bytes": 1 << 28, "rows": rows}, "write_gbps", "made here", "write GB/s")
    rgba = info["image"].to_rgba(info["image"].get_array())
    colour = {(r["src"], r["dst"]): tuple(float(x) for x in rgba[r["src"]][r["dst"]]) for r in rows}
    report["made"] = {"within": sorted({str(c) for k, c in colour.items() if k != (2, 3)}),
                      "slow": str(colour[(2, 3)]), "tolerance": info["tolerance"]}
    plt.close("all")
    print(json.dumps(report))


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    if head[:8] != b"\x89PNG\r\n\x1a\n":
        return None
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def main():
    from harness import ON_CI, check, finish, skip
    from mori_results.plots import plot_interpreter
    exe, why = plot_interpreter()
    if not exe:  # skipped with the reason; CI has scripts/deps' python3-matplotlib: there a failure
        if ON_CI:
            check(f"an interpreter that imports matplotlib (CI=true): {why}", False)
            finish()
        skip(f"the plots drawn from committed JSON: {why}")
    print(f"plot interpreter: {exe}")
    with tempfile.TemporaryDirectory() as tmp:
        p = subprocess.run([exe, os.path.abspath(__file__), "--child", tmp], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=240)
        check(f"{exe} draws every plot (exit 0)", p.returncode == 0, p.stdout + p.stderr)
        if p.returncode != 0:
            finish()
        rep = json.loads(p.stdout)
        for a in rep["a2a"]:
            labels = a["labels"]
            check(f"a2a {a['name']}: {a['lines']} lines, each one configuration (its rows, nothing else)",
                  a["lines"] > 1 and not a["problems"], "\n".join(a["problems"]))
            check(f"a2a {a['name']}: no legend label repeats",
                  len(labels) == len(set(labels)) and len(labels) >= a["lines"], "\n".join(labels))
            check(f"a2a {a['name']}: latency against chunk size on log axes with units",
                  a["scales"] == ["log", "log"] and "bytes" in a["axis_labels"][0] and "µs" in a["axis_labels"][1],
                  str(a["scales"] + a["axis_labels"]))
            size = png_size(a["png"])
            check(f"a2a {a['name']}: PNG {size} at least 800 px wide, no text outside it",
                  size and size[0] >= 800 and not a["outside"], str(a["outside"]))
        check("the 2-GPU protocol sweep has a line per protocol (the old plot pooled them in one 'lsa device graph')",
              any(a["name"].startswith("h200x2") and sum("ll, graph 16" in x for x in a["labels"]) >= 1
                  and sum(", graph 16" in x for x in a["labels"]) >= 4 for a in rep["a2a"]),
              "\n".join(str(a["labels"]) for a in rep["a2a"]))
        for m in rep["matrix"]:
            size = png_size(m["png"])
            check(f"heatmap {m['name']}: PNG {size} at least 800 px wide, title and labels whole",
                  size and size[0] >= 800 and not m["outside"], str(m["outside"]))
            check(f"heatmap {m['name']}: the colour bar says what is one colour",
                  "relative to the median" in m["bar"] and "one colour" in m["bar"] and "±" in m["bar"], m["bar"])
        made = rep["made"]
        check(f"cells 0.1 % and 1.5 % from the median are one colour (tolerance ±{100 * made['tolerance']:.1f} %)",
              len(made["within"]) == 1, str(made))
        check("a link 30 % slower has another colour", made["slow"] not in made["within"], str(made))

        # End to end: render-results started by this interpreter draws with the plot interpreter.
        res = os.path.join(tmp, "results")
        for path in A2A["h200"] + MATRICES[:1]:
            os.makedirs(os.path.dirname(os.path.join(res, path)), exist_ok=True)
            shutil.copy(os.path.join(RESULTS, path), os.path.join(res, path))
        p = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "render-results"), "--results", res],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=240)
        pngs = sorted(n for n in os.listdir(res) if n.endswith(".png"))
        page = open(os.path.join(res, "README.md")).read() if os.path.exists(os.path.join(res, "README.md")) else ""
        sizes = {n: png_size(os.path.join(res, n)) for n in pngs}
        check(f"scripts/render-results run by {sys.executable} draws the plots ({exe}) and links each",
              p.returncode == 0 and len(pngs) == 4 and all(f"]({n})" in page for n in pngs)
              and "plots drawn by" in p.stdout, p.stdout + str(pngs))
        check(f"... every PNG at least 800 px wide: {sizes}", pngs and all(s and s[0] >= 800 for s in sizes.values()))
    finish()


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2])
    else:
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: harness.py
        main()
