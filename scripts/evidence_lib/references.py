# SPDX-License-Identifier: MIT
"""The references scripts/evidence runs beside mori (docs/evidence.md): nccl-tests built from its tarball, torch
SymmetricMemory and NCCL through scripts/compare; a reference that cannot run is missing (the run fails) unless
--waive names it (recorded in the manifest's waived[])."""
import glob
import os
import shutil
import sys
import tarfile

from evidence_lib.common import HERE, ROOT
from evidence_lib.jobs import sh


class References:
    """Evidence's nccl-tests and compare steps, and the step of a reference that is missing."""

    def missing(self, name, ref, reason):
        waived = ref in self.a.waive
        step = {"name": name, "command": [], "wall_s": 0, "exit_code": None, "outputs": [],
                "status": "waived" if waived else "missing", "why": reason}
        if waived:
            self.man["waived"] = [w for w in self.man["waived"] if w["name"] != ref] + [
                {"name": ref, "reason": reason, "by": "--waive " + ref}]
        self.record(step)
        print(f"evidence: {name}: {step['status']} ({reason})", flush=True)

    def nccl_tests_step(self, s):
        tar = self.a.nccl_tests_tarball or next(iter(sorted(glob.glob(os.path.join(ROOT, "build-refs",
                                                                                   "nccl-tests*.tar.gz")))), None)
        if not tar or not os.path.isfile(tar):
            return self.missing(s["name"], s["required"], "no nccl-tests tarball (--nccl-tests-tarball, or "
                                "build-refs/nccl-tests*.tar.gz in the tree)")
        src = os.path.join(ROOT, "build-refs", "nccl-tests-src")
        shutil.rmtree(src, ignore_errors=True)
        os.makedirs(src)
        try:
            with tarfile.open(tar) as t:
                t.extractall(src, filter="data") if hasattr(tarfile, "data_filter") else t.extractall(src)
        except (OSError, tarfile.TarError) as e:
            return self.missing(s["name"], s["required"], f"{tar}: {e}")
        tops = [d for d in glob.glob(os.path.join(src, "*")) if os.path.isdir(d)]
        top = tops[0] if len(tops) == 1 else src
        self.nccl_tests = os.path.join(ROOT, "build-refs", "nccl-tests")
        step = self.run_step(s["name"], [os.path.join(HERE, "build-nccl-tests"), top, self.nccl_tests],
                             s["budget_s"], gpu=False)
        if not step or step["status"] != "ok":
            self.nccl_tests = None
        if step and step["status"] != "ok":  # the reference could not be built: missing, or waived
            ref = s["required"]
            step["status"] = "waived" if ref in self.a.waive else "missing"
            if ref in self.a.waive:
                self.man["waived"] = [w for w in self.man["waived"] if w["name"] != ref] + [
                    {"name": ref, "reason": f"the build failed ({step.get('why')}; {s['name']}.txt)",
                     "by": "--waive " + ref}]
            self.record(step)
            print(f"evidence: {s['name']}: {step['status']} (nccl-tests could not be built)", flush=True)

    def compare_step(self, s):
        rc, out = sh([sys.executable, "-c", "import torch, torch.distributed"], timeout=120)
        if rc != 0:
            return self.missing(s["name"], s["required"], "torch does not import: " + out.strip()[-300:])
        cmd = [sys.executable, os.path.join(HERE, "compare"), *s.get("args", []), "--json",
               os.path.join(self.dir, "compare.json")]
        if getattr(self, "nccl_tests", None):
            cmd += ["--nccl-tests", self.nccl_tests]
        mori = os.path.join(self.dir, "a2a-r1.json")
        if os.path.exists(mori):
            cmd += ["--mori-json", mori]
        self.run_step(s["name"], cmd, s["budget_s"], outputs=["compare.json"])
