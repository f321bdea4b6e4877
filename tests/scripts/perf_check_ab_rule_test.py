#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The A/B rule of scripts/perf-check --ab (docs/perf-check.md "The A/B rule"), end to end without a GPU: the
command of both sides is tests/fixtures/ab_fake_run.py, which writes a committed 2 x H200 report with its times
scaled by the side's factor and a deterministic per-run noise of up to +-2 % (the spread of the 256 KiB graph rows
at 8 ranks on one H200). Ten runs per side:
  - A/A (both factors 1.00): every verdict SAME, exit 0, each judged by the A/B rule (rule "ab", a p-value);
  - A/B with the current side 5 % slower: every time_p50_us verdict SLOWER with a p-value below 0.01 / K, exit 1;
  - A/B 1 % slower (inside the 2 % floor): no SLOWER, exit 0;
  - the allowance alone (the current side's runs read as a plain baseline comparison, no --ab) does not call the
    5 % SLOWER (3 x a 4 % spread is 12 %: CANNOT_JUDGE, too noisy for those runs): the reason the A/B rule exists;
  - --baseline-bin tools whose reports name another revision than REV: exit 2, no verdict; reports that name no
    commit: judged, with ab.revision_checked false and a note (docs/perf-check.md "A/B").
REV is HEAD, resolved by git. In a copy of the tree without .git (a release tarball) REV is a commit stated on the
command line, which perf-check takes as stated (ab.revision_checked false, checked here too): every check runs but
the last, which needs a REV that git resolved; it is printed NOT RUN and the test exits 77 (skipped). Under CI=true
a tree without git fails.
usage: perf_check_ab_rule_test.py
"""
import json
import os
import subprocess
import sys
import tempfile

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/: harness.py, fixtures/
PERF = os.path.join(TESTS, "..", "scripts", "perf-check")
FAKE = os.path.join(TESTS, "fixtures", "ab_fake_run.py")
sys.path.insert(0, TESTS)
from harness import check, finish, git_checkout, not_run  # noqa: E402

ROOT = os.path.dirname(TESTS)
GIT = git_checkout(ROOT)
# Without .git, REV is a stated commit (the reports below are a fixture's: no tools of this tree are measured).
STATED = "89abcdef0123456789abcdef0123456789abcdef"
HEAD = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], stdout=subprocess.PIPE,
                      text=True).stdout.strip() if GIT else STATED
REV = "HEAD" if GIT else STATED


def side(tmp, name, factor, revision=HEAD):
    d = os.path.join(tmp, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "factor"), "w") as f:
        f.write(str(factor))
    with open(os.path.join(d, "revision"), "w") as f:
        f.write(revision)
    return d


def ab(tmp, name, base_factor, cur_factor, runs=10, base_revision=HEAD):
    keep = os.path.join(tmp, f"keep-{name}")
    out = os.path.join(tmp, f"{name}.json")
    cmd = [sys.executable, PERF, "--ab", REV, "--baseline-bin", side(tmp, f"{name}-A", base_factor, base_revision),
           "--current-bin", side(tmp, f"{name}-B", cur_factor), "--runs", str(runs), "--keep", keep, "--json", out,
           "--", sys.executable, FAKE, "{bin}", "{json}"]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    doc = json.load(open(out)) if os.path.exists(out) else {}
    return p.returncode, p.stdout, doc, keep


with tempfile.TemporaryDirectory(prefix="mori-ab-rule-") as tmp:
    rc, out, doc, _ = ab(tmp, "aa", 1.0, 1.0)
    vs = doc.get("verdicts", [])
    check("A/A, 10 runs a side, +-2 % noise: exit 0, every verdict SAME, judged by the A/B rule with a p-value",
          rc == 0 and vs and all(v["verdict"] == "SAME" and v["rule"] == "ab" and v["p_value"] is not None
                                 for v in vs), out[-3000:])
    if not GIT:
        check(f"no .git: REV {STATED[:12]} taken as stated (ab.revision_checked false, the note says so)",
              (doc.get("ab") or {}).get("revision") == STATED and doc["ab"].get("revision_checked") is False
              and "taken as stated" in out and "no .git" in out, out[-3000:])
    rc, out, doc, keep = ab(tmp, "ab5", 1.0, 1.05)
    vs = doc.get("verdicts", [])
    times = [v for v in vs if v["metric"] == "time_p50_us"]
    k = len({v["result"] for v in vs})
    check(f"A/B 5 % slower: exit 1, every time_p50_us SLOWER with p < 0.01 / {k}, the p-value printed",
          rc == 1 and times and all(v["verdict"] == "SLOWER" and v["p_value"] < 0.01 / k for v in times)
          and "(A/B p=" in out, out[-3000:])
    rc, out, doc, _ = ab(tmp, "ab1", 1.0, 1.01)
    check("A/B 1 % slower (inside the 2 % floor): exit 0, no SLOWER",
          rc == 0 and not any(v["verdict"] == "SLOWER" for v in doc.get("verdicts", [])), out[-3000:])
    # The same runs as a plain comparison: the allowance (3 x the baseline's spread) does not see the 5 %.
    p = subprocess.run([sys.executable, PERF, os.path.join(keep, "runs", "baseline"),
                        os.path.join(keep, "runs", "current")], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=120)
    check("the same 5 % runs judged by the allowance alone: no SLOWER (3 x a 4 % spread is 12 %: cannot judge)",
          p.returncode == 0 and "SLOWER" not in p.stdout and "CANNOT_JUDGE" in p.stdout, p.stdout[-3000:])
    rc, out, doc, _ = ab(tmp, "other-rev", 1.0, 1.0, runs=2, base_revision="0123456789abcdef0123456789abcdef01234567")
    check("--baseline-bin whose reports name another revision than REV: exit 2 naming it, no verdict",
          rc == 2 and "0123456789abcdef" in out and "another revision" in out and not doc, out[-3000:])
    name = "--baseline-bin whose reports name no commit: judged, revision_checked false, with a note"
    if GIT:
        rc, out, doc, _ = ab(tmp, "no-rev", 1.0, 1.0, runs=2, base_revision="unknown")
        check(name, rc == 0 and (doc.get("ab") or {}).get("revision_checked") is False and
              "not checked" in out and "do not all name a commit" in out, out[-3000:])
    else:  # without .git REV is unchecked from the start: the reports cannot make it so
        not_run(name, f"needs a git checkout; {ROOT} has no .git")
finish()
