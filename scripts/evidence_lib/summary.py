# SPDX-License-Identifier: MIT
"""The end of a scripts/evidence run (docs/evidence.md): whether the folder is complete or a partial run
(--steps), the summary rendered once more from the final manifest, --archive, and the verdict line with the exit
code (0 every step judged ok, 1 one not ok, 4 the deadline cut the run)."""
import os
import subprocess
import sys
import time

from evidence_lib.common import FINAL, HERE


class Summary:
    """Evidence's last part: the manifest closed, the summary, the verdict."""

    def finish(self, plan, results):
        """Closes the manifest (complete, partial, steps_requested, finished), renders the summary again, writes
        --archive, prints the verdict line and returns the exit code."""
        a = self.a
        steps = {s["name"]: s for s in self.man["steps"]}
        wanted = [s["name"] for s in plan if not s.get("skip")]
        self.man["complete"] = all(n in steps and steps[n]["status"] in FINAL for n in wanted)
        # --steps: a partial run by request (docs/evidence.md "Partial runs"): the named steps and the summary are
        # what this call is judged by; the preset's other steps not run make the folder partial, not cut short.
        asked = [s["name"] for s in plan if not s.get("skip") and (s["name"] in a.steps or s["kind"] == "summary")]
        self.man["partial"] = bool(a.steps) and not self.man["complete"]
        self.man["steps_requested"] = list(a.steps) if a.steps else None
        self.man["finished"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.save()
        self.render_summary()
        self.archive(results)
        return self.verdict(steps, wanted, asked if a.steps else wanted)

    def render_summary(self):
        """The summary step ran before the manifest said whether the run is complete: it is rendered once more
        from the final manifest (cheap, bounded; a failure leaves the step's own summary)."""
        if "summary.md" in os.listdir(self.dir):
            try:
                subprocess.run([sys.executable, os.path.join(HERE, "render-results"), "--summary", self.dir],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60, check=False)
            except subprocess.TimeoutExpired:
                pass

    def verdict(self, steps, wanted, judged):
        """The line that ends a run and its exit code, from the steps judged (--steps: those named and the
        summary; else every step of the preset that runs here)."""
        a = self.a
        bad = [n for n in judged if n in steps and steps[n]["status"] not in ("ok", "waived")]
        good = [n for n in judged if n in steps and steps[n]["status"] in ("ok", "waived")]
        cut = [n for n in judged if n in self.cut] if a.steps else ([] if self.man["complete"] else wanted)
        unrun = [n for n in wanted if n not in steps]
        print(f"evidence: {len(good)} of {len(judged)} {'requested ' if a.steps else ''}steps ok"
              + (f"; not ok: {', '.join(bad)}" if bad else "")
              + ("; INCOMPLETE: the deadline cut the run (--resume continues)" if cut else "")
              + (f"; a partial run (--steps): {len(unrun)} of the preset's {len(wanted)} steps not run "
                 "(--resume runs them)" if self.man["partial"] else ""), flush=True)
        if cut:
            return 4
        return 1 if bad else 0
