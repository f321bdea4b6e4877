#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Values the tools must not trust: a malformed MORI_FAULT, empty option values, counts
that are not decimal, --device -1, sizes that wrap, arch lists and unusable JIT caches for --jit-precompile,
journals --summarize must not trust (missing ranks, a world no job has, a file named like no rank's journal),
floats that are not plain decimal numbers, and a rank stopped inside a teardown step at 4 ranks. Every usage
error must be one line and exit 2, and leave nothing behind; every path lies in a fresh temporary folder made
here.

usage: untrusted_values_test.py BIN_DIR MPIRUN...
"""
import json
import os
import re
import stat
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: harness.py
import harness  # noqa: E402
from harness import check, finish  # noqa: E402

BIN = os.path.abspath(sys.argv[1])
MPIRUN = sys.argv[2:]
TOOLS = ["mori-a2a", "mori-probe", "mori-teardown-repro"]
TMP = tempfile.mkdtemp(prefix="mori-untrusted-")


def tool(name):
    return os.path.join(BIN, name)


def run(cmd, env=None, timeout=120, cwd=TMP, drop=()):
    e = {k: v for k, v in os.environ.items() if k not in drop}
    rc, out, secs = harness.job(cmd, dict(e, **(env or {})), timeout=timeout, cwd=cwd)
    return rc, out, secs


def lines(out):
    # Not counted: the warning of a build older than its source tree (a test run on a tree being edited).
    return [l for l in out.splitlines() if l.strip() and "meta.build_stale" not in l]


def one_usage_line(rc, out, text):
    """Exit 2 and exactly one line of output, naming `text`."""
    ls = lines(out)
    return rc == 2 and len(ls) == 1 and text in ls[0]


def folder_is_empty():
    return sorted(os.listdir(TMP)) == []


# ---- 1. MORI_FAULT: parsed once, checked fully; one line and exit 2 on every exit path -----------------------
MALFORMED = ["a2a.timed", ":", "a2a.timed:", "a2a.timed:x", "a2a.timed:1,,", ",a2a.timed:1", "x", "a2a.timed:-1",
             "A2A.TIMED:1", "a2a.timed:1:2", "teardown.no_such_step.hang:0", "teardown.barrier.stop:0"]
for spec in MALFORMED:
    rc, out, _ = run([tool("mori-a2a"), "--backend", "host", "--chunk-kib", "4"], {"MORI_FAULT": spec})
    check(f"MORI_FAULT={spec!r}: mori-a2a exits 2 with one line, no abort, no 'never fired'",
          one_usage_line(rc, out, "MORI_FAULT:") and "never fired" not in out, out)
for name in TOOLS:
    # The parse error's exit path, and the one of an option that ends the run early.
    rc, out, _ = run([tool(name), "--bogus"], {"MORI_FAULT": "x"})
    check(f"MORI_FAULT=x {name} --bogus: exit 2, one line (no std::invalid_argument)",
          one_usage_line(rc, out, "--bogus"), out)
    rc, out, _ = run([tool(name), "--version"], {"MORI_FAULT": "a2a.timed:1,,"})
    check(f"MORI_FAULT='a2a.timed:1,,' {name} --version: exit 0, no abort",
          rc == 0 and "terminate" not in out and "never fired" not in out, out)
# A repeated item (the same point on the same rank: leading zeros aside, or '*' on either side) would never fire and
# only warn; more than 64 items would be cut silently. Both are usage errors naming what is wrong.
for spec, text in [("a2a.announce:0,a2a.announce:0", "item 2 'a2a.announce:0' arms what item 1 'a2a.announce:0'"),
                   ("a2a.timed:1,a2a.stale:0,a2a.timed:001", "item 3 'a2a.timed:001' arms what item 1"),
                   ("a2a.timed:*,a2a.timed:1", "item 2 'a2a.timed:1' arms what item 1 'a2a.timed:*'"),
                   (",".join(f"a2a.timed:{r}" for r in range(65)), "65 items, more than the 64")]:
    rc, out, _ = run([tool("mori-a2a"), "--backend", "host", "--sync", "device", "--chunk-kib", "4"],
                     {"MORI_FAULT": spec})
    check(f"MORI_FAULT={spec[:40]!r}: exit 2, one line naming it, no run, no 'never fired'",
          one_usage_line(rc, out, "MORI_FAULT: " + text) and "never fired" not in out and "chunk" not in out, out)
rc, out, _ = run([tool("mori-a2a"), "--backend", "host", "--chunk-kib", "4", "--iters", "2", "--warmup", "1"],
                 {"MORI_FAULT": ",".join(f"a2a.timed:{r}" for r in range(1, 65))})
check("MORI_FAULT of 64 items (ranks 1..64 of a 1-rank job): accepted, each warned as never fired",
      rc == 0 and out.count("never fired") == 64, out[-2000:])
# Well-formed items still work: a teardown step the tool journals (under its prefixes) is known.
for spec in ["teardown.w1.barrier.hang:5", "teardown.atexit.free_span.crash:5", "a2a.timed:0005"]:
    rc, out, _ = run([tool("mori-teardown-repro"), "--list"], {"MORI_FAULT": spec})
    check(f"MORI_FAULT={spec}: a known point, accepted", rc == 0 and "ordered" in out, out)

# ---- 2. An empty value is a usage error, for every option of every tool that takes one -------------------------
OPTION = re.compile(r"^\s+(?:-\w,)?(--[\w-]+) (TEXT|INT|UINT|FLOAT)")
for name in TOOLS:
    rc, help_text, _ = run([tool(name), "--help"])
    options = [m.group(1) for m in map(OPTION.match, help_text.splitlines()) if m]
    check(f"{name} --help lists options that take a value", rc == 0 and len(options) >= 6, help_text)
    bad = []
    for opt in options:
        rc, out, _ = run([tool(name), "--backend", "host", opt, ""], timeout=60)
        if not one_usage_line(rc, out, f"{opt}: an empty value"):
            bad.append((opt, rc, out[-300:]))
    check(f"{name}: an empty value of each of its {len(options)} options is exit 2, one line", not bad, repr(bad))
check("the empty values left nothing behind (no report, no journal folder)", folder_is_empty(), repr(os.listdir(TMP)))

# ---- 2b. Counts are decimal digits, as sizes are; 6. --device -1 is refused ------------------------------------
for name, args, text in [
    ("mori-a2a", ["--iters", "0x10"], "--iters: '0x10' is not a whole number in decimal digits"),
    ("mori-a2a", ["--warmup", " 5"], "--warmup: ' 5' is not a whole number in decimal digits"),
    ("mori-teardown-repro", ["--windows", "+3"], "--windows: '+3' is not a whole number"),
    ("mori-probe", ["--pairs", "1e3"], "--pairs: '1e3' is not a whole number"),
] + [(n, ["--device", "-1"], "--device: must be in 0..1023") for n in TOOLS]:
    rc, out, _ = run([tool(name), "--backend", "host", *args])
    check(f"{name} {' '.join(args)!r}: exit 2, one line", one_usage_line(rc, out, text), out)

# ---- 2c. A float is a plain decimal number (digits, an optional '.' and exponent), as strict as a count -------
for name, args in [("mori-teardown-repro", ["--timeout-s", " 5"]), ("mori-teardown-repro", ["--timeout-s", "0x10"]),
                   ("mori-a2a", ["--timeout-s", "0x10"]), ("mori-a2a", ["--timeout-s", "inf"]),
                   ("mori-a2a", ["--timeout-s", "nan"]), ("mori-a2a", ["--timeout-s", "+5"]),
                   ("mori-a2a", ["--timeout-s", "5 "]), ("mori-a2a", ["--timeout-s", "1e"]),
                   ("mori-a2a", ["-b", "1M", "-e", "4M", "-f", "0x2"]), ("mori-a2a", ["--skew-us", "0x10"]),
                   ("mori-a2a", ["--skew-us", " 5"]), ("mori-probe", ["--deep-mib", "0x100"])]:
    rc, out, _ = run([tool(name), "--backend", "host", *args])
    check(f"{name} {' '.join(args)!r}: exit 2, one line: not a plain decimal number",
          one_usage_line(rc, out, f"'{args[-1]}' is not a plain decimal number"), out)
for value in ["5", "2.5", ".5", "5.", "1e1", "2.5E+1", "0.1e-0"]:
    rc, out, _ = run([tool("mori-teardown-repro"), "--backend", "host", "--timeout-s", value, "--list"])
    check(f"--timeout-s {value!r} is a plain decimal number: accepted", rc == 0 and "ordered" in out, out)

# ---- 8. Sizes that wrap: the message says too large and names the limit ----------------------------------------
for name, args, text in [
    ("mori-a2a", ["-b", "18446744073709551615", "-e", "18446744073709551615"],
     "-b '18446744073709551615': chunk size: 18446744073709551615 bytes exceeds 16 GiB, the limit"),
    ("mori-a2a", ["-b", "1", "-e", "18446744073709551615"],
     "-b/-e/-f size 36 (-b 1 -e 18446744073709551615 -f 2): chunk size: 34359738368 bytes exceeds 16 GiB"),
    ("mori-a2a", ["--chunk-kib", "18446744073709551615B"],
     "--chunk-kib item 1 '18446744073709551615B': chunk size: 18446744073709551615 bytes exceeds 16 GiB"),
    ("mori-a2a", ["--chunk-kib", "4,99999999999999999999"],
     "--chunk-kib item 2 '99999999999999999999': chunk size: more than 2^64 bytes exceeds 16 GiB, the limit"),
    ("mori-a2a", ["--chunk-kib", ",".join(str(k) for k in range(1, 66))], "--chunk-kib: 65 items, more than 64"),
    ("mori-a2a", ["--chunk-kib", ",".join(str(k) for k in range(1, 61)), "-b", "1M", "-e", "16M"],
     "-b/-e/-f: more than 64 sizes with the 60 of --chunk-kib"),
    ("mori-teardown-repro", ["--size", "99999999999999999999"],
     "--size: '99999999999999999999' is too large (the limit is 2^64 - 1 bytes"),
    ("mori-teardown-repro", ["--size", "17179869184G"], "--size: '17179869184G' is too large"),
]:
    rc, out, _ = run([tool(name), "--backend", "host", *args])
    check(f"{name} {' '.join(args)[:60]}: exit 2, one line: {text[:50]}...",
          one_usage_line(rc, out, text) and "must be > 0" not in out, out)

# ---- 5. Arch lists: the whole list checked before anything is compiled or created ------------------------------
cache = os.path.join(TMP, "cache")
PROBE = [tool("mori-probe"), "--backend", "host", "--jit-precompile"]
for args, env, texts in [
    ([], {"MORI_GPU_ARCHS": "sm_90,sm_0,bogus"}, ["MORI_GPU_ARCHS: 'sm_0' is", "'bogus' is not an arch"]),
    (["--archs", "sm_90,"], {}, ["--archs: '' is an empty entry"]),
    (["--archs", "gfx"], {}, ["--archs: 'gfx' is not an AMD arch"]),
    (["--archs", "sm_90,sm_90"], {}, ["'sm_90' is a repeat"]),
    (["--archs", "sm_49,sm_9x"], {}, ["'sm_49' is below sm_50", "'sm_9x' is not an NVIDIA arch"]),
]:
    rc, out, secs = run([*PROBE, *args], dict(env, MORI_JIT_CACHE_DIR=cache))
    check(f"--jit-precompile {args or env}: exit 2, one line naming every bad entry, nothing compiled or created",
          rc == 2 and len(lines(out)) == 1 and all(t in out for t in texts) and not os.path.exists(cache), out)

# ---- 4. A cache that cannot be used fails the precompile (exit 3, naming why), before compiling ----------------
a_file = os.path.join(TMP, "a-file")
open(a_file, "w").close()
group_writable = os.path.join(TMP, "gw")
os.makedirs(os.path.join(group_writable, "sm_90_cuda"), mode=0o700)
os.chmod(group_writable, 0o700)
os.chmod(os.path.join(group_writable, "sm_90_cuda"), 0o770)
CACHES = [("MORI_JIT_CACHE_DIR=/dev/null", {"MORI_JIT_CACHE_DIR": "/dev/null"}, "/dev/null"),
          ("MORI_JIT_CACHE_DIR a regular file", {"MORI_JIT_CACHE_DIR": a_file}, a_file),
          ("a group-writable arch folder", {"MORI_JIT_CACHE_DIR": group_writable}, "writable by group or others"),
          ("HOME a file", {"HOME": a_file}, "is not a folder")]
if os.geteuid() == 0:
    foreign = os.path.join(TMP, "foreign")
    os.makedirs(foreign, mode=0o755)
    os.chown(foreign, 65534, 65534)
    CACHES.append(("a foreign-owned root", {"MORI_JIT_CACHE_DIR": foreign}, "owned by uid 65534"))
else:
    print("SKIP: a foreign-owned cache root needs root to make (not counted)")
for what, env, text in CACHES:
    rc, out, _ = run([*PROBE, "--archs", "sm_90"], env, drop=("MORI_JIT_CACHE_DIR", "XDG_CACHE_HOME"))
    check(f"--jit-precompile with {what}: exit 3 naming JIT_CACHE_UNUSABLE and why, nothing compiled",
          rc == 3 and "JIT_CACHE_UNUSABLE" in out and text in out and "compiled" not in out.split("JIT_CACHE")[0]
          .split("error")[-1], out)
check("the group-writable arch folder holds no entry", os.listdir(os.path.join(group_writable, "sm_90_cuda")) == [],
      repr(os.listdir(os.path.join(group_writable, "sm_90_cuda"))))


# ---- 7. --summarize trusts no journal it cannot account for ----------------------------------------------------
def summarize_folder(name, journals):
    d = os.path.join(TMP, "journals-" + name)
    os.makedirs(d)
    for rank, text in journals.items():
        with open(os.path.join(d, f"rank-{rank}.journal"), "w") as f:
            f.write(text)
    out_json = os.path.join(TMP, "journals-" + name + ".json")
    rc, out, _ = run([tool("mori-teardown-repro"), "--backend", "host", "--summarize", d, "--json", out_json])
    return rc, out, harness.load_json(out_json)


def e_line(step, status="ok"):
    return f"E\tordered\t{step}\t-1\t{status}\t1.0\t1000\n"


OK_RANK = "O\tordered\t2\n" + "B\tordered\talloc\t-1\n" + e_line("alloc") + "D\tordered\n"
rc, out, doc = summarize_folder("open-step", {0: OK_RANK, 1: "O\tordered\t2\nB\tordered\talloc\t-1\n"
                                               + e_line("alloc") + "B\tordered\tfree_span\t-1\nD\tordered\n"})
sc = (doc or {}).get("scenarios", [{}])[0]
check("a step's begin without its end (then D) reads as not finished, naming the step, exit 1",
      rc == 1 and sc.get("outcome") == "crash" and "free_span" in sc.get("detail", ""), out)
rc, out, doc = summarize_folder("end-without-begin", {0: OK_RANK, 1: "O\tordered\t2\n" + e_line("alloc")
                                                      + "D\tordered\n"})
sc = (doc or {}).get("scenarios", [{}])[0]
check("an end without its begin is a damaged journal", rc == 1 and sc.get("outcome") == "damaged"
      and "never began" in sc.get("detail", ""), out)
rc, out, doc = summarize_folder("foreign", {0: OK_RANK, 1: OK_RANK, 7: OK_RANK})
sc = (doc or {}).get("scenarios", [{}])[0]
ranks = [r.get("rank") for r in sc.get("ranks", []) if r.get("outcome") == "ok"]
check("a journal of rank 7 in a folder of a world-2 job is reported as foreign, not counted",
      rc == 1 and sc.get("outcome") == "damaged" and "foreign" in sc.get("detail", "")
      and "outside the job's ranks 0..1" in sc.get("detail", "") and ranks == [0, 1], out)
rc, out, doc = summarize_folder("other-world", {0: OK_RANK, 1: OK_RANK.replace("ordered\t2", "ordered\t8")})
sc = (doc or {}).get("scenarios", [{}])[0]
check("a journal of a job of another size is reported as foreign", rc == 1 and sc.get("outcome") == "damaged"
      and "world 8, the job's 2" in sc.get("detail", ""), out)

# Ranks of the job with no journal in the folder are named, and the outcome is not ok (nor as expected).
rc, out, doc = summarize_folder("missing-rank", {0: OK_RANK})
sc = (doc or {}).get("scenarios", [{}])[0]
check("only rank-0.journal of a world-2 job: exit 1, journal_error naming rank 1 as missing",
      rc == 1 and sc.get("outcome") == "journal_error" and "no journal of rank 1" in sc.get("detail", "")
      and "no journal of rank 1" in out, out)
FREE = ("O\tfree-before-unmap\t4\nB\tfree-before-unmap\tfree_span\t-1\n"
        "E\tfree-before-unmap\tfree_span\t-1\tIN_USE\t1.0\t1000\nD\tfree-before-unmap\n")
rc, out, doc = summarize_folder("missing-ranks-api-error", {0: FREE, 2: FREE})
sc = (doc or {}).get("scenarios", [{}])[0]
check("free-before-unmap (expected api_error) with ranks 1 and 3 missing of 4: exit 1, both named",
      rc == 1 and sc.get("outcome") == "journal_error" and "ranks 1,3" in sc.get("detail", "")
      and "IN_USE" in sc.get("detail", ""), out)
rc, out, doc = summarize_folder("huge-world", {0: OK_RANK.replace("ordered\t2", "ordered\t2000000000")})
check("a journal saying world 2000000000: exit 2, one line naming the file and the world, no report",
      one_usage_line(rc, out, "rank-0.journal line 1: world 2000000000") and doc is None, out)
rc, out, doc = summarize_folder("foreign-name", {0: OK_RANK, 1: OK_RANK, 99999999999: OK_RANK})
sc = (doc or {}).get("scenarios", [{}])[0]
check("rank-99999999999.journal beside a world-2 job's journals: named as foreign, outcome damaged, exit 1",
      rc == 1 and sc.get("outcome") == "damaged" and "rank-99999999999.journal is foreign" in sc.get("detail", "")
      and [r.get("rank") for r in sc.get("ranks", [])] == [0, 1], out)
rc, out, doc = summarize_folder("foreign-name-alone", {99999999999: OK_RANK})
check("a folder holding only rank-99999999999.journal: exit 2, one line naming it",
      one_usage_line(rc, out, "rank-99999999999.journal is foreign"), out)

# ---- 3. A rank stopped inside a step: the peers' own bound reports first, naming the step and the rank ---------
TD = tool("mori-teardown-repro")
jdir = os.path.join(TMP, "stopped")
rep = os.path.join(TMP, "stopped.json")
rc, out, secs = run([*MPIRUN, "-n", "4", TD, "--backend", "host", "--timeout-s", "3", "--scenario", "ordered",
                     "--journal-dir", jdir, "--json", rep], {"MORI_FAULT": "teardown.barrier.hang:1"}, timeout=120)
doc = harness.load_json(rep) or {}
what = doc.get("bound_expired", {}).get("what", "")
check("4 ranks, rank 1 stopped in step barrier: exit 4 within the bound and a margin", rc == 4 and secs < 30,
      f"rc {rc}, {secs:.1f} s\n{out}")
check("a peer's own bound reports first: step barrier and rank 1 named, the table printed, no watchdog line",
      "step barrier of scenario ordered" in out and re.search(r"ranks? not arrived: [0-9,]*1", out)
      and "scenario " in out and "outcome" in out and "watchdog" not in out, out)
detail = (doc.get("scenarios") or [{}])[0].get("detail", "")
check("the report names the step and the missing rank", "step barrier of scenario ordered" in what
      and "step barrier ran past its bound" in detail and "ranks not arrived: 1" in detail,
      json.dumps(doc.get("bound_expired")) + "\n" + json.dumps(doc.get("scenarios"))[:2000])
rc, out, doc = run([TD, "--backend", "host", "--summarize", jdir])[0:2] + (None,)
check("--summarize afterwards: hang in step barrier, seconds written as people read them",
      rc == 1 and "step barrier ran past its bound" in out and not re.search(r"\d\.\d{6}", out), out)

# No bound of its own (a step stopped on every rank): the watchdog, a backstop, fires later and names the step.
jdir = os.path.join(TMP, "watchdog")
# Every rank ends itself with 4. MPICH's mpiexec would kill the others (9) as soon as the first one exits, and its
# own code then depends on which it reports: -disable-auto-cleanup lets each rank exit by itself.
keep = ["-disable-auto-cleanup"] if harness.mpi_vendor(MPIRUN) == "MPICH" else []
rc, out, secs = run([*MPIRUN, *keep, "-n", "4", TD, "--backend", "host", "--timeout-s", "1", "--scenario", "ordered",
                     "--journal-dir", jdir], {"MORI_FAULT": "teardown.unmap_local.hang:*"}, timeout=120)
# Each rank's watchdog ends it with _exit(4). Once in CI, under load, MPICH's mpiexec reported the job as ended by a
# hangup signal after all four ranks had said so: there the launcher's code is not the ranks', and the check is
# every rank's own line with a failing code.
ended = len(re.findall(r"ending this rank with exit code 4", out))
check("every rank stopped in unmap_local: the watchdog fires after the bound and its margin, naming the step",
      (rc == 4 or (bool(keep) and rc != 0 and ended == 4)) and "step unmap_local of scenario ordered ran past 6.1 s"
      in out and secs >= 6, f"{secs:.1f} s\n{out}")
rc, out, _ = run([TD, "--backend", "host", "--summarize", jdir])
check("--summarize: hang in unmap_local, the bound as people read it", rc == 1 and "hung in step unmap_local" in out
      and "6.1 s" in out and not re.search(r"\d\.\d{6}", out), out)

finish()
