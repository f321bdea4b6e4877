#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The tools under a real Slurm (CTest label slurm; docs/setup.md, "Launching").

usage: slurm_test.py BIN_DIR -- MPIRUN...

Starts a one-node Slurm cluster on localhost: munged, slurmctld and slurmd, started and stopped by this test, every
file of theirs (slurm.conf, the munge key and socket, spool and state folders, logs, pid files) in a temporary
folder, on free ports; nothing under /etc, no service manager. Then:
  - each tool (mori-probe, mori-a2a, mori-teardown-repro --scenario all) under `srun --mpi=pmix -n 4` and under
    `salloc -n 4 mpirun ...`: exit 0, world 4, one node, the all-to-all verified (wrong 0), each teardown scenario
    its expected outcome;
  - mori-a2a under `srun --mpi=pmix -n 4` as two simulated nodes of 2 (MORI_NODE_ID from SLURM_PROCID): one
    all-to-all within each node, both verified, the fleet report;
  - `srun --mpi=none` and `--mpi=pmi2` (-n 2), plugins Open MPI cannot speak: never a job of one per rank (Open
    MPI ends each rank in MPI_Init); with SLURM_NODELIST unset on the ranks (Open MPI then makes each a job of one)
    the tools' launcher check refuses every rank (exit 2);
  - one rank of a mori-a2a job killed (SIGKILL), under srun and under salloc + mpirun: the job ends within
    --timeout-s + a margin, non-zero.
Prints the launchers' exit codes and each job's time. Skipped (77, the reason on the first line) where Slurm or
munge is not installed, not as root, or the cluster does not come up; under CI=true that is a failure instead
(scripts/deps installs them).
"""
import atexit
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: harness.py
import harness  # noqa: E402
from harness import finish, load_json, skip  # noqa: E402

_failed = []


def check(name, ok, out=""):
    """harness.check, remembering a failure: the daemons' logs are printed before they go."""
    harness.check(name, ok, out)
    if not ok:
        _failed.append(name)

if len(sys.argv) < 4 or sys.argv[2] != "--":
    sys.exit("usage: slurm_test.py BIN_DIR -- MPIRUN...")
BIN = os.path.abspath(sys.argv[1])
MPIRUN = sys.argv[3:]  # run inside an allocation (salloc): it takes the allocation's node and slots
CI = os.environ.get("CI") == "true"
N = 4
TIMEOUT_S = 20  # the tools' --timeout-s
UP_BOUND_S = 60  # how long the daemons may take to come up (a loaded 2-core machine)
JOB_BOUND_S = 240  # no job of this test may take longer
DAEMON_TAG_VARIABLE = "MORI_SLURM_TEST_DAEMONS"  # marks the daemons and what they start (slurmstepd)
DAEMON_TAG = harness.TAG


def unavailable(why):
    """Slurm cannot run here: skipped, or a failure under CI=true (where scripts/deps has installed it)."""
    if not CI:
        skip(why)
    check(f"Slurm usable under CI=true: {why}", False)
    finish()


def find_exe(name, extra=("/usr/sbin", "/sbin")):
    return shutil.which(name) or next((os.path.join(d, name) for d in extra if os.access(os.path.join(d, name),
                                                                                         os.X_OK)), None)


EXES = {n: find_exe(n) for n in ("munged", "slurmctld", "slurmd", "sinfo", "srun", "salloc")}
missing = sorted(n for n, p in EXES.items() if p is None)
if missing:
    unavailable(f"not installed: {', '.join(missing)} (Debian/Ubuntu: apt-get install slurm-wlm, which brings "
                "munge; scripts/deps installs it)")
if os.geteuid() != 0:
    unavailable("the test cluster runs its daemons as the user starting them, and slurmd needs root")

TMP = tempfile.mkdtemp(prefix="mori-slurm-")
os.chmod(TMP, 0o700)  # munged refuses a socket or key in a folder others can write
HOST = socket.gethostname().split(".")[0]


# ---- the daemons: started here, killed here (and by a watchdog should this process be killed) ------------------
def daemon_pids():
    """Every process carrying the daemons' tag: munged, slurmctld, slurmd and the slurmstepd they fork."""
    needle = f"{DAEMON_TAG_VARIABLE}={DAEMON_TAG}".encode()
    pids = set()
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    pids.add(int(d))
        except OSError:
            continue
    return pids - {os.getpid()}


def kill_all(pids_of, bound=10.0):
    """SIGTERM to what pids_of() lists, then SIGKILL to what is left after bound seconds; returns what survived."""
    for sig, wait in ((signal.SIGTERM, bound), (signal.SIGKILL, 5.0)):
        for pid in pids_of():
            try:
                os.kill(pid, sig)
            except OSError:
                pass
        deadline = time.monotonic() + wait
        while pids_of() and time.monotonic() < deadline:
            time.sleep(0.1)
    return pids_of()


_stopped = False


def stop_cluster():
    global _stopped
    if _stopped:
        return
    _stopped = True
    kill_all(harness.tagged_pids, bound=2.0)  # a job's processes first: srun, salloc, ranks
    survivors = kill_all(daemon_pids)
    if survivors:
        print(f"warning: processes of the test cluster still there after SIGKILL: {sorted(survivors)}")
    shutil.rmtree(TMP, ignore_errors=True)


atexit.register(stop_cluster)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # CTest's timeout: atexit still runs
signal.signal(signal.SIGINT, lambda *_: sys.exit(1))

# A SIGKILL of this process skips atexit: a watchdog in a session of its own then kills the daemons and the jobs'
# processes (srun, salloc, ranks), and removes the folder.
WATCHDOG = r"""
import os, signal, sys, time, shutil
parent, tmp, needles = int(sys.argv[1]), sys.argv[2], {a.encode() for a in sys.argv[3:]}
def tagged():
    pids = set()
    for d in os.listdir("/proc"):
        if d.isdigit() and int(d) != os.getpid():
            try:
                if needles & set(open(f"/proc/{d}/environ", "rb").read().split(b"\0")):
                    pids.add(int(d))
            except OSError:
                pass
    return pids
while os.getppid() == parent:
    time.sleep(0.5)
for sig in (signal.SIGTERM, signal.SIGKILL):
    for pid in tagged():
        try:
            os.kill(pid, sig)
        except OSError:
            pass
    time.sleep(3)
shutil.rmtree(tmp, ignore_errors=True)
"""
# The watchdog must not carry the tag it kills by.
_wd_env = {k: v for k, v in os.environ.items() if k not in (DAEMON_TAG_VARIABLE, harness.TAG_VARIABLE)}
subprocess.Popen([sys.executable, "-c", WATCHDOG, str(os.getpid()), TMP, f"{DAEMON_TAG_VARIABLE}={DAEMON_TAG}",
                  f"{harness.TAG_VARIABLE}={harness.TAG}"],
                 env=_wd_env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                 start_new_session=True)


def free_ports(n):
    """n distinct TCP ports free on 127.0.0.1 now (held open together so they differ)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def path(*p):
    return os.path.join(TMP, *p)


for d in ("munge", "ctld", "slurmd", "log", "tmpfs"):
    os.makedirs(path(d), mode=0o700)
CONF = path("slurm.conf")
MUNGE_SOCKET = path("munge", "munge.socket")
CTLD_PORT, SLURMD_PORT = free_ports(2)
# One node of 8 CPUs whatever the machine has (config_overrides: slurmd does not invalidate it), so 4 tasks fit on
# 2 cores; no cgroups (a container has none to delegate): linuxproc tracks the processes, no task binding. TmpFS
# holds the PMIx plugin's per-step folders (else /tmp/spmix_appdir_<uid>_<job>.<step>, which a step killed before
# its end leaves behind, and a later cluster's job of the same id, ids starting at 1 again, then fails to launch).
with open(CONF, "w") as f:
    f.write(f"""ClusterName=moritest
SlurmctldHost={HOST}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort={CTLD_PORT}
SlurmdPort={SLURMD_PORT}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={MUNGE_SOCKET}
StateSaveLocation={path("ctld")}
SlurmdSpoolDir={path("slurmd")}
TmpFS={path("tmpfs")}
SlurmctldPidFile={path("slurmctld.pid")}
SlurmdPidFile={path("slurmd.pid")}
SlurmctldLogFile={path("log", "slurmctld.log")}
SlurmdLogFile={path("log", "slurmd.log")}
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
SlurmdParameters=config_overrides
ReturnToService=2
MpiDefault=none
MailProg=/bin/true
KillWait=5
InactiveLimit=0
MinJobAge=10
NodeName={HOST} NodeAddr=127.0.0.1 CPUs=8 State=UNKNOWN
PartitionName=test Nodes={HOST} Default=YES MaxTime=10 State=UP
""")
with open(path("munge", "munge.key"), "wb") as f:
    os.fchmod(f.fileno(), 0o600)
    f.write(os.urandom(1024))


def clean_env():
    """This environment without any Slurm or launcher variable (CTest may itself run inside a Slurm job)."""
    e = {k: v for k, v in os.environ.items()
         if not k.startswith(("SLURM_", "PMI_", "PMIX_", "OMPI_COMM_WORLD_")) and k != DAEMON_TAG_VARIABLE}
    e["SLURM_CONF"] = CONF
    return e


def start_daemon(name, cmd):
    log = open(path("log", f"{name}.out"), "w")
    env = dict(clean_env(), **{DAEMON_TAG_VARIABLE: DAEMON_TAG})
    env.pop(harness.TAG_VARIABLE, None)
    return subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)


def logs():
    """The daemons' logs, the last lines of each, for a failure's message."""
    out = []
    for name in sorted(os.listdir(path("log"))):
        with open(path("log", name), errors="replace") as f:
            out.append(f"--- {name}:\n" + "".join(f.readlines()[-25:]))
    return "\n".join(out)


def wait_for(what, cond, procs, bound=UP_BOUND_S):
    """Waits (at most bound seconds) until cond() holds; a daemon that exits first ends the wait."""
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        if cond():
            return None
        dead = [n for n, p in procs.items() if p.poll() is not None]
        if dead:
            return f"{', '.join(dead)} exited while waiting for {what}"
        time.sleep(0.25)
    return f"{what}: not within {bound} s"


def quiet(cmd, timeout=15):
    try:
        return subprocess.run(cmd, env=clean_env(), capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None


procs = {}
t_up = time.monotonic()
procs["munged"] = start_daemon("munged", [EXES["munged"], "--foreground", "--force", f"--socket={MUNGE_SOCKET}",
                                          f"--key-file={path('munge', 'munge.key')}",
                                          f"--pid-file={path('munge', 'munged.pid')}",
                                          f"--seed-file={path('munge', 'munged.seed')}",
                                          f"--log-file={path('log', 'munged.log')}"])
err = wait_for("the munge socket", lambda: os.path.exists(MUNGE_SOCKET), procs)
if err is None:
    procs["slurmctld"] = start_daemon("slurmctld", [EXES["slurmctld"], "-D", "-i", "-f", CONF])
    procs["slurmd"] = start_daemon("slurmd", [EXES["slurmd"], "-D", "-f", CONF, "-N", HOST])


def node_state():
    r = quiet([EXES["sinfo"], "-h", "-N", "-o", "%T"])
    return r.stdout.strip() if r is not None and r.returncode == 0 else ""


if err is None:
    err = wait_for("the node idle in sinfo", lambda: node_state() == "idle", procs)
if err is not None:
    msg = f"the one-node Slurm cluster did not come up: {err}"
    if not CI:
        print(f"SKIPPED: {msg}\n{logs()}")
        stop_cluster()
        sys.exit(harness.SKIP_RETURN_CODE)
    check(msg, False, logs())
    finish()
print(f"time: cluster up (munged, slurmctld, slurmd; node {HOST} idle) in {time.monotonic() - t_up:.1f} s")
r = quiet([EXES["srun"], "--mpi=list"])
plugins = r.stdout + r.stderr if r is not None else ""
check("srun --mpi=list names pmix", re.search(r"\bpmix\b", plugins) is not None, plugins)

base = harness.leftovers()
# Shared-memory transport only, as MORI_MPIRUN in tests/CMakeLists.txt says for mpirun; as root.
JOB_ENV = dict(clean_env(), OMPI_MCA_btl="self,vader", OMPI_MCA_btl_vader_single_copy_mechanism="none",
               OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
TOOLS = {
    "mori-probe": [],
    "mori-a2a": ["--chunk-kib", "4", "--iters", "3", "--warmup", "1"],
    "mori-teardown-repro": ["--scenario", "all", "--size", "64K"],
}
# Every step is bounded by Slurm too: --immediate (no wait for resources) and --time (minutes).
SRUN = [EXES["srun"], "--immediate=30", "--time=3", "-N", "1"]
SALLOC = [EXES["salloc"], "--immediate=30", "--time=3", "-N", "1", "-n", str(N)]
MPIRUN_IN_ALLOC = [*MPIRUN, "-n", str(N)]


def run(name, cmd, timeout=JOB_BOUND_S):
    """One job; returns (exit code, output, report, seconds)."""
    out_json = path(name + ".json")
    try:
        rc, out, secs = harness.job([*cmd, "--json", out_json], env=JOB_ENV, timeout=timeout, cwd=TMP)
    except subprocess.TimeoutExpired:
        rc, out, secs = -1, f"did not end within {timeout} s", timeout
    print(f"time: {name}: {secs:.1f} s, exit {rc}")
    return rc, out, load_json(out_json), secs


def tool(name, args):
    return [os.path.join(BIN, name), "--backend", "host", "--timeout-s", str(TIMEOUT_S), *args]


def one_node_of(doc, n):
    """The report says world n, lists n ranks, all on one node."""
    meta = (doc or {}).get("meta") or {}
    ranks = meta.get("ranks") or []
    return (meta.get("world") == n and len(ranks) == n and len({r.get("node") for r in ranks}) == 1
            and len({r.get("host") for r in ranks}) == 1)


def judge(how, name, rc, out, doc):
    where = f"{name} under {how}"
    check(f"{where}: exit 0, world {N}, {N} ranks on one node", rc == 0 and one_node_of(doc, N), out)
    if name == "mori-probe":
        check(f"{where}: one node reported, no error diagnosis",
              len(doc.get("nodes") or []) == 1
              and not any(d.get("severity") == "error" for d in doc.get("diagnoses") or []), out)
    elif name == "mori-a2a":
        res = (doc or {}).get("results") or []
        check(f"{where}: every row verified (wrong 0)",
              doc is not None and doc.get("wrong") == 0 and res and all(r.get("wrong") == 0 for r in res), out)
    else:
        scs = (doc or {}).get("scenarios") or []
        wrong = [(s.get("name"), s.get("outcome"), s.get("expected")) for s in scs
                 if s.get("outcome") != "pending" and s.get("outcome") != s.get("expected")]
        check(f"{where}: each scenario as expected, world {N}",
              len(scs) >= 10 and not wrong and all(s.get("world") == N for s in scs), out + str(wrong))


for name, args in TOOLS.items():
    rc, out, doc, _ = run(f"srun-{name}", [*SRUN, "--mpi=pmix", "-n", str(N), *tool(name, args)])
    judge(f"srun --mpi=pmix -n {N}", name, rc, out, doc)
for name, args in TOOLS.items():
    rc, out, doc, _ = run(f"salloc-{name}", [*SALLOC, *MPIRUN_IN_ALLOC, *tool(name, args)])
    judge(f"salloc -n {N} mpirun", name, rc, out, doc)

# The main job on two nodes under srun: the tasks as two simulated nodes (MORI_NODE_ID from SLURM_PROCID), one
# all-to-all within each, both at once (docs/mori-a2a.md "Many nodes").
HALF = N // 2
as_nodes = ["sh", "-c", f'export MORI_NODE_ID=node$((SLURM_PROCID / {HALF})); exec "$@"', "sh"]
rc, out, doc, _ = run("srun-fleet", [*SRUN, "--mpi=pmix", "-n", str(N), *as_nodes, *tool("mori-a2a", TOOLS["mori-a2a"])])
teams = [(t.get("node"), t.get("ranks"), t.get("wrong")) for t in (doc or {}).get("teams") or []]
check(f"srun --mpi=pmix -n {N} mori-a2a as 2 nodes of {HALF}: exit 0, mori.a2a/3, one team a node, every row "
      "verified, a fleet line per configuration",
      rc == 0 and (doc or {}).get("schema") == "mori.a2a/3"
      and teams == [("node0", f"0-{HALF - 1}", 0), ("node1", f"{HALF}-{N - 1}", 0)]
      and all(r.get("wrong") == 0 for r in doc.get("results") or [])
      and len([ln for ln in out.splitlines() if ln.startswith("# fleet ")]) == len(doc.get("fleet") or [None]),
      out)

# srun with a plugin Open MPI does not speak. A shell around each rank reports the rank's own code (srun's is the
# launcher's to choose: docs/setup.md, "Launching").
WRAP = '"$@"; c=$?; echo "rank-exit $SLURM_PROCID $c"; exit $c'


def refused_run(name, plugin, prefix=()):
    out_json = path(name + ".json")
    cmd = [*SRUN, f"--mpi={plugin}", "-n", "2", "sh", "-c", WRAP, "sh", *prefix,
           *tool("mori-probe", ["--json", out_json])]
    try:
        rc, out, secs = harness.job(cmd, env=JOB_ENV, timeout=JOB_BOUND_S, cwd=TMP)
    except subprocess.TimeoutExpired:
        rc, out, secs = -1, f"did not end within {JOB_BOUND_S} s", JOB_BOUND_S
    codes = {int(r): int(c) for r, c in re.findall(r"^rank-exit (\d+) (\d+)$", out, re.M)}
    print(f"time: {name}: {secs:.1f} s; srun's exit code {rc}, the ranks' {codes}")
    return rc, out, codes, os.path.exists(out_json)


for plugin in ("none", "pmi2"):
    rc, out, codes, wrote = refused_run(f"srun-mpi-{plugin}", plugin)
    check(f"srun --mpi={plugin} -n 2 mori-probe: never runs as jobs of one (each rank non-zero, no --json), srun "
          "non-zero", sorted(codes) == [0, 1] and all(codes.values()) and not wrote and rc != 0, out)
rc, out, codes, wrote = refused_run("srun-mpi-none-no-nodelist", "none", ["env", "-u", "SLURM_NODELIST"])
errors = [x for x in out.splitlines() if x.startswith("mori-probe: error")
          and "SLURM_STEP_NUM_TASKS=2" in x and "MPI made a job of 1" in x]
check("srun --mpi=none -n 2 mori-probe without SLURM_NODELIST (Open MPI then starts each as a job of one): the "
      "launcher check refuses both ranks (each exits 2 naming SLURM_STEP_NUM_TASKS=2 and a world of 1), no --json",
      codes == {0: 2, 1: 2} and len(errors) == 2 and not wrote and rc != 0, out)

# One rank killed (SIGKILL) mid-run: the job ends within the tools' bound and a margin, with a non-zero exit.
A2A = os.path.basename(os.path.join(BIN, "mori-a2a"))
MARGIN_S = 15
KILLED = 2


def rank_pid(rank, variable):
    """The pid of the mori-a2a process this test started whose rank variable says rank, or None."""
    for pid in harness.tagged_pids():
        try:
            if os.path.basename(os.readlink(f"/proc/{pid}/exe")) != A2A:
                continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                if f"{variable}={rank}".encode() in f.read().split(b"\0"):
                    return pid
        except OSError:
            continue
    return None


def window_mappings(pid):
    """How many mappings of a window's memory (the host runtime's memfd, mori-symm) the process has."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            return sum("/memfd:mori-symm" in line for line in f)
    except OSError:
        return 0


def kill_one(how, launch, variable):
    """Starts a long mori-a2a job, SIGKILLs rank KILLED once it has mapped the windows, and checks the job ends."""
    p = harness.start_job([*launch, *tool("mori-a2a", ["--chunk-kib", "4,1024", "--iters", "2000", "--sync", "host",
                                                       "--addressing", "ptr"])], env=JOB_ENV, cwd=TMP)
    lines, killed, t_kill, seen = queue.Queue(), None, None, []
    reader = threading.Thread(target=lambda: [lines.put(x) for x in p.stdout], daemon=True)
    reader.start()
    deadline = time.monotonic() + JOB_BOUND_S
    while p.poll() is None or reader.is_alive() or not lines.empty():
        if time.monotonic() > deadline:
            p.kill()
            seen.append(f"(did not end within {JOB_BOUND_S} s)\n")
            break
        try:
            seen.append(lines.get(timeout=0.1))
        except queue.Empty:
            pass
        # Mid-run: the rank has mapped the windows (its output, a pipe under srun, may come late).
        pid = rank_pid(KILLED, variable) if killed is None else None
        if pid is not None and window_mappings(pid) >= N:
            os.kill(pid, signal.SIGKILL)
            killed, t_kill = pid, time.monotonic()
    rc = p.wait(timeout=30)
    dt = time.monotonic() - t_kill if t_kill is not None else float("inf")
    said = "; ".join(x.strip() for x in seen if x.startswith("srun:"))
    print(f"time: {how} mori-a2a with rank {KILLED} killed: ended {dt:.1f} s after the kill; exit code {rc}"
          + (f" ({said})" if said else ""))
    check(f"{how} mori-a2a, rank {KILLED} SIGKILLed mid-run: the job ends within --timeout-s {TIMEOUT_S} + "
          f"{MARGIN_S} s ({dt:.1f} s), non-zero ({rc})",
          killed is not None and dt <= TIMEOUT_S + MARGIN_S and rc != 0, "".join(seen))


kill_one(f"srun --mpi=pmix -n {N}", [*SRUN, "--mpi=pmix", "-n", str(N)], "SLURM_PROCID")
kill_one(f"salloc -n {N} mpirun", [*SALLOC, *MPIRUN_IN_ALLOC], "OMPI_COMM_WORLD_RANK")

after = harness.leftovers()
left = [sorted(x - y) for x, y in zip(after, base)]
check("nothing left behind by the jobs (processes, sockets, shm)", not any(left), str(left))
if _failed:
    print(f"the daemons' logs (the last lines of each):\n{logs()}")
stop_cluster()
check("the cluster's daemons are gone (munged, slurmctld, slurmd, slurmstepd)", not daemon_pids(),
      str(sorted(daemon_pids())))
finish()
