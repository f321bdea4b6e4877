# SPDX-License-Identifier: MIT
"""Evidence, one run of scripts/evidence (docs/evidence.md): the checks before anything is built (preset, --out,
the tree's revision and clean state, the plan table, --steps), the tools built or checked, the machine's kind and
folder, then the preset's steps in priority order while their budgets fit before the deadline, and the end."""
import os
import re
import shutil
import sys
import tempfile
import time

import mori_launcher
from evidence_lib import plan as presets_plan
from evidence_lib.common import FINAL, MACHINE_NAME, ROOT, SCHEMA, Usage
from evidence_lib.folder import Folder
from evidence_lib.gpus import count_gpus, machine_name
from evidence_lib.jobs import boot_id
from evidence_lib.references import References
from evidence_lib.steps import Steps
from evidence_lib.summary import Summary
from evidence_lib.teardown import Teardown
from evidence_lib.tools import Tools, tree_revision
from mori_results import env as envvars
from mori_results import plan_check
from mori_results.errors import Malformed
from mori_results.files import check_output_folder, remove_made


class Evidence(Folder, Tools, Steps, Teardown, References, Summary):
    def __init__(self, a):
        self.a = a
        self.made = None  # the folder tree this call made, until its first manifest is written
        self.deadline = time.monotonic() + a.deadline_s
        self.reserve_s = 0
        self.preset = {}
        self.bin = None
        self.kind = None
        self.ngpu = 0
        self.dir = None
        self.man = None
        self.cut = set()  # steps the deadline left out in this call
        self.lock = None
        self.env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT=envvars.read("OMPI_ALLOW_RUN_AS_ROOT", "1"),
                        OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=envvars.read("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"),
                        NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1")

    @property
    def mpirun(self):
        """MORI_MPIRUN, else the launcher of the MPI the tools in self.bin were built with (mori_launcher.py)."""
        return mori_launcher.mpirun_command(self.bin)

    def left(self, reserve=True):
        """Seconds left for a step; the summary's budget is kept back for it (it runs last and is what a reader
        opens first)."""
        return self.deadline - time.monotonic() - (self.reserve_s if reserve else 0)

    def plan_steps(self, preset):
        """The preset's steps for this machine's kind, in order (evidence_lib/plan.py)."""
        return presets_plan.plan_steps(preset, self.kind, self.all_gpus)

    def main(self):
        a = self.a
        presets = presets_plan.load_presets()
        if a.preset not in presets:
            raise Usage(f"--preset {a.preset}: no such preset (scripts/evidence --list)")
        try:  # a folder this process can write, or a new name under one: before anything is built
            check_output_folder(a.out, "--out")
        except Malformed as e:
            raise Usage(str(e))
        head, clean, self.clean_by = tree_revision(a)
        if not clean and not a.allow_dirty:
            print("evidence: the tree is dirty (git status --porcelain is not empty, or no .git and no "
                  "--tree-clean); commit first, or --allow-dirty to write under results/lab/", file=sys.stderr)
            return 2
        self.head, self.clean = head, clean
        try:
            self.table = plan_check.load_table(a.plan_table)
        except plan_check.TableError as e:
            raise Usage(f"--plan-table: {e}")
        self.host_gpus = presets[a.preset].get("host_gpus")
        if a.steps_text is not None and "" in a.steps:
            raise Usage(f"--steps {a.steps_text!r}: an empty step name (NAME,... of the preset: scripts/evidence "
                        "--list)")
        unknown = [n for n in a.steps if n not in {s["name"] for s in presets[a.preset]["steps"]}]
        if unknown:
            raise Usage(f"--steps {unknown[0]}: no such step in preset {a.preset} (scripts/evidence --list)")
        rev = head[:12]
        self.work = tempfile.mkdtemp(prefix="mori-evidence-")
        try:
            return self.run(presets[a.preset], head, rev, clean)
        except (Usage, Malformed):  # a refusal or a full file system before the first manifest: nothing left
            remove_made(self.made)
            raise
        finally:
            shutil.rmtree(self.work, ignore_errors=True)

    def run(self, preset, head, rev, clean):
        a = self.a
        results = os.path.abspath(a.out or os.path.join(ROOT, "results"))
        stage = self.start(head, clean)
        err = self.build()
        self.ngpu, gpu_name = (0, None) if err or a.backend == "host" else count_gpus(self.bin, self.work)
        if a.bin:  # checked before anything is written where results go
            bad = self.check_binaries(head, clean)
            if bad and clean:
                print(f"evidence: {bad}", file=sys.stderr)
                return 2
            if bad:  # --allow-dirty: recorded; the folder is under lab/ and feeds nothing
                self.man["build"]["revision_check"] = bad
        self.kind = "host" if self.ngpu == 0 else "gpu" if self.ngpu == 1 else "peers"
        machine = a.machine or machine_name(self.kind, self.ngpu, gpu_name)
        if not re.fullmatch(MACHINE_NAME, machine):
            raise Usage(f"--machine {machine}: letters, digits, '.', '_' and '-' only")
        # One folder per machine, revision and preset: default and host (the default's steps on the host runtime)
        # are the machine's evidence, every other preset gets its own folder beside it (docs/evidence.md).
        name = rev + presets_plan.folder_suffix(a.preset)
        sub = [machine, name] if clean else ["lab", machine, name + "-dirty"]
        self.open_folder(os.path.join(results, *sub), head, stage)
        self.man.update({"machine": machine, "kind": self.kind, "gpus": self.ngpu, "gpu_name": gpu_name,
                         "complete": False})
        self.save()
        self.made = None  # the folder holds a manifest now: it stays (--resume continues it)
        print(f"evidence: {machine} ({self.kind}, {self.ngpu} GPU(s)), preset {a.preset}, {self.dir}", flush=True)
        if err:
            print(f"evidence: {err}", file=sys.stderr)
            self.archive(results)
            return 3
        self.preset = preset
        plan = self.plan_steps(preset)
        self.run_plan(plan)
        return self.finish(plan, results)

    def start(self, head, clean):
        """The manifest begun in a staging folder, where the build writes first: the machine, and so the folder,
        is known only once the tools can count its GPUs."""
        a = self.a
        stage = os.path.join(self.work, "stage")
        os.makedirs(stage)
        self.dir = stage
        self.man = {"schema": SCHEMA, "revision": head, "clean": clean, "clean_by": self.clean_by, "machine": None,
                    "start_id": boot_id(), "preset": a.preset, "argv": sys.argv[1:],
                    "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "deadline_s": a.deadline_s,
                    "steps": [], "skipped": [], "waived": [], "complete": False}
        return stage

    def run_plan(self, plan):
        """The plan's steps in order: a step whose budget does not fit before the deadline stops the rest (listed
        in skipped[], --resume continues); the summary always runs, on its budget kept back."""
        a = self.a
        # A resumed run continues where the last one stopped: a step that ran (whatever its status) is not run
        # again unless --steps names it.
        done = {s["name"] for s in self.man["steps"] if s["status"] in FINAL}
        kinds = {"tool": self.tool_step, "teardown-matrix": self.teardown_step, "nccl-tests": self.nccl_tests_step,
                 "compare": self.compare_step, "faults": self.faults_step, "matrix-sweep": self.matrix_sweep_step,
                 "command": self.command_step, "summary": self.summary_step}
        self.reserve_s = sum(s["budget_s"] for s in plan if s["kind"] == "summary" and not s.get("skip"))
        stopped = None  # the first step whose budget did not fit: the order is kept, the rest wait for --resume
        for s in plan:
            if s.get("skip"):
                self.skip(s["name"], s["skip"], cut=False)
                continue
            if a.steps and s["name"] not in a.steps and s["kind"] != "summary":
                continue
            if s["name"] in done and s["kind"] != "summary" and s["name"] not in a.steps:
                continue
            if stopped and s["kind"] != "summary":
                self.skip(s["name"], f"after {stopped}, which did not fit before the deadline (steps run in "
                          "priority order; --resume continues)")
                continue
            if s["kind"] != "summary" and s["budget_s"] > self.left():
                stopped = s["name"]
                self.skip(s["name"], f"its budget ({s['budget_s']} s) does not fit before the deadline "
                          f"({self.left():.0f} s left for it)")
                continue
            kinds[s["kind"]](s)
