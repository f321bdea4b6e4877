# SPDX-License-Identifier: MIT
"""The tools scripts/evidence runs and the revision they stand for (docs/evidence.md): the tree's revision and
whether it is clean (git, or --revision and --tree-clean, or an install's tools), building the tools at it, or
checking that the tools --bin gives were built from it."""
import json
import os
import re
import shutil
import time

from evidence_lib.common import BUILD_BUDGET_S, BUILD_DIR, ROOT, Usage
from evidence_lib.jobs import git, sh
from evidence_lib.plan import folder_suffix
from mori_results import machine
from mori_results.errors import Malformed
from mori_results.reader import read_json


def tree_revision(a):
    """(revision, clean, how clean was found) of the tree, from git where there is a .git, else from --bin's tools
    (an install) or from --revision and --tree-clean (a copy of the tree); Usage where none can say."""
    head = git("rev-parse", "HEAD")
    if head:
        if a.revision and not head.startswith(a.revision):
            raise Usage(f"--revision {a.revision}: the tree is at {head}")
        # An evidence folder of this revision (what --resume continues) is output, not a change to the tree.
        own = re.compile(r"\?\? results/(lab/)?[^/]+/" + re.escape(head[:12]) + re.escape(folder_suffix(a.preset))
                         + r"(-dirty)?/")
        status = git("status", "--porcelain", "--untracked-files=all")
        clean = status is not None and all(own.match(ln) for ln in status.splitlines())
        return head, clean, "git status --porcelain (this revision's evidence folders aside)"
    if not a.revision and a.bin:  # an install (no .git): the tools say what they were built from
        head, tools_clean, why = machine.tools_revision(a.bin)
        if not head:
            raise Usage(f"{ROOT} has no git metadata and the tools cannot say their revision ({why}): give "
                        "--revision COMMIT (and --tree-clean where the tree was clean at it)")
        return head, tools_clean is True, "the tools' --version (no .git here: an installed copy)"
    # a copy of the tree without its .git folder: the caller states what it is
    if not a.revision:
        raise Usage(f"{ROOT} has no git metadata: give --revision COMMIT (and --tree-clean where the tree "
                    "copied here was clean at it), or --bin DIR, whose tools' --version states it")
    clean = a.tree_clean
    return a.revision, clean, ("--tree-clean (stated by the caller; no .git here)" if clean else
                               "unknown (no .git here)")


class Tools:
    """Evidence's build or check of the tools (self.bin, self.man["build"])."""

    def build(self):
        if self.a.bin:
            self.bin = os.path.abspath(self.a.bin)
            self.man["build"] = {"bin": self.bin, "built": False}
            return None
        self.bin = os.path.join(ROOT, BUILD_DIR, "bin")
        gen = ["-G", "Ninja"] if shutil.which("ninja") and not os.path.exists(
            os.path.join(ROOT, BUILD_DIR, "CMakeCache.txt")) else []
        t0 = time.monotonic()
        rev = [] if git("rev-parse", "HEAD") else [f"-DMORI_GIT_REV={self.head}",
                                                       f"-DMORI_GIT_CLEAN={'ON' if self.clean else 'OFF'}"]
        rc, out = sh(["cmake", "-S", ROOT, "-B", os.path.join(ROOT, BUILD_DIR), *gen, "-DCMAKE_BUILD_TYPE=Release",
                      "-DMORI_BUILD_TESTS=OFF", *rev], timeout=BUILD_BUDGET_S)
        if rc == 0:
            rc, out2 = sh(["cmake", "--build", os.path.join(ROOT, BUILD_DIR), "-j", str(os.cpu_count() or 2)],
                          timeout=max(BUILD_BUDGET_S - (time.monotonic() - t0), 30))
            out += out2
        self.write("build.txt", out)
        self.man["build"] = {"bin": self.bin, "built": True, "exit_code": rc,
                             "wall_s": round(time.monotonic() - t0, 2), "outputs": ["build.txt"]}
        self.save()
        return None if rc == 0 else f"the build failed (exit {rc}; {self.dir}/build.txt)"

    def check_binaries(self, head, clean):
        """Where the tools' reports carry meta.git_revision / meta.git_clean, they must be this commit, clean."""
        path = os.path.join(self.work, "probe-revision.json")
        sh([os.path.join(self.bin, "mori-probe"), "--backend", "host", "--json", path], timeout=60)
        try:
            meta = read_json(path).get("meta", {})
        except (Malformed, AttributeError):
            return f"{self.bin}/mori-probe wrote no report"
        rev, tools_clean = meta.get("git_revision"), meta.get("git_clean")
        self.man["build"]["tools_revision"], self.man["build"]["tools_clean"] = rev, tools_clean
        if "git_clean" not in meta:
            self.man["build"]["revision_check"] = "not possible: the tools' reports carry no meta.git_clean"
            return None
        if not isinstance(rev, str) or len(rev) < 7 or not head.startswith(rev):
            return f"{self.bin} was built from {rev}, the tree is at {head}: build again (or drop --bin)"
        if clean and tools_clean is not True:
            return (f"{self.bin} was built from a tree not known to be clean (meta.git_clean "
                    f"{json.dumps(tools_clean)})")
        self.man["build"]["revision_check"] = "ok"
        return None
