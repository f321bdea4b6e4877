# SPDX-License-Identifier: MIT
"""The presets of scripts/evidence (scripts/evidence_presets.json; docs/evidence.md): reading them, --list, the
folder each one writes, and a preset's steps for one machine kind, in order, with the reason of each that does not
run there."""
import json
import os

from evidence_lib.common import HERE, KINDS


def load_presets():
    # json.load, not the results model's reader: the presets are this script's own configuration, committed
    # beside it, not a tool's report or a results document.
    with open(os.path.join(HERE, "evidence_presets.json")) as f:
        return json.load(f)["presets"]


def print_presets():
    """--list: every preset and its steps (kind, machine kinds, budget, ranks, command)."""
    for name, p in load_presets().items():
        print(f"{name}: {p['description']}")
        for s in p["steps"]:
            ranks = f"{s['gpus']} GPUs" if "gpus" in s else f"ranks {s.get('ranks', '')}"
            print(f"  {s['name']:18} {s['kind']:16} on {','.join(s.get('on', KINDS)):15} {s['budget_s']:4} s "
                  f"{ranks:10} {' '.join([s.get('tool', '')] + s.get('args', []))}")


def folder_suffix(preset):
    """'' for the presets that are a machine's evidence (default; host, its steps on the host runtime), else
    '-PRESET': two presets run at one revision on one machine never share a folder."""
    return "" if preset in ("default", "host") else "-" + preset


def plan_steps(preset, kind, all_gpus):
    """The preset's steps for this machine kind, in order: a step's `host` fields replace its own on the host
    runtime; a step of another machine kind only (and of no name that runs here) is kept with `skip`, the
    reason, so that the manifest says why it did not run; so is a `gpus` subset this machine cannot hold (all_gpus():
    the GPUs the preset's "gpus" means here) or that the all-GPU step already is."""
    here = {s["name"] for s in preset["steps"] if kind in s.get("on", KINDS)}
    out, seen = [], set()
    for s in preset["steps"]:
        if kind not in s.get("on", KINDS):
            if s["name"] not in here and s["name"] not in seen:
                seen.add(s["name"])
                out.append(dict(s, skip=f"runs on {' or '.join(s.get('on', KINDS))} only (this machine: "
                                f"{kind}{', the host runtime' if kind == 'host' else ''})"))
            continue
        if kind == "host":
            s = {**s, **s.get("host", {})}
        if "gpus" in s and kind != "host":
            n, have = int(s["gpus"]), all_gpus()
            if n > have:
                s = dict(s, skip=f"needs {n} GPUs, this machine has {have}")
            elif n == have:
                s = dict(s, skip=f"{n} GPUs are all of this machine's: the all-GPU step covers it")
        out.append(s)
    return out
