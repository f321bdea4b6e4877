#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""mori-probe --health on the host runtime under mpirun (docs/mori-probe.md "Health"): a clean run exits 0 with a
verdict per check in health[]; a pair slowed by the test-only fault matrix.slow-pair is named and the run exits 1;
an expectations file that asks the impossible exits 1 naming the check; a malformed one exits 2 naming the file; a job
of two simulated nodes runs the all-to-all within each node at once, and names the node whose all-to-all is wrong; a
job of three ends with one verdict per node, writes the failing nodes to --bad-hosts, names a node whose driver, GPU
count or handle type differs from the others', and a node whose all-to-all is far slower than its siblings'.

usage: health_test.py BIN_DIR VALIDATE_JSON MPIRUN...
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: harness.py
from harness import check, finish, job, tool_job, with_env  # noqa: E402

if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
    print(__doc__)
    sys.exit(0)
BIN, VALIDATE, MPIRUN = sys.argv[1], sys.argv[2], sys.argv[3:]
PROBE = os.path.join(BIN, "mori-probe")
TMP = tempfile.mkdtemp(prefix="mori-health-")
SKIPPED = 77
FAST = ["--health", "--matrix-mib", "2", "--rounds", "100", "--iterations", "7"]


def run(n, extra, env=None, name="h.json"):
    out = os.path.join(TMP, name)
    if os.path.exists(out):
        os.remove(out)
    rc, text = tool_job(MPIRUN, n, PROBE, FAST + ["--json", out] + extra, env=env, timeout_s=30)
    doc = None
    if os.path.exists(out):
        with open(out) as f:
            doc = json.load(f)
    return rc, text, doc


def verdicts(doc, check_id):
    return [c for c in (doc or {}).get("health", []) if c["id"] == check_id]


def write(name, doc_or_text):
    path = os.path.join(TMP, name)
    with open(path, "w") as f:
        f.write(doc_or_text if isinstance(doc_or_text, str) else json.dumps(doc_or_text))
    return path


# A clean run: exit 0, every kind of check present, each with a verdict, measured value, range and source.
rc, out, doc = run(4, [])
check("clean 4-rank run exits 0", rc == 0, out)
ids = {c["id"] for c in (doc or {}).get("health", [])}
want = {"doctor.no_error", "pair.write_gbps", "pair.read_gbps", "pair.latency_us", "pair.writes_verified",
        "nvlink.links_up", "a2a.verified", "expect.write_gbps", "expect.a2a_agg_bw_gbps"}
check("health[] holds every kind of check", want <= ids, f"missing {sorted(want - ids)}\n{out}")
fields = {"id", "subject", "verdict", "measured", "unit", "expected", "source", "detail", "node"}
check("every check has its fields and a known verdict",
      all(set(c) == fields and c["verdict"] in ("pass", "warn", "fail", "no_reference") and c["node"] is None
          for c in doc["health"]) if doc else False, out)  # one node: no check names a node
a2a = verdicts(doc, "a2a.verified")
check("the all-to-all ran and verified", len(a2a) == 1 and a2a[0]["verdict"] == "pass", json.dumps(a2a))
nv = verdicts(doc, "nvlink.links_up")
check("no NVML on the host runtime: no_reference with the reason",
      bool(nv) and all(c["verdict"] == "no_reference" and c["detail"] for c in nv), json.dumps(nv))
exp = verdicts(doc, "expect.write_gbps")
check("host expectations are marked not performance",
      bool(exp) and all("not_performance" in c["source"] and c["verdict"] == "pass" for c in exp), json.dumps(exp))
check("the table ends with the verdict", "health: ok (no check failed)" in out, out)
if doc:
    v = subprocess.run([sys.executable, VALIDATE, "--require-or-skip", os.path.join(TMP, "h.json")],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    check("the document validates against the probe schema", v.returncode in (0, SKIPPED), v.stdout)

# One slowed pair (rank 1 -> rank 2): named, with its ranks, and the run exits 1.
rc, out, doc = run(4, [], env={"MORI_FAULT": "matrix.slow-pair:1"})
failed = [c for c in (doc or {}).get("health", []) if c["verdict"] == "fail"]
check("a slowed pair exits 1", rc == 1, out)
check("the failing checks name pair 1->2 and nothing else",
      bool(failed) and all(c["id"].startswith("pair.") and c["subject"].startswith("1->2") for c in failed),
      json.dumps(failed, indent=1) + out)
check("the table names the pair", "fail  pair.write_gbps  1->2" in out, out)

# Three ranks as three simulated nodes' worth of GPUs is not needed: 3 ranks on the host runtime also compare.
rc, out, doc = run(3, [], env={"MORI_FAULT": "matrix.slow-pair:2"})
failed = [c for c in (doc or {}).get("health", []) if c["verdict"] == "fail"]
check("3 ranks: the slowed pair 2->0 is named, exit 1",
      rc == 1 and bool(failed) and all(c["subject"].startswith("2->0") for c in failed), out)

# An expectations file that asks the impossible: exit 1 naming the check.
impossible = write("impossible.json", {"schema": "mori.expectations/1", "entries": [
    {"devices": ["host"], "interconnect": "host", "check": "write_gbps", "min": 1e9,
     "source": "site: a deliberately impossible figure", "source_kind": "evidence"}]})
rc, out, doc = run(3, ["--expect", impossible])
failed = [c for c in (doc or {}).get("health", []) if c["verdict"] == "fail"]
check("an impossible expectation exits 1", rc == 1, out)
check("... naming the check and the site's source",
      bool(failed) and all(c["id"] == "expect.write_gbps" and "impossible" in c["source"] for c in failed)
      and "fail  expect.write_gbps" in out, json.dumps(failed[:2]) + out)
check("... on top of ours: both files listed", doc is not None and doc["config"]["health"]["expectations"][-1]
      == impossible and len(doc["config"]["health"]["expectations"]) == 2, out)

# --expect-only: the site's file alone; checks it does not cover are no_reference.
rc, out, doc = run(2, ["--expect", impossible, "--expect-only"])
rd = verdicts(doc, "expect.read_gbps")
check("--expect-only drops ours: read_gbps has no reference",
      rc == 1 and bool(rd) and all(c["verdict"] == "no_reference" for c in rd), out)

# Two simulated nodes of 2 ranks (MORI_NODE_ID): the verdict and the report come, and the all-to-all runs within
# each node, both at once, one check per node naming it (it exited 2 with no verdict before, then ran no
# all-to-all).
out2 = os.path.join(TMP, "two-nodes.json")


def two_nodes(env_b=()):
    side = [PROBE, "--backend", "host", "--timeout-s", "30", *FAST, "--json", out2]
    if os.path.exists(out2):
        os.remove(out2)
    rc, text = job([*MPIRUN, "-n", "2", *with_env(["MORI_NODE_ID=nodeA"], side), ":", "-n", "2",
                    *with_env(["MORI_NODE_ID=nodeB", *env_b], side)])[:2]
    return rc, text, (json.load(open(out2)) if os.path.exists(out2) else None)


rc, out, doc = two_nodes()
a2a = verdicts(doc, "a2a.verified")
check("--health on two nodes exits 0 with its verdict and report", rc == 0 and doc is not None
      and "health: ok" in out, out)
check("... the all-to-all ran on each node, each named, each verified",
      sorted(c["subject"].rsplit(" on ", 1)[-1] for c in a2a) == ["nodeA", "nodeB"]
      and all(c["verdict"] == "pass" and " world 2 " in c["subject"] for c in a2a), json.dumps(a2a) + out)

# One node's all-to-all writes past its slots (the test-only mutant a2a.overrun, armed on that node's ranks): that
# node alone fails, by name, and the job exits 1.
rc, out, doc = two_nodes(["MORI_FAULT=a2a.overrun:*"])
a2a = verdicts(doc, "a2a.verified")
bad = [c["subject"] for c in a2a if c["verdict"] == "fail"]
check("a node whose all-to-all is wrong is the one named, exit 1",
      rc == 1 and len(a2a) == 2 and len(bad) == 1 and bad[0].endswith(" on nodeB") and "nodeB" in out,
      json.dumps(a2a) + out)

# Three simulated nodes of 2 ranks (fleet checks need a majority): the fleet table, --bad-hosts, a node that differs.
bad_hosts = os.path.join(TMP, "bad-hosts.txt")


def three_nodes(env_c=()):
    side = [PROBE, "--backend", "host", "--timeout-s", "30", *FAST, "--json", out2, "--bad-hosts", bad_hosts]
    for p in (out2, bad_hosts):
        if os.path.exists(p):
            os.remove(p)
    cmd = list(MPIRUN)
    for i, node in enumerate(("nodeA", "nodeB", "nodeC")):
        cmd += ([":"] if i else []) + ["-n", "2", *with_env([f"MORI_NODE_ID={node}", *(env_c if i == 2 else ())],
                                                            side)]
    rc, text = job(cmd)[:2]
    bad = open(bad_hosts).read() if os.path.exists(bad_hosts) else None
    return rc, text, (json.load(open(out2)) if os.path.exists(out2) else None), bad


rc, out, doc, bad = three_nodes()
nodes = [(n["node"], n["ranks"], n["verdict"]) for n in (doc or {}).get("health_nodes", [])]
# A node's verdict may be warn: on the host runtime's loaded cores a pair is an outlier now and then.
check("three nodes: exit 0, one passing verdict per node, an empty --bad-hosts file, the fleet checks pass",
      rc == 0 and [(n, r) for n, r, _ in nodes] == [("nodeA", "0-1"), ("nodeB", "2-3"), ("nodeC", "4-5")]
      and all(v in ("pass", "warn") for _, _, v in nodes)
      and bad == "" and {c["verdict"] for c in doc["health"] if c["id"].startswith("fleet.")} <= {"pass", "warn"}
      and {c["verdict"] for c in doc["health"]
           if c["id"].startswith("fleet.") and c["id"] != "fleet.a2a_slow"} == {"pass"}
      and "health, per node:" in out, out)
check("... every pair and all-to-all check names its node",
      all(c.get("node") in ("nodeA", "nodeB", "nodeC") for c in doc["health"]
          if c["id"].startswith(("pair.", "a2a."))), json.dumps(doc["health"])[:2000])
for fault, check_id in (("health.driver-version", "fleet.driver_version"), ("health.gpu-count", "fleet.gpu_count"),
                        ("health.handle-type", "fleet.handle_type")):
    rc, out, doc, bad = three_nodes([f"MORI_FAULT={fault}:*"])
    # (Pair checks left out: on the host runtime's loaded cores a pair may fail as an outlier now and then.)
    failing = [(c["id"], c.get("node")) for c in (doc or {}).get("health", [])
               if c["verdict"] == "fail" and c["id"].startswith(("fleet.", "a2a.", "doctor."))]
    last = [ln for ln in out.splitlines() if ln.startswith("health: ")][-1:]
    check(f"{fault} on nodeC: {check_id} fails on nodeC alone, exit 1, the last line and --bad-hosts name it",
          rc == 1 and failing == [(check_id, "nodeC")] and "nodeC" in (bad or "").split()
          and bool(last) and last[0].startswith("health: FAIL on ") and "nodeC" in last[0],
          json.dumps(failing) + out[-3000:])
# nodeC's pushes take 100 ms more each (a2a.slow-kernel): fleet.a2a_slow names it, the slowest by far; on the host
# runtime, where a loaded core is not a slow node, as a warning (a fail on GPUs: Health.FleetA2aSlow*).
rc, out, doc, bad = three_nodes(["MORI_FAULT=a2a.slow-kernel:*", "MORI_FAULT_DELAY_NS=100000000"])
slow = {c["node"]: c for c in (doc or {}).get("health", []) if c["id"] == "fleet.a2a_slow" and c.get("node")}
check("a2a.slow-kernel on nodeC: fleet.a2a_slow names nodeC (warn on the host runtime), its ratio the largest, "
      "past 10",
      "nodeC" in slow and slow["nodeC"]["verdict"] == "warn" and slow["nodeC"]["measured"] > 10
      and all(c["measured"] < slow["nodeC"]["measured"] for n, c in slow.items() if n != "nodeC")
      and any(n["node"] == "nodeC" and n["verdict"] in ("warn", "fail") for n in doc["health_nodes"]),
      json.dumps(list(slow.values())) + out[-3000:])
rc, out, doc, bad = three_nodes(["MORI_FAULT=a2a.overrun:*"])
rows = {n["node"]: n for n in (doc or {}).get("health_nodes", [])}
check("a node whose all-to-all is wrong: its row of the table fails on a2a.verified, --bad-hosts names it",
      rc == 1 and "nodeC" in (bad or "").split() and rows.get("nodeC", {}).get("verdict") == "fail"
      and "a2a.verified" in rows["nodeC"]["failing"]
      and all("a2a.verified" not in rows[n]["failing"] for n in ("nodeA", "nodeB")), out[-3000:])
rc, out, doc = run(2, ["--bad-hosts", os.path.join(TMP, "no-such-dir", "x")])
check("--bad-hosts into a missing folder: exit 2, one line", rc == 2 and "--bad-hosts" in out, out)

# A malformed expectations file: exit 2, one line naming the file, no JSON written.
for label, content in (("not JSON", "{ nope"),
                       ("wrong schema", {"schema": "mori.expectations/9", "entries": []}),
                       ("unknown field", {"schema": "mori.expectations/1", "entries": [
                           {"devices": ["host"], "interconnect": "host", "check": "write_gbps", "min": 1,
                            "source": "x", "source_kind": "evidence", "minimum": 3}]})):
    bad = write("bad.json", content)
    rc, out, doc = run(2, ["--expect", bad], name="bad-out.json")
    check(f"malformed expectations ({label}) exit 2 naming the file", rc == 2 and bad in out and doc is None, out)
rc, out, doc = run(2, ["--expect", os.path.join(TMP, "missing.json")], name="bad-out.json")
check("a missing expectations file exits 2 naming it", rc == 2 and "missing.json" in out, out)
rc, out = tool_job(MPIRUN, 1, PROBE, ["--expect", impossible])
check("--expect without --health is a usage error", rc == 2 and "--expect" in out, out)
finish()
