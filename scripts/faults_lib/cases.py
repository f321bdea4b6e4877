# SPDX-License-Identifier: MIT
"""The cases: each runs one faulty mori-a2a job (rank FAULTY is the faulty one) next to a bystander job, then
records what the survivors did, what was left and whether the devices are usable, and the checks behind its
verdict (docs/reliability.md "GPU fault suite")."""
import os
import shlex
import signal
import subprocess
import time

from .leftovers import device_memory, gpu_memory_used, left_behind_after, nothing_left, snapshot
from .output import announcement, first_timeout_report, landing, read_output, steps_done
from .procs import kill_group, kill_marked, marked, rank_pids, wait_for_rank, wait_gone

CASES = ["kill-timed-device", "kill-timed-graph", "no-launch", "stall", "die-in-rendezvous"]
SIGNALLED = {"kill-timed-device": signal.SIGKILL, "kill-timed-graph": signal.SIGKILL, "stall": signal.SIGSTOP}
FAULTY = 1
JOB_GRACE_S = 30  # a job still running T + this after the fault (no-launch: after its start) is hung, and killed


def case_args(a, name):
    """(mori-a2a arguments, extra environment) of a case's job."""
    # posix_fd: the FdChannel exchange (where rendezvous.exchange fires, and whose sockets are checked) on every
    # backend; "auto" may pick fabric handles, which skip it.
    chunk, iters = a.chunk_kib, a.iters
    if name == "kill-timed-graph":
        chunk, iters = a.graph_chunk_kib, a.graph_iters
    elif name == "no-launch":
        iters = 1000  # the reference loops before the device-sync row end quickly, so the fault comes early
    args = ["--chunk-kib", str(chunk), "--iters", str(iters), "--timeout-s", str(a.timeout_s), "--sync", "device",
            "--addressing", "ptr", "--handle-type", "posix_fd"]
    if name == "kill-timed-graph":
        # The graph row's timed phase is max(20, ceil(iters / K)) replays of K iterations (docs/mori-a2a.md):
        # with few --iters the rows before it stay short and the phase is 20 replays, K x 20 iterations.
        args += ["--graph", str(a.graph_k)]
    if name in SIGNALLED:
        # a2a.announce: the rank says when it enters a device-sync timed loop; the trace level logs each
        # bootstrap step a rank completes, so the step after the timed loop (<row>.times) shows whether the
        # signalled rank had left that loop.
        return args, {"MORI_FAULT": f"a2a.announce:{FAULTY}", "MORI_LOG_LEVEL": "trace"}
    if name == "no-launch":
        return args, {"MORI_FAULT": f"a2a.no-launch:{FAULTY}"}
    return args, {"MORI_FAULT": f"rendezvous.exchange:{FAULTY}"}


class Case:
    def __init__(self, run, name, cfg):
        self.run, self.a, self.name, self.cfg = run, run.a, name, cfg
        self.mark = f"{run.token}-{run.n + 1}"
        self.extra_vis = {"CUDA_VISIBLE_DEVICES": cfg["visible"]} if cfg["visible"] is not None else {}
        self.fault = {"rank": FAULTY}
        self.res = {"name": name, "config": cfg["name"], "world": cfg["world"], "gpus": cfg["gpus"],
                    "mps": bool(run.mps_env), "timeout_s": self.a.timeout_s, "faulty_rank": FAULTY}
        self.t_start = self.t_fault = None

    def execute(self):
        t0 = time.monotonic()
        before = snapshot(self.run.tmp)
        mem_before = gpu_memory_used() if self.a.backend == "gpu" else None
        bystander = self.start_bystander()
        p = self.start_job()
        self.inject(p)
        self.res["fault"] = self.fault
        rc, hung = self.wait_job(p)
        self.read_job(p, rc, hung)
        self.stop_bystander(bystander)
        # Leftovers of the case itself (before the next job can add its own), then the devices.
        lb = left_behind_after(before, self.run.tmp, self.mark)
        kill_marked(self.mark)
        self.res["gpu_usable_after"] = self.run.usable_after(
            self.mark + "-after", 2 if self.cfg["name"] != "per-gpu" else self.cfg["world"], self.extra_vis)
        lb["device_memory_mib"] = device_memory(mem_before)
        self.res["left_behind"] = lb
        self.res["nothing_left"] = nothing_left(lb)
        self.verdict(rc, hung)
        self.res["wall_seconds"] = round(time.monotonic() - t0, 2)
        return self.res

    def start_bystander(self):
        if not self.a.bystander:
            self.res["other_mps_clients_survived"] = None
            self.res["other_mps_clients"] = {"reason": "--no-bystander"}
            return None
        p, note = self.run.start_bystander(self.mark + "-bystander")
        if note is not None:
            self.res["bystander_start"] = note
        return p

    def stop_bystander(self, p):
        if p is not None:
            self.res["other_mps_clients_survived"], self.res["other_mps_clients"] = self.run.stop_bystander(
                p, self.mark + "-bystander", self.res.get("bystander_start"))

    def start_job(self):
        args, fenv = case_args(self.a, self.name)
        self.t_start = time.monotonic()
        p = self.run.start(self.cfg["world"], args, self.mark, {**self.extra_vis, **fenv})
        shown = f"  ({' '.join(f'{k}={v}' for k, v in fenv.items())})" if fenv else ""
        self.res["command"] = shlex.join(p.cmd) + shown
        return p

    # ---- the faults ---------------------------------------------------------------------------------------------
    def inject(self, p):
        if self.name in SIGNALLED:
            self.signal_in_timed_loop(p)
        elif self.name == "die-in-rendezvous":
            self.rank_exits(p)
        else:
            self.fault.update(kind="MORI_FAULT a2a.no-launch")  # its moment is read from the output later

    def signal_in_timed_loop(self, p):
        """The signal goes --settle-s after the faulty rank announces the timed loop (of the graph row for
        kill-timed-graph; the stream row of the same job comes first); without an announcement within
        --announce-limit-s, it goes anyway (and is recorded as having landed before it)."""
        a, graph = self.a, self.name == "kill-timed-graph"
        t_ann, tag, end = None, None, time.monotonic() + a.announce_limit_s
        while tag is None and time.monotonic() < end and p.poll() is None:
            t_ann, tag = announcement(p.lines, FAULTY, graph)
            time.sleep(0.05)
        pid = rank_pids(self.mark).get(FAULTY)
        end = time.monotonic() + a.settle_s
        while time.monotonic() < end and p.poll() is None:
            time.sleep(0.05)
        self.fault["timed_loop"] = tag  # None: not announced within --announce-limit-s
        self.fault["announced_at_s"] = round(t_ann - self.t_start, 2) if t_ann is not None else None
        sig = SIGNALLED[self.name]
        if pid is None or p.poll() is not None:
            self.fault.update(kind="signal", error="the job ended before the fault")
            return
        try:
            os.kill(pid, sig)
            self.t_fault = time.monotonic()
            self.fault.update(kind=sig.name, pid=pid, at_s=round(self.t_fault - self.t_start, 2),
                              basis="signal sent", settle_s=a.settle_s)
        except OSError as e:
            self.fault.update(kind=sig.name, error=str(e))

    def rank_exits(self, p):
        """rendezvous.exchange: the rank's own exit marks the fault; its pid is watched while the job runs."""
        until = self.t_start + self.a.announce_limit_s
        pid = wait_for_rank(p, self.mark, FAULTY, self.a.announce_limit_s)
        if pid is not None:
            wait_gone(p, pid, until)
        self.t_fault = time.monotonic() if pid is not None else self.t_start
        self.fault.update(kind="MORI_FAULT rendezvous.exchange", pid=pid, at_s=round(self.t_fault - self.t_start, 2),
                          basis="faulty rank gone" if pid is not None else "job start (rank not seen)")

    def place_no_launch(self, p):
        """Nothing marks the moment the faulty rank skips its first launch; the survivors' first timeout report
        comes T s after they started waiting on it, so the fault is placed T s before that report (the figure is
        then T plus the time the job took to end after the report). Without a report: the job's start."""
        first = first_timeout_report(p.lines, FAULTY)
        if first is not None:
            self.t_fault = max(self.t_start, first - self.a.timeout_s)
            self.fault.update(at_s=round(self.t_fault - self.t_start, 2), basis="first survivor timeout report - T")
        else:
            self.t_fault = self.t_start
            self.fault.update(at_s=0.0, basis="job start (no survivor timeout report)")

    def landing(self, p):
        """Where the signal landed (docs/reliability.md "GPU fault suite"): only "timed-loop" counts."""
        self.fault["landed"] = landing(p.lines, FAULTY, self.fault.get("timed_loop"), self.t_fault is not None)
        self.fault["in_timed_loop"] = self.fault["landed"] == "timed-loop"
        self.fault["steps_logged"] = len(steps_done(p.lines, FAULTY))

    # ---- after the fault ----------------------------------------------------------------------------------------
    def wait_job(self, p):
        """(mpirun's exit code, hung): the job gets T + JOB_GRACE_S from the fault (or its start), then is killed."""
        limit = self.a.timeout_s + JOB_GRACE_S
        try:
            return p.wait(timeout=max(1.0, limit - (time.monotonic() - (self.t_fault or self.t_start)))), False
        except subprocess.TimeoutExpired:
            kill_group(p)
            return None, True

    def read_job(self, p, rc, hung):
        res, t_end = self.res, time.monotonic()
        if self.name == "no-launch":
            self.place_no_launch(p)
        if self.name == "stall":
            # A stopped rank that mpirun could not end is the suite's own doing: noted, then ended.
            self.fault["alive_after_job"] = any(pid == self.fault.get("pid") for pid, _, _ in marked(self.mark))
            kill_marked(self.mark)
        out = self.run.output(p)
        if self.name in SIGNALLED:
            self.landing(p)
        res["mpirun_rc"], res["hung"] = rc, hung
        res["job_seconds"] = round(t_end - self.t_fault, 2) if self.t_fault is not None else None
        res["since_start_seconds"] = round(t_end - self.t_start, 2)
        res["within_goal"] = res["job_seconds"] is not None and not hung and res["job_seconds"] <= self.a.timeout_s + 5
        survivors, by_mpirun, res["faulty_rank_lines"] = read_output(out, self.cfg["world"], FAULTY)
        res["survivors"] = survivors
        res["named_ranks"] = sorted({r for s in survivors for r in s["names_missing"]})
        named_ranks = FAULTY in res["named_ranks"]
        named_mpirun = FAULTY in by_mpirun
        res["named_missing"] = named_ranks or named_mpirun
        res["named_by"] = [w for w, ok in (("ranks", named_ranks), ("mpirun", named_mpirun)) if ok]
        res["mpirun_reported"] = [{"rank": r, **v} for r, v in sorted(by_mpirun.items())]
        res["output_tail"] = out[-1500:]

    def verdict(self, rc, hung):
        """The checks behind ok, each recorded: all must hold."""
        res = self.res
        checks = {"job_failed": rc not in (0, None), "not_hung": not hung, "within_goal": res["within_goal"],
                  "named_missing": res["named_missing"], "gpu_usable_after": res["gpu_usable_after"]["usable"],
                  "nothing_left": res["nothing_left"],
                  "bystander_survived": res["other_mps_clients_survived"] is not False}
        if self.name in SIGNALLED:
            checks["in_timed_loop"] = self.fault["in_timed_loop"]
        if self.name == "no-launch":
            checks.update(no_launch_checks(res))
        res["checks"] = checks
        res["ok"] = all(checks.values())


def no_launch_checks(res):
    """no-launch: the rank that skips its launches then blocks on the host, so its peers' bounded waits expire
    first: every survivor that reports exits 4 naming exactly that rank, and mpirun passes the 4 on."""
    reported = [s for s in res["survivors"] if s["lines"]]
    codes = [s["exit_code"] for s in res["survivors"] if s["exit_code"] is not None]
    return {"survivors_exit_4": res["mpirun_rc"] == 4 and bool(codes) and all(c == 4 for c in codes),
            "named_exactly_faulty": bool(reported) and all(s["names_missing"] == [FAULTY] for s in reported)}

