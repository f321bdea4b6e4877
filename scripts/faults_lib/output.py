# SPDX-License-Identifier: MIT
"""Reading a job's output: the tools' error lines and the ranks they name, the fault announcements, the trace of
bootstrap steps, and what mpirun reports about its ranks. `lines` are [(monotonic time, line)] as they arrived."""
import re

ERROR_RE = re.compile(r"^(mori-[\w-]+): error \(rank (\d+)\): (.*)$", re.M)
# On a job of several nodes the ranks follow their node: "ranks not arrived: nodeB: 4,5".
NAMED_RE = re.compile(
    r"(?:ranks not arrived: |no fd arrived from ranks |waiting on rank |sending to rank )(?:[^\s:;]+: )?([\d,]+)")
TIMEOUT_RE = re.compile(r"timed out|waited more than")  # bootstrap/FdChannel steps; the device barrier's bound
ANNOUNCE_RE = re.compile(r"^MORI_FAULT: rank (\d+) entering the timed loop (\S+)$")  # lib/src/a2a/a2a.cpp
# lib/src/comm/bootstrap.cpp at --log-level trace: a bootstrap step that completed on that rank.
STEP_RE = re.compile(r"\brank (\d+) pid \d+\] \[trace\] bootstrap: step '([^']+)' done")
# Open MPI's mpirun about a rank that failed. MPICH's mpiexec (Hydra) names a failed process by its PID only ("BAD
# TERMINATION ... PID N ... EXIT CODE: N"), never by rank, so under it these match nothing and each survivor's exit
# code is inferred from its own error lines (read_output); the faulty rank is then named by the survivors alone.
MPIRUN_RANK_RE = re.compile(r"process rank (\d+) with PID \d+ on node \S+ exited on signal (\d+)")
MPIRUN_EXIT_RE = re.compile(r"Process name:\s+\[\[\d+,\d+\],(\d+)\]\s+Exit code:\s+(\d+)")


def error_lines(out):
    """{rank: {"lines": [...], "names": {ranks named}}} from the tools' error lines."""
    ranks = {}
    for m in ERROR_RE.finditer(out):
        r = ranks.setdefault(int(m.group(2)), {"lines": [], "names": set()})
        r["lines"].append(m.group(0)[:400])
        for n in NAMED_RE.finditer(m.group(3)):
            r["names"].update(int(x) for x in n.group(1).split(",") if x)
    return ranks


def mpirun_reports(out):
    """{rank: {"signal": N} and/or {"exit_code": N}} from mpirun's own report of failed ranks."""
    by_mpirun = {int(m.group(1)): {"signal": int(m.group(2))} for m in MPIRUN_RANK_RE.finditer(out)}
    for m in MPIRUN_EXIT_RE.finditer(out):
        by_mpirun.setdefault(int(m.group(1)), {})["exit_code"] = int(m.group(2))
    return by_mpirun


def read_output(out, world, faulty):
    """(survivors, mpirun's reports, the faulty rank's error lines): per survivor its exit code (from mpirun, or
    inferred from its message), its error lines and the ranks they name."""
    ranks, by_mpirun = error_lines(out), mpirun_reports(out)
    survivors = []
    for rank in range(world):
        if rank == faulty:
            continue
        r = ranks.get(rank, {"lines": [], "names": set()})
        code, source = None, None
        if "exit_code" in by_mpirun.get(rank, {}):
            code, source = by_mpirun[rank]["exit_code"], "mpirun"
        elif r["lines"]:
            # tool_main maps a TimeoutError to 4 and other errors to their code (3: runtime); inferred from the
            # message when mpirun reports another rank's status.
            code, source = (4 if any(TIMEOUT_RE.search(x) for x in r["lines"]) else 3), "message"
        survivors.append({"rank": rank, "exit_code": code, "exit_code_source": source, "lines": r["lines"][:4],
                          "names_missing": sorted(r["names"])})
    return survivors, by_mpirun, ranks.get(faulty, {"lines": []})["lines"][:4]


def announcement(lines, rank, graph):
    """(time, tag) of the rank's first announcement of a device-sync timed loop (of the graph row if graph, else of
    a stream row), or (None, None)."""
    for t, line in list(lines):
        m = ANNOUNCE_RE.match(line)
        if m and int(m.group(1)) == rank and m.group(2).endswith(".graph") == graph:
            return t, m.group(2)
    return None, None


def steps_done(lines, rank):
    """The bootstrap steps the rank logged as completed (at --log-level trace), in order."""
    return [m.group(2) for _, line in list(lines) if (m := STEP_RE.search(line)) and int(m.group(1)) == rank]


def landing(lines, rank, tag, sent):
    """Where a signal to the rank landed: "not-sent"; "before-announcement" (tag None: the timed loop was not
    announced); "unknown" (the rank logged no completed step, so the trace level was off); "after-timed-loop" (the
    rank completed the row's <tag>.times step, the exchange right after the loop); else "timed-loop"."""
    if not sent:
        return "not-sent"
    if tag is None:
        return "before-announcement"
    steps = steps_done(lines, rank)
    if not steps:
        return "unknown"
    return "after-timed-loop" if tag + ".times" in steps else "timed-loop"


def first_timeout_report(lines, faulty):
    """Time of the first timeout error line of a rank other than the faulty one, or None."""
    return next((t for t, line in list(lines) if (m := ERROR_RE.match(line)) and int(m.group(2)) != faulty
                 and TIMEOUT_RE.search(line)), None)
