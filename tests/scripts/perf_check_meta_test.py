#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""scripts/perf-check prints beside a regression what differs in the two runs' meta (docs/perf-check.md, "What
differs"): a current run whose meta.gpu_state has another power limit, throttle reason or violation time than the
baseline's names them on the regression's lines, what explains a change before readings that move by themselves
(clock, temperature, power draw), within the 12-line limit and its total.

Fixture: tests/fixtures/h200-a2a-w2-r1.json (mori.a2a/2, a real 2 x H200 run, trimmed); the gpu_state blocks are
written here in the shape mori-a2a writes them (docs/json.md).
"""
import copy
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: harness.py
from harness import check, finish  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
CHECK = os.path.join(ROOT, "scripts", "perf-check")
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "h200-a2a-w2-r1.json")


def run(*args):
    p = subprocess.run([sys.executable, CHECK, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=60)
    return p.returncode, p.stdout


def gpu(pci, rank, limit_w=700.0, reasons=(), power_ms=0.0, sm_mhz=1980, temp=38, draw_w=412.5, others=()):
    """One entry of meta.gpu_state as the tools write it."""
    return {"pci_bus_id": pci, "ranks": [rank], "driver_version": "570.86.15",
            "clocks": {"sm_mhz": sm_mhz, "mem_mhz": 3201, "sm_max_mhz": 1980, "mem_max_mhz": 3201,
                       "sm_applications_mhz": 1980, "mem_applications_mhz": 3201,
                       "sm_default_applications_mhz": 1980, "mem_default_applications_mhz": 3201},
            "pstate": 0, "power": {"limit_w": limit_w, "draw_w": draw_w}, "temperature_c": temp,
            "clocks_event_reasons": list(reasons), "violation_ms": {"power": power_ms, "thermal": 0.0},
            "ecc": {"enabled": True, "pending_enabled": True, "uncorrected_volatile": 0, "uncorrected_during_run": 0},
            "persistence_mode": True,
            "processes": {"total": 1 + len(others), "others": len(others), "other_pids": list(others)},
            "nvlink_errors": {"replay": {"start": 0, "end": 0, "delta": 0}, "crc": {"start": 0, "end": 0, "delta": 0}}}


def state(**kw):
    return [gpu("00000000:19:00.0", 0, **kw), gpu("00000000:3B:00.0", 1, **kw)]


def document(gpu_state, slower=1.0, rtc="13.0", image="fa27a84e975f2f09"):
    d = copy.deepcopy(base)
    for r in d["results"]:
        if r["time_us"].get("p50") is not None and r["time_us"].get("p95") is not None:
            r["time_us"]["p95"] = r["time_us"]["p50"] * 1.01  # a tight baseline: only the slowdown decides
    first = next(r for r in d["results"] if r["sync"] == "device")  # host-sync rows: not judged from one run
    first["time_us"]["p50"] *= slower
    for k in ("total_bw_gbps", "agg_bw_gbps", "algbw_gbps", "busbw_gbps"):
        first[k] /= slower
    if gpu_state is not None:
        d["meta"]["gpu_state"] = gpu_state
        d["meta"]["rtc"] = {"name": "nvrtc", "version": rtc, "library": "libnvrtc.so.13"}
        d["meta"]["jit"]["entries"][0]["image_hash"] = image
    return d


def differs(out):
    """The meta lines printed under the first SLOWER line."""
    lines = out.splitlines()
    at = next((i for i, ln in enumerate(lines) if "SLOWER" in ln), None)
    if at is None:
        return []
    got = []
    for ln in lines[at + 1:]:
        if not ln.startswith("    "):
            break
        got.append(ln.strip())
    return got


base = json.load(open(FIXTURE))
with tempfile.TemporaryDirectory() as tmp:
    def write(name, doc):
        p = os.path.join(tmp, name)
        with open(p, "w") as f:
            json.dump(doc, f)
        return p

    b = write("base.json", document(state()))

    # A lower power limit and the power cap it brings: named beside the regression, in that order, before the clock.
    cur = write("capped.json", document(state(limit_w=600.0, reasons=("sw_power_cap",), power_ms=812.5, sm_mhz=1605),
                                        slower=1.10))
    rc, out = run(b, cur)
    got = differs(out)
    check("a 10% slowdown with a lower power limit: exit 1, SLOWER", rc == 1 and "SLOWER" in out, out)
    want = ["meta differs: gpu_state[0,1].power.limit_w: 700.0 -> 600.0",
            "meta differs: gpu_state[0,1].clocks_event_reasons: [] -> ['sw_power_cap']",
            "meta differs: gpu_state[0,1].violation_ms.power: 0.0 -> 812.5",
            "meta differs: gpu_state[0,1].clocks.sm_mhz: 1980 -> 1605"]
    check("the power limit, the throttle reason, the violation time and the SM clock are printed beside it",
          all(w in got for w in want), "\n".join(got) + "\n---\n" + out)
    check("... what explains a change before the clock it moved",
          all(w in got for w in want) and [got.index(w) for w in want] == sorted(got.index(w) for w in want),
          "\n".join(got))
    check("... one line for both GPUs (the same difference on each)", len(got) == len(want), "\n".join(got))

    # More than 12 differences: the explaining ones stay, readings that move by themselves are cut, the total is said.
    many = [gpu("00000000:19:00.0", 0, limit_w=600.0, reasons=("sw_power_cap",), power_ms=5.0, sm_mhz=1500, temp=80,
                draw_w=600.0, others=(4242,)),
            gpu("00000000:3B:00.0", 1, limit_w=650.0, reasons=("hw_thermal_slowdown",), power_ms=6.0, sm_mhz=1510,
                temp=81, draw_w=610.0, others=(4343,))]
    cur = write("many.json", document(many, slower=1.10, rtc="13.1", image="0123456789abcdef"))
    rc, out = run(b, cur)
    got = differs(out)
    shown = [ln for ln in got if ln.startswith("meta differs: ")]
    more = [ln for ln in got if re.match(r"\.\.\. and \d+ more meta difference", ln)]
    check("many differences: 12 lines and the number left out", len(shown) == 12 and len(more) == 1,
          "\n".join(got))
    check("... the RTC version and the kernel image hash first",
          shown[:2] == ["meta differs: rtc.version: '13.0' -> '13.1'",
                        "meta differs: jit.entries[0].image_hash: 'fa27a84e975f2f09' -> '0123456789abcdef'"],
          "\n".join(got))
    check("... another process on the GPU is named (its pid)",
          "meta differs: gpu_state[0].processes.other_pids: [] -> [4242]" in shown, "\n".join(got))
    check("... temperature and power draw are left out before any of them",
          not any("temperature_c" in ln or "draw_w" in ln for ln in shown), "\n".join(got))
    j = os.path.join(tmp, "verdicts.json")
    rc, out = run(b, cur, "--json", j)
    v = [x for x in json.load(open(j))["verdicts"] if x["verdict"] == "SLOWER"]
    keys = [d["key"] for d in v[0]["meta_differs"]] if v else []
    check("--json: meta_differs holds the same keys in the same order, and the total",
          v and keys[:2] == ["rtc.version", "jit.entries[0].image_hash"] and len(keys) == 12
          and v[0]["meta_differs_total"] > 12, json.dumps(v[:1], indent=1)[:3000])

    # A baseline from before gpu_state was recorded: one line for the whole block, not one per fact.
    old = write("old.json", document(None))
    cur = write("capped2.json", document(state(limit_w=600.0), slower=1.10))
    rc, out = run(old, cur)
    got = differs(out)
    check("a baseline without gpu_state: one line for the block, with how many facts the current run holds",
          any(re.fullmatch(r"meta differs: gpu_state: '\(absent\)' -> '\(recorded: \d+ facts\)'", ln) for ln in got)
          and not any(ln.startswith("meta differs: gpu_state[") for ln in got), "\n".join(got))
    nulled = document(None)
    nulled["meta"]["gpu_state"] = None
    nulled["meta"]["gpu_state_reason"] = "dlopen(libnvidia-ml.so.1) failed: not found"
    rc, out = run(write("nulled.json", nulled), cur)
    check("a baseline whose gpu_state is null: its reason is printed on the line",
          "meta differs: gpu_state: 'None (dlopen(libnvidia-ml.so.1) failed: not found)' -> '(recorded:"
          in out, out)

    # Same state, same speed: nothing to explain.
    rc, out = run(b, write("same.json", document(state())))
    check("the same state and speed: exit 0, no meta lines", rc == 0 and "meta differs" not in out, out)

finish()
