# SPDX-License-Identifier: MIT
"""nccl-tests' alltoall_perf (--nccl-tests DIR): run by rank 0 after the torch processes have released the GPUs'
collectives, its -J JSON read into mori.a2a/2 rows (docs/results.md "Comparing with NCCL and torch")."""
import os
import shlex
import shutil
import subprocess
import tempfile

from mori_results.reader import read_json

from .options import UsageError
from .rows import fmt_size
from .stats import bandwidths, failed_fields, time_stats

AVERAGE = {"0": "rank 0", "1": "mean over ranks", "2": "min over ranks", "3": "max over ranks"}  # its -a


# ---------------------------------------------------------------------------------------------------------------
# Reading its -J JSON (the JSON written by nccl-tests' src/util.cu)
# ---------------------------------------------------------------------------------------------------------------

def _num(x):
    """nccl-tests writes numbers with %lf and NaN as the string "nan"."""
    if x is None:
        return None
    if isinstance(x, str):
        try:
            x = float(x)
        except ValueError:
            return None
    x = float(x)
    return None if x != x else x


def _arg_value(args, flag):
    """The value after `flag` in an argv list (last one wins), or None."""
    val = None
    for i, a in enumerate(args or []):
        if a == flag and i + 1 < len(args):
            val = args[i + 1]
        elif a.startswith(flag) and len(a) > len(flag) and not a.startswith("--"):
            val = a[len(flag):]
    return val


def _ranks(doc, cfg, world):
    ranks = len(doc.get("devices") or []) or int(cfg.get("nthreads", 1)) * int(cfg.get("ngpus", 1))
    if world and ranks and world != ranks and not doc.get("devices"):
        ranks = world
    ranks = ranks or world
    if not ranks:
        raise ValueError("nccl-tests JSON names no devices and no world was given")
    return ranks


def _run_facts(doc, world):
    """What holds for every result of one document: ranks, iterations, graph launches, the -R/-D/-V/-a options."""
    cfg = doc.get("config") or {}
    args = [str(a) for a in (doc.get("args") or [])]
    ranks = _ranks(doc, cfg, world)
    graph_launches = int(cfg.get("graph", 0) or 0)
    iters = int(cfg.get("iterations", 0) or 0) * max(1, int(cfg.get("aggregated_iterations", 1) or 1))
    reg = _arg_value(args, "-R") or _arg_value(args, "--local_register") or "0"
    dev = _arg_value(args, "-D") or _arg_value(args, "--device_implementation") or "0"
    ctas = _arg_value(args, "-V") or _arg_value(args, "--device_cta_count")
    avg = _arg_value(args, "-a") or _arg_value(args, "--average") or "1"
    return {"ranks": ranks, "graph_launches": graph_launches, "iters": iters, "reg": reg, "dev": dev, "ctas": ctas,
            "avg": avg, "reduction": AVERAGE.get(avg, avg), "lsa": int(dev) > 0, "version": doc.get("nccl_version")}


def _timing(r, oop, f):
    """(mean, time_us, samples, note) of one result: -I 1 per-iteration samples where present, else its mean."""
    mean = _num(oop.get("time"))
    if mean is None:
        mean = _num(oop.get("cpu_time"))
    per_iter = r.get("out_of_place_per_iter") or {}
    times = [v for v in (_num(x) for x in per_iter.get("times_us") or []) if v is not None]
    skip = int(per_iter.get("skipped_iterations", 0) or 0)
    if len(times) > skip:
        note = ("nccl-tests -I 1: per-iteration CUDA-event times, max over ranks per iteration; "
                "percentiles recomputed here")
        return mean, time_stats(times[skip:]), len(times) - skip, note
    graph_launches = f["graph_launches"]
    note = (f"nccl-tests reports a mean: one timer over {f['iters']} iterations"
            + (f" x {graph_launches} graph launches" if graph_launches else "")
            + f", {f['reduction']} (-a {f['avg']}); min/p95/max not available; p50 and mean hold that mean")
    return mean, {"min": None, "p50": mean, "p95": None, "max": None, "mean": mean}, 1, note


def _result_row(r, f):
    ranks, graph_launches, iters, dev, lsa = f["ranks"], f["graph_launches"], f["iters"], f["dev"], f["lsa"]
    size = int(r["size"])
    if size % ranks:
        raise ValueError(f"nccl-tests size {size} is not a multiple of {ranks} ranks")
    chunk = size // ranks
    oop = r.get("out_of_place") or {}
    mean, t, samples, note = _timing(r, oop, f)
    nwrong = oop.get("nwrong")
    row = {"chunk_bytes": chunk, "addressing": "nccl-lsa" if lsa else "nccl", "sync": "device",
           "graph": graph_launches > 0, "graph_iters": iters if graph_launches else 0,
           "protocol": f"nccl-lsa-D{dev}" if lsa else ("nccl-host-graph" if graph_launches else "nccl-host"),
           "iters": iters * max(1, graph_launches), "samples": samples, "time_us": t,
           **bandwidths(ranks, chunk, t["p50"]),
           "wrong": int(_num(nwrong) or 0) if nwrong is not None else 0,
           "source": "nccl-tests", "note": note,
           "nccl_tests": {"size": size, "count": r.get("count"), "type": r.get("type"),
                          "time_us": mean, "alg_bw": _num(oop.get("alg_bw")), "bus_bw": _num(oop.get("bus_bw")),
                          "nwrong": nwrong, "register": int(f["reg"]), "device_impl": int(dev),
                          "device_ctas": int(f["ctas"]) if f["ctas"] else None, "graph_launches": graph_launches,
                          "version": f["version"]}}
    if nwrong is None:
        row["checked"] = False
    return row


def nccl_tests_rows(doc, world=None):
    """Rows of mori.a2a/2 from one alltoall_perf -J document (the JSON written by nccl-tests' src/util.cu).

    nccl-tests' "size" is the whole send buffer (per-peer chunk x ranks): chunk_bytes = size / ranks. Its "time"
    is a mean per iteration over iterations x graph launches (one timer), reduced over ranks as -a says (the
    compare run passes -a 3: max). Where -I 1 per-iteration times are present (never with -G), those are the
    samples instead. "#wrong" (-c 1) becomes `wrong`; a row whose check did not run says so.
    """
    facts = _run_facts(doc, world)
    return [_result_row(r, facts) for r in doc.get("results") or []]


# ---------------------------------------------------------------------------------------------------------------
# Running it
# ---------------------------------------------------------------------------------------------------------------

def nccl_tests_binary(d):
    exe = os.path.join(d, "build", "alltoall_perf")
    if not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
        raise UsageError(f"--nccl-tests {d}: no executable {exe} (build it with scripts/build-nccl-tests)")
    return exe


def nccl_tests_configs(graph_k, ctas):
    v = ["-V", str(ctas)] if ctas else []
    return [("nccl-tests host path -G", ["-G", str(graph_k)]),
            ("nccl-tests -R 2 -D 1 -G", ["-R", "2", "-D", "1", "-G", str(graph_k)] + v),
            ("nccl-tests -R 2 -D 2 -G", ["-R", "2", "-D", "2", "-G", str(graph_k)] + v)]


def _env(d):
    """This environment with DIR/nccl/lib first on LD_LIBRARY_PATH (scripts/build-nccl-tests puts NCCL there)."""
    env = dict(os.environ)
    libdir = os.path.join(d, "nccl", "lib")
    if os.path.isdir(libdir):
        env["LD_LIBRARY_PATH"] = libdir + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    env["NCCL_NVLS_ENABLE"] = "0"
    return env


def _run_one(a, exe, env, world, c, config, jpath, log):
    """alltoall_perf of one configuration at one chunk: its rows, or one row with "error"."""
    name, extra = config
    size = c * world
    gpus = ["-t", str(world), "-g", "1"] if a.nccl_tests_threads else ["-g", str(world)]
    cmd = [exe, "-b", str(size), "-e", str(size), *gpus, "-n", str(a.iters), "-w", str(a.warmup),
           "-c", "1", "-a", "3", *extra, "-J", jpath]
    base = {"chunk_bytes": c, "addressing": "nccl-lsa" if "-D" in extra else "nccl", "sync": "device",
            "graph": True, "graph_iters": a.iters,
            "protocol": ("nccl-lsa-D" + extra[extra.index("-D") + 1]) if "-D" in extra
            else "nccl-host-graph", "source": "nccl-tests", "command": " ".join(map(shlex.quote, cmd))}
    log(f"[compare] {name} chunk {fmt_size(c)}: {' '.join(cmd)}")
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=a.nccl_tests_timeout)
        if p.returncode != 0 or not os.path.exists(jpath):
            tail = (p.stdout + p.stderr).strip().splitlines()[-6:]
            raise RuntimeError(f"exit {p.returncode}: " + " | ".join(tail))
        got = nccl_tests_rows(read_json(jpath), world)
        got = [g for g in got if g["chunk_bytes"] == c] or got
        if not got:
            raise RuntimeError("its JSON holds no result")
        for g in got:
            g["command"] = base["command"]
        return got
    except Exception as e:  # noqa: BLE001
        msg = f"nccl-tests ({name}, chunk {fmt_size(c)}): {type(e).__name__}: {e}"
        log("[compare] FAILED " + msg)
        return [{**base, **failed_fields(world, c, msg)}]


def run_nccl_tests(a, world, chunks, log):
    """Every configuration of nccl_tests_configs at every chunk, one alltoall_perf run each."""
    exe = nccl_tests_binary(a.nccl_tests)
    env = _env(a.nccl_tests)
    rows = []
    tmp = tempfile.mkdtemp(prefix="compare-nccl-tests-")
    try:
        for config in nccl_tests_configs(a.graph, a.nccl_tests_ctas):
            for c in chunks:
                jpath = os.path.join(tmp, f"a2a-{len(rows)}-{c * world}.json")  # -J opens with "wx": must not exist
                rows += _run_one(a, exe, env, world, c, config, jpath, log)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return rows
