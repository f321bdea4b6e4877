#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The GPU path for real (CTest label `gpu`): one case per CTest test. Without a GPU each case exits 77, which
CTest reports as skipped (never as passed). A GPU that nvidia-smi lists but the tools cannot use is a failure.

usage: gpu_test.py CASE BIN_DIR MPIRUN...
CASE:
  probe     mori-probe --backend gpu does every step of its chosen handle type (posix_fd or fabric) on every
            device; with 2+ GPUs, --deep finds every pair reachable
  a2a       mori-a2a --backend gpu at 2 ranks (one per GPU with 2+ GPUs, else both on GPU 0 under MPS),
            --sync device --graph 4 --protocol all: exit 0, wrong 0 in every configuration; at the defaults, graph
            rows of 16 and one best line per chunk
  mutants   the unmutated run passes; MORI_FAULT=a2a.no-barrier:*, a2a.stale:1, a2a.overrun:* each exit 1 with
            "wrong" > 0 under each protocol (simple, direct, ll, copy)
  teardown  mori-teardown-repro at 2 ranks on the GPU: ordered -> ok, free-before-unmap -> api_error
  jit       a fresh MORI_JIT_CACHE_DIR: the first run compiles, the second loads from the cache (same keys and
            images), a third with MORI_DISABLE_JIT=1 still runs
  distinct-policy
            the distinct-GPU plan on one GPU (MORI_FAULT=a2a.distinct-policy:0, docs/mori-a2a.md "The plan";
            results/h200/distinct-policy/): at 2 and 8 ranks on GPU 0 under MPS (whatever the GPU count),
            --chunk-kib 256,4096 --protocol all: exit 0, wrong 0, plan_policy distinct_gpus, system-scope signals,
            normal source loads, the distinct-GPU tables (table_world 2), every protocol verified; and under it
            each mutant (no-barrier, stale, overrun) exits 1 with wrong > 0 under every protocol
With one GPU and no MPS daemon active, the 2-rank cases start a private one (scripts/mori_mps.py, its own pipe and
log folders under a temporary folder) and stop it afterwards; an MPS daemon already active is used and left running.
-h, --help: this text, exit 0.
"""
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: harness.py
from harness import check, finish, skip  # noqa: E402

CASES = ("probe", "a2a", "mutants", "teardown", "jit", "distinct-policy")
if sys.argv[1:2] in (["-h"], ["--help"]):
    print(__doc__.strip())
    sys.exit(0)
if len(sys.argv) < 4 or sys.argv[1] not in CASES:
    print(__doc__.strip(), file=sys.stderr)
    sys.exit(2)
CASE, BIN, MPIRUN = sys.argv[1], sys.argv[2], sys.argv[3:]
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import mori_mps  # noqa: E402
PROBE = os.path.join(BIN, "mori-probe")
A2A = os.path.join(BIN, "mori-a2a")
TEARDOWN = os.path.join(BIN, "mori-teardown-repro")
PROBE_STEPS = ["granularity", "create", "export", "import", "reserve", "map", "set_access", "write_read", "unmap",
               "release", "free"]
MUTANTS = ("a2a.no-barrier:*", "a2a.stale:1", "a2a.overrun:*")


def run(cmd, env=None, timeout=300):
    """(exit code, stdout + stderr); a command past its timeout is killed with its process group: exit 124."""
    e = dict(os.environ, **(env or {}))
    try:
        p = subprocess.Popen(cmd, env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True)
    except OSError as err:
        return 127, f"$ {' '.join(cmd)}\n{err}"
    try:
        out, _ = p.communicate(timeout=timeout)
        return p.returncode, f"$ {' '.join(cmd)}\n{out}"
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, _ = p.communicate()
        return 124, f"$ {' '.join(cmd)}\n{out}\n(killed after {timeout} s)"


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def visible_limit():
    """How many devices CUDA_VISIBLE_DEVICES lets through (None: not set)."""
    v = os.environ.get("CUDA_VISIBLE_DEVICES")
    if v is None:
        return None
    n = 0
    for item in v.split(","):
        if not item.strip() or item.strip().startswith("-"):
            break  # the list ends at the first invalid entry
        n += 1
    return n


def gpus(tmp):
    """The GPUs the tools use here, as mori-probe finds them: (count, the probe's node, what was found)."""
    smi = shutil.which("nvidia-smi")
    listed = None
    if smi:
        rc, out = run([smi, "-L"], timeout=60)
        listed = len(re.findall(r"^GPU \d+:", out, re.M)) if rc == 0 else 0
        lim = visible_limit()
        if lim is not None:
            listed = min(listed, lim)
    path = os.path.join(tmp, "probe-auto.json")
    rc, out = run([PROBE, "--backend", "auto", "--json", path], timeout=120)
    doc = load(path)
    node = doc["nodes"][0] if doc and doc.get("nodes") else None
    runtime = node.get("runtime") if node else None
    count = len(node.get("devices", [])) if node and runtime not in (None, "host") else 0
    seen = (f"nvidia-smi {'lists ' + str(listed) + ' GPU(s)' if smi else 'not found'}; "
            f"mori-probe --backend auto: runtime {runtime or '?'} (exit {rc})"
            + (f": {node['gpu_unavailable']}" if node and node.get("gpu_unavailable") else ""))
    if count == 0 and listed:
        print(out[-3000:])
        print(f"FAIL: a GPU is here but the tools do not use it ({seen}). The build may lack the NVIDIA path "
              "(no cuda.h when it was configured: set CUDA_HOME and build again) or the driver library cannot "
              "be loaded; the probe's log is above.")
        sys.exit(1)
    if count == 0:
        skip(f"no GPU here ({seen}); the GPU tests run where a GPU is present")
    if listed is not None and listed != count:
        print(f"note: nvidia-smi lists {listed} GPU(s), mori-probe uses {count}")
    print(f"GPUs: {count} ({seen})")
    return count, node


class TwoRanks:
    """Where the ranks go (2 unless `ranks`): one per GPU with as many GPUs and not `one_gpu`; otherwise all on
    GPU 0 under MPS (scripts/mori_mps.py: the daemon the environment names, or a private one started here and
    stopped by stop())."""

    def __init__(self, count, node, tmp, ranks=2, one_gpu=False):
        self.env, self.placement, self.ok, self.ranks = {}, None, True, ranks
        if count >= ranks and not one_gpu:
            self.what = f"{ranks} ranks, one per GPU"
            return
        if node.get("mps_active") and mori_mps.active_daemon() is None:
            if count < 2:  # the one GPU there is, under the daemon serving it
                self.what = f"{ranks} ranks on one GPU, under the MPS daemon already active"
                return
            # Several GPUs under a daemon this process cannot name: the ranks cannot be confined to one of them.
            skip(f"{ranks} ranks on one of {count} GPUs: an MPS daemon is active that this environment does not "
                 "name (set CUDA_MPS_PIPE_DIRECTORY, or stop it)")
        self.placement = mori_mps.Placement(ranks, gpu=0, base=os.path.join(tmp, f"mps-{ranks}"))
        self.what = self.placement.describe()
        try:
            self.placement.start()
            self.env, out = self.placement.env(), ""
        except mori_mps.MpsError as e:  # the folder goes with this test's temporary folder: show the log now
            self.ok, out = False, f"{e}\n{self.placement.daemon.log_tail()}"
        check(f"MPS for {ranks} ranks on one GPU ({self.what})", self.ok, out)

    def stop(self):
        if self.placement and self.placement.started:
            check("the private MPS daemon stops", self.placement.stop(), self.placement.daemon.log_tail())

    def placement_ok(self, doc, count):
        """The report's own account of where the ranks ran matches what was asked."""
        m = doc.get("meta", {}) if doc else {}
        devices = [r.get("device") for r in m.get("ranks", [])]
        if count >= 2:
            return len(devices) == 2 and len(set(devices)) == 2 and m.get("all_ranks_one_device") is False, \
                f"devices {devices}, all_ranks_one_device {m.get('all_ranks_one_device')}"
        return m.get("mps_active") is True and m.get("shared_device_without_mps") is False, \
            f"devices {devices}, mps_active {m.get('mps_active')}, " \
            f"shared_device_without_mps {m.get('shared_device_without_mps')}"


def mpirun2(tool, args, env, ranks=2):
    return [*MPIRUN, "-n", str(ranks), tool, "--backend", "gpu", "--timeout-s", "30", *args], env


def case_probe(tmp, count, node):
    path = os.path.join(tmp, "probe-gpu.json")
    rc, out = run([PROBE, "--backend", "gpu", "--json", path], timeout=180)
    doc = load(path)
    n = doc["nodes"][0] if doc and doc.get("nodes") else {}
    check(f"mori-probe --backend gpu: exit 0, a GPU runtime (got exit {rc}, runtime {n.get('runtime')})",
          rc == 0 and n.get("runtime") not in (None, "host"), out)
    devs = n.get("devices", [])
    check(f"one device entry per GPU ({len(devs)} for {count})", len(devs) == count, out)
    for d in devs:
        chosen = d.get("chosen_handle_type")
        ht = d.get("handle_types", {}).get(chosen, {}) if chosen in ("posix_fd", "fabric") else {}
        steps = [(s.get("step"), s.get("status")) for s in ht.get("steps", [])]
        bad = [f"{s}={st}" for s, st in steps if st != "ok"]
        check(f"device {d.get('index')}: VMM, chosen handle type {chosen} (posix_fd or fabric), usable, every "
              f"step done and ok (not ok: {bad or 'none'}; reason: {d.get('reason')})",
              d.get("vmm_supported") is True and chosen in ("posix_fd", "fabric") and ht.get("usable") is True
              and [s for s, _ in steps] == PROBE_STEPS and not bad, out)
    if count >= 2:
        path = os.path.join(tmp, "probe-deep.json")
        rc, out = run([PROBE, "--backend", "gpu", "--deep", "--deep-mib", "64", "--json", path], timeout=300)
        doc = load(path)
        pairs = doc["nodes"][0].get("deep", {}).get("pairs", []) if doc and doc.get("nodes") else []
        bad = [p for p in pairs if p.get("status") != "ok" or p.get("reachable") is not True]
        check(f"--deep: all {count}x{count} pairs reachable by doing (not: {bad or 'none'})",
              rc == 0 and len(pairs) == count * count and not bad, out)


def a2a_job(tmp, name, where, args, fault=None):
    path = os.path.join(tmp, f"{name}.json")
    env = dict(where.env, **({"MORI_FAULT": fault} if fault else {}))
    cmd, env = mpirun2(A2A, [*args, "--json", path], env, where.ranks)
    rc, out = run(cmd, env=env, timeout=300)
    return rc, load(path), out


def case_a2a(tmp, count, where):
    args = ["--chunk-kib", "256,4096", "--sync", "device", "--graph", "4", "--protocol", "all"]
    rc, doc, out = a2a_job(tmp, "a2a", where, args)
    res = doc.get("results", []) if doc else []
    got = f"exit {rc}, wrong {doc.get('wrong') if doc else 'no JSON'}, {len(res)} results"
    check(f"{where.what}, --sync device --graph 4 --protocol all: exit 0, wrong 0 ({got})",
          rc == 0 and doc is not None and doc.get("wrong") == 0 and len(res) > 0
          and all(r.get("wrong") == 0 and r.get("sync") == "device" for r in res), out)
    protos = {(r.get("protocol"), r.get("graph")) for r in res}
    check(f"simple, direct, ll and copy each ran with and without a graph ({sorted(protos)})",
          protos == {(p, g) for p in ("simple", "direct", "ll", "copy") for g in (False, True)}, out)
    graphs = {(r.get("addressing"), r.get("chunk_bytes")) for r in res if r.get("graph") and r.get("graph_iters") == 4}
    check(f"graph replays of 4 iterations ran for both addressing models and both chunks ({sorted(graphs)})",
          len(graphs) == 4 and all(r.get("total_bw_gbps", 0) > 0 for r in res), out)
    # The defaults (the main job as typed): device sync also replayed in a graph of 16, and one best line per chunk.
    rc, doc2, out2 = a2a_job(tmp, "a2a-default", where, ["--chunk-kib", "256"])
    res2 = doc2.get("results", []) if doc2 else []
    best = doc2.get("best", []) if doc2 else []
    check("the defaults also measure device sync in a graph of 16 and end with one best line per chunk: "
          f"exit {rc}, {len(best)} best entries",
          rc == 0 and any(r.get("graph") and r.get("graph_iters") == 16 for r in res2) and
          (doc2 or {}).get("config", {}).get("graph_auto") is True and len(best) == 1 and
          best[0].get("chunk_bytes") == 256 << 10 and out2.count("# best  chunk 262144 B:") == 1, out2)
    # Device-scope signals exactly where both ranks share one GPU, and never for the copy protocol's barrier.
    shared = count < 2 and (doc or {}).get("meta", {}).get("platform") == "cuda"  # AMD: system scope always
    want = {p: ("device" if shared and p != "copy" else "system") for p in ("simple", "direct", "ll", "copy")}
    scopes = sorted({(r.get("protocol"), r.get("signal_scope")) for r in res})
    check(f"signal_scope is {'device (system for copy)' if shared else 'system'} in every row ({scopes})",
          len(res) > 0 and all(r.get("signal_scope") == want.get(r.get("protocol")) for r in res), out)
    platform = (doc or {}).get("meta", {}).get("platform")
    archs = [re.fullmatch(r"sm_(\d+)[a-z]?", r.get("arch", "")) for r in (doc or {}).get("meta", {}).get("ranks", [])]
    hints = platform == "cuda" and archs and all(m and int(m.group(1)) >= 80 for m in archs)
    # Auto marks the source loads evict-first exactly where ranks share a GPU whose L2 cannot hold the working
    # set (the row's l2_resident says whether it does) and the kernels have cache hints; copy moves none.
    def want_cache(r):
        if r.get("protocol") == "copy":
            return "none"
        return "evict_first" if shared and hints and r.get("l2_resident") is False else "normal"
    caches = sorted({(r.get("protocol"), r.get("chunk_bytes"), r.get("source_cache")) for r in res})
    check(f"source_cache follows the rule in every row ({caches})",
          len(res) > 0 and all(r.get("source_cache") == want_cache(r) for r in res), out)
    meta = doc.get("meta", {}) if doc else {}
    ok, why = where.placement_ok(doc, count)
    check(f"the report says backend gpu, world 2 and the placement asked for ({why})",
          meta.get("backend") == "gpu" and meta.get("world") == 2 and ok, out)
    # Evict-first source loads (docs/mori-a2a.md "Source cache") move the same bytes: verified like the rest.
    args = ["--chunk-kib", "256", "--sync", "device", "--graph", "4", "--protocol", "simple,direct,ll",
            "--source-cache", "evict-first"]
    rc, doc, out = a2a_job(tmp, "a2a-evict-first", where, args)
    res = doc.get("results", []) if doc else []
    if not hints:
        check(f"--source-cache evict-first is refused without cache hints (AMD, NVIDIA before sm_80; exit {rc})",
              rc == 2, out)
        return
    check(f"--source-cache evict-first: exit 0, wrong 0, every row evict_first "
          f"({sorted({(r.get('protocol'), r.get('source_cache'), r.get('wrong')) for r in res})})",
          rc == 0 and len(res) == 12 and all(r.get("wrong") == 0 and r.get("source_cache") == "evict_first"
                                            for r in res), out)


def fault_point_present(point):
    needle = point.split(":")[0].encode()
    files = [A2A] + glob.glob(os.path.join(BIN, "..", "**", "libmori_symm*"), recursive=True)
    for f in files:
        try:
            with open(f, "rb") as fh:
                if needle in fh.read():
                    return True
        except OSError:
            pass
    return False


def case_mutants(tmp, count, where):
    args = ["--chunk-kib", "256", "--sync", "device", "--protocol", "all"]
    rc, doc, out = a2a_job(tmp, "unmutated", where, args)
    check(f"{where.what}, unmutated: exit 0, wrong 0 (exit {rc}, wrong {doc.get('wrong') if doc else 'no JSON'})",
          rc == 0 and doc is not None and doc.get("wrong") == 0, out)
    for fault in MUTANTS:
        rc, doc, out = a2a_job(tmp, "mutant-" + re.sub(r"[^a-z0-9]+", "_", fault), where, args, fault)
        wrong = doc.get("wrong") if doc else None
        hint = "" if fault_point_present(fault) else (
            f"\nhint: the string '{fault.split(':')[0]}' occurs in neither mori-a2a nor libmori_symm: this build "
            "may not have that fault point (or was configured with -DMORI_FAULT_INJECTION=OFF)")
        per = mutant_per_protocol(doc)
        check(f"MORI_FAULT={fault}: the verification catches it under every protocol: exit 1 and wrong > 0 "
              f"(exit {rc}, wrong per protocol {per if doc else 'no JSON'})",
              rc == 1 and isinstance(wrong, int) and all(v > 0 for v in per.values()), out + hint)


def mutant_per_protocol(doc):
    """Wrong elements per protocol of a report's rows."""
    return {p: sum(r.get("wrong", 0) for r in (doc or {}).get("results", []) if r.get("protocol") == p)
            for p in ("simple", "direct", "ll", "copy")}


DISTINCT = "a2a.distinct-policy:0"


def case_distinct_policy(tmp, count, node):
    """The distinct-GPU plan on one GPU at 2 and 8 ranks (results/h200/distinct-policy/README.md)."""
    for ranks in (2, 8):
        where = TwoRanks(count, node, tmp, ranks=ranks, one_gpu=True)
        try:
            if where.ok:
                distinct_policy_at(tmp, where)
        finally:
            where.stop()


def distinct_policy_at(tmp, where):
    n = where.ranks
    args = ["--chunk-kib", "256,4096", "--protocol", "all"]
    rc, doc, out = a2a_job(tmp, f"distinct-w{n}", where, args, DISTINCT)
    res = doc.get("results", []) if doc else []
    meta = (doc or {}).get("meta", {})
    check(f"{where.what}, MORI_FAULT={DISTINCT}, --chunk-kib 256,4096 --protocol all: exit 0, wrong 0 in every "
          f"row, world {n}, plan_policy distinct_gpus (exit {rc}, wrong {doc.get('wrong') if doc else 'no JSON'}, "
          f"{len(res)} rows, world {meta.get('world')}, plan_policy {meta.get('plan_policy')})",
          rc == 0 and doc is not None and doc.get("wrong") == 0 and len(res) > 0
          and all(r.get("wrong") == 0 for r in res) and meta.get("world") == n
          and meta.get("plan_policy") == "distinct_gpus" and meta.get("all_ranks_one_device") is True, out)
    device = [r for r in res if r.get("sync") == "device"]
    protos = {(r.get("protocol"), r.get("graph")) for r in device}
    check(f"{n} ranks: simple, direct, ll and copy each verified, eager and in a graph ({sorted(protos)})",
          protos == {(p, g) for p in ("simple", "direct", "ll", "copy") for g in (False, True)}, out)
    shape = sorted({(r.get("sync"), r.get("signal_scope"), r.get("source_cache"), r.get("table_world"))
                    for r in res})
    check(f"{n} ranks: the distinct-GPU plan in every row: system-scope signals (none for host sync), normal source "
          f"loads (none for copy), the tables of distinct GPUs measured at 2 ranks ({shape})",
          len(res) > 0 and all(r.get("signal_scope") == ("system" if r.get("sync") == "device" else "none")
                               and r.get("source_cache") == ("none" if r.get("protocol") == "copy" else "normal")
                               and r.get("table_world") == 2 for r in res), out)
    margs = ["--chunk-kib", "256", "--sync", "device", "--protocol", "all"]
    for fault in MUTANTS:
        name = f"distinct-w{n}-mutant-" + re.sub(r"[^a-z0-9]+", "_", fault)
        rc, doc, out = a2a_job(tmp, name, where, margs, f"{DISTINCT},{fault}")
        per = mutant_per_protocol(doc)
        plan = (doc or {}).get("meta", {}).get("plan_policy")
        check(f"{n} ranks, distinct-GPU plan, MORI_FAULT={fault}: exit 1 and wrong > 0 under every protocol "
              f"(exit {rc}, wrong per protocol {per if doc else 'no JSON'}, plan_policy {plan})",
              rc == 1 and doc is not None and plan == "distinct_gpus" and all(v > 0 for v in per.values()), out)


def case_teardown(tmp, count, where):
    for scenario, expected in (("ordered", "ok"), ("free-before-unmap", "api_error")):
        d = os.path.join(tmp, f"journal-{scenario}")
        path = os.path.join(tmp, f"teardown-{scenario}.json")
        cmd, env = mpirun2(TEARDOWN, ["--scenario", scenario, "--journal-dir", d, "--json", path], where.env)
        rc, out = run(cmd, env=env, timeout=300)
        doc = load(path)
        s = doc["scenarios"][0] if doc and doc.get("scenarios") else {}
        check(f"{where.what}, {scenario}: exit 0, outcome {expected} (exit {rc}, outcome {s.get('outcome')}, "
              f"expected {s.get('expected')}, detail: {s.get('detail')})",
              rc == 0 and s.get("name") == scenario and s.get("outcome") == expected == s.get("expected")
              and doc.get("meta", {}).get("backend") == "gpu", out)
        summary = os.path.join(tmp, f"summary-{scenario}.json")
        rc2, out2 = run([TEARDOWN, "--backend", "host", "--summarize", d, "--json", summary], timeout=60)
        sdoc = load(summary)
        ss = sdoc["scenarios"][0] if sdoc and sdoc.get("scenarios") else {}
        leaked = [r.get("leaked") for r in ss.get("ranks", [])]
        clean = all(not any((v or 0) for v in (lk or {}).values()) for lk in leaked)
        check(f"{scenario}: the summary of both ranks' journals says {expected} (got {ss.get('outcome')})"
              + (f"; nothing leaked ({leaked})" if scenario == "ordered" else ""),
              rc2 == 0 and ss.get("outcome") == expected and len(ss.get("ranks", [])) == 2
              and (clean or scenario != "ordered"), out2)


def case_jit(tmp, count):
    cache = tempfile.mkdtemp(prefix="jit-", dir=tmp)  # mode 0700: the cache only loads from private folders
    args = ["--chunk-kib", "64", "--iters", "2", "--warmup", "0", "--sync", "host", "--addressing", "ptr"]

    def job(name, extra=None):
        path = os.path.join(tmp, f"{name}.json")
        rc, out = run([*MPIRUN, "-n", "1", A2A, "--backend", "gpu", *args, "--json", path],
                      env={"MORI_JIT_CACHE_DIR": cache, "MORI_JIT_VERBOSE": "1", **(extra or {})}, timeout=300)
        doc = load(path)
        return rc, (doc or {}).get("meta", {}).get("jit", {}), doc, out

    rc, cold, doc, out = job("cold")
    ents = cold.get("entries", [])
    check(f"cold (empty cache {cache}): exit 0, wrong 0, every kernel compiled (compiles_in_job "
          f"{cold.get('compiles_in_job')}, sources {[e.get('source') for e in ents]}, cold_compile_ms "
          f"{cold.get('cold_compile_ms')})",
          rc == 0 and doc is not None and doc.get("wrong") == 0 and doc["meta"].get("backend") == "gpu"
          and (cold.get("compiles_in_job") or 0) >= 1 and ents and all(e.get("source") == "compiled" for e in ents)
          and (cold.get("cold_compile_ms") or 0) > 0 and str(cold.get("cache_dir", "")).startswith((cache, os.path.realpath(cache))), out)
    rc, warm, doc, out = job("warm")
    went = warm.get("entries", [])
    same = sorted((e.get("key"), e.get("image_hash")) for e in went) == \
        sorted((e.get("key"), e.get("image_hash")) for e in ents)
    check(f"warm: exit 0, no compile, every kernel from the cache with the cold run's keys and images "
          f"(compiles_in_job {warm.get('compiles_in_job')}, sources {[e.get('source') for e in went]}, "
          f"cache_load_ms {warm.get('cache_load_ms')} vs cold_compile_ms {cold.get('cold_compile_ms')})",
          rc == 0 and doc is not None and doc.get("wrong") == 0 and warm.get("compiles_in_job") == 0 and went
          and all(e.get("source") == "cache" for e in went) and same
          and 0 < (warm.get("cache_load_ms") or 0) < (cold.get("cold_compile_ms") or 0), out)
    rc, _, doc, out = job("nojit", {"MORI_DISABLE_JIT": "1"})
    check(f"MORI_DISABLE_JIT=1 on the warm cache: still runs (exit {rc})",
          rc == 0 and doc is not None and doc.get("wrong") == 0, out)


def main():
    with tempfile.TemporaryDirectory(prefix="mori-gpu-test-") as tmp:
        count, node = gpus(tmp)
        if CASE == "probe":
            case_probe(tmp, count, node)
        elif CASE == "jit":
            case_jit(tmp, count)
        elif CASE == "distinct-policy":
            case_distinct_policy(tmp, count, node)
        else:
            where = TwoRanks(count, node, tmp)
            try:
                if where.ok:
                    print(f"placement: {where.what}")
                    {"a2a": case_a2a, "mutants": case_mutants, "teardown": case_teardown}[CASE](tmp, count, where)
            finally:
                where.stop()
    finish()


if __name__ == "__main__":
    main()
