# SPDX-License-Identifier: MIT
"""Rows of several systems side by side: which are mori-a2a's, launch modes, like-mode pairs, labels, the table.

Which addressing is mori's comes from the results model (scripts/mori_results/constants.py), the one place it is
defined; scripts/compare puts scripts/ on sys.path before importing this package."""
from mori_results.a2a import fmt_chunk
from mori_results.constants import MORI_ADDRESSING


def is_mori_row(row):
    return row.get("addressing") in MORI_ADDRESSING


def mode(row):
    """'graph' or 'eager': the only two classes speedups may be taken within."""
    return "graph" if row.get("graph") else "eager"


def like_pairs(rows):
    """(mori row, other row) pairs of the same chunk and the same launch mode: graph with graph (mori's graph rows
    vs NCCL graph, nccl-lsa, torch-symm graph), non-graph with non-graph (mori's device-sync non-graph and host-sync
    rows vs NCCL eager and torch-symm host). Rows with an error or no time are left out."""
    ok = [r for r in rows if not r.get("error") and (r.get("time_us") or {}).get("p50")]
    pairs = []
    for m in (r for r in ok if is_mori_row(r)):
        for o in (r for r in ok if not is_mori_row(r)):
            if o["chunk_bytes"] == m["chunk_bytes"] and mode(o) == mode(m):
                pairs.append((m, o))
    return pairs


def label(row):
    a = row.get("addressing")
    if is_mori_row(row):
        return f"mori {a} {row.get('sync')}" + (f" graph{row.get('graph_iters') or ''}" if row.get("graph") else "")
    proto = row.get("protocol") or ""
    if row.get("source") == "nccl-tests":
        name = f"nccl-tests {proto}"
    elif a == "nccl":
        name = "torch nccl all_to_all_single"
    else:
        name = f"{a} {proto} {row.get('sync')}-sync"
    return name + (" graph" if row.get("graph") else " eager")


def fmt_size(b):
    return fmt_chunk(b)


def table(rows):
    """The rows and the like-mode speedups as text (p50 microseconds; speedup = other p50 / mori p50)."""
    lines = [f"{'chunk':>9}  {'system':<44} {'samples':>7} {'p50 us':>10} {'p95 us':>10} {'total GB/s':>10} "
             f"{'wrong':>5}"]
    for r in sorted(rows, key=lambda r: (r["chunk_bytes"], mode(r), not is_mori_row(r), label(r))):
        t = r.get("time_us") or {}
        if r.get("error"):
            lines.append(f"{fmt_size(r['chunk_bytes']):>9}  {label(r):<44} ERROR {r['error'][:80]}")
            continue
        p95 = t.get("p95")
        tot = r.get("total_bw_gbps")
        lines.append(f"{fmt_size(r['chunk_bytes']):>9}  {label(r):<44} {r.get('samples', 0):>7} {t['p50']:>10.2f} "
                     f"{(f'{p95:.2f}' if p95 is not None else '-'):>10} {(f'{tot:.1f}' if tot else '-'):>10} "
                     f"{r.get('wrong', 0):>5}")
    pairs = like_pairs(rows)
    if pairs:
        lines.append("")
        lines.append("like-for-like speedups (other p50 / mori p50; >1: mori faster), graph with graph, eager with eager:")
        for m, o in sorted(pairs, key=lambda p: (p[0]["chunk_bytes"], mode(p[0]), label(p[0]), label(p[1]))):
            lines.append(f"{fmt_size(m['chunk_bytes']):>9}  {mode(m):<5}  {label(m):<26} vs {label(o):<34} "
                         f"{o['time_us']['p50'] / m['time_us']['p50']:6.2f}x")
    return "\n".join(lines)
