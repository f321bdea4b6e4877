#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The several-GPU evidence preset (scripts/evidence --preset node) rehearsed on the host runtime with 8 ranks
(docs/evidence.md "The node preset"): its priority order and budgets (the essentials within 420 s of budget, every
step within one 10-minute call), the planned commands of the GPU-count subsets (the host runtime has one device
whatever the count, so the subsets are the rank counts and the CUDA_VISIBLE_DEVICES each step would set), the
GPU-only steps skipped with their reason, a run cut by its deadline that --resume continues where it stopped, the
plan check on every mori-a2a row against results/expectations/a2a-plan.json, and a deliberately wrong table entry
that makes the step fail naming the row and the field.

In a tree without .git (a release tarball, a GPU machine's copy) every run states the revision the build recorded
(--revision, and --tree-clean where the build says clean; a stand-in commit where it recorded none): nothing here
needs git otherwise, so every check runs. Under CI=true a tree without git fails.

usage: evidence_node_test.py BIN_DIR MPIRUN...
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: harness.py
from harness import check, evidence_revision, finish, git_checkout  # noqa: E402

if len(sys.argv) < 3:
    print(__doc__.strip(), file=sys.stderr)
    sys.exit(2)
BIN, MPIRUN = sys.argv[1], sys.argv[2:]
ROOT = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
EVIDENCE = os.path.join(ROOT, "scripts", "evidence")
TABLE = os.path.join(ROOT, "results", "expectations", "a2a-plan.json")
ENV = dict(os.environ, MORI_MPIRUN=" ".join(MPIRUN))
GIT = git_checkout(ROOT)
HEAD, CLEAN, STATED = (None, None, []) if GIT else evidence_revision(BIN)  # no .git: as the build recorded
ORDER = ["main-job", "main-job-4", "main-job-2", "topo", "nvlink", "a2a-r1", "a2a-r2", "nccl-tests-build", "compare",
         "mutant-none", "mutant-no-barrier", "mutant-stale", "mutant-overrun", "sweep", "sweep-4", "sweep-2",
         "teardown-matrix", "faults", "summary"]
ESSENTIALS = ["main-job", "main-job-4", "main-job-2", "topo", "nvlink", "a2a-r1", "a2a-r2"]
GPU_ONLY = ["topo", "nvlink", "nccl-tests-build", "compare", "mutant-stale", "mutant-overrun", "faults"]
HOST_RUN = [n for n in ORDER if n not in GPU_ONLY]
CALL_S = 540  # scripts/evidence --deadline-s of one 10-minute call (docs/evidence.md): 60 s left for the end
BUILD_S = 240  # scripts/evidence BUILD_BUDGET_S: the first call builds


def run(args, timeout=600):
    p = subprocess.run([sys.executable, EVIDENCE, *args], cwd=ROOT, env=ENV, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=timeout)
    return p.returncode, p.stdout


def git(*args):
    return subprocess.run(["git", *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          text=True).stdout.strip()


def manifest(folder):
    try:
        with open(os.path.join(folder, "manifest.json")) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        return {"error": str(e)}


def n_of(cmd):
    return cmd[cmd.index("-n") + 1] if "-n" in cmd else None


# ---- the preset as written: order and budgets ----
with open(os.path.join(ROOT, "scripts", "evidence_presets.json")) as f:
    preset = json.load(f)["presets"]["node"]
steps = preset["steps"]
names = [s["name"] for s in steps]
check("the node preset's steps in priority order", names == ORDER, json.dumps(names))
peers = [s for s in steps if "peers" in s.get("on", ["host", "gpu", "peers"])]
check("on a node every step but the summary runs one rank per GPU (ranks gpus, or a gpus subset)",
      all(s.get("ranks") == "gpus" or "gpus" in s or s["kind"] not in ("tool",) for s in peers), json.dumps(peers))
main = {s["name"]: s for s in steps}
check("the users' exact command at all GPUs, 4 and 2: mori-a2a --chunk-kib 256",
      all(main[n]["tool"] == "mori-a2a" and main[n]["args"] == ["--chunk-kib", "256"]
          for n in ("main-job", "main-job-4", "main-job-2")) and main["main-job"]["ranks"] == "gpus" and
      main["main-job-4"]["gpus"] == 4 and main["main-job-2"]["gpus"] == 2, json.dumps(steps[:3]))
check("topo and nvlink capture nvidia-smi topo -m and nvidia-smi nvlink --status",
      main["topo"]["args"] == ["nvidia-smi", "topo", "-m"] and
      main["nvlink"]["args"] == ["nvidia-smi", "nvlink", "--status"], json.dumps([main["topo"], main["nvlink"]]))
ess = sum(main[n]["budget_s"] for n in ESSENTIALS)
check(f"the essentials' budgets ({ess} s) fit the first 7 minutes after the build (420 s)", ess <= 420, str(ess))
summary_s = main["summary"]["budget_s"]
worst = max(s["budget_s"] for s in steps)
check(f"every step fits one 10-minute call without the build ({worst} + {summary_s} <= {CALL_S} s) and the "
      "first call holds the build and the main job",
      worst + summary_s <= CALL_S and BUILD_S + main["main-job"]["budget_s"] + summary_s <= CALL_S, str(worst))
check("the teardown matrix runs one rank per GPU without MPS (worlds up to the GPUs) and faults one rank per GPU "
      "only (--worlds= leaves out the one-GPU worlds)",
      main["teardown-matrix"].get("worlds_up_to_gpus") is True and "--worlds=" in main["faults"]["args"], "")

# ---- the planned commands on a node of 8, 4 and 2 GPUs (scripts/evidence's own planning, nothing run) ----
import importlib.machinery  # noqa: E402
import importlib.util  # noqa: E402
_loader = importlib.machinery.SourceFileLoader("evidence_script", EVIDENCE)
ev = importlib.util.module_from_spec(importlib.util.spec_from_loader("evidence_script", _loader))
_loader.exec_module(ev)


def planned(ngpu):
    """{step: (mpirun -n, CUDA_VISIBLE_DEVICES)} of the tool steps and {step: skip reason} on `ngpu` GPUs."""
    e = ev.Evidence(ev.parse(["--preset", "node"]))
    e.kind, e.ngpu, e.host_gpus, e.bin, e.work, e.dir = "peers", ngpu, 8, "/bin", tempfile.gettempdir(), "/x"
    e.table = {"schema": "mori.a2a-plan-table/1", "cases": []}
    got = {}
    e.run_step = lambda name, cmd, budget, env=None, **kw: got.setdefault(name, (n_of(cmd), (env or {}).get(
        "CUDA_VISIBLE_DEVICES"), cmd))
    plan = e.plan_steps(preset)
    skips = {x["name"]: x["skip"] for x in plan if x.get("skip")}
    for x in plan:
        if x["kind"] == "tool" and not x.get("skip"):
            e.tool_step(x)
    return got, skips


for ngpu in (8, 4, 2):
    got, skips = planned(ngpu)
    want = {"main-job": (str(ngpu), None), "a2a-r1": (str(ngpu), None), "mutant-stale": (str(ngpu), None),
            "sweep": (str(ngpu), None)}
    if ngpu > 4:
        want.update({"main-job-4": ("4", "0,1,2,3"), "sweep-4": ("4", "0,1,2,3")})
    if ngpu > 2:
        want.update({"main-job-2": ("2", "0,1"), "sweep-2": ("2", "0,1")})
    check(f"{ngpu} GPUs: the planned commands (mpirun -n, CUDA_VISIBLE_DEVICES) of the main job, sweeps, mutants",
          all(got.get(k, (None, None))[:2] == v for k, v in want.items()),
          json.dumps({k: v[:2] for k, v in got.items()}))
    cmd = got["main-job"][2]
    tool = next((i for i, c in enumerate(cmd) if c.endswith("/mori-a2a")), -1)
    check(f"{ngpu} GPUs: the users' command exactly (mori-a2a --backend gpu --timeout-s 30 --chunk-kib 256 --json)",
          cmd[tool + 1:-1] == ["--backend", "gpu", "--timeout-s", "30", "--chunk-kib", "256", "--json"],
          json.dumps(cmd))
    wskip = ({} if ngpu > 4 else {"main-job-4": "all of this" if ngpu == 4 else "needs 4",
                                  "sweep-4": "all of this" if ngpu == 4 else "needs 4"})
    if ngpu == 2:
        wskip.update({"main-job-2": "all of this", "sweep-2": "all of this"})
    check(f"{ngpu} GPUs: the subsets skipped with their reason: {sorted(wskip)}",
          sorted(skips) == sorted(wskip) and all(w in skips[k] for k, w in wskip.items()), json.dumps(skips))

rc, out = run(["--list"])
check("--list shows the node preset with its budgets", rc == 0 and "\nnode:" in out and "540" in out, out[-2000:])
rc, out = run(["--preset", "node", "--steps", "no-such-step", "--backend", "host", "--bin", BIN, "--out",
               tempfile.gettempdir(), *STATED, "--allow-dirty"])
check("--steps with a step the preset lacks: exit 2, one line", rc == 2 and "no-such-step" in out, out)

tmp = tempfile.mkdtemp(prefix="mori-evidence-node-")
try:
    head = git("rev-parse", "HEAD") if GIT else HEAD
    clean = git("status", "--porcelain") == "" if GIT else CLEAN
    dirty = [] if clean else ["--allow-dirty"]
    out_dir = os.path.join(tmp, "results")
    folder = os.path.join(out_dir, "host", head[:12] + "-node") if clean else os.path.join(
        out_dir, "lab", "host", head[:12] + "-node-dirty")
    common = ["--preset", "node", "--backend", "host", "--bin", BIN, "--out", out_dir, *STATED, *dirty]

    # ---- call 1: a deadline that holds the main job (30 s of budget) and the summary (30 s), never main-job-4
    # (60 s: 85 - 30 < 60 whatever the main job took) ----
    rc, out = run([*common, "--deadline-s", "85"])
    m = manifest(folder)
    st = {s["name"]: s for s in m.get("steps", [])}
    sk = {s["name"]: s["reason"] for s in m.get("skipped", [])}
    check("call 1: cut by its deadline (exit 4, complete false), the main job ok", rc == 4 and
          m.get("complete") is False and st.get("main-job", {}).get("status") == "ok", out + json.dumps(m)[:3000])
    check("call 1: main-job-4 did not fit, and every later step waits behind it (priority order kept)",
          "deadline" in sk.get("main-job-4", "") and
          all("after main-job-4" in sk.get(n, "") for n in HOST_RUN[3:-1]), json.dumps(sk, indent=1))
    check("the GPU-only steps are skipped with their reason", all("runs on peers only" in sk.get(n, "")
                                                                  for n in GPU_ONLY), json.dumps(sk, indent=1))
    first = dict(st.get("main-job", {}))

    # ---- call 2: --resume continues where call 1 stopped ----
    rc, out = run([*common, "--resume"])
    m = manifest(folder)
    st = {s["name"]: s for s in m.get("steps", [])}
    sk = {s["name"]: s["reason"] for s in m.get("skipped", [])}
    check("call 2 (--resume): complete, exit 0, one resume recorded", rc == 0 and m.get("complete") is True and
          len(m.get("resumes", [])) == 1, out + json.dumps(m)[:3000])
    p = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "validate-json"),
                        os.path.join(folder, "manifest.json")], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=120)
    check("scripts/validate-json: the manifest is a valid mori.evidence/1", p.returncode == 0, p.stdout)
    check("call 2 did not run the main job again", st.get("main-job") == first, json.dumps(st.get("main-job")))
    check("call 2 ran the rest in the preset's order",
          [s["name"] for s in m.get("steps", []) if s["name"] != "summary"] == HOST_RUN[:-1],
          json.dumps([s["name"] for s in m.get("steps", [])]))
    check("only the GPU-only steps stay skipped, each with its reason",
          sorted(sk) == sorted(GPU_ONLY) and all("peers" in r for r in sk.values()), json.dumps(sk, indent=1))
    for n in HOST_RUN:
        check(f"step {n}: ok", st.get(n, {}).get("status") == "ok", json.dumps(st.get(n))[:2000])
    # The GPU-count subsets: 8 ranks for all GPUs, 4 and 2 with the CUDA_VISIBLE_DEVICES they would set.
    for n, ranks, vis in (("main-job", "8", None), ("main-job-4", "4", "0,1,2,3"), ("main-job-2", "2", "0,1"),
                          ("a2a-r1", "8", None), ("sweep", "8", None), ("sweep-4", "4", "0,1,2,3"),
                          ("sweep-2", "2", "0,1")):
        s = st.get(n, {})
        cmd = s.get("command", [])
        check(f"{n}: mpirun -n {ranks} mori-a2a"
              + (f", CUDA_VISIBLE_DEVICES={vis}" if vis else ", all GPUs (no CUDA_VISIBLE_DEVICES)"),
              n_of(cmd) == ranks and any(c.endswith("/mori-a2a") for c in cmd) and
              s.get("env", {}).get("CUDA_VISIBLE_DEVICES") == vis, json.dumps(s)[:1500])
    # The plan check: on every row of every mori-a2a step, all held to the table's host case.
    a2a = [n for n in HOST_RUN if main[n]["kind"] == "tool"]
    for n in a2a:
        pc = st.get(n, {}).get("plan_check", {})
        check(f"{n}: the plan check ran on every row ({pc.get('checked')} of {pc.get('rows')}), case host, "
              "nothing differs, nothing uncovered",
              pc.get("case") == "host" and pc.get("placement") == "host" and pc.get("rows", 0) > 0 and
              pc.get("checked") == pc.get("rows") and
              pc.get("differs") == [] and pc.get("uncovered") == [], json.dumps(pc)[:2000])
    with open(os.path.join(folder, "main-job.json")) as f:
        doc = json.load(f)
    check("the main job ran 8 ranks (the report's meta.world)", doc.get("meta", {}).get("world") == 8,
          json.dumps(doc.get("meta", {}))[:500])

    # ---- a deliberately wrong table entry fails the step, naming the row and the field ----
    with open(TABLE) as f:
        table = json.load(f)
    host = next(c for c in table["cases"] if c["name"] == "host")
    cell = next(c for c in host["cells"] if c["chunk"] == 16384 and c["sync"] == "device" and
                not c.get("protocol_given"))
    cell["blocks_per_peer"] += 1
    wrong = os.path.join(tmp, "a2a-plan-wrong.json")
    with open(wrong, "w") as f:
        json.dump(table, f)
    rc, out = run([*common, "--resume", "--steps", "main-job", "--plan-table", wrong])
    m = manifest(folder)
    s = {x["name"]: x for x in m.get("steps", [])}.get("main-job", {})
    why = s.get("why", "")
    check("a wrong table entry: main-job failed, exit 1", rc == 1 and s.get("status") == "failed", out + why)
    check("... the why names the row and the differing field",
          "chunk 16384 B" in why and "sync device" in why and "blocks_per_peer 1" in why and
          f"says {cell['blocks_per_peer']}" in why, why)
    check("... and the step's plan_check lists the rows that differ",
          len(s.get("plan_check", {}).get("differs", [])) == 2, json.dumps(s.get("plan_check"))[:2000])
finally:
    shutil.rmtree(tmp, ignore_errors=True)

# The committed one-GPU run holds to the table's H200 cells (the same check on real GPU rows).
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from mori_results import plan_check  # noqa: E402
t = plan_check.load_table(TABLE)
with open(os.path.join(ROOT, "results", "h200", "b47e06b8de79", "a2a-r1.json")) as f:
    r = plan_check.check_report(t, json.load(f), "a2a-r1.json")
check("results/h200/b47e06b8de79/a2a-r1.json (8 ranks on one H200): case h200-one-gpu-8-mps, every row checked, "
      "none differs", r["case"] == "h200-one-gpu-8-mps" and r["checked"] == r["rows"] > 0 and not r["differs"],
      json.dumps(r)[:3000])
with open(os.path.join(ROOT, "results", "h200", "b47e06b8de79", "main-job.json")) as f:
    r = plan_check.check_report(t, json.load(f), "main-job.json", "one_rank_per_gpu")
check("the same rows held to a node's placement (one_rank_per_gpu): every row differs, its placement named",
      len(r["differs"]) == r["rows"] > 0 and all('placement "one_gpu", the machine is one_rank_per_gpu' in d
                                                 for d in r["differs"]) and
      plan_check.verdict(r).startswith("plan check: main-job.json row 0"), json.dumps(r)[:3000])
finish()
