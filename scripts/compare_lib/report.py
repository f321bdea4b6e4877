# SPDX-License-Identifier: MIT
"""The mori.a2a/3 document this command writes (results/schema/), and the exit code it stands for."""
import json

from mori_results.files import write_text

from .options import EXIT_OK, EXIT_RUNTIME, EXIT_WRONG, parse_systems

SCHEMA = "mori.a2a/3"
# mori-a2a documents --mori-json takes: /3 and /2 rows mean the same (docs/json.md "mori.a2a/3").
MORI_SCHEMAS = ("mori.a2a/2", "mori.a2a/3")


def document(meta, a, chunks, rows, replays):
    doc = {"schema": SCHEMA, "meta": meta,
           "config": {"chunks": chunks, "addressing": "compare", "sync": "both", "graph": a.graph,
                      "iters": a.iters, "warmup": a.warmup, "replays": replays, "systems": parse_systems(a.systems),
                      "blocks_per_peer": a.blocks_per_peer, "symm_entry_barrier": a.symm_entry_barrier,
                      "nccl_tests": a.nccl_tests, "mori_json": a.mori_json,
                      "timing": "per iteration: max over ranks; percentiles: linear, pos = q*(n-1)"},
           "results": rows, "wrong": sum(int(r.get("wrong") or 0) for r in rows)}
    return doc


def write(path, doc):
    """Through the scripts' one writer (mori_results.files): only a regular file or a new name is replaced."""
    write_text(path, json.dumps(doc, indent=2), "--json")


def exit_code(doc):
    rows = doc.get("results") or []
    if doc.get("error") or any(r.get("error") for r in rows):
        return EXIT_RUNTIME if not any(int(r.get("wrong") or 0) for r in rows) else EXIT_WRONG
    if any(int(r.get("wrong") or 0) for r in rows):
        return EXIT_WRONG
    return EXIT_OK
