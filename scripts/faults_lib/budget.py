# SPDX-License-Identifier: MIT
"""The time budget (--budget-s): a case starts only when what is left of the budget, less the final cleanup's
reserve, covers the case's worst case, the sum of its bounded waits; a case that does not fit is skipped with the
reason, and later cases that fit still run. So the run, cleanup and document included, ends within the budget."""
import math
import time

from .cases import JOB_GRACE_S
from .jobs import AFTER_S, BYSTANDER_UP_S, OUTPUT_S, RECOVER_S
from .leftovers import SETTLE_S, SMI_S
from .procs import KILL_S

MPS_STOP_S = 30  # the final cleanup stops the MPS daemon within this (scripts/mps stop)
STEPS_S = 5  # the /proc scans and short steps of a case, and the cleanup's own


def worst_case_s(a, name):
    """The longest the case can take: the wait for its fault, the job's bound after it (then killed), the
    bystander's start and stop, the leftovers' settling, the all-to-all after it (tried again for RECOVER_S when it
    fails) and the memory readings."""
    fault = {"no-launch": 0, "die-in-rendezvous": a.announce_limit_s}.get(name, a.announce_limit_s + a.settle_s)
    job = a.timeout_s + JOB_GRACE_S + KILL_S + OUTPUT_S
    bystander = BYSTANDER_UP_S + KILL_S + OUTPUT_S if a.bystander else 0
    after = SETTLE_S + AFTER_S + KILL_S + OUTPUT_S + RECOVER_S + KILL_S + OUTPUT_S
    smi = 2 * SMI_S + 1 if a.backend == "gpu" else 0
    return math.ceil(fault + job + bystander + after + smi + STEPS_S)


class Budget:
    def __init__(self, budget_s, mps):
        self.t0 = time.monotonic()
        self.budget_s = budget_s
        self.reserve_s = STEPS_S + (MPS_STOP_S if mps else 0)

    def left(self):
        return self.budget_s - (time.monotonic() - self.t0)

    def skip_reason(self, worst):
        """None when a case of this worst case fits in what is left, else why it does not."""
        usable = self.left() - self.reserve_s
        if usable >= worst:
            return None
        return (f"budget: {max(0.0, usable):.0f} s left (--budget-s {self.budget_s:g} less {self.reserve_s} s for "
                f"the cleanup) < the case's worst case {worst} s")

    def summary(self):
        return {"budget_s": self.budget_s, "reserve_s": self.reserve_s,
                "used_s": round(time.monotonic() - self.t0, 2)}
