# SPDX-License-Identifier: MIT
"""The performance gate behind scripts/perf-check (docs/perf-check.md).

Rows are matched by their Identity (a2a.py). The allowance of a baseline configuration is

    max(3 x the spread of its p50 across the baseline's runs, its p95/p50 spread within a run + margin)

where the spread across runs is (max - min) / median of the per-run values (runs of several machine starts
count alike), the within-run spread is the median over its runs of p95/p50 - 1, and the margin (the run-to-run
variation beyond a row's own spread) is 3 % for device-sync rows and 40 % for host-sync rows (whose time includes a
host barrier), or --tolerance where given. A row is not judged ("cannot judge", docs/perf-check.md "What one
baseline run cannot judge") where its allowance is wider than GATE_JUDGE_LIMIT and its change inside it, where a
side has fewer than MIN_SAMPLES timed samples of it, or where the current side holds it only under another MPS
setting. Why these numbers: docs/perf-check.md "The allowance" (every pair of committed reruns of one revision and
one command, tests/scripts/perf_check_reruns_test.py).
"""
import dataclasses
import math
import re
import statistics
from dataclasses import dataclass, field

from .a2a import ABSENT
from .constants import (GATE_AB_ALPHA, GATE_AB_FLOOR_DEVICE_SYNC, GATE_AB_FLOOR_HOST_SYNC, GATE_AB_MIN_RUNS,
                        GATE_FLOOR_DEVICE_SYNC, GATE_FLOOR_HOST_SYNC, GATE_JUDGE_LIMIT, GATE_SPREAD_FACTOR,
                        MIN_SAMPLES)
from .errors import Malformed
from .row_fields import gated_metrics

METRIC_NAMES = {"time_p50_us": "p50"}  # command-line name -> Row attribute
# Row attribute -> higher is better: every field of the row the schema gives a direction (row_fields.py).
METRICS = {METRIC_NAMES.get(m, m): hib for m, hib in gated_metrics().items()}
DEFAULT_METRICS = ("total_bw_gbps", "time_p50_us")


def attr(metric):
    return METRIC_NAMES.get(metric, metric)


@dataclass
class Side:
    """One side of the comparison: identity -> [(run, row)] of gated rows, notes, wrong elements."""
    name: str
    rows: dict = field(default_factory=dict)
    notes: dict = field(default_factory=dict)
    wrong: int = 0
    wrong_external: int = 0
    external: int = 0

    def note(self, why, n=1):
        self.notes[why] = self.notes.get(why, 0) + n


def collect(name, runs, include_external):
    """The gated rows of runs. mori rows copied into a comparison document are left out (they are gated where
    mori-a2a wrote them), so are rows with an error; other systems' rows are left out unless include_external."""
    side = Side(name)
    for run in runs:
        if run.is_mutant:
            side.note("row of a verification mutant run (MORI_FAULT: its wrong elements are the point)",
                      len(run.rows))
            continue
        for row in run.rows:
            if row.is_mori and run.tool != "mori-a2a" and row.source == "mori-a2a":
                side.note("mori row copied into a comparison document (gated where mori-a2a wrote it)")
                continue
            if row.error:
                # Not gated, but its wrong elements still count: an errored row is no excuse for wrong data.
                side.note("row with an error")
                if row.is_mori or include_external:
                    side.wrong += row.wrong
                else:
                    side.wrong_external += row.wrong
                continue
            if not row.is_mori and not include_external:
                side.external += 1
                side.wrong_external += row.wrong
                continue
            side.wrong += row.wrong
            side.rows.setdefault(row.identity, []).append((run, row))
    for ident, pairs in side.rows.items():
        revs = sorted({str(run.revision) for run, _ in pairs})
        if len(revs) > 1:
            paths = sorted({run.path for run, _ in pairs})
            raise Malformed(paths[0], f"the {name} holds revisions {', '.join(revs)} of one configuration "
                                      f"({ident.label()}; also {', '.join(paths[1:3])}): runs are pooled only "
                                      "within one revision")
    return side


def team_view(ident):
    """A team's configuration as a one-node job of the team's size runs it (perf-check --per-team): world the team's
    size, the GPUs in proportion."""
    size = ident.team_size
    if size is ABSENT or size == ident.world:
        return ident
    gpus = max(1, ident.gpus * size // ident.world)
    return dataclasses.replace(ident, world=size, gpus=gpus,
                               ranks_per_gpu=size // gpus if size % gpus == 0 else f"{size}/{gpus}")


def team_sides(cur):
    """perf-check --per-team: the current side's rows of jobs of several teams, one side per team (by node, in the
    order the rows name them), each row under its team's one-node identity (team_view)."""
    teams = {}
    for ident, pairs in cur.rows.items():
        for run, row in pairs:
            node = (row.team or {}).get("node") if isinstance(row.team, dict) else None
            if node is None or ident.team_size is ABSENT or ident.team_size == ident.world:
                continue
            side = teams.setdefault(node, Side(f"team {node}"))
            side.rows.setdefault(team_view(ident), []).append((run, row))
    return teams


def per_run(pairs, metric):
    """The metric of each run (median of its rows of one identity, usually one), in run order."""
    by = {}
    for run, row in pairs:
        v = row.metric(attr(metric))
        if v is not None:
            by.setdefault(id(run), []).append(v)
    return [statistics.median(v) for v in by.values()]


def allowance(pairs, metric, floor):
    """(allowance, margin, spread across runs, spread within a run, number of runs) of a baseline configuration;
    floor: the margin (None: by the rows' sync)."""
    vals = per_run(pairs, metric)
    mid = statistics.median(vals)
    between = (max(vals) - min(vals)) / mid if len(vals) > 1 and mid else 0.0
    within = [row.p95 / row.p50 - 1 for _, row in pairs if row.p95 is not None and row.p50]
    w = statistics.median(within) if within else 0.0
    if floor is None:
        floor = GATE_FLOOR_HOST_SYNC if pairs[0][1].sync == "host" else GATE_FLOOR_DEVICE_SYNC
    return max(GATE_SPREAD_FACTOR * between, w + floor), floor, between, w, len(vals)


def few_samples(pairs):
    """The smallest timed-sample count of the rows (samples, else iters) where it is below MIN_SAMPLES, else None:
    a p50 of so few samples has no spread to judge it by. mori rows only: another system's row (nccl-tests) is one
    average over its iterations."""
    counts = [row.samples if row.samples is not None else row.iters for _, row in pairs if row.is_mori]
    counts = [c for c in counts if c is not None]
    return min(counts) if counts and min(counts) < MIN_SAMPLES else None


def other_setup(ident, rows):
    """The identity in rows that differs from ident only in whether an MPS daemon was running (a machine's setup,
    not the command: a sweep started after another may find its daemon still up), else None."""
    flipped = dataclasses.replace(ident, mps=not ident.mps)
    return flipped if flipped in rows else None


def _pct(x):
    return f"{100 * x:.1f} %"


def mann_whitney_worse(base, cur, higher_is_better):
    """One-sided p-value that the current runs are worse than the baseline runs (Mann-Whitney U, normal
    approximation with continuity and tie corrections): small when nearly every current run is worse than nearly
    every baseline run. Only the per-run values are used, so one outlying run moves it by one rank."""
    n, m = len(base), len(cur)
    if n == 0 or m == 0:
        return 1.0
    worse = 0.0
    for c in cur:
        for b in base:
            if c == b:
                worse += 0.5
            elif (c < b) if higher_is_better else (c > b):
                worse += 1.0
    ranks_tied = {}
    for v in list(base) + list(cur):
        ranks_tied[v] = ranks_tied.get(v, 0) + 1
    tie = sum(t ** 3 - t for t in ranks_tied.values())
    var = n * m / 12.0 * ((n + m + 1) - tie / ((n + m) * (n + m - 1)))
    if var <= 0:
        return 1.0
    z = (worse - n * m / 2.0 - 0.5) / math.sqrt(var)
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def ab_verdict(bv, cv, metric, sync, configurations, floor=None):
    """(verdict, floor, p-value of worse, p-value of better) under the A/B rule (constants.py GATE_AB_*)."""
    if floor is None:
        floor = GATE_AB_FLOOR_HOST_SYNC if sync == "host" else GATE_AB_FLOOR_DEVICE_SYNC
    hib = METRICS[attr(metric)]
    b, c = statistics.median(bv), statistics.median(cv)
    worse_by = (b - c) / b if hib else (c - b) / b
    p_worse = mann_whitney_worse(bv, cv, hib)
    p_better = mann_whitney_worse(bv, cv, not hib)
    alpha = GATE_AB_ALPHA / max(1, configurations)
    if worse_by > floor and p_worse < alpha:
        return "SLOWER", floor, p_worse, p_better
    if -worse_by > floor and p_better < alpha:
        return "FASTER", floor, p_worse, p_better
    return "SAME", floor, p_worse, p_better


# What can explain a change, from each run's meta: compared key by key beside every regression.
MEANING = ("version", "git_revision", "git_clean", "build_stale", "driver_version", "runtime_version", "handle_type",
           "mps_active", "env", "environment", "jit", "rtc", "clocks", "gpu_state", "devices")
SKIP_KEYS = ("pid", "time", "argv", "cold_compile_ms", "cache_load_ms", "ms", "pid_ns", "net_ns", "cache_dir",
             "kernel_dir", "compiled", "from_cache", "compiles_in_job", "pipe_directory")
_GPU = r"^gpu_state\[[^\]]*\]\."
# The order of the differences printed (docs/perf-check.md, "What differs"): what explains a change first, in this
# order (a key's "_reason" goes with its key), then the rest of meta, then readings that move by themselves.
EXPLAINS = tuple(re.compile(p) for p in (
    r"(^|\.)driver_version$|^runtime_version$",
    r"^rtc\.|^jit\.compiler$",
    r"^jit\.entries\[[^\]]*\]\.(image_hash|key)$",
    _GPU + r"power\.limit_w$",
    _GPU + r"clocks\.(sm|mem)_(default_applications|applications|max)_mhz$",
    _GPU + r"ecc\.",
    _GPU + r"(clocks_event_reasons$|violation_ms\.)",
    _GPU + r"processes",
    _GPU + r"nvlink_errors\.[a-z]+(\.delta)?$",
    r"^machine start|^environment\.ranks\[[^\]]*\]\.boot_id$",
))
VOLATILE = re.compile(_GPU + r"(clocks\.(sm|mem)_mhz|temperature_c|power\.draw_w|pstate|nvlink_errors\.[a-z]+\.(start|end))$")
NOT_RECORDED = "(absent)"


def flatten(node, prefix, out, depth=0):
    if depth > 8:
        return
    if isinstance(node, dict):
        for k, v in node.items():
            if k not in SKIP_KEYS:
                flatten(v, f"{prefix}.{k}" if prefix else k, out, depth + 1)
    elif isinstance(node, list):
        if all(not isinstance(x, (dict, list)) for x in node):
            out[prefix] = node  # a list of names or numbers (throttle reasons, pids) is one value
        elif node and all(isinstance(x, dict) for x in node) and len(node) > 1 and all(x == node[0] for x in node[1:]):
            flatten(node[0], f"{prefix}[*]", out, depth + 1)
        else:
            for i, v in enumerate(node):
                flatten(v, f"{prefix}[{i}]", out, depth + 1)
    else:
        out[prefix] = node


def meta_facts(run):
    out = {}
    for k in MEANING:
        if k in run.meta:
            flatten(run.meta[k], k, out)
    # Whether a kernel came from the cache or was compiled changes nothing that ran (its image hash says that).
    for k in [k for k in out if re.match(r"^jit\.entries\[[^\]]*\]\.source$", k)]:
        del out[k]
    for i, r in enumerate(run.meta.get("ranks") or []):
        if isinstance(r, dict):
            out[f"ranks[{i}].device_name"] = r.get("device_name")
    out["machine start (boot id)"] = None if run.start is ABSENT else run.start
    if isinstance(run.step, dict) and run.step.get("gpu_before") is not None:
        flatten(run.step["gpu_before"], "gpu_before", out)
    return out


def _order(key):
    """(group, key): what explains a change first, readings that move by themselves last."""
    k = key[:-len("_reason")] if key.endswith("_reason") else key
    for i, p in enumerate(EXPLAINS):
        if p.search(k):
            return i, key
    return (len(EXPLAINS) + 1 if VOLATILE.search(k) else len(EXPLAINS)), key


def _top(key):
    return re.match(r"[^.\[]*", key).group(0)


def _collapse(diffs, facts, metas):
    """A block of meta that one run records and the other lacks (gpu_state, rtc: newer than the other run, or null
    there) is one line, not one per fact: its value on the side that lacks it (absent, or null with its *_reason)
    against how many facts the other holds."""
    def lacks(meta, t):
        return not isinstance(meta.get(t), (dict, list))

    out, done = [], set()
    for k, x, y in diffs:
        t = _top(k)
        if t in done:
            continue
        missing = [lacks(m, t) for m in metas]
        if missing[0] == missing[1]:
            out.append((k, x, y))
            continue
        done.add(t)
        vals = []
        for side, meta, miss in zip(facts, metas, missing):
            if not miss:
                vals.append(f"(recorded: {sum(_top(f) == t for f in side)} facts)")
            elif t not in meta:
                vals.append(NOT_RECORDED)
            else:
                reason = meta.get(f"{t}_reason")
                vals.append(f"{meta[t]!r}" + (f" ({reason})" if isinstance(reason, str) else ""))
        out.append((t, vals[0], vals[1]))
    return out


def _merge_devices(diffs):
    """The same difference on several GPUs is one line: gpu_state[0,1].power.limit_w."""
    out, at = [], {}
    for k, x, y in diffs:
        m = re.match(r"gpu_state\[(\d+)\](.+)", k)
        sig = m and (m.group(2), repr(x), repr(y))
        if sig and sig in at:
            out[at[sig]][0].append(m.group(1))
            continue
        if sig:
            at[sig] = len(out)
        out.append([[m.group(1)] if m else None, m.group(2) if m else k, x, y])
    return [(f"gpu_state[{','.join(gpus)}]{rest}" if gpus else rest, x, y) for gpus, rest, x, y in out]


def meta_diff(base_run, cur_run, limit=12):
    """[(key, baseline value, current value)] of the meta facts that differ between two runs, what explains a change
    first; and how many differ in all."""
    a, b = meta_facts(base_run), meta_facts(cur_run)
    keys = sorted(set(a) | set(b), key=_order)
    diffs = [(k, a.get(k, NOT_RECORDED), b.get(k, NOT_RECORDED)) for k in keys
             if a.get(k, NOT_RECORDED) != b.get(k, NOT_RECORDED)]
    diffs = _merge_devices(_collapse(diffs, (a, b), (base_run.meta, cur_run.meta)))
    return diffs[:limit], len(diffs)


CANNOT_JUDGE = "CANNOT_JUDGE"


@dataclass
class Verdict:
    identity: object
    metric: str
    baseline: object
    current: object
    delta: object
    allowance: object
    floor: object
    spread_runs: object
    spread_within: object
    baseline_runs: int
    verdict: str
    differs: list = field(default_factory=list)
    differs_total: int = 0
    p_value: object = None  # the A/B rule's one-sided p-value in the direction of the change (None: the allowance)
    why: object = None      # CANNOT_JUDGE: why this row cannot be judged from this baseline, and what would judge it
    team: object = None     # perf-check --per-team: the team (node) the current side's rows came from

    def label(self):
        return (f"team {self.team}: " if self.team is not None else "") + self.identity.label()

    def as_json(self):
        return {"result": self.label(), "team": self.team, "identity": self.identity.as_json(), "metric": self.metric,
                "baseline": self.baseline, "current": self.current, "delta": self.delta,
                "allowance": self.allowance, "floor": self.floor, "spread_across_runs": self.spread_runs,
                "spread_within_run": self.spread_within, "baseline_runs": self.baseline_runs,
                "verdict": self.verdict,
                "meta_differs": [{"key": k, "baseline": a, "current": b} for k, a, b in self.differs],
                "meta_differs_total": self.differs_total, "rule": "allowance" if self.p_value is None else "ab",
                "p_value": self.p_value, "why": self.why}


def compare(base, cur, metrics, floor=None, ab=False):
    """Verdicts of every baseline configuration whose schema version the current side holds. ab: both sides were
    measured interleaved in one job (perf-check --ab): the A/B rule (ab_verdict) in place of the allowance, for
    configurations with at least GATE_AB_MIN_RUNS runs on each side."""
    versions = {i.version for i in cur.rows}
    configurations = sum(1 for i in base.rows if i.version in versions and i in cur.rows)
    out = []
    for ident in sorted((i for i in base.rows if i.version in versions), key=lambda i: i.sort_key()):
        pairs = base.rows[ident]
        for m in metrics:
            bv = per_run(pairs, m)
            if not bv:
                out.append(Verdict(ident, m, None, None, None, None, None, None, None, 0, "n/a"))
                continue
            b = statistics.median(bv)
            allow, fl, between, within, n = allowance(pairs, m, floor)
            if ident not in cur.rows:
                twin = other_setup(ident, cur.rows)
                if twin is None:
                    out.append(Verdict(ident, m, b, None, None, allow, fl, between, within, n, "MISSING"))
                    continue
                v = Verdict(ident, m, b, None, None, allow, fl, between, within, n, CANNOT_JUDGE)
                v.why = (f"in one run only: the current side holds it only with MPS {'off' if ident.mps else 'on'} "
                         f"(the baseline: {'on' if ident.mps else 'off'}), another setup; run both under one")
                out.append(v)
                continue
            cv = per_run(cur.rows[ident], m)
            if not cv:
                out.append(Verdict(ident, m, b, None, None, allow, fl, between, within, n, "n/a"))
                continue
            c = statistics.median(cv)
            if b <= 0 or c <= 0:  # a time or bandwidth of zero or below is no measurement: bad input, not a verdict
                bad = pairs[0][0] if b <= 0 else cur.rows[ident][0][0]
                raise Malformed(bad.path, f"{ident.label()}: {m} is {b if b <= 0 else c}, not a measurement "
                                          "(must be positive)")
            delta = (c - b) / b
            better = delta if METRICS[attr(m)] else -delta
            p = why = None
            if ab and len(bv) >= GATE_AB_MIN_RUNS and len(cv) >= GATE_AB_MIN_RUNS:
                v, allow, pw, pb = ab_verdict(bv, cv, m, pairs[0][1].sync, configurations, floor)
                fl, p = allow, pw if better <= 0 else pb
            elif few_samples(pairs) is not None or few_samples(cur.rows[ident]) is not None:
                side, k = ("baseline", few_samples(pairs)) if few_samples(pairs) is not None else (
                    "current", few_samples(cur.rows[ident]))
                v, why = CANNOT_JUDGE, (f"{k} timed sample(s) in the {side} run, fewer than {MIN_SAMPLES}: its p50 "
                                        "has no spread to judge it by; run it with more iterations")
            elif abs(delta) <= allow:
                v = "SAME"
                if allow > GATE_JUDGE_LIMIT:
                    if allow != within + fl:
                        source = f"its own spread ({_pct(between)} across {n} runs) gives"
                    elif fl > GATE_JUDGE_LIMIT:  # the margin alone is wider than the gate resolves
                        kind = ("a host barrier in its time" if ident.sync == "host" and fl == GATE_FLOOR_HOST_SYNC
                                else "--tolerance")
                        source = (f"its margin between runs ({_pct(fl)}: {kind}) and its own spread "
                                  f"({_pct(within)} p95/p50 within a run) give")
                    else:
                        source = f"its own spread ({_pct(within)} p95/p50 within a run) gives"
                    v, why = CANNOT_JUDGE, (f"too noisy for one baseline run: {source} an allowance of "
                                            f"{_pct(allow)}, wider than the {_pct(GATE_JUDGE_LIMIT)} the gate "
                                            "resolves; judge it with --ab (interleaved runs, a rank test) or a "
                                            "baseline of more runs")
            else:
                v = "FASTER" if better > 0 else "SLOWER"
            verdict = Verdict(ident, m, b, c, delta, allow, fl, between, within, n, v)
            verdict.p_value, verdict.why = p, why
            if v == "SLOWER":
                verdict.differs, verdict.differs_total = meta_diff(pairs[0][0], cur.rows[ident][0][0])
            out.append(verdict)
    return out
