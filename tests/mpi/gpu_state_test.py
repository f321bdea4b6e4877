#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Every tool's report on the host runtime says what it could not read about the GPU, never a made-up value:
meta.gpu_state is null with meta.gpu_state_reason beside it, and meta.rtc names no compiler (docs/json.md).

usage: gpu_state_test.py BIN_DIR MPIRUN...
"""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: harness.py
import harness  # noqa: E402
from harness import check, finish, load_json  # noqa: E402

BIN = sys.argv[1]
MPIRUN = sys.argv[2:]


def tool(name):
    return os.path.join(BIN, name)


def check_meta(what, path, out):
    doc = load_json(path)
    meta = doc.get("meta") if isinstance(doc, dict) else None
    if not isinstance(meta, dict):
        check(f"{what}: a report with meta", False, out)
        return
    check(f"{what}: meta.gpu_state is null with the reason (host runtime)",
          "gpu_state" in meta and meta["gpu_state"] is None
          and meta.get("gpu_state_reason") == "host runtime: no GPU",
          f"{out}\ngpu_state={meta.get('gpu_state')!r} reason={meta.get('gpu_state_reason')!r}")
    rtc = meta.get("rtc")
    check(f"{what}: meta.rtc names no compiler, with the reason",
          isinstance(rtc, dict) and rtc.get("name") == "none" and "version" in rtc and rtc["version"] is None
          and isinstance(rtc.get("reason"), str) and rtc["reason"], f"{out}\nrtc={rtc!r}")


with tempfile.TemporaryDirectory() as tmp:
    j = os.path.join(tmp, "probe.json")
    rc, out = harness.tool_job(MPIRUN, 2, tool("mori-probe"), ["--json", j])
    check("mori-probe at 2 ranks: exit 0", rc == 0, out)
    check_meta("mori-probe", j, out)

    j = os.path.join(tmp, "a2a.json")
    rc, out = harness.tool_job(MPIRUN, 2, tool("mori-a2a"), ["--chunk-kib", "64", "--iters", "3", "--json", j])
    check("mori-a2a at 2 ranks: exit 0", rc == 0, out)
    check_meta("mori-a2a", j, out)

    d = os.path.join(tmp, "journals")
    j = os.path.join(tmp, "teardown.json")
    rc, out = harness.tool_job(MPIRUN, 2, tool("mori-teardown-repro"),
                               ["--scenario", "ordered", "--journal-dir", d, "--json", j])
    check("mori-teardown-repro at 2 ranks: exit 0", rc == 0, out)
    check_meta("mori-teardown-repro", j, out)

    j = os.path.join(tmp, "summary.json")
    p = subprocess.run([tool("mori-teardown-repro"), "--backend", "host", "--summarize", d, "--json", j],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60,
                       env=dict(os.environ, **{harness.TAG_VARIABLE: harness.TAG}))
    check("mori-teardown-repro --summarize: exit 0", p.returncode == 0, p.stdout)
    check_meta("mori-teardown-repro --summarize", j, p.stdout)

finish()
