# SPDX-License-Identifier: MIT
"""mori-a2a's own mori.a2a/2 or /3 document (--mori-json): loaded, its rows appended, its reference fields copied."""
from mori_results.errors import Malformed
from mori_results.reader import read_json

from .options import UsageError
from .report import MORI_SCHEMAS
from .rows import is_mori_row, mode

# Spelled, not the row table's role "reference" (row_fields.py): ceiling_graph, ceiling_spread and ceilings describe
# how mori-a2a's own ceiling was measured (its rounds), not a reference an external row may borrow.
REFERENCE_FIELDS = ("push_only_us", "sync_only_us", "ceiling_bw_gbps", "ceiling_kind", "physical_bw_gbps",
                    "physical_source")


def load_mori(path, world):
    """A mori-a2a mori.a2a/2 or /3 document of the same machine and world (UsageError otherwise)."""
    try:
        doc = read_json(path)
    except Malformed as e:
        raise UsageError(f"--mori-json {e}")
    if not isinstance(doc, dict):
        raise UsageError(f"--mori-json {path}: the document is not a JSON object")
    if doc.get("schema") not in MORI_SCHEMAS:
        raise UsageError(f"--mori-json {path}: schema {doc.get('schema')!r}, expected one of {MORI_SCHEMAS}")
    if len(doc.get("teams") or []) > 1:
        raise UsageError(f"--mori-json {path}: a job of several load/store teams; compare one node's run")
    w = (doc.get("meta") or {}).get("world")
    if world and w and w != world:
        raise UsageError(f"--mori-json {path}: world {w}, this run has {world}")
    return doc


def merge_mori(rows, mori_doc):
    """Copies mori's reference fields of the same chunk into each external row and returns mori's rows to append."""
    mori_rows = [r for r in mori_doc.get("results") or [] if is_mori_row(r)]
    for r in rows:
        if is_mori_row(r):
            continue
        same = [m for m in mori_rows if m.get("chunk_bytes") == r.get("chunk_bytes")]
        # prefer the row of the same launch mode, then any
        same.sort(key=lambda m: mode(m) != mode(r))
        if not same:
            continue
        for k in REFERENCE_FIELDS:
            if k in same[0]:
                r[k] = same[0][k]
        r["references_from"] = "mori-a2a"
    out = []
    for m in mori_rows:
        m = dict(m)
        m.setdefault("source", "mori-a2a")
        out.append(m)
    return out
