#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The doctor's cross-rank causes, produced for real under mpirun on the host runtime.

usage: doctor_test.py BIN_DIR WINDOW_TEST MPIRUN...
Each scenario starts mori-probe (and once window-mpi-test) with one condition made real: a rank in its own PID
namespace (unshare), a low fd limit (prlimit), an MPS pipe seen by one rank only, two simulated machines
(MORI_TEST_BOOT_ID, test-only) with one host name, two simulated nodes (MORI_NODE_ID); the network namespace
id is overridden (MORI_TEST_NET_NS, test-only, see below). It asserts the diagnosis id and the ranks it names. A clean run must have no diagnosis of severity error.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: harness.py
import harness  # noqa: E402

BIN, WINDOW_TEST, MPIRUN = sys.argv[1], sys.argv[2], sys.argv[3:]
if harness.mpi_vendor(MPIRUN) == "MPICH":
    # MPICH's UCX shared memory passes its segments as /proc/<pid>/fd/<fd> by default, which a rank in another
    # PID namespace cannot open (MPI_Init fails before any check); over its socket instead, MPI starts and the
    # doctor's own checks are what the pidns cases see. Set in the launcher's environment, which it forwards.
    os.environ["UCX_POSIX_USE_PROC_LINK"] = "n"
PROBE = [os.path.join(BIN, "mori-probe"), "--backend", "host", "--timeout-s", "20"]
TMP = tempfile.mkdtemp(prefix="mori-doctor-")
failures = []


def run(name, ranks, extra=(), expect_code=(0,)):
    """ranks: one prefix (list) per rank, put before the probe command. Returns the JSON document."""
    out = os.path.join(TMP, name + ".json")
    cmd = list(MPIRUN)
    for i, prefix in enumerate(ranks):
        if i:
            cmd.append(":")
        cmd += ["-n", "1"] + list(prefix) + PROBE + list(extra) + ["--json", out]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    if p.returncode not in expect_code:
        failures.append(f"{name}: exit {p.returncode}\n{p.stdout}")
        return None
    with open(out) as f:
        doc = json.load(f)
    doc["_stdout"] = p.stdout
    return doc


def expect(name, doc, did, ranks=None, severity=None):
    if doc is None:
        return
    hits = [d for d in doc["diagnoses"] if d["id"] == did]
    if not hits:
        failures.append(f"{name}: no {did} in {[d['id'] for d in doc['diagnoses']]}")
        return
    if ranks is not None and hits[0]["ranks"] != ranks:
        failures.append(f"{name}: {did} names ranks {hits[0]['ranks']}, expected {ranks}")
    if severity and hits[0]["severity"] != severity:
        failures.append(f"{name}: {did} has severity {hits[0]['severity']}, expected {severity}")
    if did not in doc["_stdout"]:
        failures.append(f"{name}: {did} not printed under the table")
    print(f"ok   {name}: {did} {hits[0]['ranks']}: {hits[0]['evidence']}")


def main():
    clean = run("clean", [[], []])
    if clean is not None:
        errors = [d["id"] for d in clean["diagnoses"] if d["severity"] == "error"]
        if errors or "diagnoses: none" not in clean["_stdout"]:
            failures.append(f"clean: diagnoses {clean['diagnoses']}")
        env = clean["meta"]["environment"]
        if env["ranks"][0]["pid_ns"] is None or env["kernel"] is None or "reason" not in env["nvml"]:
            failures.append(f"clean: meta.environment incomplete: {env}")
        print("ok   clean: no diagnosis" if not errors else "FAIL clean")

    expect("pidns", run("pidns", [[], ["unshare", "--pid", "--fork"]]), "pid_namespace_mismatch", [0, 1], "error")
    # `unshare --net` works here, but a rank in a new network namespace cannot reach mpirun's PMIx server (TCP
    # only), so MPI_Init fails before any check: the test-only override stands in for the namespace id.
    netns = run("netns", [[], ["env", "MORI_TEST_NET_NS=1"]])
    expect("netns", netns, "net_namespace_mismatch", [0, 1], "error")
    fd = run("fdlimit", [[], ["prlimit", "--nofile=100:100"]], extra=["--windows", "32"])
    expect("fdlimit", fd, "fd_limit_low", [1], "error")

    pipe = os.path.join(TMP, "mps")
    os.mkdir(pipe)
    os.mkfifo(os.path.join(pipe, "control"))
    expect("mps", run("mps", [[], ["env", "CUDA_MPS_PIPE_DIRECTORY=" + pipe]]), "mps_mismatch", [0, 1])

    other = ["env", "MORI_TEST_BOOT_ID=00000000-0000-0000-0000-000000000001"]
    two = run("two_machines", [["env", "MORI_NODE_ID=a"], other + ["MORI_NODE_ID=b"]])
    expect("two_machines", two, "hostname_collision", [0, 1], "warning")
    expect("two_machines", two, "null_peers_outside_team", [], "info")
    expect("one_team_two_machines", run("one_team", [[], other]), "team_spans_hosts", [0, 1], "error")

    # A rendezvous that fails (rank 1's fd datagrams carry a pid that rank 0 cannot match) prints the cause.
    win = [WINDOW_TEST, "--backend", "host", "--timeout-s", "5", "--doctor"]
    cmd = list(MPIRUN) + ["-n", "1"] + win + [":", "-n", "1", "unshare", "--pid", "--fork"] + win
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    if p.returncode == 0 or "likely causes" not in p.stdout or "pid_namespace_mismatch" not in p.stdout:
        failures.append(f"rendezvous: exit {p.returncode}, no diagnosis printed:\n{p.stdout}")
    else:
        print(f"ok   rendezvous failure (exit {p.returncode}) prints pid_namespace_mismatch")

    shutil.rmtree(TMP, ignore_errors=True)
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
