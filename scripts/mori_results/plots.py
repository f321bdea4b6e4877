"""PNG plots of the results tables (matplotlib, optional: pyplot() is None without it)."""
import os

from .tables import group_title, med, plot_name


def pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def plot_group(plt, g, rows, root):
    """The plot of one table (identity -> raw rows): total bandwidth by chunk per configuration, and the ceiling."""
    fig, ax = plt.subplots(figsize=(7, 4))
    combos = sorted({(i.addressing, i.sync, i.graph) for i in rows})
    for addr, sync, graph in combos:
        by_chunk = {}
        for i in rows:
            if (i.addressing, i.sync, i.graph) == (addr, sync, graph):
                by_chunk.setdefault(i.chunk_bytes, []).extend(rows[i])
        xs = sorted(by_chunk)
        ys = [med(by_chunk[c], lambda r: r.get("total_bw_gbps")) for c in xs]
        style = "-" if sync == "host" else ("--" if not graph else ":")
        ax.plot([c >> 10 for c in xs], ys, style, marker={"ptr": "o", "lsa": "s"}.get(addr, "x"),
                label=f"{addr} {sync}{' graph' if graph else ''}")
    cs = sorted({i.chunk_bytes for i in rows})
    ceil = [med([r for i in rows if i.chunk_bytes == c for r in rows[i]], lambda r: r.get("ceiling_bw_gbps"))
            for c in cs]
    if any(v is not None for v in ceil):
        ax.plot([c >> 10 for c in cs], ceil, "k-", linewidth=2, label="ceiling (same run)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("chunk per peer (KiB)")
    ax.set_ylabel("total GB/s")
    ax.set_title(group_title(g), fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(True, alpha=0.3)
    png = plot_name(g)
    fig.tight_layout()
    fig.savefig(os.path.join(root, png), dpi=90)
    plt.close(fig)
    return png


def plot_matrix(plt, path, m, root):
    """Heatmaps of a probe's peer matrix (ptr rows); the names of the PNGs written."""
    n = max(max(r["src"], r["dst"]) for r in m["rows"]) + 1
    tag = os.path.relpath(os.path.dirname(path), root).replace(os.sep, "-").replace(".", "root")
    names = []
    for key, label in (("write_gbps", "write GB/s"), ("read_gbps", "read GB/s"), ("latency_us_p50", "latency us")):
        grid = [[float("nan")] * n for _ in range(n)]
        for r in m["rows"]:
            if r["addressing"] == "ptr" and r[key] is not None:
                grid[r["src"]][r["dst"]] = r[key]
        fig, ax = plt.subplots(figsize=(1.2 + 0.6 * n, 1 + 0.5 * n))
        im = ax.imshow(grid, cmap="viridis")
        fig.colorbar(im, ax=ax, label=label)
        ax.set_xlabel("dst rank")
        ax.set_ylabel("src rank")
        ax.set_title(f"{label} (ptr)", fontsize=9)
        name = f"matrix-{tag}-{key}.png"
        fig.tight_layout()
        fig.savefig(os.path.join(root, name), dpi=90)
        plt.close(fig)
        names.append((label, name))
    return names


def matrix_names(path, root):
    tag = os.path.relpath(os.path.dirname(path), root).replace(os.sep, "-").replace(".", "root")
    return [(label, f"matrix-{tag}-{key}.png") for key, label in
            (("write_gbps", "write GB/s"), ("read_gbps", "read GB/s"), ("latency_us_p50", "latency us"))]
