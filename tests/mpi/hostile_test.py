#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Hostile but fair inputs and faults beyond the bad-input and fault suites, with real mpirun jobs on
the host runtime: output paths that are not regular files, bytes that are not UTF-8, long names, a hung rank, a
rank killed from outside, full and damaged journals, two jobs on one journal folder, and more.

Every path a case uses lies in a fresh temporary folder made here. usage: hostile_test.py BIN_DIR MPIRUN...
"""
import json
import os
import re
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: harness.py
import harness  # noqa: E402
from harness import check, finish  # noqa: E402

BIN = sys.argv[1]
MPIRUN = sys.argv[2:]
A2A = os.path.join(BIN, "mori-a2a")
TD = os.path.join(BIN, "mori-teardown-repro")


def run(cmd, env=None, timeout=120, cwd=None):
    e = dict(os.environ, **(env or {}))
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout, cwd=cwd)
        out, rc = p.stdout.decode(errors="replace"), p.returncode
    except subprocess.TimeoutExpired as ex:
        out, rc = (ex.output or b"").decode(errors="replace") + f"\n(did not end within {timeout} s)", -1
    return rc, out, time.monotonic() - t0


def journal_dir(tmp, name, text=b"O\tordered\t1\nD\tordered\n"):
    """A journal folder holding one rank's journal with the given bytes, for --summarize."""
    d = os.path.join(tmp, name)
    os.makedirs(d)
    with open(os.path.join(d, "rank-0.journal"), "wb") as f:
        f.write(text)
    return d


def summarize(d, *extra, env=None):
    return run([TD, "--backend", "host", "--summarize", d, *extra], env=env, timeout=60)


def rank_pids(mpirun_pid, tool):
    """{rank: pid} of the job's processes: descendants of mpirun_pid running `tool`."""
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.path.basename(open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")[0]).decode() != tool:
                continue
            ppid, p = int(pid), None
            while ppid > 1 and ppid != mpirun_pid:
                p = ppid
                ppid = int(re.search(r"PPid:\s+(\d+)", open(f"/proc/{p}/status").read()).group(1))
            if ppid != mpirun_pid:
                continue
            env = dict(v.split(b"=", 1) for v in open(f"/proc/{pid}/environ", "rb").read().split(b"\0") if b"=" in v)
            rank = harness.rank_of(env)  # any launcher's rank variable (tests/harness.py)
            if rank is not None:
                found[rank] = int(pid)
        except (OSError, StopIteration, AttributeError, ValueError):
            continue
    return found


def start(cmd, env=None):
    return subprocess.Popen(cmd, env=dict(os.environ, **(env or {})), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)


def collect(p, timeout):
    try:
        out = p.communicate(timeout=timeout)[0]
    except subprocess.TimeoutExpired:
        p.kill()
        out = p.communicate()[0] + b"\n(did not end in time)"
    return p.returncode, out.decode(errors="replace")


tmp = tempfile.mkdtemp(prefix="mori-hostile-")

# 1. --json onto files that are not regular or onto a dangling symlink: refused up front (exit 2), left as they
# were (docs/reliability.md, "Files the tools read and write").
d = os.path.join(tmp, "json-targets")
os.makedirs(d)
j = journal_dir(tmp, "j1")
node = os.path.join(d, "null")
try:
    os.mknod(node, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # a second /dev/null
except OSError:
    node = None
if node:
    rc, out, _ = summarize(j, "--json", node)
    check("#1 --json onto a device node: exit 2 naming it, still a device node",
          rc == 2 and "is a character device" in out and stat.S_ISCHR(os.lstat(node).st_mode), out)
fifo = os.path.join(d, "fifo")
os.mkfifo(fifo)
got = []
reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()), daemon=True)
reader.start()
rc, out, _ = summarize(j, "--json", fifo)
open(fifo, "wb").close()  # lets the reader go
reader.join(timeout=30)
check("#1 --json onto a FIFO with a reader: exit 2 naming it, the reader gets nothing, still a FIFO",
      rc == 2 and "is a FIFO" in out and got == [b""] and stat.S_ISFIFO(os.lstat(fifo).st_mode), out)
link = os.path.join(d, "link")
os.symlink("t", link)
rc, out, _ = summarize(j, "--json", link)
target = os.path.join(d, "t")
check("#1 --json onto a dangling symlink: exit 2 naming it, the link stays, nothing created through it",
      rc == 2 and "dangling symlink" in out and os.path.islink(link) and not os.path.lexists(target), out)

# 7. Bytes that are not UTF-8 in a file name and the environment: the report is written, the bytes replaced.
j = journal_dir(tmp, "j7")
bad = os.path.join(os.fsencode(d), b"r\xff.json")
rc, out, _ = run([TD, "--backend", "host", "--summarize", j, "--json", bad], env={"MORI_NODE_ID": "n\udcfe"})
ok = rc == 0 and os.path.exists(bad)
check("#7 non-UTF-8 --json name and MORI_NODE_ID: exit 0, report written with U+FFFD",
      ok and "\ufffd" in open(bad, encoding="utf-8").read(), out)

# 8. A legal long name (250 bytes) works; one over NAME_MAX is exit 2 before the run.
j = journal_dir(tmp, "j8")
long_ok = os.path.join(d, "x" * 245 + ".json")
rc, out, _ = summarize(j, "--json", long_ok)
check("#8 a 250-byte --json name: exit 0, written", rc == 0 and os.path.isfile(long_ok), out)
rc, out, _ = summarize(j, "--json", os.path.join(d, "y" * 251 + ".json"))
check("#8 a 256-byte --json name: exit 2 up front", rc == 2 and "longer than 255 bytes" in out, out)

# 13. The command line's --log-level wins over MORI_LOG_LEVEL.
j = journal_dir(tmp, "j13")
rc, out, _ = summarize(j, "--log-level", "info", env={"MORI_LOG_LEVEL": "loud"})
check("#13 MORI_LOG_LEVEL=loud with --log-level info: exit 0", rc == 0, out)

# MORI_FAULT names only known points: a misspelt one is exit 2 on every rank, listing the known ones.
rc, out, _ = run([*MPIRUN, "-n", "2", TD, "--backend", "host", "--journal-dir", os.path.join(tmp, "jf")],
                 env={"MORI_FAULT": "rendezvous.nope:1"})
n = len(re.findall(r"MORI_FAULT: unknown point 'rendezvous.nope' \(known: .*a2a.overrun.*teardown.<step>.crash", out))
check("unknown MORI_FAULT point: exit 2, one line per rank listing the known points",
      rc == 2 and n == 2 and not os.path.exists(os.path.join(tmp, "jf")), out)
j = journal_dir(tmp, "jf2")
rc, out, _ = summarize(j, env={"MORI_FAULT": "teardown.w1.unmap_slot.hang:3,a2a.stale:0"})
check("known MORI_FAULT points (a teardown pattern, a2a.stale) are accepted", rc == 0, out)

# 11. Damaged journals: the file and line named, the verdict says damaged.
j = journal_dir(tmp, "j11a", b"O\tcycles\t1\nB\tcycles\talloc\t-1\nC\tcycles\t1\t2\t3\t4\t")
rc, out, _ = summarize(j)
check("#11 truncated last line: exit 1 naming rank-0.journal line 3, outcome damaged",
      rc == 1 and "rank-0.journal line 3" in out and "damaged" in out, out)
j = journal_dir(tmp, "j11b", bytes(range(256)) * 4)
rc, out, _ = summarize(j)
check("#11 a journal of random bytes: exit 1 naming rank-0.journal line 1, outcome damaged",
      rc == 1 and "rank-0.journal line 1" in out and "damaged" in out, out)

# 9. A stride quantum whose span (stride x ranks) wraps: exit 2 naming the option, on every rank.
for q in ("4611686018427387904", str(2**62 + 65536)):
    rc, out, _ = run([*MPIRUN, "-n", "4", A2A, "--backend", "host", "--chunk-kib", "4", "--iters", "2",
                      "--stride-quantum", q])
    check(f"#9 --stride-quantum {q} at 4 ranks: exit 2 naming the option on every rank",
          rc == 2 and len(re.findall(r"error .*--stride-quantum: the flat span", out)) == 4, out)

# 10. A journal folder another job has claimed (its claim made, no journal yet): exit 2, nothing written.
jd = os.path.join(tmp, "j10")
os.makedirs(jd)
open(os.path.join(jd, "job.claim"), "w").close()
rc, out, _ = run([*MPIRUN, "-n", "2", TD, "--backend", "host", "--scenario", "ordered", "--size", "64K",
                  "--journal-dir", jd])
check("#10 a folder claimed by another job: exit 2, no journal written",
      rc == 2 and "another job's claim" in out and sorted(os.listdir(jd)) == ["job.claim"], out)
for pair in range(2):
    jd = os.path.join(tmp, f"j10-pair{pair}")
    cmd = [*MPIRUN, "-n", "2", TD, "--backend", "host", "--scenario", "ordered", "--size", "64K", "--journal-dir",
           jd]
    ps = [start(cmd), start(cmd)]
    res = [collect(p, 120) for p in ps]
    codes = sorted(r[0] for r in res)
    opens = open(os.path.join(jd, "rank-0.journal")).read().count("O\tordered") if os.path.exists(
        os.path.join(jd, "rank-0.journal")) else -1
    check(f"#10 two jobs started together on one folder (pair {pair}): one runs, the other exits 2, "
          f"journal not interleaved", codes == [0, 2] and opens == 1, res[0][1] + res[1][1])

# 2. exporter-first with two simulated nodes: ranks outside the owner's team skip the read, no SIGSEGV.
jd = os.path.join(tmp, "j2")
td = [TD, "--backend", "host", "--scenario", "exporter-first", "--size", "64K", "--journal-dir", jd]
rc, out, _ = run([*MPIRUN, "-n", "2", *harness.with_env(["MORI_NODE_ID=a"], td), ":", "-n", "2",
                  *harness.with_env(["MORI_NODE_ID=b"], td)])
check("#2 exporter-first on two simulated nodes: exit 0, outcome ok, no SIGSEGV",
      rc == 0 and re.search(r"exporter-first\s+4 ok", out) and "SIGSEGV" not in out, out)

# 5. A journal that cannot be written (test-only: a file system that fills up mid-line): reported, and the
#    verdict says so instead of a false crash; --summarize later calls the torn journal damaged.
jd = os.path.join(tmp, "j5")
rc, out, _ = run([*MPIRUN, "-n", "2", TD, "--backend", "host", "--scenario", "cycles", "--cycles", "20", "--size",
                  "64K", "--journal-dir", jd], env={"MORI_FAULT": "journal.full:1"})
check("#5 journal write fails (ENOSPC): the job names it, verdict journal_error, exit 1",
      rc == 1 and "write failed (ENOSPC)" in out and re.search(r"cycles\s+2 journal_error", out), out)
rc, out, _ = summarize(jd)
check("#5 --summarize on the torn journal: damaged, naming rank-1.journal", rc == 1 and "rank-1.journal line" in out
      and "damaged" in out, out)

# 6. SIGKILL of rank 3 during cycles: the summary names every rank that ended without finishing, not rank 0
#    alone.
jd = os.path.join(tmp, "j6")
p = start([*MPIRUN, "-n", "4", TD, "--backend", "host", "--timeout-s", "20", "--scenario", "cycles", "--cycles",
           "100000", "--size", "64K", "--journal-dir", jd])
killed = False
deadline = time.monotonic() + 60
while time.monotonic() < deadline and not killed:
    time.sleep(0.2)
    try:
        cycles = open(os.path.join(jd, "rank-3.journal")).read().count("\nC\t")
    except OSError:
        continue
    if cycles >= 3:
        pids = rank_pids(p.pid, "mori-teardown-repro")
        if 3 in pids:
            os.kill(pids[3], signal.SIGKILL)
            killed = True
rc, out = collect(p, 60)
rc2, out2, _ = summarize(jd)
m = re.search(r"cycles\s+4 crash\s+\S+\s+(.*)", out2)
detail = m.group(1) if m else ""
check("#6 rank 3 killed: the summary names rank 3 among every rank that ended without finishing",
      killed and rc != 0 and rc2 == 1 and detail.startswith("ended without finishing:") and "rank 3" in detail,
      out[-1500:] + out2)

# 3. A hung rank (SIGSTOP) ends the job within --timeout-s + 5 s, and host sync names the missing rank.
T = 6
for sync in ("host", "device"):
    p = start([*MPIRUN, "-n", "4", A2A, "--backend", "host", "--chunk-kib", "4,1024", "--iters", "2000", "--sync",
               sync, "--addressing", "ptr", "--timeout-s", str(T)])
    lines, stopped = [], None
    t0 = time.monotonic()
    for raw in p.stdout:
        lines.append(raw.decode(errors="replace"))
        if stopped is None and "chunk 4096 B done" in lines[-1]:
            pids = rank_pids(p.pid, "mori-a2a")
            if 2 in pids:
                os.kill(pids[2], signal.SIGSTOP)
                stopped, t0 = pids[2], time.monotonic()
    p.wait()
    dt = time.monotonic() - t0
    if stopped:
        try:
            os.kill(stopped, signal.SIGKILL)
        except ProcessLookupError:
            pass
    out = "".join(lines)
    named = sync != "host" or "ranks not arrived: 2" in out
    check(f"#3 rank 2 stopped ({sync} sync): job ends in {dt:.1f} s <= --timeout-s {T} + 5 (+2 for mpirun), "
          f"missing rank named", stopped and p.returncode != 0 and dt <= T + 5 + 2 and named, out[-3000:])

# 12. A tiny --timeout-s at 8 ranks: either no timeout, or messages that name ranks and a bound that is not 0.0.
rc, out, _ = run([*MPIRUN, "-n", "8", A2A, "--backend", "host", "--chunk-kib", "4", "--iters", "2", "--sync", "host",
                  "--timeout-s", "0.001"], timeout=120)
timeouts = [l for l in out.splitlines() if "timed out after" in l]
check(f"#12 --timeout-s 0.001 at 8 ranks: exit {rc}, each of {len(timeouts)} timeout line(s) names ranks, "
      "no 'within 0.0 s'",
      rc in (0, 4) and "within 0.0 s" not in out and "waiting on rank  " not in out
      and all(re.search(r"(ranks not arrived: |waiting on rank |to rank |from ranks |ranks 0-)\d", l) for l in timeouts),
      out[-3000:])

subprocess.run(["rm", "-rf", tmp])
finish()
