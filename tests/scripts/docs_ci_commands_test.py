#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""docs/ci.md stays true: both CI jobs on the page run exactly the commands of its marked block, and those
commands work here, on the host runtime: scripts/evidence (preset host) with the suite's build as MORI_BIN, then perf-check
against that run's own evidence as MORI_BASELINE (every verdict SAME or CANNOT_JUDGE: exit 0), writing a JUnit
XML that parses and a Markdown summary that says PASS. scripts/build is the suite's own build step (not run again).
The evidence refuses a tree with changes: in a checkout with changes, or without .git, the run is NOT RUN and the
test exits 77 (skipped); under CI=true (a clean clone) that is a failure.

usage: docs_ci_commands_test.py BIN_DIR MPIRUN...
"""
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: harness.py
from harness import check, finish, git_checkout, not_run  # noqa: E402

BIN, MPIRUN = os.path.abspath(sys.argv[1]), sys.argv[2:]
ROOT = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
page = open(os.path.join(ROOT, "docs", "ci.md")).read()
m = re.search(r"<!-- ci-commands:begin -->\n```sh\n(.*?)```\n<!-- ci-commands:end -->", page, re.S)
block = [ln.strip() for ln in (m.group(1) if m else "").splitlines() if ln.strip()]
check("docs/ci.md has its marked block of commands", len(block) == 3 and block[0] == "scripts/build", page[:500])
yamls = re.findall(r"```yaml\n(.*?)```", page, re.S)
github = [x.strip() for x in re.findall(r"^\s*- run: (.*)$", yamls[0], re.M)] if yamls else []
gitlab = []
if len(yamls) > 1:
    script = re.search(r"^  script:\n((?:    - .*\n)+)", yamls[1], re.M)
    gitlab = [ln.strip()[2:] for ln in script.group(1).splitlines()] if script else []
check("the GitHub Actions job runs the block's commands, in order", github == block, "\n".join(github))
check("the GitLab job runs the block's commands, in order", gitlab == block, "\n".join(gitlab))

dirty = None
if git_checkout(ROOT):
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain"],  # the evidence's own rule
                           stdout=subprocess.PIPE, text=True).stdout.strip()
if dirty is None or dirty:
    not_run("the block's commands on the host runtime",
            "the evidence refuses a tree with changes" if dirty else "no .git: the evidence needs the revision")
else:
    with tempfile.TemporaryDirectory() as tmp:
        for d in ("scripts", "results"):
            os.symlink(os.path.join(ROOT, d), os.path.join(tmp, d))
        env = dict(os.environ, MORI_BIN=BIN, MORI_MPIRUN=" ".join(MPIRUN), MORI_PRESET="host",
                   MORI_BASELINE=os.path.join(tmp, "ci-evidence"))
        for cmd in block[1:]:
            p = subprocess.run(["bash", "-c", cmd], cwd=tmp, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, timeout=500)
            check(f"`{cmd[:60]}...`: exit 0", p.returncode == 0, p.stdout)
        xml_path, md_path = os.path.join(tmp, "perf-check.xml"), os.path.join(tmp, "perf-check.md")
        try:
            suite = ET.parse(xml_path).getroot().find("testsuite")
        except (OSError, ET.ParseError) as e:
            suite, err = None, str(e)
        check("perf-check.xml: a JUnit report with test cases and no failure",
              suite is not None and int(suite.get("tests", 0)) > 1 and suite.get("failures") == "0",
              "" if suite is not None else err)
        md = open(md_path).read() if os.path.exists(md_path) else ""
        check("perf-check.md: the job summary says PASS", md.startswith("## perf-check: PASS"), md[:1000])
finish()
