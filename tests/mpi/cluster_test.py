#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Many hosts on one machine, launched for real (CTest fleet.cluster_host; docs/setup.md, "Many nodes on one
machine").

usage: cluster_test.py BIN_DIR -- MPIRUN...

scripts/cluster up makes 2 hosts of 4 slots (a network namespace and a host name each, on a private bridge); the
launcher MPIRUN[0] (Open MPI's mpirun) runs 8 ranks over them with the cluster's flags (its other flags, shared
memory only, are left out: the hosts reach each other over TCP). Then:
  - `hostname` prints nodeA 4 times and nodeB 4 times;
  - mori-probe --backend host --json: two nodes, nodeA and nodeB, ranks 0-3 on the first and 4-7 on the second;
  - mori-teardown-repro --scenario ordered: exit 0, outcome ok at 8 ranks;
  - mori-probe --health: exit 0, the all-to-all run and verified within each host (a2a.verified on nodeA, on nodeB);
  - mori-a2a --backend host --chunk-kib 64: one all-to-all within each host, both at once (docs/mori-a2a.md "Many
    nodes"): exit 0, the fleet lines over 2 teams of 4, the teams nodeA 0-3 and nodeB 4-7, every row verified;
    --scope world refused, exit 2;
  - scripts/cluster down (always, also when a check fails; a watchdog runs it should this process be killed): no
    namespace or link of the cluster's prefix left, no process of the jobs left; a second down is exit 0.
Skipped (77, the reason first) where scripts/cluster up exits 77 (not root, no CAP_NET_ADMIN, no ip); under CI=true
(root) that is a failure instead.
"""
import os
import shutil
import subprocess
import sys
import tempfile
import time

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/: harness.py
sys.path.insert(0, TESTS)
import harness  # noqa: E402
from harness import check, finish, load_json, skip  # noqa: E402

if len(sys.argv) < 4 or sys.argv[2] != "--":
    sys.exit("usage: cluster_test.py BIN_DIR -- MPIRUN...")
BIN = os.path.abspath(sys.argv[1])
LAUNCHER = sys.argv[3]  # only the launcher: the cluster's flags replace the suite's shared-memory ones
CLUSTER = os.path.join(os.path.dirname(TESTS), "scripts", "cluster")
HOSTS, SLOTS = 2, 4
N = HOSTS * SLOTS
# Every wait bounded, inside CTest's TIMEOUT (240 s): up and the jobs end by DEADLINE (each job JOB_S at most), which
# leaves DOWN_S for down (a loaded 2-core machine makes every process slow).
JOB_S, DOWN_S = 45, 60
DEADLINE = time.monotonic() + 240 - DOWN_S - 20
TEAM_RULE = "cannot span load/store teams"

if harness.mpi_vendor(sys.argv[3:]) != "OpenMPI":
    skip("the cluster's launch agent and flags are Open MPI's (plm_rsh_agent); this build's MPI is MPICH")


def left_s(cap):
    """Seconds the next step may take: at most cap, and nothing past DEADLINE."""
    return max(1.0, min(cap, DEADLINE - time.monotonic()))


def text(b):
    return b.decode(errors="replace") if isinstance(b, bytes) else (b or "")


def run(cmd, timeout, env=None, cwd=None):
    """(exit code, stdout, stderr) of cmd; -1 and a note on stderr where it ran past timeout (then killed). Prints
    how long it took."""
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout, env=env,
                           cwd=cwd)
        print(f"{time.monotonic() - t0:6.2f} s: {' '.join(os.path.basename(c) for c in cmd)[:100]}")
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        return -1, text(e.stdout), f"{text(e.stderr)}\n(ran past {e.timeout:.0f} s)"


def script(*args, timeout=30):
    """(exit code, stdout, stderr) of scripts/cluster ARGS."""
    return run([CLUSTER, *args], timeout)


def names_with(prefix):
    """The network namespaces and links whose names start with prefix."""
    ns = subprocess.run(["ip", "netns", "list"], stdout=subprocess.PIPE, text=True, timeout=30).stdout
    links = subprocess.run(["ip", "-o", "link", "show"], stdout=subprocess.PIPE, text=True, timeout=30).stdout
    found = [line.split()[0] for line in ns.splitlines() if line.strip()]
    found += [line.split(": ")[1].split("@")[0] for line in links.splitlines() if ": " in line]
    return sorted(n for n in found if n.startswith(prefix))


def on_cluster(args, cwd):
    """8 ranks of args on the cluster, with the test's tag: (exit code, stdout, stderr)."""
    return run([CLUSTER, "run", "--dir", CDIR, "--", LAUNCHER, "-n", str(N), *args], left_s(JOB_S),
               env=dict(os.environ, **{harness.TAG_VARIABLE: harness.TAG}), cwd=cwd)


def tool(name, *args):
    return [os.path.join(BIN, name), "--backend", "host", "--timeout-s", "20", *args]


TMP = tempfile.mkdtemp(prefix="mori-cluster-test-")
CDIR = os.path.join(TMP, "cluster")
# A SIGKILL of this process (a CTest timeout) skips the finally below: a watchdog in a session of its own waits for
# this process to end, then runs scripts/cluster down (nothing to do where the test already did it) and removes TMP.
WATCHDOG = ("import os, shutil, subprocess, sys, time\n"
            "while os.getppid() == int(sys.argv[1]):\n    time.sleep(0.5)\n"
            "subprocess.run([sys.argv[2], 'down', '--dir', sys.argv[3]], timeout=120)\n"
            "shutil.rmtree(sys.argv[4], ignore_errors=True)\n")
subprocess.Popen([sys.executable, "-c", WATCHDOG, str(os.getpid()), CLUSTER, CDIR, TMP], stdin=subprocess.DEVNULL,
                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)

rc, out, err = script("up", "--hosts", str(HOSTS), "--slots", str(SLOTS), "--dir", CDIR, timeout=left_s(60))
if rc == 77:
    why = err.strip().splitlines()[-1].removeprefix("cluster: ") if err.strip() else "exit 77, no reason given"
    if not harness.ON_CI:
        skip(f"scripts/cluster up: {why}")
    check(f"scripts/cluster up under CI=true (root): {why}", False)
    finish()
check(f"scripts/cluster up --hosts {HOSTS} --slots {SLOTS}: exit 0", rc == 0, out + err)
if rc != 0:
    script("down", "--dir", CDIR, timeout=DOWN_S)
    finish()
state = dict(line.split("=", 1) for line in open(os.path.join(CDIR, "state")).read().splitlines() if "=" in line)
PREFIX = state.get("prefix", "")
check(f"the cluster's prefix {PREFIX!r}: mori and 6 hex digits; {HOSTS} namespaces and links made",
      len(PREFIX) == 10 and len([n for n in names_with(PREFIX) if n.startswith(PREFIX + "n")]) == HOSTS, repr(state))
hostfile = open(os.path.join(CDIR, "hostfile")).read().split("\n")
check(f"hostfile: {HOSTS} lines of 'ADDRESS slots={SLOTS}'",
      len([ln for ln in hostfile if ln.endswith(f" slots={SLOTS}")]) == HOSTS, "\n".join(hostfile))

try:
    rc, out, err = on_cluster(["hostname"], TMP)
    names = sorted(out.split())
    check(f"hostname at {N} ranks: nodeA x{SLOTS}, nodeB x{SLOTS}",
          rc == 0 and names == ["nodeA"] * SLOTS + ["nodeB"] * SLOTS, out + err)

    probe_json = os.path.join(TMP, "probe.json")
    rc, out, err = on_cluster(tool("mori-probe", "--json", probe_json), TMP)
    doc = load_json(probe_json) or {}
    nodes = [(n.get("node"), n.get("host")) for n in doc.get("nodes", [])]
    ranks = [(r.get("rank"), r.get("node"), r.get("host")) for r in doc.get("meta", {}).get("ranks", [])]
    want = [(r, r // SLOTS, "nodeA" if r < SLOTS else "nodeB") for r in range(N)]
    check(f"mori-probe: exit 0, two nodes by name {nodes}, ranks 0-3 on nodeA and 4-7 on nodeB",
          rc == 0 and nodes == [(0, "nodeA"), (1, "nodeB")] and sorted(ranks) == want
          and doc.get("meta", {}).get("world") == N, out + err)

    report = os.path.join(TMP, "teardown.json")
    rc, out, err = on_cluster(tool("mori-teardown-repro", "--scenario", "ordered", "--journal-dir",
                                   os.path.join(TMP, "journal"), "--json", report), TMP)
    doc = load_json(report) or {}
    got = [(s.get("name"), s.get("outcome")) for s in doc.get("scenarios", [])]
    check(f"mori-teardown-repro --scenario ordered at {N} ranks: exit 0, ok {got}",
          rc == 0 and got == [("ordered", "ok")] and doc.get("meta", {}).get("world") == N, out + err)

    health = os.path.join(TMP, "health.json")
    rc, out, err = on_cluster(tool("mori-probe", "--health", "--matrix-mib", "2", "--rounds", "100",
                                   "--iterations", "7", "--json", health), TMP)
    doc = load_json(health) or {}
    a2a = [(c.get("subject", "").rsplit(" on ", 1)[-1], c.get("verdict")) for c in doc.get("health", [])
           if c.get("id") == "a2a.verified"]
    check(f"mori-probe --health across hosts: exit 0, the all-to-all verified on each host {a2a}",
          rc == 0 and sorted(a2a) == [("nodeA", "pass"), ("nodeB", "pass")], out + err)

    fleet = os.path.join(TMP, "fleet.json")
    rc, out, err = on_cluster(tool("mori-a2a", "--chunk-kib", "64", "--json", fleet), TMP)
    doc = load_json(fleet) or {}
    teams = [(t.get("node"), t.get("ranks")) for t in doc.get("teams", [])]
    fleet_lines = [ln for ln in out.splitlines() if ln.startswith("# fleet ")]
    check(f"mori-a2a across hosts: exit 0, one all-to-all within each host {teams}, every row verified",
          rc == 0 and teams == [("nodeA", "0-3"), ("nodeB", "4-7")] and doc.get("wrong") == 0
          and fleet_lines and all("2 teams of 4" in ln for ln in fleet_lines), out + err)
    rc, out, err = on_cluster(tool("mori-a2a", "--chunk-kib", "64", "--scope", "world"), TMP)
    check(f"mori-a2a --scope world across hosts: refused, exit 2, '{TEAM_RULE}' on stderr (exit {rc})",
          rc == 2 and TEAM_RULE in err and "this job spans 2 nodes" in err, out + err)
    check("no process of the jobs left", not harness.settle(left_s(10)), "")
finally:
    rc, out, err = script("down", "--dir", CDIR, timeout=DOWN_S)
check("scripts/cluster down: exit 0", rc == 0, out + err)
left = names_with(PREFIX)
check(f"after down: no namespace or link named {PREFIX}...", not left, repr(left))
check("after down: its folder is gone (up made it)", not os.path.exists(CDIR), repr(os.listdir(TMP)))
rc, out, err = script("down", "--dir", CDIR)
check("a second down: exit 0, nothing to remove", rc == 0 and "nothing to remove" in err, out + err)
# Usage errors: one line, exit 2, nothing made (no root needed).
for bad in (["up", "--hosts", "0", "--slots", "4", "--dir", "x"], ["up", "--hosts", "2", "--slots", "129", "--dir",
                                                                     "x"], ["down"], ["up", "--hosts", ""]):
    rc, out, err = script(*bad)
    check(f"scripts/cluster {' '.join(bad)}: exit 2, one line", rc == 2 and len(err.strip().splitlines()) == 1
          and not out, err)
shutil.rmtree(TMP, ignore_errors=True)
finish()
