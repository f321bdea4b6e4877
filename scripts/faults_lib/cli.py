# SPDX-License-Identifier: MIT
"""The command line of scripts/faults and the loop over configurations and cases within the budget."""
import os
import signal
import sys

import mori_launcher  # scripts/ is on sys.path (scripts/faults puts it there)
from mori_results.cli import Parser, integer_list, non_negative_decimal, positive_decimal, positive_integer
from mori_results.errors import Malformed, WriteFailed
from mori_results.files import check_output_file
from mori_results.machine import needs_mps, smi_gpus

from .budget import Budget, worst_case_s
from .cases import CASES, FAULTY, Case
from .jobs import ROOT, Run
from .report import SCHEMA, finish, meta, table
from mori_results import env as envvars


def parse(usage):
    ap = Parser(prog="scripts/faults", name="faults", description=usage.split("\n")[0])
    ap.add_argument("--backend", choices=["gpu", "host"], default="gpu")
    ap.add_argument("--bin", help="directory of mori-a2a (default: $MORI_BIN, build-gpu/bin or build/bin)")
    ap.add_argument("--worlds", type=integer_list, default="4,8",
                    help="ranks on one GPU (or on the host runtime), comma separated")
    ap.add_argument("--cases", default=",".join(CASES), help="comma separated, of: " + ", ".join(CASES))
    ap.add_argument("--timeout-s", type=positive_integer, default=10, help="mori-a2a --timeout-s (T)")
    ap.add_argument("--settle-s", type=non_negative_decimal, default=1.0,
                    help="seconds from the faulty rank entering the timed loop to the signal")
    ap.add_argument("--announce-limit-s", type=positive_decimal, default=120,
                    help="longest wait for the faulty rank to enter the timed loop (then signalled anyway) or to "
                         "exit in die-in-rendezvous")
    ap.add_argument("--chunk-kib", type=positive_integer,
                    help="chunk per peer (default 4096 on the GPU, 16 on the host)")
    ap.add_argument("--iters", type=positive_integer, default=100000, help="mori-a2a --iters of the signal cases")
    ap.add_argument("--graph-iters", type=positive_integer, default=1000,
                    help="--iters of kill-timed-graph (few: the reference and stream rows before its graph row "
                         "stay short)")
    ap.add_argument("--graph-k", type=positive_integer, default=10000,
                    help="--graph K of kill-timed-graph: its timed phase is max(20, ceil(graph-iters / K)) replays "
                         "of K iterations")
    ap.add_argument("--graph-chunk-kib", type=positive_integer, default=1024, help="--chunk-kib of kill-timed-graph")
    ap.add_argument("--bystander-chunk-kib", type=positive_integer, default=256)
    ap.add_argument("--no-bystander", dest="bystander", action="store_false")
    ap.add_argument("--no-mps", dest="mps", action="store_false", help="gpu backend without the MPS daemon")
    ap.add_argument("--no-per-gpu", dest="per_gpu", action="store_false", help="skip the one-rank-per-GPU runs")
    ap.add_argument("--mpirun", default=envvars.read("MORI_MPIRUN") or None,
                    help="the launcher and its options, as one string (default: $MORI_MPIRUN, else the launcher of "
                         "the MPI the tools were built with: mpirun --oversubscribe for Open MPI)")
    ap.add_argument("--budget-s", type=positive_decimal, default=420,
                    help="a case starts only if its worst case fits in what is left of this; the rest are skipped "
                         "(listed in the document with the reason)")
    ap.add_argument("--json", default="faults.json")
    a = ap.parse_args()
    a.case_list = [c for c in a.cases.split(",") if c]
    bad = [c for c in a.case_list if c not in CASES]
    if bad:
        ap.error(f"unknown case {bad[0]} (cases: {', '.join(CASES)})")
    a.world_list = a.worlds
    if any(w <= FAULTY for w in a.world_list):
        ap.error("every world needs at least 2 ranks")
    gpu = a.backend == "gpu"
    if not gpu and "kill-timed-graph" in a.case_list:
        if a.cases != ",".join(CASES):
            ap.error("kill-timed-graph needs --backend gpu (the host runtime has no graphs)")
        a.case_list.remove("kill-timed-graph")
    if a.chunk_kib is None:
        a.chunk_kib = 4096 if gpu else 16
    if a.bin is None:
        a.bin = envvars.read("MORI_BIN") or os.path.join(ROOT, "build-gpu/bin" if gpu and os.path.isdir(
            os.path.join(ROOT, "build-gpu/bin")) else "build/bin")
    try:  # a regular file or a new name in a writable folder, checked before any job starts
        check_output_file(a.json, "--json")
    except Malformed as e:
        print(f"faults: {e}", file=sys.stderr)
        sys.exit(2)
    a.bin = os.path.abspath(a.bin)  # the jobs run in a temporary folder
    try:  # split as a shell would: an unbalanced quote is a usage error before any job
        a.mpirun = (mori_launcher.split_line(a.mpirun, "--mpirun (or MORI_MPIRUN)") if a.mpirun else
                    mori_launcher.mpirun_command(a.bin))
    except mori_launcher.BadLauncher as e:
        ap.error(str(e))
    return a


def configs(a, gpu_list):
    """The run's configurations, each a device placement (scripts/mori_results/machine.py): one-gpu (every world's
    ranks on GPU 0), per-gpu (one rank per GPU, where there are 2+), host (the host runtime)."""
    gpu = a.backend == "gpu"
    out = [{"name": "one-gpu" if gpu else "host", "world": w, "gpus": 1 if gpu else 0,
            "visible": "0" if gpu else None} for w in a.world_list]
    if gpu and a.per_gpu and len(gpu_list) >= 2:
        out.append({"name": "per-gpu", "world": len(gpu_list), "gpus": len(gpu_list), "visible": None})
    return out


def skipped(name, cfg, reason, worst, left):
    return {"name": name, "config": cfg["name"], "world": cfg["world"], "reason": reason, "worst_case_s": worst,
            "left_s": round(max(0.0, left), 1)}


def run_all(a, run, budget, plan, doc):
    """Runs the planned (configuration, case) pairs that fit in the budget; on SIGINT, SIGTERM or SIGHUP the
    rest are listed as skipped (interrupted)."""
    i = 0
    try:
        # One private MPS daemon for every job of the run where ranks share a GPU (the one-gpu configurations, all
        # ranks on GPU 0; the per-gpu one runs under it too, so that the bystander can share GPU 0).
        if a.mps and any(needs_mps(cfg["world"], cfg["gpus"]) for cfg, _ in plan):
            run.start_mps()
        for i, (cfg, name) in enumerate(plan):
            worst = worst_case_s(a, name)
            reason = budget.skip_reason(worst)
            if reason is not None:
                doc["skipped"].append(skipped(name, cfg, reason, worst, budget.left()))
                print(f"faults: {name} ({cfg['name']}, {cfg['world']} ranks) skipped: {reason}", flush=True)
                continue
            print(f"faults: {name} ({cfg['name']}, {cfg['world']} ranks)", flush=True)
            res = Case(run, name, cfg).execute()
            res["worst_case_s"] = worst
            doc["cases"].append(res)
        i = len(plan)
    except KeyboardInterrupt:
        doc["interrupted"] = True
        print("faults: interrupted; cleaning up", file=sys.stderr)
        doc["skipped"] += [skipped(name, cfg, "interrupted", worst_case_s(a, name), budget.left())
                           for cfg, name in plan[i:]]


def main(usage):
    a = parse(usage)
    budget = Budget(a.budget_s, a.backend == "gpu" and a.mps)
    if not os.access(os.path.join(a.bin, "mori-a2a"), os.X_OK):
        print(f"faults: no mori-a2a in {a.bin} (build first, or pass --bin)", file=sys.stderr)
        return 2
    gpu_list = smi_gpus() if a.backend == "gpu" else []
    if a.backend == "gpu" and not gpu_list:
        print("faults: --backend gpu but nvidia-smi -L lists no GPU (use --backend host)", file=sys.stderr)
        return 2
    plan = [(cfg, name) for cfg in configs(a, gpu_list) for name in a.case_list]
    run = Run(a)
    doc = {"schema": SCHEMA, "meta": meta(a, gpu_list), "cases": [], "skipped": []}

    def interrupted(signum, frame):
        raise KeyboardInterrupt()

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, interrupted)
    try:
        try:
            run_all(a, run, budget, plan, doc)
        finally:
            run.cleanup()
            doc["budget"] = budget.summary()
            finish(doc, a.json)
    except WriteFailed as e:  # the system refused the write (a full file system: ENOSPC): a system error
        print(f"faults: {e}", file=sys.stderr)
        return 3
    table(doc)
    print(f"faults: {sum(c['ok'] for c in doc['cases'])}/{len(doc['cases'])} cases ok, "
          f"{len(doc['skipped'])} skipped; wrote {a.json}")
    return 0 if doc["ok"] else 1
