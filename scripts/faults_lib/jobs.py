# SPDX-License-Identifier: MIT
"""Starting mori-a2a jobs under mpirun (each with its own mark and output reader), the private MPS daemon
(scripts/mori_mps.py), the bystander job and the all-to-all after a case; cleaning up after all of them."""
import os
import shutil
import subprocess
import tempfile
import threading
import time

from .output import ERROR_RE
from .procs import MARK, kill_group, kill_marked, wait_for_rank

import mori_mps  # scripts/ is on sys.path (scripts/faults puts it there)
from mori_results.errors import Malformed
from mori_results.reader import read_json

ROOT = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BYSTANDER_UP_S = 30  # the bystander's rank 1 is up within this, or the case notes it did not come up
AFTER_S = 60  # the all-to-all after a case ends within this, or it is killed (then KILL_S more)
RECOVER_S = 30  # after a failed first try, the all-to-all is tried again for this long ...
RETRY_GAP_S = 3  # ... this far apart
RETRY_MIN_S = 5  # each try gets at least this long; none starts unless it fits before the end of RECOVER_S
OUTPUT_S = 1.0  # output(): after a job's end, the pipe gets this long to drain


class Run:
    def __init__(self, a):
        self.a = a
        self.token = f"{os.getpid()}-{int(time.time())}"
        self.tmp = tempfile.mkdtemp(prefix="mori-faults-")
        self.logs = tempfile.mkdtemp(prefix="mori-faults-logs-")
        # The bystander is ended by us, not by the fault: its temp files are kept apart from the case's.
        self.bystander_tmp = tempfile.mkdtemp(prefix="mori-faults-bystander-")
        self.children = []
        self.mps_env = {}
        self.mps_dir = os.path.join(self.logs, "mps")
        self.n = 0

    def env(self, mark, extra, tmp):
        e = dict(os.environ, TMPDIR=tmp, **self.mps_env, **extra)
        e[MARK] = mark
        e.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        e.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        return e

    def start(self, world, args, mark, extra=None, tmp=None):
        self.n += 1
        cmd = [*self.a.mpirun, "-n", str(world), os.path.join(self.a.bin, "mori-a2a"), "--backend",
               self.a.backend, *args]
        tmp = tmp or self.tmp
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=tmp, text=True,
                             env=self.env(mark, extra or {}, tmp), start_new_session=True, errors="replace")
        p.cmd, p.lines = cmd, []  # (monotonic time, line) as they arrive

        def read():
            for line in p.stdout:
                p.lines.append((time.monotonic(), line))

        threading.Thread(target=read, daemon=True).start()
        self.children.append(p)
        return p

    @staticmethod
    def output(p, settle=OUTPUT_S):
        """The job's output so far (after its end, waits up to `settle` s for the pipe to drain)."""
        end = time.monotonic() + settle
        while p.poll() is not None and not p.stdout.closed and time.monotonic() < end:
            time.sleep(0.05)
            if p.lines and p.lines[-1][0] < time.monotonic() - 0.3:
                break
        return "".join(x for _, x in list(p.lines))

    def cleanup(self):
        for p in self.children:
            kill_group(p)
        kill_marked(self.token, prefix=True)
        if self.mps_env:
            mori_mps.Daemon(self.mps_dir).stop()
        shutil.rmtree(self.tmp, ignore_errors=True)
        shutil.rmtree(self.logs, ignore_errors=True)
        shutil.rmtree(self.bystander_tmp, ignore_errors=True)

    def start_mps(self):
        try:
            self.mps_env = mori_mps.Daemon(self.mps_dir).start()
        except mori_mps.MpsError as e:
            raise SystemExit(f"faults: the private MPS daemon did not start: {e}")

    # ---- the bystander: a concurrent 2-rank job on the same GPU, host sync, long enough to outlive the case ----
    def start_bystander(self, mark):
        """(job, note): note is None when its rank 1 came up within BYSTANDER_UP_S."""
        a = self.a
        p = self.start(2, ["--chunk-kib", str(a.bystander_chunk_kib), "--iters", "100000", "--sync", "host",
                           "--addressing", "ptr", "--timeout-s", str(a.timeout_s + 60)],
                       mark, {"CUDA_VISIBLE_DEVICES": "0"} if a.backend == "gpu" else {}, tmp=self.bystander_tmp)
        if wait_for_rank(p, mark, 1, BYSTANDER_UP_S) is None:
            return p, "did not come up: " + self.output(p)[-300:]
        return p, None

    def stop_bystander(self, p, mark, start_note):
        """(survived, details): still running (or finished clean) when the case is over, no error line."""
        rc = p.poll()
        alive = rc is None
        kill_group(p)
        kill_marked(mark)
        out = self.output(p)
        errors = [m.group(0)[:300] for m in ERROR_RE.finditer(out)]
        survived = (alive or rc == 0) and start_note is None and not errors
        details = {"alive_at_end": alive, "rc": rc, "errors": errors[:4]}
        if not survived:
            details["output_tail"] = out[-800:]
        return survived, details

    # ---- after the case: a short verified all-to-all on the same devices --------------------------------------
    def usable_after(self, mark, world, extra):
        """gpu_usable_after: a short all-to-all (device sync; a graph of 4 on the GPU) exits 0 with nothing wrong.
        `usable` is the first try, right after the case. When it fails, the same job is tried again every
        RETRY_GAP_S for RECOVER_S: `recovered_after_s` says when the devices took a job again (None: not within
        that), `retries` what each try did."""
        res = self.after_job(mark, world, extra, AFTER_S)
        res["retries"] = []
        res["recovered_after_s"] = None
        if res["usable"]:
            return res
        t0 = time.monotonic()
        deadline = t0 + RECOVER_S
        while time.monotonic() + RETRY_GAP_S + RETRY_MIN_S <= deadline:
            time.sleep(RETRY_GAP_S)
            at = round(time.monotonic() - t0 + res["seconds"], 2)
            r = self.after_job(mark, world, extra, deadline - time.monotonic())
            res["retries"].append({"at_s": at, "usable": r["usable"], "rc": r["rc"], "wrong": r["wrong"],
                                   "output_tail": r.get("output_tail", "")[-300:]})
            if r["usable"]:
                res["recovered_after_s"] = at
                break
            if r["rc"] is None:  # it did not end in time: no point in another
                break
        return res

    def after_job(self, mark, world, extra, bound_s):
        a = self.a
        jpath = os.path.join(self.logs, f"after-{self.n + 1}.json")
        t0 = time.monotonic()
        u = self.start(world, ["--chunk-kib", "256", "--iters", "20", "--sync", "device", "--addressing", "ptr",
                               "--timeout-s", str(a.timeout_s), "--json", jpath] +
                       (["--graph", "4"] if a.backend == "gpu" else []), mark, extra)
        try:
            rc = u.wait(timeout=bound_s)
        except subprocess.TimeoutExpired:
            rc = None
            kill_group(u)
        kill_marked(mark)
        wrong = None
        try:  # the tool's report, through the results model's reader
            wrong = read_json(jpath).get("wrong")
        except (Malformed, AttributeError):
            pass
        res = {"usable": rc == 0 and wrong == 0, "rc": rc, "wrong": wrong, "seconds": round(time.monotonic() - t0, 2)}
        if rc != 0:
            res["output_tail"] = self.output(u)[-800:]
        return res
