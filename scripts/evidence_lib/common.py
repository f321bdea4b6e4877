# SPDX-License-Identifier: MIT
"""What the parts of scripts/evidence share: the folders it reads and builds in, the manifest's schema, the
statuses of a step that ran, the machine kinds, the limits on a build and a teardown job, and Usage (exit 2)."""
import os

HERE = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))  # scripts/, also through an installed link
ROOT = os.path.dirname(HERE)
SCHEMA = "mori.evidence/1"
KINDS = ("host", "gpu", "peers")
BUILD_DIR = "build-evidence"
PLAN_TABLE = os.path.join(ROOT, "results", "expectations", "a2a-plan.json")  # docs/evidence.md "The plan check"
FINAL = ("ok", "failed", "missing", "waived", "timeout")  # a step with one of these has run (--resume skips it)
BUILD_BUDGET_S = 240
TEARDOWN_JOB_S = 60  # one teardown scenario's job (its waits are bounded by --timeout-s 20)
MACHINE_NAME = r"[A-Za-z0-9][A-Za-z0-9._-]*"  # an evidence folder's machine name


class Usage(Exception):
    pass
