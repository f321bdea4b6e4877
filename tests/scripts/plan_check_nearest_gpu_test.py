#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The plan check on a GPU the plan table has no case for (docs/evidence.md "The plan check"): a report is checked
against the nearest measured GPU's case, as its plan read that GPU's cells (docs/mori-a2a.md "The automatic
tables"), and the check says so. From the committed 8-rank one-H200 evidence report:
  - as it is: the H200 case, no case_by, every row checked, none differs;
  - the same rows from an H100 (sm_90): the H200 case by the same arch, said in case_by, every row checked, none
    differs;
  - from a GPU of another arch of the same vendor (sm_100): the H200 case by the same vendor;
  - a row whose unroll the table does not give still differs on the H100 (the fallback checks, it does not waive);
  - from another vendor's platform: no case, uncovered, a failing verdict (an automatic run).
usage: plan_check_nearest_gpu_test.py
"""
import copy
import glob
import json
import os
import sys

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(TESTS)
sys.path.insert(0, TESTS)
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from harness import check, finish  # noqa: E402
from mori_results import plan_check  # noqa: E402

table = plan_check.load_table(os.path.join(ROOT, "results", "expectations", "a2a-plan.json"))
runs = sorted(glob.glob(os.path.join(ROOT, "results", "h200", "*", "a2a-r1.json")))
with open(runs[-1]) as f:
    h200 = json.load(f)


def as_gpu(doc, name, arch, platform="cuda"):
    d = copy.deepcopy(doc)
    d["meta"]["platform"] = platform
    for r in d["meta"]["ranks"]:
        r["device_name"], r["arch"] = name, arch
    return d


r = plan_check.check_report(table, h200, "a2a-r1.json")
check("the H200's own report: its case, no nearest-GPU note, every row checked and none differs",
      r["case"] == "h200-one-gpu-8-mps" and "case_by" not in r and r["checked"] == r["rows"] > 0
      and not r["differs"] and plan_check.verdict(r) is None, json.dumps(r)[:1500])

h100 = as_gpu(h200, "NVIDIA H100 80GB HBM3", "sm_90")
r = plan_check.check_report(table, h100, "a2a-r1.json")
check("an H100's report: the H200 case by the same arch, said in case_by, every row checked, none differs",
      r["case"] == "h200-one-gpu-8-mps" and "the same arch (sm_90)" in r.get("case_by", "")
      and "NVIDIA H100 80GB HBM3" in r.get("case_by", "") and r["checked"] == r["rows"]
      and plan_check.verdict(r) is None, json.dumps(r)[:1500])

r = plan_check.check_report(table, as_gpu(h200, "NVIDIA B200", "sm_100"), "a2a-r1.json")
check("a GPU of another arch of the same vendor: the H200 case by the same vendor",
      r["case"] == "h200-one-gpu-8-mps" and "the same vendor" in r.get("case_by", ""), json.dumps(r)[:1500])

bad = copy.deepcopy(h100)
bad["results"][0]["unroll"] = 2
r = plan_check.check_report(table, bad, "a2a-r1.json")
check("a row that is not the table's still differs on the H100: the nearest case checks, it does not waive",
      len(r["differs"]) == 1 and "unroll 2" in r["differs"][0] and plan_check.verdict(r), json.dumps(r)[:1500])

r = plan_check.check_report(table, as_gpu(h200, "AMD Instinct MI250X", "gfx90a", "amd"), "a2a-r1.json")
check("another vendor's platform with no case of its placement: uncovered, a failing verdict",
      r["case"] is None and r["uncovered"] and (plan_check.verdict(r) or "").startswith("plan check: no case"),
      json.dumps(r)[:1500])
finish()
