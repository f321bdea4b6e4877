# SPDX-License-Identifier: MIT
"""The fields of mori-a2a's rows as the library declares them once (lib/src/a2a/row.cpp): role (identity, metric,
reference, detail), unit, and the direction perf-check gates each by (lower or higher). scripts/a2a-row writes them,
from the same declaration, into results/schema/a2a.schema.json (x-role, x-unit, x-better) and into
row_fields_table.py beside this file (a module, so that the scripts need no file of results/ to start); CTest
results.a2a_row fails where either differs. The gate's metrics and the row identity's fields are read from here,
not spelled again.
"""
from .row_fields_table import ROW_FIELDS

# The percentiles of time_us that perf-check gates, by the names its --metric takes (docs/perf-check.md).
TIME_METRICS = {"p50": "time_p50_us", "p95": "time_p95_us"}


def row_fields():
    """name -> {"role", "unit", "better"} for every field of a mori-a2a row, in the row's order."""
    return ROW_FIELDS


def identity_fields():
    """The row fields that change what ran (role identity), in the row's order."""
    return [n for n, f in ROW_FIELDS.items() if f["role"] == "identity"]


def gated_metrics():
    """perf-check's metrics: command-line name -> higher is better, for every field with a direction (time_us
    stands for its gated percentiles)."""
    out = {}
    for name, f in ROW_FIELDS.items():
        if f["better"] is None:
            continue
        for metric in (TIME_METRICS.values() if name == "time_us" else (name,)):
            out[metric] = f["better"] == "higher"
    return out
