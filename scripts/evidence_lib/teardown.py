# SPDX-License-Identifier: MIT
"""The teardown matrix of scripts/evidence (docs/evidence.md): every scenario of mori-teardown-repro (or those the
step lists) at each world, each job bounded, summarized from its journals and merged into one report."""
import json
import os
import shutil
import time

import mori_mps
from evidence_lib.common import TEARDOWN_JOB_S
from evidence_lib.gpus import gpu_state
from evidence_lib.jobs import sh
from mori_results.errors import Malformed
from mori_results.reader import read_json


class Teardown:
    """Evidence's teardown-matrix step."""

    def teardown_step(self, s):
        """Every scenario (or those listed) at each world, summarized from its journals, merged into one report."""
        name, tool = s["name"], os.path.join(self.bin, "mori-teardown-repro")
        rc, out = sh([tool, "--list"], timeout=30)
        scenarios = s.get("scenarios") or [ln.split()[0] for ln in out.splitlines() if ln.strip()]
        backend = "host" if self.kind == "host" else "gpu"
        folder = os.path.join(self.work, name)  # per-job reports: merged into NAME.json below
        os.makedirs(folder, exist_ok=True)
        jobs = []
        worlds = s["worlds"]
        if s.get("worlds_up_to_gpus"):  # one rank per GPU, no MPS: the worlds this machine has GPUs for
            worlds = [w for w in worlds if w <= max(self.all_gpus(), 2)]
        repeat = s.get("repeat", 1)  # a race is run N times at each world: how often it breaks is the finding
        for w in worlds:
            for sc in scenarios:
                for i in range(repeat):
                    n_args, mps_placement = self.rank_args(w)
                    jobs.append((w, sc, n_args, mps_placement, f"-r{i + 1}" if repeat > 1 else ""))
        if s["budget_s"] > self.left():
            self.skip(name, f"its budget ({s['budget_s']} s) does not fit before the deadline ({self.left():.0f} s "
                            "left)")
            return
        t0, docs, log, status = time.monotonic(), [], [], "ok"
        end = t0 + s["budget_s"]  # the step's bound: each job gets at most JOB_S and what is left of it
        before = gpu_state() if self.kind != "host" else None
        for w, sc, n_args, mps_placement, tag in jobs:
            if end - time.monotonic() < 5:
                log.append(f"w{w} {sc}{tag}: not run, the step's budget ({s['budget_s']} s) is spent")
                status = "timeout"
                continue
            if mps_placement:
                try:
                    n_args = mps_placement.start().mpirun_args()
                except mori_mps.MpsError as e:
                    log.append(f"w{w} {sc}{tag}: MPS: {e}")
                    status = "failed"
                    continue
            jd = os.path.join(self.work, f"teardown-w{w}-{sc}{tag}")
            shutil.rmtree(jd, ignore_errors=True)
            try:
                rc, out = sh([*self.mpirun, *n_args, tool, "--backend", backend, "--scenario", sc, "--journal-dir",
                              jd, "--timeout-s", "20"], timeout=min(TEARDOWN_JOB_S, end - time.monotonic()),
                             env=self.env)
            finally:  # also when a signal stops the run
                if mps_placement:
                    mps_placement.stop()
            rep = os.path.join(folder, f"w{w}-{sc}{tag}.json")
            rc2, out2 = sh([tool, "--backend", "host", "--summarize", jd, "--json", rep], timeout=60)
            log.append(f"w{w} {sc}{tag}: mpirun exit {rc}; summary exit {rc2}\n{out[-2000:]}{out2[-500:]}")
            try:
                docs.append(read_json(rep))
            except Malformed:
                status = "failed"
        rows = [x for d in docs for x in d.get("scenarios", [])]
        # The tool judges (as_expected: a race's fault is expected too); reports without it are judged here.
        unexpected = [f"{x.get('name')} w{x.get('world')}: {x.get('outcome')}" for x in rows
                      if not x.get("as_expected", x.get("outcome") == x.get("expected"))]
        if docs:
            merged = {"schema": docs[0].get("schema", "mori.teardown/1"), "meta": docs[0].get("meta"),
                      "config": {"matrix": True, "reports": len(docs), "worlds": s["worlds"], "repeat": repeat},
                      "scenarios": rows}
            self.write(f"{name}.json", json.dumps(merged, indent=2))
        self.write(f"{name}.txt", "\n".join(log) + "\n")
        if unexpected or (not docs and status == "ok"):
            status = "failed"
        step = {"name": name, "command": [tool, "--scenario", ",".join(scenarios), "worlds",
                                          ",".join(map(str, worlds))] + (["repeat", str(repeat)] if repeat > 1 else []),
                "wall_s": round(time.monotonic() - t0, 2),
                "exit_code": {"ok": 0, "timeout": 124}.get(status, 1),
                "status": status, "outputs": [f"{name}.txt"] + ([f"{name}.json"] if docs else []),
                "budget_s": s["budget_s"]}
        if before is not None:
            step["gpu_before"], step["gpu_after"] = before, gpu_state()
        if unexpected:
            step["why"] = "outcome other than expected: " + "; ".join(unexpected)
        self.record(step)
        print(f"evidence: {name}: {status} ({step['wall_s']} s, {len(rows)} scenario rows)", flush=True)
