# SPDX-License-Identifier: MIT
"""The summary of scripts/matrix-sweep: one mori.matrix-sweep/1 document from the peer matrix mori-probe wrote.

usage: python3 scripts/matrix_sweep.py --probe PROBE.json --out SWEEP.json --world N --goal RATIO --probe-exit RC
                                       [-- MORI-PROBE-ARGS...]
       python3 scripts/matrix_sweep.py --check-goal RATIO [--check-out DIR]

PROBE.json is mori-probe's report of `--matrix --write-kernel all` (read through scripts/mori_results/: bounded,
strict JSON, schema mori.probe checked first). The document has the probe's meta, a row per (pair, addressing,
variant), and per variant its worst and median ratio to the copy engine's write of the same bytes, the best
variant (highest worst ratio; a variant with a wrong row never reaches the goal) first, and whether it reaches
RATIO (docs/mori-probe.md "Peer matrix"). Prints one line per variant and the verdict.
--check-goal RATIO: only check that RATIO is a number in (0, 10]; with --check-out DIR also that DIR can take the
sweep's files (a folder, or a new name in a writable folder; DIR/probe.json, probe.log and matrix-sweep.json each a
regular file or a new name: docs/reliability.md "Files the scripts write").
Exit 0: written (the verdict is in the document); 2: usage (a goal out of range); 3: the report could not be
read or summarised (the message names the file and why).
"""
import argparse
import json
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mori_results.cli import Parser, decimal, non_negative_integer, positive_integer  # noqa: E402
from mori_results.documents import load_document  # noqa: E402
from mori_results.errors import Malformed, Usage  # noqa: E402
from mori_results.files import check_output_file, check_output_folder, write_text  # noqa: E402

EXIT_USAGE = 2
EXIT_SUMMARY = 3
OUTPUTS = ("probe.json", "probe.log", "matrix-sweep.json")  # what scripts/matrix-sweep writes into --out DIR


class SummaryError(Exception):
    """The probe's report cannot be summarised (scripts/matrix-sweep's exit 3)."""


def parse_goal(text):
    """The goal as a float in (0, 10], plain decimal digits (scripts/mori_results/cli.py); ValueError otherwise."""
    try:
        g = decimal(text)
    except argparse.ArgumentTypeError:
        raise ValueError(text)
    if not (math.isfinite(g) and 0 < g <= 10):
        raise ValueError(text)
    return g


def variant_rows(matrix, src):
    rows = []
    for r in matrix["rows"]:
        for v in r.get("write_variants", []):
            rows.append({"src": r["src"], "dst": r["dst"], "addressing": r["addressing"], **v})
    if not rows:
        raise SummaryError(f"{src} has no write_variants (no pair measured?)")
    return rows


def summarise_variant(name, mine, goal):
    writes = [x["write_gbps"] for x in mine if x["write_gbps"] is not None]
    ces = [x["copy_engine_write_gbps"] for x in mine if x["copy_engine_write_gbps"] is not None]
    ratios = [x["write_over_copy_engine"] for x in mine if x["write_over_copy_engine"] is not None]
    judged = len(ratios) == len(mine)  # every row has its copy-engine baseline
    wrong = sum(1 for x in mine if not x["verified"])
    s = {"variant": name, "kernel": mine[0]["kernel"], "rows": len(mine), "wrong_rows": wrong,
         "write_gbps_min": min(writes, default=None),
         "write_gbps_median": statistics.median(writes) if writes else None,
         "copy_engine_write_gbps_median": statistics.median(ces) if ces else None,
         "ratio_min": min(ratios) if judged else None,
         "ratio_median": statistics.median(ratios) if judged else None}
    if "fallback" in mine[0]:
        s["fallback"] = mine[0]["fallback"]
    # A variant that left wrong bytes in any row never reaches the goal, however fast.
    s["reaches_goal"] = None if s["ratio_min"] is None else (s["ratio_min"] >= goal and not wrong)
    return s


def summarise(probe, src, world, goal, rc, probe_args):
    """The mori.matrix-sweep/1 document of one probe report."""
    m = probe["matrix"]
    rows = variant_rows(m, src)
    variants = []
    for name in dict.fromkeys(x["variant"] for x in rows):
        variants.append(summarise_variant(name, [x for x in rows if x["variant"] == name], goal))
    variants.sort(key=lambda s: (s["wrong_rows"] > 0, s["ratio_min"] is None, -(s["ratio_min"] or 0),
                                 -(s["ratio_median"] or 0)))
    best = variants[0] if variants[0]["ratio_min"] is not None and not variants[0]["wrong_rows"] else None
    return {"schema": "mori.matrix-sweep/1", "meta": probe["meta"],
            "config": {"world": world, "goal": goal, "probe_args": probe_args, "probe_exit": rc,
                       "bytes": m["bytes"], "iterations": m["iterations"], "write_kernel": m["write_kernel"]},
            "rows": rows, "variants": variants, "best": best,
            "goal_met": None if best is None else best["reaches_goal"]}


def print_summary(doc, src, dst):
    num = lambda v, f: "-" if v is None else f.format(v)  # noqa: E731
    print(f"{'variant':20} {'ran':8} {'rows':>4} {'write min':>10} {'write p50':>10} {'CE p50':>10} "
          f"{'ratio min':>9} {'ratio p50':>9} check")
    for s in doc["variants"]:
        print(f"{s['variant']:20} {s['kernel']:8} {s['rows']:>4} {num(s['write_gbps_min'], '{:.1f}'):>10} "
              f"{num(s['write_gbps_median'], '{:.1f}'):>10} {num(s['copy_engine_write_gbps_median'], '{:.1f}'):>10} "
              f"{num(s['ratio_min'], '{:.3f}'):>9} {num(s['ratio_median'], '{:.3f}'):>9} "
              f"{'WRONG in ' + str(s['wrong_rows']) + ' row(s)' if s['wrong_rows'] else 'ok'}")
    best, goal = doc["best"], doc["config"]["goal"]
    if best is None:
        print("no verified variant with a copy-engine baseline (host runtime?): no verdict")
    else:
        print(f"best: {best['variant']} (worst ratio {best['ratio_min']:.3f}); goal {goal}: "
              f"{'reached' if doc['goal_met'] else 'not reached'}")
    if doc["config"]["probe_exit"] != 0:
        print(f"note: mori-probe exited {doc['config']['probe_exit']} (see {src} and its log)")
    print(f"wrote {dst}")


def main(argv):
    ap = Parser(prog="python3 scripts/matrix_sweep.py", name="matrix-sweep", description=__doc__.split("\n\n")[0],
                formatter_class=argparse.RawDescriptionHelpFormatter, epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    ap.add_argument("--check-goal", metavar="RATIO", help="only check the goal (exit 0 or 2)")
    ap.add_argument("--check-out", metavar="DIR", help="with --check-goal: also check the output folder")
    ap.add_argument("--probe", help="mori-probe's report")
    ap.add_argument("--out", help="the mori.matrix-sweep/1 document to write")
    ap.add_argument("--world", type=positive_integer, help="ranks of the probe's job")
    ap.add_argument("--goal", help="the worst ratio to the copy engine a variant must reach")
    ap.add_argument("--probe-exit", type=non_negative_integer, default=0, help="mori-probe's exit status")
    ap.add_argument("probe_args", nargs=argparse.REMAINDER, help="-- and the options mori-probe ran with")
    a = ap.parse_args(argv)
    goal_text = a.check_goal if a.check_goal is not None else a.goal
    try:
        goal = parse_goal(goal_text if goal_text is not None else "")
    except ValueError:
        print(f"matrix-sweep: --goal '{goal_text}' is not a ratio in (0, 10]", file=sys.stderr)
        return EXIT_USAGE
    if a.check_goal is not None:
        try:
            check_output_folder(a.check_out, "--out")
            if a.check_out is not None and os.path.isdir(a.check_out):
                for name in OUTPUTS:
                    check_output_file(os.path.join(a.check_out, name), "--out")
        except Usage as e:
            print(f"matrix-sweep: {e}", file=sys.stderr)
            return EXIT_USAGE
        return 0
    if not a.probe or not a.out or a.world is None:
        ap.error("--probe, --out and --world are required")
    probe_args = a.probe_args[1:] if a.probe_args[:1] == ["--"] else a.probe_args
    try:
        check_output_file(a.out, "--out")
    except Usage as e:
        print(f"matrix-sweep: {e}", file=sys.stderr)
        return EXIT_USAGE
    try:
        d = load_document(a.probe, accept=("mori.probe",))
        if d is None:
            raise Malformed(a.probe, "not a mori.probe report")
        doc = summarise(d.doc, a.probe, a.world, goal, a.probe_exit, probe_args)
    except (Malformed, SummaryError) as e:
        print(f"matrix-sweep: {e}", file=sys.stderr)
        return EXIT_SUMMARY
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
        print(f"matrix-sweep: {a.probe}: not a peer-matrix report with write variants ({type(e).__name__}: {e})",
              file=sys.stderr)
        return EXIT_SUMMARY
    try:
        write_text(a.out, json.dumps(doc, indent=2), "--out")
    except Usage as e:
        print(f"matrix-sweep: {e}", file=sys.stderr)
        return EXIT_USAGE
    except Malformed as e:
        print(f"matrix-sweep: {e}", file=sys.stderr)
        return EXIT_SUMMARY
    print_summary(doc, a.probe, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
