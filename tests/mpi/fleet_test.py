#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""mori-a2a on a job of several nodes (docs/mori-a2a.md "Many nodes"), nodes simulated with MORI_NODE_ID, host
runtime: one all-to-all within every node, all at once, every element verified; a fleet line per configuration,
one best line per node, the JSON (mori.a2a/3) with every team's rows, the teams and the fleet block, valid against
the schema. A node slowed by the test-only fault a2a.slow-kernel (armed on its ranks only) is the one named
slow_team, a warning (exit 0) and under --strict an error (exit 1); a node whose all-to-all writes past its slots
(a2a.overrun) is named, exit 1; teams of unequal size run, each compared only with its own size; --per-team prints
every team's table; perf-check --per-team compares each team with a one-node baseline (the slowed node SLOWER, far
past the change of the other); a rank that stops on one node ends the job within the bound, every error naming the node
first (a2a.no-launch); --scope world is refused in one line (exit 2).

usage: fleet_test.py BIN_DIR VALIDATE_JSON MPIRUN...
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: harness.py
from harness import check, finish, job, with_env  # noqa: E402

if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
    print(__doc__)
    sys.exit(0)
BIN, VALIDATE, MPIRUN = sys.argv[1], sys.argv[2], sys.argv[3:]
A2A = os.path.join(BIN, "mori-a2a")
TMP = tempfile.mkdtemp(prefix="mori-fleet-")
OUT = os.path.join(TMP, "fleet.json")
SLOW = ["MORI_FAULT=a2a.slow-kernel:*", "MORI_FAULT_DELAY_NS=20000000"]  # 20 ms a push: far past 3x
# 100 ms a push for the run perf-check judges: under the sanitizers on 2 loaded cores a one-node baseline's p50 has
# reached 8 ms with a p95/p50 spread near 70 %, so 20 ms could fall within perf-check's allowance.
SLOWER = ["MORI_FAULT=a2a.slow-kernel:*", "MORI_FAULT_DELAY_NS=100000000"]


def fleet(sizes=(4, 4), extra=(), env_b=(), timeout_s=60, seconds=None):
    """A job of len(sizes) simulated nodes (nodeA, nodeB, ...) of sizes[i] ranks; env_b: on nodeB's ranks only.
    Returns (exit code, output, document or None); seconds, a list, receives the job's wall time."""
    side = [A2A, "--backend", "host", "--timeout-s", str(timeout_s), "--chunk-kib", "64", "--iters", "20",
            "--json", OUT, *extra]
    if os.path.exists(OUT):
        os.remove(OUT)
    cmd = list(MPIRUN)
    for i, n in enumerate(sizes):
        node = "node" + "ABCDEFGH"[i]
        cmd += ([":"] if i else []) + ["-n", str(n), *with_env([f"MORI_NODE_ID={node}",
                                                                *(env_b if i == 1 else ())], side)]
    rc, text, dt = job(cmd, timeout=180)
    if seconds is not None:
        seconds.append(dt)
    doc = None
    if os.path.exists(OUT):
        with open(OUT) as f:
            doc = json.load(f)
    return rc, text, doc


def lines(text, prefix):
    return [ln for ln in text.splitlines() if ln.startswith(prefix)]


def slow_nodes(doc):
    return sorted({t["node"] for e in doc["fleet"] for t in e["teams"] if t["slow"]})


# Two nodes of 4: both teams measured and verified, side by side.
rc, out, doc = fleet()
fl = lines(out, "# fleet ")
check("two nodes: exit 0, one fleet line per configuration, each over 2 teams of 4",
      rc == 0 and len(fl) == 4 and all("2 teams of 4" in ln for ln in fl), out)
check("... one best line per node", [ln.split()[2] for ln in lines(out, "# best ")] == ["nodeA", "nodeB"], out)
check("... the JSON: mori.a2a/3, the teams by node and ranks, wrong 0",
      doc is not None and doc["schema"] == "mori.a2a/3" and doc["wrong"] == 0
      and [(t["node"], t["ranks"], t["size"]) for t in doc["teams"]] == [("nodeA", "0-3", 4), ("nodeB", "4-7", 4)],
      json.dumps(doc)[:2000] if doc else out)
rows = doc["results"] if doc else []
check("... every row carries its team, its team size and its launch time; each node's rows verified",
      len(rows) == 8 and sorted({r["team"]["node"] for r in rows}) == ["nodeA", "nodeB"]
      and all(r["team_size"] == 4 and r["wrong"] == 0 and r["launch_us"] > 0 for r in rows), json.dumps(rows)[:2000])
# (No check that no team is slow: on 2 loaded cores one simulated node can be 3x another; that is a warning, and the
# exit code above holds either way.)
check("... the fleet block: 4 configurations, 2 teams each, each team's ratio to the lower median at least 1",
      doc is not None and len(doc["fleet"]) == 4 and all(len(e["teams"]) == 2 for e in doc["fleet"])
      and all(t["ratio"] >= 1 and t["limit"] == 3.0 for e in doc["fleet"] for t in e["teams"]),
      json.dumps(doc and doc["fleet"])[:2000])
p = subprocess.run([sys.executable, VALIDATE, OUT], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
check("... valid against results/schema and readable by the results model", p.returncode == 0, p.stdout)

# nodeB slowed (100 ms a push on its ranks alone): named slow_team, a warning; --strict makes it exit 1.
rc, out, doc = fleet(env_b=SLOWER)
warn = [ln for ln in out.splitlines() if "slow_team" in ln]
check("a slow node is the one named slow_team (a warning on the host runtime: exit 0)",
      rc == 0 and doc is not None and slow_nodes(doc) == ["nodeB"] and warn
      and all("warning: slow_team nodeB (ranks 4-7)" in ln for ln in warn), out)
slow_json = os.path.join(TMP, "slow-fleet.json")
if os.path.exists(OUT):
    os.replace(OUT, slow_json)
rc, out, doc = fleet(extra=["--strict"], env_b=SLOW)
check("... under --strict: exit 1, named as an error",
      rc == 1 and any("error: slow_team nodeB" in ln for ln in out.splitlines()), out)

# perf-check --per-team: each team of the slowed fleet against a one-node baseline of 4 ranks (the same options).
PERF_CHECK = os.path.join(os.path.dirname(VALIDATE), "perf-check")
one_node = os.path.join(TMP, "one-node.json")
rc, out = job([*MPIRUN, "-n", "4", A2A, "--backend", "host", "--timeout-s", "60", "--chunk-kib", "64", "--iters",
               "20", "--json", one_node], timeout=180)[:2]
gate_json = os.path.join(TMP, "per-team.json")
p = subprocess.run([sys.executable, PERF_CHECK, one_node, slow_json, "--per-team", "--json", gate_json],
                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
verdicts = json.load(open(gate_json))["verdicts"] if os.path.exists(gate_json) else []
times = {}  # configuration -> {team: (verdict, delta)}
for v in verdicts:
    if v["metric"] == "time_p50_us":
        times.setdefault(v["result"].split(": ", 1)[-1], {})[v["team"]] = (v["verdict"], v["delta"])
# nodeA is judged against a baseline run at another moment of a loaded machine: it may come out SLOWER too; what
# must hold is that the gate puts the slowdown on nodeB, far past nodeA's own change in every configuration.
check("perf-check --per-team, the slowed fleet against a one-node baseline of 4: exit 1; every time of nodeB SLOWER, "
      "each far past nodeA's change; each verdict names its team",
      rc == 0 and p.returncode == 1 and len(times) == 4 and all(set(t) == {"nodeA", "nodeB"} for t in times.values())
      and all(t["nodeB"][0] == "SLOWER" and t["nodeB"][1] > 2 * max(t["nodeA"][1], 1) for t in times.values())
      and all(v["result"].startswith(f"team {v['team']}: ") for v in verdicts),
      json.dumps(times) + "\n" + p.stdout[-3000:])
p2 = subprocess.run([sys.executable, PERF_CHECK, one_node, one_node, "--per-team"], stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT, text=True)
check("perf-check --per-team on a run of one team: exit 2 saying why",
      p2.returncode == 2 and "--per-team" in p2.stdout, p2.stdout)

# nodeB's all-to-all writes past its slots (a2a.overrun on its ranks): exit 1 naming nodeB; nodeA stays verified.
rc, out, doc = fleet(env_b=["MORI_FAULT=a2a.overrun:*"])
check("a node with wrong elements: exit 1, the team named, and the ranks that received them",
      rc == 1 and "wrong element(s) in team nodeB (ranks 4-7), received by nodeB: 4,5,6,7" in out
      and "team nodeA" not in out and doc is not None and [t["wrong"] > 0 for t in doc["teams"]] == [False, True]
      and [t["wrong_ranks"] for t in doc["teams"]] == [[], [4, 5, 6, 7]] and doc["wrong_ranks"] == [4, 5, 6, 7],
      out)
check("... its fleet lines say which team did not verify",
      all("not verified: nodeB (ranks 4-7)" in ln for ln in lines(out, "# fleet ")), out)

# Teams of unequal size (a node with a GPU missing): both run, each compared only with teams of its size.
rc, out, doc = fleet(sizes=(3, 5))
check("teams of 3 and 5: exit 0, each reported alone of its size",
      rc == 0 and doc is not None and [t["size"] for t in doc["teams"]] == [3, 5]
      and sorted({e["team_size"] for e in doc["fleet"]}) == [3, 5]
      and all(len(e["teams"]) == 1 for e in doc["fleet"]) and len(lines(out, "# fleet ")) == 8, out)
# The plan's note on the automatic tables (no cell at 3 or 5 ranks on one device): once for the job, from its rank 0,
# and once more for the team whose note differs, named (not once per team's first rank).
notes = [ln for ln in out.splitlines() if "] plan" in ln]
check("... the plan's note once, and nodeB's own note named once",
      len(notes) == 2 and "rank 0 " in notes[0] and "] plan: " in notes[0] and "measured at 3 ranks" in notes[0]
      and "] plan on nodeB (ranks 3-7): " in notes[1] and "measured at 5 ranks" in notes[1], out)

# --per-team: every team's own table.
rc, out, doc = fleet(extra=["--per-team"])
check("--per-team prints each team's table",
      rc == 0 and lines(out, "# team ") == ["# team nodeA (ranks 0-3)", "# team nodeB (ranks 4-7)"], out)

# A rank of nodeB stops (a2a.no-launch: it never launches its pushes and sleeps 2 x the bound + 10 s): the job ends
# within the bound, every error names the node first, and no rank waits for the sleeper.
dt = []
rc, out, doc = fleet(extra=["--sync", "device"], env_b=["MORI_FAULT=a2a.no-launch:5"], timeout_s=5, seconds=dt)
errors = [ln for ln in out.splitlines() if ln.startswith("mori-a2a: error")]
check(f"a rank stopped on nodeB: the job ends in {dt[0]:.1f} s (bound 5 s + 10 s, the rank sleeps 20 s), exit 4, "
      "nodeB's ranks name nodeB: 5, nodeA's name nodeB",
      rc == 4 and dt[0] < 15 and any("ranks not arrived: nodeB: 5" in ln for ln in errors)
      and all("nodeB: " in ln for ln in errors)
      and all(ln.startswith(("mori-a2a: error (nodeA rank", "mori-a2a: error (nodeB rank")) for ln in errors)
      and errors, out)

# --scope world across nodes: refused in one line, exit 2, no JSON.
rc, out, doc = fleet(extra=["--scope", "world"])
errors = [ln for ln in out.splitlines() if "error" in ln and "mori-a2a" in ln]
check("--scope world across nodes: exit 2, one line, no report",
      rc == 2 and len(errors) == 1 and "cannot span load/store teams" in errors[0] and doc is None, out)

finish()
