#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A fleet of NODES simulated nodes of PER_NODE ranks on the host runtime (CTest labels scale and fleet;
docs/reliability.md, "Scale"): the sizes of a cluster allocation, 16 nodes x 8 GPUs.

usage: fleet_scale_test.py BIN_DIR NODES PER_NODE HANDLE_TYPE [--hosts H] -- MPIRUN...

Nodes are simulated with MORI_NODE_ID (node00, node01, ...), one launcher segment a node. --hosts H spreads them over
H hosts launched for real (scripts/cluster: a network namespace and a host name each, Open MPI's launch agent; the
launcher MPIRUN[0] with the cluster's flags, NODES / H nodes a host): every job must run on H hosts. Where the
cluster cannot be made (not root, no ip) or the MPI is not Open MPI, the jobs run on this host alone and the test
says so; under CI=true a cluster that cannot be made is a failure. With HANDLE_TYPE for every window:
  - mori-a2a: one all-to-all within every node, all at once: exit 0, NODES teams of PER_NODE, every team's rows
    verified, a fleet line per configuration over all NODES teams;
  - mori-probe --health (a sample of pairs, short transfers: the matrix of scale_test.py): one verdict per node,
    the all-to-all verified on every node, the fleet checks of the node facts pass; a failure only in the host's
    timing checks (a few cores for all ranks); the job within its stated bound (docs/mori-probe.md "Health on many
    nodes");
  - mori-teardown-repro --scenario ordered: ok at NODES x PER_NODE ranks.
Prints each job's time.
"""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: harness.py
import harness  # noqa: E402
from harness import check, finish, load_json, with_env  # noqa: E402

if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
    print(__doc__)
    sys.exit(0)
SEP = sys.argv.index("--") if "--" in sys.argv else -1
if SEP not in (5, 7) or (SEP == 7 and (sys.argv[5] != "--hosts" or not sys.argv[6].isdigit())):
    sys.exit("usage: fleet_scale_test.py BIN_DIR NODES PER_NODE HANDLE_TYPE [--hosts H] -- MPIRUN...")
BIN, NODES, PER_NODE, HT = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
HOSTS = int(sys.argv[6]) if SEP == 7 else 1
MPIRUN = sys.argv[SEP + 1:]
N = NODES * PER_NODE
NAMES = [f"node{i:02d}" for i in range(NODES)]
TMP = tempfile.mkdtemp(prefix=f"mori-fleet-{NODES}x{PER_NODE}-{HT}-")
HEALTH_BOUND_S = 300  # the stated bound of a 16 x 8 --health job on the host runtime, 2 cores (docs/mori-probe.md)
CLUSTER = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "scripts",
                       "cluster")
CDIR = os.path.join(TMP, "cluster")


def make_cluster():
    """HOSTS hosts of N / HOSTS slots (scripts/cluster up); returns the launcher command that runs on them, or None
    where they cannot be made here (said, and a failure under CI=true)."""
    if HOSTS <= 1:
        return None
    why = None
    if harness.mpi_vendor(MPIRUN) != "OpenMPI" or NODES % HOSTS:
        why = "the cluster's launch agent is Open MPI's" if NODES % HOSTS == 0 else f"{NODES} nodes on {HOSTS} hosts"
    else:
        # A SIGKILL of this process (a CTest timeout) skips the cleanup at the end: a watchdog in a session of its
        # own waits for this process to end, then runs scripts/cluster down (nothing to do where the test did it).
        watchdog = ("import os, subprocess, sys, time\n"
                    "while os.getppid() == int(sys.argv[1]):\n    time.sleep(0.5)\n"
                    "subprocess.run([sys.argv[2], 'down', '--dir', sys.argv[3]], timeout=120)\n")
        harness.subprocess.Popen([sys.executable, "-c", watchdog, str(os.getpid()), CLUSTER, CDIR],
                                 stdin=harness.subprocess.DEVNULL, stdout=harness.subprocess.DEVNULL,
                                 stderr=harness.subprocess.DEVNULL, start_new_session=True)
        p = harness.subprocess.run([CLUSTER, "up", "--hosts", str(HOSTS), "--slots", str(N // HOSTS), "--dir", CDIR],
                                   stdout=harness.subprocess.PIPE, stderr=harness.subprocess.PIPE, text=True,
                                   timeout=120)
        if p.returncode == 0:
            return [CLUSTER, "run", "--dir", CDIR, "--", MPIRUN[0]]
        why = (p.stderr.strip().splitlines() or [f"exit {p.returncode}"])[-1].removeprefix("cluster: ")
        check(f"scripts/cluster up --hosts {HOSTS}: exit 0 or 77 (cannot be made here)", p.returncode == 77,
              p.stdout + p.stderr)
    print(f"note: {NODES} nodes on this host alone, not on {HOSTS} hosts: {why}")
    check(f"{HOSTS} hosts under CI=true: {why}", not harness.ON_CI, why)
    return None


LAUNCH = make_cluster()


def run(name, tool, args, timeout=600):
    """One job over the fleet; returns (exit code, output, report, seconds)."""
    out_json = os.path.join(TMP, name + ".json")
    side = [os.path.join(BIN, tool), "--backend", "host", "--timeout-s", "120", "--json", out_json, *args]
    cmd = list(LAUNCH or MPIRUN)
    for i, node in enumerate(NAMES):
        cmd += ([":"] if i else []) + ["-n", str(PER_NODE), *with_env([f"MORI_NODE_ID={node}"], side)]
    try:
        rc, out, secs = harness.job(cmd, timeout=timeout, cwd=TMP)
    except harness.subprocess.TimeoutExpired:
        rc, out, secs = -1, f"did not end within {timeout} s", timeout
    where = f" on {HOSTS} hosts" if LAUNCH else ""
    print(f"time: {name}, {NODES} nodes x {PER_NODE}{where} ({HT}): {secs:.1f} s, exit {rc}")
    doc = load_json(out_json)
    if LAUNCH:
        hosts = {r.get("host") for r in ((doc or {}).get("meta") or {}).get("environment", {}).get("ranks") or []}
        check(f"{name}: its {N} ranks ran on {HOSTS} hosts ({len(hosts)})", len(hosts) == HOSTS, sorted(hosts))
    return rc, out, doc, secs


def ranks_of(i):
    return f"{i * PER_NODE}-{(i + 1) * PER_NODE - 1}"


rc, out, doc, _ = run("a2a", "mori-a2a", ["--handle-type", HT, "--chunk-kib", "4", "--iters", "3", "--warmup", "1"])
teams = [(t.get("node"), t.get("ranks"), t.get("size"), t.get("wrong")) for t in (doc or {}).get("teams") or []]
fleet = (doc or {}).get("fleet") or []
check(f"mori-a2a, {NODES} nodes x {PER_NODE}, {HT}: exit 0, one team a node, every row verified, each fleet "
      f"line over {NODES} teams",
      rc == 0 and teams == [(n, ranks_of(i), PER_NODE, 0) for i, n in enumerate(NAMES)]
      and all(r.get("wrong") == 0 for r in doc.get("results") or []) and fleet
      and all(len(e.get("teams") or []) == NODES for e in fleet)
      and len([ln for ln in out.splitlines() if ln.startswith("# fleet ")]) == len(fleet), out[-4000:])

matrix = ["--handle-type", HT, "--pairs", str(2 * N), "--rounds", "10", "--iterations", "1", "--matrix-mib", "0.0625"]
rc, out, doc, secs = run("health", "mori-probe", ["--health", *matrix])
checks = (doc or {}).get("health") or []
nodes = [(n.get("node"), n.get("ranks")) for n in (doc or {}).get("health_nodes") or []]
# As in scale_test.py: the pair timings judge memcpy of N processes on a few cores, so only they may fail.
timing = ("pair.write_gbps", "pair.read_gbps", "pair.latency_us")
failed = sorted({c.get("id") for c in checks if c.get("verdict") == "fail"})
verified = sorted(c.get("node") for c in checks if c.get("id") == "a2a.verified" and c.get("verdict") == "pass")
facts = {c.get("id"): c.get("verdict") for c in checks
         if c.get("id") in ("fleet.gpu_count", "fleet.gpu_model", "fleet.driver_version", "fleet.runtime_version",
                            "fleet.handle_type")}
check(f"mori-probe --health, {NODES} nodes x {PER_NODE}, {HT}: one verdict a node, the all-to-all verified on each, "
      f"the fleet facts pass, a failure only in the host's timing checks, within {HEALTH_BOUND_S} s ({secs:.0f} s)",
      rc in (0, 1) and nodes == [(n, ranks_of(i)) for i, n in enumerate(NAMES)] and verified == NAMES
      and len(facts) == 5 and set(facts.values()) == {"pass"} and all(f in timing for f in failed)
      and (rc == 0) == (not failed) and secs <= HEALTH_BOUND_S, out[-4000:] + str(failed))

rc, out, doc, _ = run("teardown", "mori-teardown-repro", ["--scenario", "ordered", "--handle-type", HT,
                                                           "--size", "64K"])
scs = [(s.get("name"), s.get("world"), s.get("outcome")) for s in (doc or {}).get("scenarios") or []]
check(f"mori-teardown-repro --scenario ordered, {NODES} nodes x {PER_NODE}, {HT}: exit 0, ok at world {N}",
      rc == 0 and scs == [("ordered", N, "ok")], out[-4000:])
if LAUNCH:
    p = harness.subprocess.run([CLUSTER, "down", "--dir", CDIR], stdout=harness.subprocess.PIPE,
                               stderr=harness.subprocess.STDOUT, text=True, timeout=120)
    check("scripts/cluster down: exit 0", p.returncode == 0, p.stdout)
finish()
