#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A usage error is one line (docs/reliability.md): nothing follows it (no "never fired" warning of an armed
MORI_FAULT point, no warning about the run), the user's bytes in it are escaped (a control byte, a line break or a
terminal escape in an option value shows as \\xNN), and an option that does not apply to the run is refused (exit
2, one line), never silently ignored. Every tool, started alone on the host runtime.

usage: usage_error_line_test.py BIN_DIR
"""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: harness.py
from harness import check, finish  # noqa: E402

if len(sys.argv) != 2 or sys.argv[1] in ("-h", "--help"):
    print(__doc__.strip())
    sys.exit(0 if len(sys.argv) == 2 else 2)
BIN = sys.argv[1]
TMP = tempfile.mkdtemp(prefix="mori-usage-line-")


def run(tool, args, env=None):
    """(exit code, the non-empty lines of stdout + stderr) of one process of `tool`, started alone."""
    e = {k: v for k, v in os.environ.items() if not k.startswith("MORI_FAULT")}
    e.update(env or {})
    p = subprocess.run([os.path.join(BIN, tool), "--backend", "host", *args], env=e, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=120, cwd=TMP)
    return p.returncode, [l for l in p.stdout.split(b"\n") if l.strip()]


def one_line(rc, lines, *words):
    return rc == 2 and len(lines) == 1 and all(w.encode() in lines[0] for w in words)


def show(lines):
    return "\n".join(repr(l) for l in lines)


# ---- An armed MORI_FAULT point and a usage error: the error alone --------------------------------------------------
ARMED = {"MORI_FAULT": "a2a.slow-kernel:0", "MORI_FAULT_DELAY_NS": "1000"}
for tool, args, words in [
        ("mori-a2a", ["--chunk-kib", "0"], "chunk size: must be > 0"),
        ("mori-a2a", ["--iters", "0"], "--iters: must be in 1..1000000"),
        ("mori-probe", ["--deep-mib", "1"], "--deep-mib: must be in [2, 65536]"),
        ("mori-teardown-repro", ["--windows", "0"], "--windows: must be in 1..64"),
        ("mori-teardown-repro", ["--journal-dir", os.path.join(TMP, "used")], "already holds journals")]:
    if "--journal-dir" in args:
        os.makedirs(args[1], exist_ok=True)
        open(os.path.join(args[1], "rank-0.journal"), "w").close()
    rc, lines = run(tool, args, ARMED)
    check(f"{tool} {' '.join(args)} with MORI_FAULT armed: exit 2, the error line alone (no 'never fired')",
          one_line(rc, lines, words) and b"never fired" not in b"".join(lines), show(lines))
# As the example: the delay is the usage error.
rc, lines = run("mori-a2a", ["--chunk-kib", "4"], {"MORI_FAULT": "a2a.slow-kernel:0", "MORI_FAULT_DELAY_NS": "0"})
check("mori-a2a --chunk-kib 4 with MORI_FAULT=a2a.slow-kernel:0 MORI_FAULT_DELAY_NS=0: exit 2, one line",
      rc == 2 and len(lines) == 1 and b"never fired" not in lines[0], show(lines))

# ---- Control and escape bytes in an option value: escaped in the error line ------------------------------------------
for tool, option in [("mori-a2a", "--chunk-kib"), ("mori-probe", "--handle-type"),
                     ("mori-teardown-repro", "--scenario")]:
    value = b"x\x1b[2J\x1b]0;owned\x07\ny\xc2\x9b1m\xff"  # C1 CSI (U+009B) in UTF-8, then a lone 0xff
    rc, lines = run(tool, [option, value])
    raw = [c for c in (b"\x1b", b"\x07", b"\x9b", b"\xff") if c in b"".join(lines)]
    check(f"{tool} {option} holding ESC, BEL, a line break, C1 CSI and a byte not UTF-8: exit 2, one line, "
          "every such byte as \\xNN",
          one_line(rc, lines, option, "x\\x1b[2J\\x1b]0;owned\\x07\\x0ay\\xc2\\x9b1m\\xff") and not raw, show(lines))

# ---- Options that do not apply: refused, one line ----------------------------------------------------------------
journals = os.path.join(TMP, "journals")
os.makedirs(journals)
for tool, args, words in [
        ("mori-probe", ["--jit-precompile", "--archs", "sm_90", "--matrix"], "--jit-precompile: compiles the kernels"),
        ("mori-probe", ["--jit-precompile", "--archs", "sm_90", "--health"], "not with --health"),
        ("mori-probe", ["--jit-precompile", "--archs", "sm_90", "--deep"], "not with --deep"),
        ("mori-probe", ["--pairs", "4"], "--pairs: only with --matrix or --health"),
        ("mori-probe", ["--list-diagnoses", "--json", os.path.join(TMP, "diag.json")],
         "--list-diagnoses: prints the catalog and writes no report; not with --json"),
        ("mori-a2a", ["--protocol", "copy", "--sync", "host"], "--protocol: the device sync's signalling; not with "
                                                               "--sync host"),
        ("mori-teardown-repro", ["--summarize", journals, "--scenario", "ordered"],
         "--summarize: reports an earlier job's journals and runs no scenario; not with --scenario")]:
    rc, lines = run(tool, args)
    check(f"{tool} {' '.join(args)}: exit 2, one line saying the option does not apply",
          one_line(rc, lines, words) and not os.path.exists(os.path.join(TMP, "diag.json")), show(lines))
# Where they apply, they are taken.
rc, lines = run("mori-probe", ["--list-diagnoses"])
check("mori-probe --list-diagnoses alone: exit 0, the catalog", rc == 0 and len(lines) > 5, show(lines))

finish()
