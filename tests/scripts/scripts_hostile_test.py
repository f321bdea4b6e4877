#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Hostile inputs, the scripts' side (docs/reliability.md, "Files the scripts write"): output paths that
are not regular files (the one writer, scripts/mori_results/files.py), output folders that are not folders
(matrix-sweep, scale-sweep, evidence --archive), evidence stopped by SIGTERM, an empty value for every option of
every script and numbers that are not plain decimal (scripts/mori_results/cli.py). Every usage error must be one
line and exit 2, and leave nothing behind; every path lies in a fresh temporary folder made here.

usage: scripts_hostile_test.py BIN_DIR MPIRUN...
"""
import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
import time

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/: harness.py, fixtures/
ROOT = os.path.dirname(TESTS)
SCRIPTS = os.path.join(ROOT, "scripts")
sys.path.insert(0, TESTS)
sys.path.insert(0, SCRIPTS)
import harness  # noqa: E402
from harness import check, finish  # noqa: E402

BIN = os.path.abspath(sys.argv[1])
MPIRUN = sys.argv[2:]
TMP = tempfile.mkdtemp(prefix="mori-scripts-hostile-")
FIX = os.path.join(ROOT, "tests", "fixtures")
A2A_DOC = os.path.join(FIX, "h200-a2a-w2-r1.json")


def script(name):
    return os.path.join(SCRIPTS, name)


def run(cmd, env=None, timeout=120, cwd=None):
    """(exit code, stdout + stderr text) of cmd, from cwd (default a fresh folder)."""
    cwd = cwd or tempfile.mkdtemp(dir=TMP, prefix="cwd-")
    try:
        p = subprocess.run(cmd, env=dict(os.environ, **(env or {})), cwd=cwd, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
        return p.returncode, p.stdout.decode(errors="replace")
    except subprocess.TimeoutExpired as e:
        return -1, (e.output or b"").decode(errors="replace") + f"\n(did not end within {timeout} s)"


def lines(out):
    return [ln for ln in out.splitlines() if ln.strip()]


def one_usage_line(rc, out, *texts):
    """Exit 2 and exactly one line of output, holding every text."""
    ls = lines(out)
    return rc == 2 and len(ls) == 1 and all(t in ls[0] for t in texts)


def entries(folder):
    return sorted(os.listdir(folder))


# ---- Output files: only a regular file or a new name; anything else is exit 2 before any work ------------
def targets(folder):
    """{what: path} of output paths that are not regular files or new names, made in folder (a symlink to a
    regular file is followed, as the tools follow it: checked below)."""
    os.makedirs(folder)
    out = {}
    out["a FIFO"] = os.path.join(folder, "fifo")
    os.mkfifo(out["a FIFO"])
    if os.geteuid() == 0:
        out["a character device"] = os.path.join(folder, "null")  # a second /dev/null, never the real one
        os.mknod(out["a character device"], 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    out["a symlink loop"] = os.path.join(folder, "l1")
    os.symlink("l2", out["a symlink loop"])
    os.symlink("l1", os.path.join(folder, "l2"))
    out["a folder"] = os.path.join(folder, "dir")
    os.mkdir(out["a folder"])
    regular = os.path.join(folder, "regular.json")
    with open(regular, "w") as f:
        f.write("keep\n")
    out["a symlink to nothing"] = os.path.join(folder, "dangling")
    os.symlink("nowhere.json", out["a symlink to nothing"])
    return out


def state(folder):
    """What each entry of folder is (type, link target, content of a regular file): unchanged after a refusal."""
    out = {}
    for name in entries(folder):
        p = os.path.join(folder, name)
        st = os.lstat(p)
        out[name] = (stat.S_IFMT(st.st_mode), os.readlink(p) if stat.S_ISLNK(st.st_mode) else None,
                     open(p, "rb").read() if stat.S_ISREG(st.st_mode) else None, st.st_rdev)
    return out


if os.geteuid() != 0:
    print("note: not root: the character-device target (mknod) is left out")
WRITERS = [
    ("perf-check --json", lambda t: [script("perf-check"), A2A_DOC, A2A_DOC, "--json", t]),
    ("faults --json", lambda t: [sys.executable, script("faults"), "--backend", "host", "--bin", BIN, "--json", t]),
    ("compare --json", lambda t: [sys.executable, script("compare"), "--json", t]),
    ("matrix_sweep.py --out", lambda t: [sys.executable, os.path.join(SCRIPTS, "matrix_sweep.py"), "--probe",
                                         A2A_DOC, "--world", "2", "--goal", "0.9", "--out", t]),
]
for label, cmd in WRITERS:
    folder = os.path.join(TMP, "out-" + label.split()[0])
    paths = targets(folder)
    before = state(folder)
    for what, path in paths.items():
        rc, out = run(cmd(path), timeout=60)
        check(f"{label} onto {what}: exit 2, one line naming it, before any work",
              one_usage_line(rc, out, os.path.basename(path), what), out)
    check(f"{label}: every target as it was, nothing left beside them", state(folder) == before,
          f"{before}\n{state(folder)}")

# render-results: --summary DIR writes DIR/summary.md; the default mode RESULTS/README.md.
for label, name, cmd in [("render-results --summary", "summary.md", lambda d: ["--summary", d]),
                         ("render-results --results", "README.md", lambda d: ["--results", d])]:
    for what in ("a FIFO", "a symlink loop", "a symlink to nothing", "a folder"):
        d = tempfile.mkdtemp(dir=TMP, prefix="render-")
        t = os.path.join(d, name)
        if what == "a FIFO":
            os.mkfifo(t)
        elif what == "a symlink loop":
            os.symlink(name, t)
        elif what == "a symlink to nothing":
            os.symlink("other.md", t)
        else:
            os.mkdir(t)
        before = state(d)
        rc, out = run([script("render-results"), *cmd(d)], timeout=60)
        check(f"{label} with {name} {what}: exit 2, one line, left as it was",
              one_usage_line(rc, out, name, what) and state(d) == before, out)

# The writer itself: a FIFO swapped in while the new content is written is refused, never replaced.
from mori_results import files  # noqa: E402
from mori_results.errors import Malformed  # noqa: E402

d = tempfile.mkdtemp(dir=TMP, prefix="swap-")
t = os.path.join(d, "r.json")
with open(t, "w") as f:
    f.write("old\n")
os.chmod(t, 0o600)
files.write_text(t, "new\n", "--json")
check("the writer replaces a regular file, keeping its mode 0600",
      open(t).read() == "new\n" and stat.S_IMODE(os.stat(t).st_mode) == 0o600 and entries(d) == ["r.json"],
      repr(entries(d)))
refused = None
try:
    with files.replacing(t, "--json") as f:
        f.write("newer\n")
        os.unlink(t)
        os.mkfifo(t)
except Malformed as e:
    refused = str(e)
check("a FIFO swapped in during the write: refused, still a FIFO, no temporary file left",
      refused is not None and "a FIFO" in refused and stat.S_ISFIFO(os.lstat(t).st_mode) and entries(d) == ["r.json"],
      f"{refused!r} {entries(d)}")
t2, link = os.path.join(d, "r2.json"), os.path.join(d, "link.json")
with open(t2, "w") as f:
    f.write("old\n")
os.symlink("r2.json", link)
files.write_text(link, "through\n", "--json")
check("the writer follows a symlink to a regular file, as the tools do: the file replaced, the link kept",
      open(t2).read() == "through\n" and os.readlink(link) == "r2.json"
      and entries(d) == ["link.json", "r.json", "r2.json"], repr(entries(d)))
os.unlink(link)
os.unlink(t2)
rc, out = run([script("perf-check"), A2A_DOC, A2A_DOC, "--json", os.path.join(d, "new.json")])
check("perf-check --json to a new name: exit 0, the report written, nothing else left",
      rc == 0 and json.load(open(os.path.join(d, "new.json")))["schema"].startswith("mori.perf-check/")
      and entries(d) == ["new.json", "r.json"], out)
rc, out = run([script("perf-check"), A2A_DOC, A2A_DOC, "--json", "-"])
check("perf-check --json -: the report on stdout", rc == 0 and '"schema": "mori.perf-check/' in out, out)

# ---- matrix-sweep --out: '' or what is not a folder is exit 2 before anything runs; relative from the caller --
SWEEP_ENV = {"MORI_BIN": BIN, "MORI_MPIRUN": " ".join(MPIRUN)}
d = tempfile.mkdtemp(dir=TMP, prefix="sweep-")
paths = targets(os.path.join(d, "t"))
a_file = os.path.join(d, "t", "regular.json")
root_before = set(os.listdir("/"))
rc, out = run([script("matrix-sweep"), "--out", ""], env=SWEEP_ENV)
check("matrix-sweep --out '': exit 2, one line, nothing written into /",
      one_usage_line(rc, out, "--out: an empty value") and set(os.listdir("/")) <= root_before, out)
before = state(os.path.join(d, "t"))
for what, path in [("a file", a_file)] + [(w, p) for w, p in paths.items() if w in ("a FIFO", "a character device",
                                                                                     "a symlink loop")]:
    rc, out = run([script("matrix-sweep"), "--out", path], env=SWEEP_ENV)
    check(f"matrix-sweep --out onto {what}: exit 2, one line naming it", one_usage_line(rc, out, "--out", path), out)
os.mkfifo(os.path.join(paths["a folder"], "probe.log"))
rc, out = run([script("matrix-sweep"), "--out", paths["a folder"]], env=SWEEP_ENV, timeout=60)
check("matrix-sweep --out DIR whose probe.log is a FIFO: exit 2 at once naming it, no hang",
      one_usage_line(rc, out, "probe.log", "a FIFO"), out)
os.unlink(os.path.join(paths["a folder"], "probe.log"))
check("matrix-sweep: the refused targets are as they were", state(os.path.join(d, "t")) == before)
cwd = tempfile.mkdtemp(dir=TMP, prefix="sweep-cwd-")
rc, out = run([script("matrix-sweep"), "--world", "2", "--out", "rel", "--", "--backend", "host"], env=SWEEP_ENV,
              cwd=cwd, timeout=300)
check("matrix-sweep --out rel (relative): written under the caller's folder",
      rc == 0 and os.path.isfile(os.path.join(cwd, "rel", "matrix-sweep.json"))
      and os.path.isfile(os.path.join(cwd, "rel", "probe.json")), out)

# ---- scale-sweep --out: a symlink loop, a file, a FIFO: exit 2, one line, before any job ------------------
d = tempfile.mkdtemp(dir=TMP, prefix="scale-")
paths = targets(os.path.join(d, "t"))
before = state(os.path.join(d, "t"))
for what in ("a symlink loop", "a FIFO", "a symlink to nothing"):
    rc, out = run([script("scale-sweep"), "--bin", BIN, "--out", paths[what]])
    check(f"scale-sweep --out onto {what}: exit 2, one line naming it, no job", one_usage_line(rc, out, "--out", what)
          and "scale-sweep: mori-a2a" not in out, out)
os.symlink("l1", os.path.join(paths["a folder"], "scale-sweep.json"))
rc, out = run([script("scale-sweep"), "--bin", BIN, "--out", paths["a folder"]])
check("scale-sweep --out DIR whose scale-sweep.json is a symlink: exit 2, one line, before any job",
      one_usage_line(rc, out, "scale-sweep.json", "a symlink"), out)
os.unlink(os.path.join(paths["a folder"], "scale-sweep.json"))
check("scale-sweep: the refused targets are as they were", state(os.path.join(d, "t")) == before)

# ---- evidence --archive checked up front like --out; SIGTERM leaves no /tmp/mori-evidence-* ----------------
EVIDENCE = [sys.executable, script("evidence"), "--preset", "host", "--backend", "host", "--bin", BIN,
            "--allow-dirty"]
if not harness.git_checkout(ROOT):
    EVIDENCE += harness.evidence_revision(BIN)[2]
EV_ENV = {"MORI_MPIRUN": " ".join(MPIRUN)}
d = tempfile.mkdtemp(dir=TMP, prefix="evidence-")
paths = targets(os.path.join(d, "t"))
before = state(os.path.join(d, "t"))
for what in ("a folder", "a FIFO", "a symlink loop", "a symlink to nothing"):
    t0 = time.monotonic()
    rc, out = run([*EVIDENCE, "--out", os.path.join(d, "o"), "--archive", paths[what]], env=EV_ENV, timeout=60)
    check(f"evidence --archive onto {what}: exit 2 at once, one line naming it, nothing built or run",
          one_usage_line(rc, out, "--archive", what) and time.monotonic() - t0 < 30
          and not os.path.exists(os.path.join(d, "o")), out)
check("evidence: the refused archive targets are as they were", state(os.path.join(d, "t")) == before)

private_tmp = tempfile.mkdtemp(dir=TMP, prefix="evidence-tmpdir-")
out_dir = os.path.join(d, "results")
# A launcher that takes its time, so that SIGTERM finds the run inside its first step whatever the machine's speed
# (the host preset's steps take a tenth of a second each: a run could end before the signal); the step's process
# group, this sleep included, is what evidence must end.
slow_launcher = os.path.join(d, "slow-launcher")
with open(slow_launcher, "w") as f:
    f.write("#!/bin/sh\nsleep 300\nexec " + " ".join(shlex.quote(a) for a in MPIRUN) + ' "$@"\n')
os.chmod(slow_launcher, 0o755)
p = subprocess.Popen([*EVIDENCE, "--out", out_dir], cwd=ROOT,
                     env=dict(os.environ, TMPDIR=private_tmp, **dict(EV_ENV, MORI_MPIRUN=slow_launcher)),
                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
seen, t_start = [], time.monotonic()
for line in p.stdout:  # the run has begun its steps: the work folder exists and a step's job is running
    seen.append(line)
    if line.startswith("evidence: host ("):
        break
time.sleep(2)
work = [n for n in os.listdir(private_tmp) if n.startswith("mori-evidence-")]
p.send_signal(15)  # SIGTERM
try:
    rest = p.communicate(timeout=60)[0]
except subprocess.TimeoutExpired:
    p.kill()
    rest = p.communicate()[0] + "\n(did not end within 60 s of SIGTERM)"
out = "".join(seen) + rest
left = [n for n in os.listdir(private_tmp) if n.startswith("mori-evidence-")]
check("evidence under SIGTERM: its work folder existed, then exit 143 saying so, no /tmp/mori-evidence-* left",
      bool(work) and p.returncode == 143 and "stopped by SIGTERM" in out and not left, f"{work} {left}\n{out}")
manifests = [os.path.join(r, f) for r, _, fs in os.walk(out_dir) for f in fs if f == "manifest.json"]
check("evidence under SIGTERM: the folder's manifest says complete: false",
      len(manifests) == 1 and json.load(open(manifests[0]))["complete"] is False, repr(manifests))

# ---- An empty value is a usage error for every option of every script that takes one ---------------------
# The options are read from each script's --help: argparse's option table (`  --json PATH   ...`) and the usage
# lines (`[--out DIR]`). Stand-ins for the commands that start work come first on the PATH
# (tests/scripts/scripts_help_test.py) so that a script that did not refuse could not start anything.
import scripts_help_test  # noqa: E402

OPTION_ROW = re.compile(r"^  (?:-\w(?: \S+)?, )?(--[\w-]+)(?:[ =](\S+))?(?:\s{2,}|$)")
USAGE_OPTION = re.compile(r"\[(--[\w-]+)[ =]([^\]\s|][^\]\s]*)")
EXPECTED = {"perf-check": 12, "render-results": 3, "evidence": 12, "compare": 14, "faults": 15, "scale-sweep": 6,
            "matrix-sweep": 3, "amd-chroot": 1, "amd-kernels": 1, "matrix_sweep.py": 7}


def value_options(help_text):
    """{option: whether argparse reads it (then `--opt=` is the same as `--opt ''`)}."""
    found = {m.group(1): True for m in map(OPTION_ROW.match, help_text.splitlines()) if m and m.group(2)}
    return {**{m.group(1): False for m in USAGE_OPTION.finditer(help_text)}, **found}


stand_ins = tempfile.mkdtemp(dir=TMP, prefix="stand-ins-")
called = os.path.join(stand_ins, "called.log")
scripts_help_test.make_stand_ins(stand_ins, called)
GUARD = {"PATH": stand_ins + os.pathsep + os.environ.get("PATH", "")}
counts = {}
for name in scripts_help_test.executables() + ["matrix_sweep.py"]:  # the last: matrix-sweep's summary
    cmd = [sys.executable, script(name)] if name.endswith(".py") else [script(name)]
    rc, help_text = run([*cmd, "--help"], env=GUARD)
    options = value_options(help_text)
    counts[name] = len(options)
    if not options:
        continue
    bad = []
    for opt, argparse_reads_it in sorted(options.items()):
        for argv in ([opt, ""], [opt + "="]) if argparse_reads_it else ([opt, ""],):
            rc, out = run([*cmd, *argv], env=GUARD, timeout=60)
            if not one_usage_line(rc, out, f"{opt}: an empty value"):
                bad.append((" ".join(argv), rc, out[-300:]))
    check(f"scripts/{name}: an empty value of each of its {len(options)} value options is exit 2, one line",
          not bad, repr(bad))
short = {n: (counts.get(n), k) for n, k in EXPECTED.items() if (counts.get(n) or 0) < k}
check("the value options were found in every script's --help", not short, f"found, at least: {short}")
check("no stand-in was called (nothing started)", not os.path.exists(called),
      open(called).read() if os.path.exists(called) else "")

# ---- A number is plain decimal: no blank around it, no sign but '-', no hex, no exponent, no nan ----------
NUMBERS = [("evidence", ["--deadline-s"], [" 5", "5 ", "0x10", "1e3", "nan", "+5"]),
           ("perf-check", ["--tolerance", "--runs", "--run-timeout-s"], [" 3", "0x3", "3e0"]),
           ("faults", ["--timeout-s", "--settle-s", "--budget-s", "--chunk-kib", "--iters"], [" 5", "0x10", "1_0"]),
           ("faults", ["--worlds"], ["4, 8", "4,,8", "0x4"]),
           ("compare", ["--iters", "--graph", "--nproc"], [" 50", "0x20", "²"]),
           ("compare", ["--chunk-kib"], ["256, 4096", " 256", "²"]),
           ("scale-sweep", ["--fit-from", "--timeout-s"], [" 8", "1e2", "0x8"]),
           ("scale-sweep", ["--worlds"], ["2, 4,8", "2,+4,8"]),
           ("matrix-sweep", ["--world", "--goal"], [" 2", "0x1", "9e-1"])]
for name, opts, values in NUMBERS:
    bad = []
    for opt in opts:
        for v in values:
            extra = ["--json", os.path.join(TMP, "c.json")] if name == "compare" else []
            rc, out = run([script(name), opt, v, *extra], env=GUARD, timeout=60)
            if not (rc == 2 and len(lines(out)) == 1 and opt in out and "Traceback" not in out):
                bad.append((opt, v, rc, out[-300:]))
    check(f"scripts/{name} {' '.join(opts)}: {values} each exit 2, one line naming the option", not bad, repr(bad))
# ---- A number is also in its option's range: refused before any job (scripts/mori_results/cli.py, bounded) -----
RANGES = [("faults", ["--backend", "host", "--bin", BIN], [("--timeout-s", "-1"), ("--timeout-s", "0"),
                                                           ("--settle-s", "-1"), ("--iters", "0"),
                                                           ("--iters", "-5"), ("--announce-limit-s", "-2"),
                                                           ("--chunk-kib", "0"), ("--graph-k", "-1"),
                                                           ("--budget-s", "-3")]),
          ("scale-sweep", ["--bin", BIN], [("--fit-from", "-3"), ("--fit-from", "0"), ("--timeout-s", "-1")]),
          ("perf-check", ["--ab", "HEAD", "--baseline-bin", BIN, "--current-bin", BIN],
           [("--run-timeout-s", "-1"), ("--run-timeout-s", "0")]),
          ("compare", ["--json", os.path.join(TMP, "range-compare.json")],
           [("--timeout-s", "0"), ("--nccl-tests-timeout", "-1"), ("--nproc", "-2"), ("--nccl-tests-ctas", "-1")]),
          ("matrix_sweep.py", ["--probe", A2A_DOC, "--goal", "0.9", "--out", os.path.join(TMP, "range-sweep.json")],
           [("--world", "-2"), ("--world", "0"), ("--probe-exit", "-1")])]
for name, base, cases in RANGES:
    bad = []
    for opt, v in cases:
        out_json = os.path.join(TMP, f"range-{name}.json")
        tail = ["--json", out_json] if name == "faults" else []
        tail += ["--", *MPIRUN, "-n", "2", "{bin}/mori-a2a", "--json", "{json}"] if name == "perf-check" else []
        cmd = [sys.executable, script(name)] if name.endswith(".py") else [script(name)]
        rc, out = run([*cmd, *base, opt, v, *tail], env=GUARD, timeout=60)
        written = [p for p in (out_json, os.path.join(TMP, "range-compare.json"),
                               os.path.join(TMP, "range-sweep.json")) if os.path.exists(p)]
        if not (one_usage_line(rc, out, opt) and "Traceback" not in out and not written):
            bad.append((opt, v, rc, out[-300:]))
    check(f"scripts/{name}: a number out of its option's range ({', '.join(o + ' ' + v for o, v in cases)}) "
          "is exit 2, one line naming the option, before any job", not bad, repr(bad))

# ---- A launcher line that cannot be split as a shell would: exit 2, one line, before any work --------------
for label, cmd, env in (("faults --mpirun", [script("faults"), "--backend", "host", "--bin", BIN, "--mpirun",
                                             "mpirun -x 'FOO", "--json", os.path.join(TMP, "q.json")], {}),
                        ("faults with MORI_MPIRUN", [script("faults"), "--backend", "host", "--bin", BIN, "--json",
                                                     os.path.join(TMP, "q.json")], {"MORI_MPIRUN": 'mpirun "-x'}),
                        ("scale-sweep with MPIRUN", [script("scale-sweep"), "--bin", BIN, "--out",
                                                     os.path.join(TMP, "q-sweep")], {"MPIRUN": "mpirun 'x"})):
    rc, out = run(cmd, env=dict(GUARD, **env), timeout=60)
    check(f"{label} holding an unbalanced quote: exit 2, one line naming it, nothing written",
          one_usage_line(rc, out, "as a shell would") and not os.path.exists(os.path.join(TMP, "q.json"))
          and not os.path.exists(os.path.join(TMP, "q-sweep")), out)

rc, out = run([script("perf-check"), A2A_DOC, A2A_DOC, "--tolerance", "3.5"], env=GUARD)
check("perf-check --tolerance 3.5 (plain decimal): accepted", rc == 0, out)
rc, out = run([script("matrix-sweep"), "--goal", ".9", "--world", "x"], env=GUARD)
check("matrix-sweep --goal .9: accepted (the --world after it is what is refused)", rc == 2 and "--world" in out, out)

shutil.rmtree(TMP, ignore_errors=True)
finish()
