# SPDX-License-Identifier: MIT
"""Every mori-a2a row's plan against the hand-written plan table (results/expectations/a2a-plan.json, schema
mori.a2a-plan-table/1; docs/evidence.md "The plan check"). tests/unit/a2a_plan_test.cpp holds the code to the same
table; this holds what actually ran to it."""
import json

from .errors import Malformed
from .reader import read_json

SCHEMA = "mori.a2a-plan-table/1"
FIELDS = ("protocol", "blocks_per_peer", "unroll", "launch", "signal_scope", "source_cache")
# Options that choose by hand what the plan would choose (mori-a2a's report config; "auto", 0 or null: the
# plan's). --launch is programmatic by default (where the plan finds it safe); only plain overrides the plan.
BY_HAND = ("blocks_per_peer", "unroll", "signal_scope", "source_cache")


class TableError(Exception):
    pass


def load_table(path):
    """The table at path, read by the results model's bounded, strict reader (a FIFO, a device, a truncated or
    too deeply nested file is a TableError naming it, never a hang or a traceback)."""
    try:
        t = read_json(path)
    except Malformed as e:
        raise TableError(str(e)) from e
    if not isinstance(t, dict) or t.get("schema") != SCHEMA or not isinstance(t.get("cases"), list):
        raise TableError(f"{path}: not a {SCHEMA} table")
    for i, c in enumerate(t["cases"]):
        if not isinstance(c, dict) or not isinstance(c.get("cells", []), list) or not all(
                isinstance(cell, dict) for cell in c.get("cells", [])) or not isinstance(c.get("match") or {}, dict):
            raise TableError(f"{path}: cases[{i}]: not an object with a match object and a list of cell objects")
        for cell in c.get("cells", []):
            missing = [k for k in ("chunk", "sync", "cite", *FIELDS) if k not in cell]
            if missing:
                raise TableError(f"{path}: case {c.get('name')}: a cell without {', '.join(missing)}")
    return t


def _facts(doc):
    """What a case of the table matches on; "placement" is the rows' plan placement (their field "placement")."""
    meta = doc.get("meta") or {}
    ranks = [r for r in meta.get("ranks") or [] if isinstance(r, dict)]
    names = {r.get("device_name") for r in ranks if r.get("device_name")}
    archs = {r.get("arch") for r in ranks if r.get("arch")}
    rows = doc.get("results") or []
    placements = {r.get("placement") for r in rows}
    return {"platform": meta.get("platform"), "devices": names, "archs": archs, "world": meta.get("world"),
            "placement": placements.pop() if len(placements) == 1 else None,
            "plan_policy": meta.get("plan_policy") or "placement"}


# How near a case's GPU is to the report's, as the automatic tables take the nearest measured GPU
# (docs/mori-a2a.md "The automatic tables"): 0 the model (match.device), 1 the same arch (match.arch), 2 the
# same vendor (the platform alone).
NEARNESS = ("the GPU model", "the same arch", "the same vendor")


def _nearness(m, f):
    if "device" not in m or any(m["device"].lower() in n.lower() for n in f["devices"]):
        return 0
    if m.get("arch") in f["archs"]:
        return 1
    return 2


def _fits(m, f):
    """Whether a case's match fits the report in everything but the GPU model."""
    if not m:
        return False
    if m.get("platform") not in (None, f["platform"]) or m.get("placement") != f["placement"]:
        return False
    if "world" in m and m["world"] != f["world"]:
        return False
    return m.get("plan_policy", "placement") == f["plan_policy"]


def find_case_nearest(table, doc):
    """(case, nearness): the first case that fits the report on its GPU model, else the first on the same arch,
    else the first of the same vendor (a GPU the table has no case for checks against the nearest measured
    GPU's, as its plan read that GPU's cells); (None, None) where no case fits."""
    f = _facts(doc)
    fitting = [c for c in table["cases"] if _fits(c.get("match") or {}, f)]
    for level in range(len(NEARNESS)):
        for c in fitting:
            if _nearness(c["match"], f) == level:
                return c, level
    return None, None


def find_case(table, doc):
    """The case the report is checked against (find_case_nearest), or None."""
    return find_case_nearest(table, doc)[0]


def _hand(cfg):
    return [k for k in BY_HAND if cfg.get(k) not in (None, "auto", 0)] + (
        ["launch"] if cfg.get("launch") == "plain" else [])


def check_report(table, doc, report="report", plan_placement=None):
    """{"case", "case_by"?, "rows", "checked", "differs": [...], "uncovered": [...], "by_hand": n}. A row differs where a
    field of its plan is not the table cell's, or where its plan placement (the row's field "placement") is not
    `plan_placement` (what the run's machine is: one_rank_per_gpu on a node); it is uncovered where the table has no
    cell for it (a failure where every choice was the plan's, listed only where the options chose by hand)."""
    rows = doc.get("results") or []
    cfg = doc.get("config") or {}
    out = {"report": report, "case": None, "rows": len(rows), "checked": 0, "differs": [], "uncovered": [],
           "by_hand": 0}
    if plan_placement:
        out["placement"] = plan_placement
        out["differs"] += [f"{report} row {i} (chunk {r.get('chunk_bytes')} B): placement "
                           f"{json.dumps(r.get('placement'))}, the machine is {plan_placement}"
                           for i, r in enumerate(rows) if r.get("placement") != plan_placement]
    c, near = find_case_nearest(table, doc)
    f = _facts(doc)
    if c is None:
        out["uncovered"].append(f"no case of the table matches (platform {f['platform']}, placement "
                                f"{f['placement']}, world {f['world']}, devices {sorted(f['devices'])}, "
                                f"plan_policy {f['plan_policy']})")
        out["automatic"] = not _hand(cfg) and cfg.get("protocol") in (None, "auto")
        return out
    out["case"] = c["name"]
    if near:  # a GPU the table has no case for: the nearest measured GPU's case, said so
        out["case_by"] = (f"nearest GPU: {NEARNESS[near]} ({', '.join(sorted(f['archs']))}); no case for "
                          f"{', '.join(sorted(f['devices']))}")
    hand = _hand(cfg)
    proto_given = cfg.get("protocol") not in (None, "auto")
    out["automatic"] = not hand and not proto_given
    if hand:  # not the plan's choices: nothing to hold to the table
        out["by_hand"] = len(rows)
        return out
    for i, r in enumerate(rows):
        key = f"row {i} (chunk {r.get('chunk_bytes')} B, {r.get('addressing')}, sync {r.get('sync')}" + (
            ", graph" if r.get("graph") else "") + f", {r.get('protocol')})"
        cells = [x for x in c["cells"] if x["chunk"] == r.get("chunk_bytes") and x["sync"] == r.get("sync")]
        if r.get("sync") == "device":
            if proto_given:
                cells = [x for x in cells if x["protocol"] == r.get("protocol")]
            else:
                cells = [x for x in cells if not x.get("protocol_given")]
        if not cells:
            out["uncovered"].append(f"{report} {key}: no cell in case {c['name']}")
            continue
        cell = cells[0]
        out["checked"] += 1
        for k in FIELDS:
            if r.get(k) != cell[k]:
                out["differs"].append(f"{report} {key}: {k} {json.dumps(r.get(k))}, the table (case {c['name']}) "
                                      f"says {json.dumps(cell[k])} ({cell['cite']})")
    return out


def verdict(result):
    """None where the rows hold to the table, else why not (the first rows and fields that differ)."""
    bad = list(result["differs"])
    if result.get("automatic"):
        bad += result["uncovered"]
    if not bad:
        return None
    more = f" (and {len(bad) - 3} more)" if len(bad) > 3 else ""
    return "plan check: " + "; ".join(bad[:3]) + more
