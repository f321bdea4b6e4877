# SPDX-License-Identifier: MIT
"""The steps of scripts/evidence (docs/evidence.md): one command run as a step against the deadline (its output,
exit code, status and the GPUs' state before and after it, recorded in the manifest), where a step's ranks go,
and the steps of kind tool (each mori-a2a row's plan checked against the plan table), command, faults,
matrix-sweep and summary."""
import os
import shutil
import sys
import time

import mori_mps
from evidence_lib.common import HERE
from evidence_lib.gpus import gpu_state
from evidence_lib.jobs import sh
from mori_results import machine, plan_check
from mori_results.errors import Malformed
from mori_results.reader import read_json


class Steps:
    """Evidence's steps: each writes NAME.txt (and its tool's NAME.json) and records itself in the manifest."""

    def run_step(self, name, cmd, budget, env=None, gpu=True, expect=0, outputs=(), check=None, reserve=True):
        if budget > self.left(reserve):
            self.skip(name, f"its budget ({budget} s) does not fit before the deadline ({self.left(reserve):.0f} s "
                      "left for it)")
            return None
        step = {"name": name, "command": cmd, "budget_s": budget}
        if env:
            step["env"] = env
        if gpu and self.kind != "host":
            step["gpu_before"] = gpu_state()
        t0 = time.monotonic()
        rc, out = sh(cmd, timeout=budget, env=dict(self.env, **(env or {})))
        step["wall_s"] = round(time.monotonic() - t0, 2)
        if gpu and self.kind != "host":
            step["gpu_after"] = gpu_state()
        self.write(f"{name}.txt", "$ " + " ".join(cmd) + "\n" + out)
        step["exit_code"] = rc
        step["outputs"] = [f"{name}.txt"] + [o for o in outputs if os.path.exists(os.path.join(self.dir, o))]
        why = None
        if rc == 124:
            step["status"] = "timeout"
        else:
            why = f"exit {rc}, expected {expect}" if rc != expect else (check() if check else None)
            step["status"] = "failed" if why else "ok"
        if why:
            step["why"] = why
        self.record(step)
        print(f"evidence: {name}: {step['status']} ({step['wall_s']} s{', ' + why if why else ''})", flush=True)
        return step

    def all_gpus(self):
        """The GPUs a preset's "gpus" means: this machine's, or on the host runtime the preset's host_gpus (the
        node it rehearses; the host runtime has one device whatever the count, so only the rank count and the
        planned CUDA_VISIBLE_DEVICES stand for the subset)."""
        return self.host_gpus if self.kind == "host" and self.host_gpus else self.ngpu

    def rank_args(self, ranks):
        """(the launcher's -n, or None and the mps_placement) for `ranks` (an integer or "gpus"): on a machine of
        one GPU, ranks that share it go under a private MPS daemon (scripts/mori_results/machine.py)."""
        n = self.all_gpus() if ranks == "gpus" else int(ranks)
        mps_placement = machine.mps_placement(n, self.ngpu, os.path.join(self.work, "mps"),
                                              one_gpu_machines_only=True)
        return (None, mps_placement) if mps_placement else (["-n", str(n)], None)

    def tool_step(self, s):
        name, out_json = s["name"], f"{s['name']}.json"
        args = [a.format(out=self.dir, bin=self.bin, work=self.work) for a in s.get("args", [])]
        args += s.get("host_args" if self.kind == "host" else "gpu_args", [])
        env = {k: v.format(out=self.dir, bin=self.bin, work=self.work) for k, v in s.get("env", {}).items()}
        backend = "host" if self.kind == "host" else "gpu"
        ranks = s.get("ranks", 1)
        if "gpus" in s:  # one rank on each of the first N GPUs: a CUDA_VISIBLE_DEVICES subset
            ranks = int(s["gpus"])
            env["CUDA_VISIBLE_DEVICES"] = ",".join(str(i) for i in range(ranks))
        n_args, mps_placement = self.rank_args(ranks)
        if mps_placement:
            try:
                mps_placement.start()
            except mori_mps.MpsError as e:
                self.record({"name": name, "command": [], "wall_s": 0, "exit_code": None, "status": "failed",
                             "why": f"MPS: {e}", "outputs": []})
                return
            n_args = mps_placement.mpirun_args()
        cmd = [*self.mpirun, *n_args, os.path.join(self.bin, s["tool"]), "--backend", backend, "--timeout-s", "30",
               *args, "--json", os.path.join(self.dir, out_json)]
        checked = {}
        verdict = self.tool_verdict(s, out_json, checked)
        try:
            step = self.run_step(name, cmd, s["budget_s"], env=env, expect=s.get("expect", 0),
                                 outputs=[out_json], check=verdict)
            if step is not None and s["tool"] == "mori-a2a":
                if "plan_check" not in checked:  # the exit was not the expected one: check the rows all the same
                    verdict()
                if "plan_check" in checked:
                    step["plan_check"] = checked["plan_check"]
                    why = plan_check.verdict(checked["plan_check"])
                    if why and step["status"] == "ok":
                        step["status"], step["why"] = "failed", why
                    self.record(step)
        finally:
            if mps_placement and not mps_placement.stop():
                print(f"evidence: warning: the MPS daemon under {mps_placement.daemon.base} did not stop",
                      flush=True)

    def tool_verdict(self, s, out_json, checked):
        """The check of a tool step's report once it exited as expected (None: as expected): every mori-a2a row's
        plan against the table (kept in checked["plan_check"]), and a mutant's wrong > 0."""

        def verdict():
            if s["tool"] != "mori-a2a" and not s.get("expect_wrong"):
                return None
            try:
                doc = read_json(os.path.join(self.dir, out_json))
            except Malformed as e:
                return f"no report ({e.why})"
            why = None
            if s["tool"] == "mori-a2a" and isinstance(doc, dict):
                # Every row's plan against the hand-written table (docs/evidence.md "The plan check").
                plan_placement = (self.preset.get("expect_placement") or {}).get(self.kind)
                checked["plan_check"] = plan_check.check_report(self.table, doc, out_json, plan_placement)
                why = plan_check.verdict(checked["plan_check"])
            if s.get("expect_wrong"):
                wrong = doc.get("wrong") if isinstance(doc, dict) else None
                if not (isinstance(wrong, int) and wrong > 0):
                    why = "; ".join(w for w in (why, f"wrong {wrong}, expected > 0") if w)
            return why

        return verdict

    def command_step(self, s):
        """A command captured as it is (nvidia-smi topo -m, nvlink --status): its output is the evidence."""
        if not shutil.which(s["args"][0]):
            return self.missing(s["name"], s.get("required", s["args"][0]), f"{s['args'][0]} is not on PATH")
        self.run_step(s["name"], list(s["args"]), s["budget_s"], gpu=False)

    def faults_step(self, s):
        args = s.get("args", []) if self.kind != "host" else s.get("host_args", s.get("args", []))
        cmd = [sys.executable, os.path.join(HERE, "faults"), "--backend", "host" if self.kind == "host" else "gpu",
               "--bin", self.bin, "--budget-s", str(max(s["budget_s"] - 30, 60)), *args,
               "--json", os.path.join(self.dir, "faults.json")]
        self.run_step(s["name"], cmd, s["budget_s"], outputs=["faults.json"])

    def matrix_sweep_step(self, s):
        n = str(max(self.ngpu, 2))
        extra = ["--", "--backend", "host"] if self.kind == "host" else []
        cmd = [os.path.join(HERE, "matrix-sweep"), "--world", n, "--out", os.path.join(self.dir, "matrix-sweep"),
               *extra]
        self.run_step(s["name"], cmd, s["budget_s"], env={"MORI_BIN": self.bin},
                      outputs=["matrix-sweep/matrix-sweep.json", "matrix-sweep/probe.json"])

    def summary_step(self, s):
        self.run_step(s["name"], [sys.executable, os.path.join(HERE, "render-results"), "--summary", self.dir],
                      s["budget_s"], gpu=False, outputs=["summary.md"], reserve=False)
