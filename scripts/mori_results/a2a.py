# SPDX-License-Identifier: MIT
"""Typed rows of mori.a2a documents and the row identity.

The identity of a row is every field that changes what ran (docs/perf-check.md "Row identity"): schema version,
system, platform, device name, GPU count, world, ranks per GPU, MPS, chunk, addressing, sync, protocol, graph
iterations, blocks per peer, unroll, launch, signal scope, source cache, kernel source (meta.env.MORI_KERNEL_DIR)
and fault point (meta.env.MORI_FAULT). A field an older document lacks is ABSENT, a value of its own: it never
matches a present value, so rows recorded before a field existed are not pooled with rows that record it.
Runs are grouped only within one revision (group_runs).
"""
import os
import statistics
from dataclasses import dataclass, fields, make_dataclass

from .constants import MORI_ADDRESSING, MUTANT_FAULTS
from .documents import load_documents
from .errors import Malformed
from .row_fields import identity_fields, row_fields


class _Absent:
    """A field the document does not record: a value of its own, equal only to itself."""

    def __repr__(self):
        return "absent"

    __str__ = __repr__

    def __reduce__(self):
        return "ABSENT"


ABSENT = _Absent()


# The identity: the job's fields, then the row's fields of role identity as the schema declares them
# (row_fields.py), then the job's kernel source and fault point. Five row fields are read by rules of their own
# (graph and graph_iters make one: the graph iterations, 0 where the row was not graph-captured); the others are
# the row's recorded settings, ABSENT where a document lacks them.
_JOB_FIELDS = (("version", int), ("system", str),  # system: "mori-a2a", "nccl-tests", "torch" or an addressing
               ("platform", str), ("device", str), ("gpus", int), ("world", int),
               ("ranks_per_gpu", object),  # int, or a fraction written "W/G" where ranks do not divide evenly
               ("mps", bool))
# The rows' meaning by document version, for the identity: mori.a2a/3 added fields only (the team of a row on a job
# of several load/store teams, launch_us) and the fleet block; a row of /2 is a row of the job's one team, the same
# measurement as a /3 row of team_size == world, so both compare (docs/json.md "Versions").
ROW_VERSION = {1: 1, 2: 2, 3: 2}
_ROW_OWN_RULES = ("chunk_bytes", "addressing", "sync", "protocol", "graph", "graph_iters")
SETTINGS = tuple(n for n in identity_fields() if n not in _ROW_OWN_RULES)  # blocks_per_peer, unroll, launch, ...
_SHORT = {"blocks_per_peer": "bpp", "signal_scope": "scope", "source_cache": "cache", "team_size": "team"}
# The label's order of the settings (as labels were first written); a setting added later comes last.
_LABEL_ORDER = tuple(n for n in ("launch", "blocks_per_peer", "unroll", "signal_scope", "source_cache")
                     if n in SETTINGS) + tuple(n for n in SETTINGS if n not in
                                               ("launch", "blocks_per_peer", "unroll", "signal_scope", "source_cache"))


class _IdentityMethods:
    def items(self):
        return [(f.name, getattr(self, f.name)) for f in fields(self)]

    def as_json(self):
        return {k: (None if v is ABSENT else v) for k, v in self.items()} | {
            "absent": [k for k, v in self.items() if v is ABSENT]}

    def sort_key(self):
        return tuple(str(v) if not isinstance(v, int) or isinstance(v, bool) else f"{v:020d}" for _, v in self.items())

    def label(self):
        """One line naming the configuration (fields at their usual value are left out)."""
        size = fmt_chunk(self.chunk_bytes)
        parts = [f"/{self.version}", f"{self.device} x{self.gpus}", f"w{self.world}"]
        if self.mps:
            parts.append("MPS")
        parts += [size, self.addressing, f"{self.sync}-sync"]
        if self.graph:
            parts.append(f"graph{self.graph}")
        parts.append(str(self.protocol) if self.protocol is not ABSENT else "protocol=absent")
        for name in _LABEL_ORDER:
            if name == "team_size" and self.team_size in (self.world, ABSENT):
                continue  # one team: the job (every row before mori.a2a/3)
            parts.append(f"{_SHORT.get(name, name)}={getattr(self, name)}")
        if self.system != "mori-a2a":
            parts.append(f"[{self.system}]")
        if self.kernel_dir is not ABSENT:
            parts.append(f"kernels={self.kernel_dir}")
        if self.fault is not ABSENT:
            parts.append(f"fault={self.fault}")
        return " ".join(parts)


Identity = make_dataclass(
    "Identity", [*_JOB_FIELDS, ("chunk_bytes", int), ("addressing", str), ("sync", str), ("protocol", object),
                 ("graph", int), *((n, object) for n in SETTINGS), ("kernel_dir", object), ("fault", object)],
    bases=(_IdentityMethods,), frozen=True, order=False)
Identity.__module__ = __name__


def fmt_chunk(b):
    if b >= 1 << 20 and b % (1 << 20) == 0:
        return f"{b >> 20} MiB"
    return f"{b >> 10} KiB" if b >= 1024 and b % 1024 == 0 else f"{b} B"


# The row: one attribute per field of the row table (row_fields.py), in its order, then what the reader adds. A
# field the document does not record reads None, as does one it records as null (graph_iters too; the identity
# reads a missing one as 0); `recorded` names the fields the document holds, for a check that tells the two apart.
# Values are as _load_row checked them; a field it has no rule for (placement, l2_resident, ...; the settings of
# another system's row; protocol before mori.a2a/2) is the document's value as it stands. Rows of other systems
# (scripts/compare's nccl-tests and torch rows) have the same attributes; what else they record is not read.
_NUMBERS = ("push_only_us", "sync_only_us", "ceiling_bw_gbps", "physical_bw_gbps", "ceiling_spread", "ceiling_ratio",
            "algbw_gbps")
_BANDWIDTHS = ("total_bw_gbps", "agg_bw_gbps", "busbw_gbps")  # positive in a measured row
_ROW_TYPES = {"chunk_bytes": int, "addressing": str, "sync": str, "graph": bool, "graph_iters": int, "iters": int,
              "samples": int, "time_us": dict, "wrong": int, "ceiling_kind": str, "physical_source": str,
              "ceilings": list} | {n: float for n in _NUMBERS + _BANDWIDTHS}  # the rest: object


@dataclass(frozen=True)
class Ceiling:
    """One round of the row's ceiling (ceilings[]): its round and bandwidth, None where not recorded."""
    round: object
    gbps: object


class _RowMethods:
    @property
    def is_mori(self):
        return self.addressing in MORI_ADDRESSING

    @property
    def mode(self):
        return "graph" if self.graph else "eager"

    def metric(self, name):
        return getattr(self, name) if name != "time_p95_us" else self.p95


Row = make_dataclass(
    "Row", [("identity", Identity), ("index", int), *((n, _ROW_TYPES.get(n, object)) for n in row_fields()),
            ("p50", object), ("p95", object),  # time_us.p50 and .p95
            ("error", object), ("source", object), ("system", str),  # system_of(addressing, source)
            ("recorded", frozenset)], bases=(_RowMethods,))
Row.__module__ = __name__


@dataclass
class Run:
    """One document of mori.a2a: one job, one revision."""
    path: str
    version: int
    tool: str
    revision: object
    time: object
    start: object           # the machine start (boot id of rank 0's host), ABSENT where not recorded
    meta: dict
    config: dict
    rows: list
    wrong_total: object
    step: object = None       # the evidence manifest's step that wrote this file, where there is one
    manifest: object = None

    @property
    def fault(self):
        return (self.meta.get("env") or {}).get("MORI_FAULT")

    @property
    def is_mutant(self):
        # MORI_FAULT is a comma-separated list of points (docs/reliability.md): a mutant may ride with others.
        items = [i.strip() for i in (self.fault or "").split(",")]
        return any(i.startswith(p) for i in items for p in MUTANT_FAULTS)

    @property
    def is_comparison(self):
        return len({r.system for r in self.rows}) > 1

    @property
    def side_run(self):
        """Runs that are not measurements of the tool as users run it: verification mutants (MORI_FAULT), soaks
        (--cycles), tuning sweeps that pin a setting (--blocks-per-peer, --unroll, --protocol, --signal-scope or
        --source-cache other than auto) and other kernel sources (MORI_KERNEL_DIR)."""
        if self.tool != "mori-a2a":
            return False
        env, cfg = self.meta.get("env") or {}, self.config
        pinned = cfg.get("blocks_per_peer", 0) not in (0, None) or cfg.get("unroll", 0) not in (0, None) or any(
            cfg.get(k, "auto") != "auto" for k in ("protocol", "signal_scope", "source_cache"))
        return bool(env.get("MORI_FAULT")) or bool(env.get("MORI_KERNEL_DIR")) or (cfg.get("cycles") or 1) > 1 \
            or pinned


# --- checked field access -----------------------------------------------------------------------------------------

class _Fields:
    """Typed access to one JSON object, failing with the file and the field's place named."""

    def __init__(self, path, where, obj):
        if not isinstance(obj, dict):
            raise Malformed(path, f"{where}: expected an object, found {_jtype(obj)}")
        self.path, self.where, self.obj = path, where, obj

    def fail(self, key, why):
        raise Malformed(self.path, f"{self.where}.{key}: {why}" if self.where else f"{key}: {why}")

    def get(self, key, kind, required=True, default=ABSENT, nullable=False):
        if key not in self.obj:
            if required:
                self.fail(key, "missing")
            return default
        v = self.obj[key]
        if v is None and nullable:
            return None
        return _check(self, key, v, kind)


def _jtype(v):
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null",
            int: "an integer", float: "a number"}.get(type(v), type(v).__name__)


_TYPES = {"str": (str, "a string"), "bool": (bool, "true or false"), "object": (dict, "an object"),
          "array": (list, "an array")}


def _check(f, key, v, kind):
    if kind == "count":  # a non-negative integer (7.0 is refused as much as 7.5: counts are written as integers)
        if isinstance(v, bool) or not isinstance(v, int):
            f.fail(key, f"expected a non-negative integer, found {_jtype(v)} {v!r}")
        if v < 0:
            f.fail(key, f"negative count {v}")
        return v
    if kind in ("number", "positive"):
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            f.fail(key, f"expected a number, found {_jtype(v)} {v!r}")
        if v < 0 or (kind == "positive" and v == 0):
            f.fail(key, f"{v} is not {'positive' if kind == 'positive' else 'a non-negative number'}")
        return v
    if kind in _TYPES:
        t, name = _TYPES[kind]
        if not isinstance(v, t):
            f.fail(key, f"expected {name}, found {_jtype(v)}")
        return v
    if kind == "scalar":  # a recorded setting: a string or a count
        if isinstance(v, str):
            return v
        return _check(f, key, v, "count")
    raise AssertionError(kind)


def system_of(addressing, source):
    """The system a row measures: mori-a2a, nccl-tests, or torch (NCCL and SymmetricMemory launched from torch)."""
    if addressing in MORI_ADDRESSING:
        return "mori-a2a"
    if source == "nccl-tests":
        return "nccl-tests"
    return "torch" if addressing in ("nccl", "torch-symm") else addressing


def _gpus(path, meta, ranks):
    """Distinct GPUs of the job: by host and PCI bus id where meta.environment records it (ranks confined to their
    own GPU all see ordinal 0), else by host and device ordinal."""
    env = meta.get("environment")
    if isinstance(env, dict) and isinstance(env.get("ranks"), list) and env["ranks"] and all(
            isinstance(r, dict) and isinstance(r.get("pci_bus_id"), str) for r in env["ranks"]):
        return len({(r.get("host"), r["pci_bus_id"]) for r in env["ranks"]})
    return len({(r["host"], r["device"]) for r in ranks})


def _start(meta):
    env = meta.get("environment")
    if isinstance(env, dict) and isinstance(env.get("ranks"), list) and env["ranks"]:
        b = env["ranks"][0].get("boot_id") if isinstance(env["ranks"][0], dict) else None
        if isinstance(b, str):
            return b
    return ABSENT


def check_document(document):
    """Malformed unless the Document holds to the rules this model reads it by: for mori.a2a every field load_run
    uses, typed (a count such as `wrong` is an integer: 7.0 is refused as much as 7.5). The one place of those
    rules: perf-check and check-results read through load_run, validate-json checks through this. Other schemas:
    nothing more than their schema file."""
    if document.schema == "mori.a2a":
        load_run(document)


def load_run(document):
    """The Run of a mori.a2a Document, every field it uses checked (Malformed naming the file and the field)."""
    try:
        return _load_run(document)
    except Malformed as e:
        raise Malformed(e.path, f"not a valid {document.tag} document: {e.why}")


def _load_run(document):
    path, doc = document.path, document.doc
    top = _Fields(path, "", doc)
    meta = _Fields(path, "meta", top.get("meta", "object"))
    config = top.get("config", "object", required=False, default={})
    results = top.get("results", "array")
    wrong_total = top.get("wrong", "count", required=False)
    ranks_raw = meta.get("ranks", "array")
    if not ranks_raw:
        meta.fail("ranks", "empty")
    ranks = []
    for i, r in enumerate(ranks_raw):
        rf = _Fields(path, f"meta.ranks[{i}]", r)
        ranks.append({"host": rf.get("host", "str"), "device": rf.get("device", "count"),
                      "device_name": rf.get("device_name", "str")})
    world = meta.get("world", "count")
    if world < 1:
        meta.fail("world", "must be at least 1")
    platform = meta.get("platform", "str")
    tool = meta.get("tool", "str", required=False, default="mori-a2a")
    revision = meta.get("git_revision", "str", required=False)
    mps = meta.get("mps_active", "bool", required=False, default=False)
    env = meta.get("env", "object", required=False, default={})
    for k in ("MORI_KERNEL_DIR", "MORI_FAULT"):
        if k in env and not isinstance(env[k], str):
            raise Malformed(path, f"meta.env.{k}: expected a string")
    kernel_dir = env.get("MORI_KERNEL_DIR") or ABSENT
    fault = env.get("MORI_FAULT") or ABSENT
    gpus = _gpus(path, meta.obj, ranks)
    rpg = world // gpus if world % gpus == 0 else f"{world}/{gpus}"
    job = dict(version=ROW_VERSION[document.version], platform=platform, device=ranks[0]["device_name"], gpus=gpus,
               world=world,
               ranks_per_gpu=rpg, mps=mps, kernel_dir=kernel_dir, fault=fault)
    rows = [_load_row(path, i, r, job) for i, r in enumerate(results)]
    return Run(path=path, version=document.version, tool=tool, revision=revision,
               time=meta.get("time", "str", required=False), start=_start(meta.obj), meta=meta.obj,
               config=config, rows=rows, wrong_total=wrong_total)


def _load_row(path, i, r, job):
    """The Row of results[i] (r), each field checked by its rule in the order the checks have always run (the first
    failure is the one named); job: the identity's fields of the job."""
    f, v, val = _Fields(path, f"results[{i}]", r), job["version"], {}
    val["addressing"] = f.get("addressing", "str")
    source = f.get("source", "str", required=False, default=None, nullable=True)
    error = f.get("error", "str", required=False, default=None, nullable=True)
    system = system_of(val["addressing"], source)
    val["chunk_bytes"] = f.get("chunk_bytes", "count")
    if val["chunk_bytes"] == 0:
        f.fail("chunk_bytes", "zero")
    val["graph"] = f.get("graph", "bool")
    val["graph_iters"] = f.get("graph_iters", "count", required=False, default=None)
    val["sync"] = f.get("sync", "str")
    val["protocol"] = f.get("protocol", "str", required=False, default=None) if v >= 2 else r.get("protocol")
    val["wrong"] = f.get("wrong", "count")
    t = f.get("time_us", "object", required=error is None, default=None, nullable=error is not None)
    p50 = p95 = None
    if t is not None:
        tf = _Fields(path, f"results[{i}].time_us", t)
        for k in ("min", "p95", "max", "mean"):
            tf.get(k, "number", required=False, nullable=True)
        # A measured row has a positive time; a failed row (error set) may have none.
        p50 = tf.get("p50", "positive", required=error is None, default=None, nullable=error is not None)
        p95 = tf.get("p95", "positive", required=False, default=None, nullable=True)
    val["time_us"] = t
    for k in _NUMBERS:
        val[k] = f.get(k, "number", required=False, default=None, nullable=True)
    for k in _BANDWIDTHS:  # bandwidths of a measured row are positive: a zero is not a measurement
        val[k] = f.get(k, "positive" if error is None else "number", required=False, default=None, nullable=True)
    for k in ("samples", "iters"):
        val[k] = f.get(k, "count", required=False, default=None)
    for k in SETTINGS:  # checked in mori-a2a's rows only
        val[k] = f.get(k, "scalar", required=False, default=None) if system == "mori-a2a" else r.get(k)
    for k in ("ceiling_kind", "physical_source"):
        val[k] = f.get(k, "str", required=False, default=None, nullable=True)
    if "ceilings" in r:
        val["ceilings"] = []
        for j, c in enumerate(f.get("ceilings", "array")):
            cf = _Fields(path, f"results[{i}].ceilings[{j}]", c)
            val["ceilings"].append(Ceiling(round=cf.get("round", "count", required=False, default=None),
                                           gbps=cf.get("gbps", "number", required=False, default=None,
                                                       nullable=True)))
    val.update((k, r.get(k)) for k in row_fields() if k not in val)  # no rule: the document's value
    settings = {k: ABSENT if system != "mori-a2a" or val[k] is None else val[k] for k in SETTINGS}
    if system == "mori-a2a" and settings.get("team_size") is ABSENT and v <= 2:
        settings["team_size"] = job["world"]  # before mori.a2a/3 every row was the job's one team
    ident = Identity(**job, system=system, chunk_bytes=val["chunk_bytes"], addressing=val["addressing"],
                     sync=val["sync"], protocol=ABSENT if v < 2 or val["protocol"] is None else val["protocol"],
                     graph=(val["graph_iters"] or 0) if val["graph"] else 0, **settings)
    return Row(identity=ident, index=i, **val, p50=p50, p95=p95, error=error, source=source, system=system,
               recorded=frozenset(r))


def baseline_evidence(document):
    """The paths a mori.baseline/1 document names (relative to the repository holding its results/ folder)."""
    ev = document.doc.get("evidence")
    if not isinstance(ev, list) or not ev or not all(isinstance(e, str) and e.startswith("results/") for e in ev):
        raise Malformed(document.path, "not a valid mori.baseline/1 document: evidence must list paths under "
                                       "results/")
    here = os.path.dirname(os.path.abspath(document.path))
    while os.path.basename(here) != "results" and os.path.dirname(here) != here:
        here = os.path.dirname(here)
    if os.path.basename(here) != "results":
        raise Malformed(document.path, "a mori.baseline/1 document must lie under a results/ folder")
    root = os.path.dirname(here)
    out = [os.path.normpath(os.path.join(root, e)) for e in ev]
    outside = [e for e, p in zip(ev, out) if not p.startswith(here + os.sep)]
    if outside:
        raise Malformed(document.path, f"evidence {outside[0]!r} leads outside {here}")
    return out


def load_runs(paths, skip_folders=("schema",), attach_manifests=True):
    """Every mori.a2a Run under paths (files or folders); other schemas are read, checked and left out. A file
    named directly that is a mori.baseline/1 document stands for the evidence it names. Where a run lies in an
    evidence folder, the manifest step that wrote it is attached (Run.step: its gpu_before state and more)."""
    runs = []
    for p in paths:
        for d in load_documents([p], skip_folders=skip_folders):
            if d.schema == "mori.a2a":
                runs.append(load_run(d))
            elif d.schema == "mori.baseline" and d.path == p:
                runs += load_runs(baseline_evidence(d), skip_folders, attach_manifests=False)
    if attach_manifests:
        from .evidence import load_manifest
        manifests = {}
        for run in runs:
            folder = os.path.dirname(os.path.abspath(run.path))
            for f in (folder, os.path.dirname(folder)):
                if f not in manifests:
                    manifests[f] = load_manifest(f, required=False)
                if manifests[f] is not None:
                    run.step = manifests[f].step_of(run.path)
                    run.manifest = manifests[f]
                    break
    return runs


def group_runs(runs, rows=None):
    """(revision, identity) -> [(run, row)]: a configuration's rows pooled only within one revision."""
    out = {}
    for run in runs:
        for row in run.rows:
            if rows is None or rows(run, row):
                out.setdefault((run.revision, row.identity), []).append((run, row))
    return out


def median(values):
    vs = [v for v in values if v is not None]
    return statistics.median(vs) if vs else None
