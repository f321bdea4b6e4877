#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""mori-teardown-repro at the limits of its journals (docs/mori-teardown-repro.md, docs/reliability.md):

- journals on a file system that fills during --scenario all (a 40 KiB tmpfs): every requested scenario keeps
  its row in the table and the JSON, those no journal recorded as journal_error, naming the journals' errors;
- --journal-dir on a full file system: exit 3 (a system error, not a usage error), one line naming ENOSPC, and
  the folders it made for the claim are gone;
- --summarize of a journal holding a step name of megabytes and control bytes: every echoed field is bounded
  (cut with a marker saying how much) and escaped, on stdout, stderr and in the JSON.

The tmpfs cases need root (mount -t tmpfs); where the mount fails they are not run (exit 77 naming why; a
failure under CI=true, which runs as root).

usage: teardown_journal_limits_test.py BIN_DIR MPIRUN...
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: harness.py
import harness  # noqa: E402
from harness import check, finish  # noqa: E402

if len(sys.argv) < 3 or sys.argv[1] in ("-h", "--help"):
    print(__doc__.strip())
    sys.exit(0 if len(sys.argv) >= 2 else 2)
BIN = sys.argv[1]
MPIRUN = sys.argv[2:]
TOOL = os.path.join(BIN, "mori-teardown-repro")


def mount_tmpfs(path, size):
    """A tmpfs of `size` at path; "" when mounted, else why not."""
    os.makedirs(path)
    p = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", path],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return "" if p.returncode == 0 else f"mount -t tmpfs failed ({p.stdout.strip() or p.returncode})"


def umount(path):
    subprocess.run(["umount", path], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def fill(path):
    """Fills the file system of `path` to the last byte."""
    fd = os.open(os.path.join(path, "filler"), os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while os.write(fd, b"\0" * 4096) > 0:
            pass
    except OSError:
        pass
    finally:
        os.close(fd)


def table_rows(out):
    names = {s["name"] for s in SCENARIOS}
    return [l.split()[0] for l in out.splitlines() if l.split() and l.split()[0] in names]


p = subprocess.run([TOOL, "--list"], stdout=subprocess.PIPE, text=True, timeout=60)
SCENARIOS = [{"name": l.split()[0]} for l in p.stdout.splitlines() if l.strip()]

with tempfile.TemporaryDirectory() as tmp:
    # ---- --summarize: every echoed field bounded and escaped ----------------------------------------------------
    d = os.path.join(tmp, "huge-step")
    os.makedirs(d)
    name = "s" * (8 << 20)
    why = "\x1b[2Jbell\x07" + "w" * (1 << 20)
    with open(os.path.join(d, "rank-0.journal"), "w") as f:
        f.write(f"O\tordered\t1\nB\tordered\t{name}\t-1\nH\tordered\t{why}\n")
    out_json = os.path.join(tmp, "huge.json")
    p = subprocess.run([TOOL, "--backend", "host", "--summarize", d, "--json", out_json], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=120)
    size = os.path.getsize(out_json) if os.path.exists(out_json) else -1
    text = p.stdout + p.stderr + (open(out_json, "rb").read() if size >= 0 else b"")
    check(f"--summarize of an 8 MiB step name: stdout {len(p.stdout)} B, stderr {len(p.stderr)} B, JSON {size} B, "
          "each under 64 KiB, the cut named",
          p.returncode == 1 and len(p.stdout) < 65536 and len(p.stderr) < 65536 and 0 < size < 65536
          and b"bytes cut" in p.stdout and b"of 8388608 bytes cut" in text, (p.stdout + p.stderr)[-3000:].decode(
              errors="replace"))
    check("--summarize: control bytes of a journal's field escaped (\\x1b, \\x07), never echoed raw",
          b"\\x1b[2Jbell\\x07" in p.stdout and b"\x1b" not in text and b"\x07" not in text,
          p.stdout[-2000:].decode(errors="replace"))

    # ---- A file system that fills during --scenario all: every scenario keeps its row -----------------------------
    small = os.path.join(tmp, "small")
    why_not = mount_tmpfs(small, "40k")
    if why_not:
        harness.not_run("journals on a 40 KiB tmpfs, --journal-dir on a full file system", why_not)
    else:
        try:
            out_json = os.path.join(tmp, "all.json")
            rc, out = harness.tool_job(MPIRUN, 2, TOOL, ["--scenario", "all", "--journal-dir",
                                                         os.path.join(small, "j"), "--json", out_json])
            doc = harness.load_json(out_json) or {}
            got = [s["name"] for s in doc.get("scenarios", [])]
            want = [s["name"] for s in SCENARIOS]
            rows = table_rows(out)
            errs = {s["name"]: s.get("detail", "") for s in doc.get("scenarios", [])
                    if s["outcome"] == "journal_error"}
            check(f"--scenario all, journals on a 40 KiB tmpfs: exit 1, every scenario has its row in the JSON "
                  f"({len(got)} of {len(want)}) and the table ({len(rows)})",
                  rc == 1 and sorted(got) == sorted(want) and sorted(rows) == sorted(want)
                  and doc.get("journal_errors"), out)
            check(f"the scenarios no journal recorded are journal_error naming ENOSPC ({sorted(errs)})",
                  "atexit" in errs and "leak" in errs and all("ENOSPC" in d for n, d in errs.items()
                                                              if "no journal holds" in d), json.dumps(errs)[:3000])
        finally:
            umount(small)
        full = os.path.join(tmp, "full")
        why_not = mount_tmpfs(full, "40k")
        if not why_not:
            try:
                fill(full)
                made = os.path.join(full, "new")
                rc, out = harness.tool_job(MPIRUN, 2, TOOL, ["--scenario", "ordered", "--journal-dir",
                                                             os.path.join(made, "sub")])
                errors = [l for l in out.splitlines() if ": error (" in l]
                check("--journal-dir on a full file system: exit 3, one line per rank naming ENOSPC, the folders "
                      "it made gone",
                      rc == 3 and errors and all("ENOSPC" in l for l in errors) and not os.path.exists(made)
                      and sorted(os.listdir(full)) == ["filler"], out + f"\n{os.listdir(full)}")
            finally:
                umount(full)
        else:
            harness.not_run("--journal-dir on a full file system", why_not)

finish()
