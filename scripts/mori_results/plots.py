# SPDX-License-Identifier: MIT
"""PNG plots of the results (matplotlib; docs/perf-check.md "Plots"): the all-to-all latency and bandwidth by chunk
size, one line per configuration a user can re-run, and the peer matrix's heatmaps, coloured relative to the median
so that what is within the measurement's spread is one colour.

pyplot() is None where matplotlib does not import; plot_interpreter() names one where it does (the running
interpreter, $MORI_PLOT_PYTHON, or Debian's /usr/bin/python3, which python3-matplotlib serves).
The figure functions return the figure and what it shows, so that a test can inspect them before they are saved.
"""
import io
import json
import os
import statistics
import subprocess
import sys
import textwrap
from dataclasses import fields

from .a2a import ABSENT, Identity, fmt_chunk
from .files import replacing
from .tables import group_title, plot_name
from . import env as envvars

DPI = 100
SYSTEM_PYTHON = "/usr/bin/python3"  # Debian's python3-matplotlib serves this interpreter only
PLOT_PYTHON_ENV = "MORI_PLOT_PYTHON"
# What makes a configuration a user re-runs (mori-a2a --addressing, --sync, --protocol, --graph; eager rows are
# graph 0). The group (device, GPUs, world, MPS, schema version, revision) fixes the rest; the other identity
# fields join only where a sweep pinned them (two rows of one chunk would otherwise share a line).
CONFIG_FIELDS = ("addressing", "sync", "protocol", "graph")
GROUP_FIELDS = ("version", "platform", "device", "gpus", "world", "mps", "chunk_bytes")
EXTRA_FIELDS = tuple(f.name for f in fields(Identity) if f.name not in CONFIG_FIELDS + GROUP_FIELDS)
SHORT = {"blocks_per_peer": "bpp", "signal_scope": "scope", "source_cache": "cache", "kernel_dir": "kernels",
         "ranks_per_gpu": "ranks/GPU"}
# Heatmaps: deviations from the median within MIN_TOLERANCE (or the rows' own spread, if larger) are one colour.
MIN_TOLERANCE = 0.02
MATRIX_KEYS = (("write_gbps", "write GB/s", "GB/s", True), ("read_gbps", "read GB/s", "GB/s", True),
               ("latency_us_p50", "latency us", "µs", False))


def pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def plot_interpreter(timeout=60):
    """(path, None) of an interpreter that imports matplotlib: the running one, then $MORI_PLOT_PYTHON, then
    /usr/bin/python3; (None, why) where none does."""
    if pyplot() is not None:
        return sys.executable, None
    tried = [sys.executable]
    for exe in (envvars.read(PLOT_PYTHON_ENV), SYSTEM_PYTHON):
        if not exe or exe in tried:
            continue
        tried.append(exe)
        if not os.access(exe, os.X_OK) or os.path.realpath(exe) == os.path.realpath(sys.executable):
            continue
        try:
            p = subprocess.run([exe, "-c", "import matplotlib; matplotlib.use('Agg'); import matplotlib.pyplot"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=timeout)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if p.returncode == 0:
            return exe, None
    return None, (f"matplotlib does not import in {', '.join(tried)} (apt-get install python3-matplotlib: Debian's "
                  f"serves {SYSTEM_PYTHON}; ${PLOT_PYTHON_ENV} names another interpreter)")


def save(plt, fig, path):
    """Writes fig as a PNG of 256 colours where Pillow (which matplotlib needs) imports: a third of the size."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    plt.close(fig)
    try:
        from PIL import Image
        img = Image.open(io.BytesIO(buf.getvalue())).convert("RGB").quantize(colors=256)
        buf = io.BytesIO()
        img.save(buf, format="PNG", optimize=True)
    except ImportError:
        pass
    with replacing(path, "--results", binary=True) as f:  # the scripts' one writer (files.py)
        f.write(buf.getvalue())


# ---- all-to-all: one line per configuration -----------------------------------------------------------------------

# Options a run may pin (mori-a2a's command line) and their defaults: a pinned one is part of the configuration
# (the per-chunk values the plan chose under the default are not: they change from chunk to chunk).
OPTIONS = (("blocks_per_peer", "--blocks-per-peer", 0), ("unroll", "--unroll", 0),
           ("launch", "--launch", "programmatic"), ("signal_scope", "--signal-scope", "auto"),
           ("source_cache", "--source-cache", "auto"))


def run_options(runs):
    """id(row) -> ((option, value), ...) the row's run pinned (OPTIONS), for a2a_lines."""
    out = {}
    for run in runs:
        cfg = run.config or {}
        pinned = tuple((opt, cfg[key]) for key, opt, default in OPTIONS
                       if cfg.get(key, default) not in (default, None))
        for row in run.rows:
            out[id(row)] = pinned
    return out


def _config(ident, extra):
    return tuple((f, getattr(ident, f)) for f in CONFIG_FIELDS + tuple(extra))


def a2a_lines(rows, options=None):
    """identity -> [rows] of one group -> [(configuration, {chunk: [rows]})], one entry per configuration:
    (field, value) pairs, CONFIG_FIELDS first, then the options the row's run pinned (options: run_options), then
    any identity field that must still tell two rows of a chunk apart."""
    extra = []
    while True:
        lines = {}
        for ident, rs in rows.items():
            for r in rs:
                key = _config(ident, extra) + (options or {}).get(id(r), ())
                lines.setdefault(key, {}).setdefault(ident.chunk_bytes, {}).setdefault(ident, []).append(r)
        clash = [list(ids) for pts in lines.values() for ids in pts.values() if len(ids) > 1]
        more = [f for f in EXTRA_FIELDS
                if f not in extra and any(len({getattr(i, f) for i in ids}) > 1 for ids in clash)]
        if not clash or not more:  # identities are distinct: a clash always has a field that tells it apart
            break
        extra.append(more[0])
    return [(cfg, {c: [r for rs in ids.values() for r in rs] for c, ids in pts.items()})
            for cfg, pts in sorted(lines.items(), key=lambda kv: str(kv[0]))]


def config_label(cfg):
    """The legend entry of a configuration: the values of mori-a2a's --addressing, --sync, --protocol, --graph."""
    d = dict(cfg)
    parts = [str(d["addressing"]), f"{d['sync']} sync"]
    if d["protocol"] is not ABSENT:
        parts.append(str(d["protocol"]))
    parts.append(f"graph {d['graph']}" if d["graph"] else "eager")
    for f, v in cfg[len(CONFIG_FIELDS):]:  # an option the run pinned (--unroll 8), or an identity field
        parts.append(f"{SHORT.get(f, f)} {'-' if v is ABSENT else v}")
    return ", ".join(parts)


def _median(rs, get):
    vs = [v for v in (get(r) for r in rs) if v is not None]
    return statistics.median(vs) if vs else None


def _chunk_axis(ax, chunks):
    ax.set_xscale("log", base=2)
    ax.set_xticks(chunks)
    ax.set_xticklabels([fmt_chunk(c) for c in chunks], rotation=30 if len(chunks) > 6 else 0)
    ax.minorticks_off()
    ax.set_xlabel("chunk per peer (bytes, log scale)")
    ax.grid(True, which="major", alpha=0.3)


def a2a_figure(plt, g, rows, options=None):
    """The plot of one table (group g, identity -> rows; options: run_options): p50 latency and total bandwidth
    against chunk size, one line per configuration. -> (figure, [(label, configuration, {chunk: p50 us})])."""
    lines = a2a_lines(rows, options)
    chunks = sorted({i.chunk_bytes for i in rows})
    runs = max(len(rs) for rs in rows.values())
    fig = plt.figure(figsize=(12, 5.6 + 0.24 * ((len(lines) + 2) // 2)), dpi=DPI, layout="constrained")
    grid = fig.add_gridspec(2, 2, height_ratios=[5, 0.2 + 0.24 * ((len(lines) + 2) // 2)])
    lat, bw, leg = fig.add_subplot(grid[0, 0]), fig.add_subplot(grid[0, 1]), fig.add_subplot(grid[1, :])
    keys = sorted({str(cfg[1:]) for cfg, _ in lines})  # one colour per configuration but the addressing
    colours = plt.get_cmap("tab10" if len(keys) <= 10 else "tab20").colors
    shown = []
    for cfg, pts in lines:
        xs = sorted(pts)
        label = config_label(cfg)
        style = dict(color=colours[keys.index(str(cfg[1:])) % len(colours)],
                     marker={"ptr": "o", "lsa": "s"}.get(dict(cfg)["addressing"], "x"),
                     linestyle="-" if dict(cfg)["addressing"] != "lsa" else "--", label=label,
                     gid=json.dumps([[f, None if v is ABSENT else v] for f, v in cfg]))
        ys = [_median(pts[c], lambda r: r.p50) for c in xs]
        lat.plot(xs, ys, **style)
        bw.plot(xs, [_median(pts[c], lambda r: r.total_bw_gbps) for c in xs], **style)
        shown.append((label, cfg, dict(zip(xs, ys))))
    ceil = [_median([r for i in rows if i.chunk_bytes == c for r in rows[i]], lambda r: r.ceiling_bw_gbps)
            for c in chunks]
    if any(v is not None for v in ceil):
        bw.plot(chunks, ceil, "k-", linewidth=2.5, alpha=0.6, label="ceiling (same runs' copy, median)")
    for ax in (lat, bw):
        _chunk_axis(ax, chunks)
    lat.set_yscale("log")
    lat.set_ylabel("p50 time per iteration (µs, log scale)")
    lat.set_title("latency", fontsize=10)
    bw.set_ylabel("total bandwidth (GB/s = 10^9 B/s)")
    bw.set_title("bandwidth", fontsize=10)
    leg.axis("off")
    handles, labels = bw.get_legend_handles_labels()
    leg.legend(handles, labels, loc="center", ncol=2, fontsize=8, frameon=False,
               title="one line per configuration (mori-a2a --addressing, --sync, --protocol, --graph)",
               title_fontsize=8)
    fig.suptitle("\n".join(textwrap.wrap(
        f"mori-a2a on {group_title(g)}: median over {runs} run{'s' if runs > 1 else ''} of each row's p50", 110)),
        fontsize=11)
    return fig, shown


def plot_group(plt, g, rows, root, options=None):
    """Writes the plot of one table into root; its file name."""
    fig, _ = a2a_figure(plt, g, rows, options)
    png = plot_name(g)
    save(plt, fig, os.path.join(root, png))
    return png


# ---- peer matrix heatmaps ------------------------------------------------------------------------------------------

def bucket_edges(tol):
    """Edges of the relative deviation from the median: within ±tol one bucket, then two bands each side."""
    e1 = max(0.10, 2 * tol)
    e2 = max(0.25, 2 * e1)
    return [-1e9, -e2, -e1, -tol, tol, e1, e2, 1e9]


def own_spread(m, key):
    """The rows' own spread: the median relative difference between the two addressings' measurements of one pair
    in the same run (0 where a pair was measured once)."""
    by_pair = {}
    for r in m["rows"]:
        if r.get(key) is not None:
            by_pair.setdefault((r["src"], r["dst"]), []).append(r[key])
    diffs = [(max(v) - min(v)) / statistics.mean(v) for v in by_pair.values() if len(v) > 1 and statistics.mean(v)]
    return statistics.median(diffs) if diffs else 0.0


def matrix_figure(plt, m, key, title, label, higher_is_better=True, unit="GB/s"):
    """A heatmap of one metric of a peer matrix (ptr rows): each cell coloured by its deviation from the median,
    within max(±2 %, the rows' own spread) one colour. -> (figure, {"tolerance", "median", "grid"})."""
    from matplotlib.colors import BoundaryNorm, ListedColormap
    n = max(max(r["src"], r["dst"]) for r in m["rows"]) + 1
    grid = [[float("nan")] * n for _ in range(n)]
    for r in m["rows"]:
        if r["addressing"] == "ptr" and r.get(key) is not None:
            grid[r["src"]][r["dst"]] = r[key]
    vals = [v for row in grid for v in row if v == v]
    med = statistics.median(vals) if vals else 1.0
    tol = max(MIN_TOLERANCE, own_spread(m, key))
    rel = [[(v / med - 1) if v == v and med else float("nan") for v in row] for row in grid]
    worse, better = ["#8e0152", "#de77ae", "#fde0ef"], ["#e6f5d0", "#7fbc41", "#276419"]
    colours = (worse + ["#d9d9d9"] + better) if higher_is_better else (better[::-1] + ["#d9d9d9"] + worse[::-1])
    edges = bucket_edges(tol)
    cmap = ListedColormap(colours)
    cmap.set_bad("white")
    fig, ax = plt.subplots(figsize=(9, 7.2), dpi=DPI, layout="constrained")
    im = ax.imshow(rel, cmap=cmap, norm=BoundaryNorm(edges, len(colours)))
    size = max(6, min(12, 60 // n))
    for s in range(n):
        for d in range(n):
            v = grid[s][d]
            ax.text(d, s, "-" if v != v else f"{v:.3g}\n{100 * rel[s][d]:+.1f} %", ha="center", va="center",
                    fontsize=size)
    ax.set_xticks(range(n))
    ax.set_yticks(range(n))
    ax.set_xlabel("dst rank")
    ax.set_ylabel("src rank")
    bar = fig.colorbar(im, ax=ax, ticks=edges[1:-1], shrink=0.9)
    bar.ax.set_yticklabels([f"{100 * e:+.0f} %" if abs(e) >= 0.1 else f"{100 * e:+.1f} %" for e in edges[1:-1]])
    bar.set_label("\n".join(textwrap.wrap(
        f"{label} relative to the median ({med:.3g} {unit}; {'higher' if higher_is_better else 'lower'} is better): "
        f"within ±{100 * tol:.1f} % (the rows' own spread, at least ±{100 * MIN_TOLERANCE:.0f} %) is one colour",
        60)), fontsize=9)
    ax.set_title("\n".join(textwrap.wrap(title, 70)), fontsize=11)
    return fig, {"tolerance": tol, "median": med, "grid": grid, "image": im}


def matrix_tag(path, root):
    return os.path.relpath(os.path.dirname(path), root).replace(os.sep, "-").replace(".", "root")


def matrix_title(path, root, m, label):
    return (f"mori-probe peer matrix, {os.path.relpath(path, root)}: {label}, ptr, "
            f"{m['bytes'] >> 20} MiB transfers" + (f", p50 of {m['rounds']} round trips / 2" if "rounds" in m and
                                                    label.startswith("latency") else ""))


def plot_matrix(plt, path, m, root):
    """Heatmaps of a probe's peer matrix (ptr rows) into root; [(label, PNG name)]."""
    names = []
    for (key, label, unit, higher), (_, name) in zip(MATRIX_KEYS, matrix_names(path, root)):
        fig, _ = matrix_figure(plt, m, key, matrix_title(path, root, m, label), label, higher, unit)
        save(plt, fig, os.path.join(root, name))
        names.append((label, name))
    return names


def matrix_names(path, root):
    tag = matrix_tag(path, root)
    return [(label, f"matrix-{tag}-{key}.png") for key, label, _, _ in MATRIX_KEYS]
