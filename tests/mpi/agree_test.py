#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""True revisions, one job of one build, the first failure in time, and the settled surprises, with
real mpirun jobs on the host runtime (docs/reliability.md: "Revisions", "One job, one build", "Fault injection";
docs/mori-teardown-repro.md; docs/mori-a2a.md).

Every path a case uses lies in a fresh temporary folder made here; nothing is left behind.
usage: agree_test.py SOURCE_DIR BUILD_DIR BIN_DIR MPIRUN...
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: harness.py
import harness  # noqa: E402
from harness import check, finish  # noqa: E402

if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
    print(__doc__)
    sys.exit(0)

SRC, BUILD, BIN = sys.argv[1:4]
MPIRUN = sys.argv[4:]
A2A = os.path.join(BIN, "mori-a2a")
PROBE = os.path.join(BIN, "mori-probe")
TD = os.path.join(BIN, "mori-teardown-repro")
TMP = tempfile.mkdtemp(prefix="mori-agree-")
HEX40 = re.compile(r"^[0-9a-f]{40}$")


def run(cmd, env=None, timeout=120):
    rc, out, _ = harness.job(cmd, dict(env or {}, TMPDIR=TMP), timeout=timeout, cwd=TMP)
    return rc, out


def mpi(*parts, env=None, timeout=120):
    return run([*MPIRUN, *parts], env, timeout)


load = harness.load_json


def git(*args, cwd=None):
    p = subprocess.run(["git", *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                       timeout=60)
    return p.returncode, p.stdout.strip()


base = harness.leftovers(TMP)

# ---- A. Revisions that are true --------------------------------------------------------------------------------
out_json = os.path.join(TMP, "probe.json")
rc, out = run([PROBE, "--backend", "host", "--timeout-s", "20", "--json", out_json])
doc = load(out_json)
meta = (doc or {}).get("meta", {})
header = os.path.join(BUILD, "generated", "mori_build_revision.h")
htext = open(header).read() if os.path.exists(header) else ""
stale = meta.get("build_stale")
if harness.git_checkout(SRC):
    check("meta.git_revision is the full commit (no suffix), the one the build recorded; git_clean a bool",
          rc == 0 and HEX40.match(meta.get("git_revision", "")) is not None
          and isinstance(meta.get("git_clean"), bool) and f'MORI_BUILD_COMMIT "{meta.get("git_revision")}"' in htext,
          out + json.dumps(meta)[:2000] + htext)
    check("meta.build_stale is a bool where the source tree can be read, with a warning on stderr exactly when true",
          isinstance(stale, bool) and (("older than its source tree" in out) == stale), out + str(stale))
else:  # a copy of the tree without .git (a GPU machine's): the build recorded "unknown" or the revision it was given
    check("a build from a tree without .git: meta.git_revision is what the build recorded, build_stale null and "
          "no warning (the source tree cannot be read)",
          rc == 0 and meta.get("git_revision") and f'MORI_BUILD_COMMIT "{meta.get("git_revision")}"' in htext
          and stale is None and "older than" not in out, out + json.dumps(meta)[:2000] + htext)
    harness.not_run("meta.git_revision is the full commit the build recorded, build_stale a bool",
                    f"needs a git checkout; {SRC} has no .git")

# Another HEAD: the tool asks git in its source folder; GIT_DIR makes that another repository.
other = os.path.join(TMP, "other")
os.makedirs(other)
git("init", "-q", cwd=other)
git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "x", cwd=other)
rc, out = run([PROBE, "--backend", "host", "--timeout-s", "20", "--json", out_json],
              {"GIT_DIR": os.path.join(other, ".git")})
meta = (load(out_json) or {}).get("meta", {})
if harness.git_checkout(SRC):  # a build without a checkout records no source folder to ask
    check("a source tree at another HEAD: build_stale true and a warning naming both commits",
          rc == 0 and meta.get("build_stale") is True and "older than its source tree" in out and
          meta.get("git_revision", "") in out, out)
else:
    harness.not_run("a source tree at another HEAD: build_stale true", f"needs a git checkout; {SRC} has no .git")
rc, out = run([PROBE, "--backend", "host", "--timeout-s", "20", "--json", out_json],
              {"GIT_DIR": os.path.join(TMP, "no-such-repository")})
meta = (load(out_json) or {}).get("meta", {})
check("a source tree that cannot be read: build_stale null, no warning",
      rc == 0 and "build_stale" in meta and meta["build_stale"] is None and "older than" not in out, out)

# The build-time script: a given revision must be a commit; the header is rewritten only when it changed.
script = os.path.join(SRC, "cmake", "revision.cmake")
hdr = os.path.join(TMP, "rev.h")


NOGIT = os.path.join(TMP, "nogit")  # a tree git cannot read: the given revision is used
os.makedirs(NOGIT)


def stamp(rev, clean=""):
    p = subprocess.run(["cmake", f"-DSRC={NOGIT}", f"-DOUT={hdr}", f"-DGIVEN_REV={rev}", f"-DGIVEN_CLEAN={clean}",
                        "-P", script], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
    return p.returncode, p.stdout


rc, out = stamp("7b8a5148c0c0-dirty")
check("-DMORI_GIT_REV with a suffix is refused", rc != 0 and "is not a commit" in out and not os.path.exists(hdr),
      out)
rc, out = stamp("0123456789abcdef0123456789abcdef01234567", "ON")
t1 = os.stat(hdr).st_mtime_ns if os.path.exists(hdr) else 0
text = open(hdr).read() if t1 else ""
rc2, _ = stamp("0123456789abcdef0123456789abcdef01234567", "ON")
check("-DMORI_GIT_REV: the commit as given, clean as given, no source folder; unchanged header not rewritten",
      rc == 0 and rc2 == 0 and '"0123456789abcdef0123456789abcdef01234567"' in text and "CLEAN 1" in text and
      'SOURCE_DIR ""' in text and os.stat(hdr).st_mtime_ns == t1, out + text)

# The digest of a modified tree does not follow the user's git configuration (diff.noprefix changes `git diff`).
DIRTY = os.path.join(TMP, "dirty")
os.makedirs(DIRTY)
git("init", "-q", cwd=DIRTY)
with open(os.path.join(DIRTY, "f.txt"), "w") as f:
    f.write("one\n")
git("add", "f.txt", cwd=DIRTY)
git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "x", cwd=DIRTY)
with open(os.path.join(DIRTY, "f.txt"), "w") as f:
    f.write("two\n")
digests = []
for i, config in enumerate(("", "[diff]\n\tnoprefix = true\n\tmnemonicPrefix = true\n")):
    home = os.path.join(TMP, f"home{i}")
    os.makedirs(home)
    with open(os.path.join(home, ".gitconfig"), "w") as f:
        f.write(config)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(HOME=home, XDG_CONFIG_HOME=os.path.join(home, ".config"))
    out_h = os.path.join(TMP, f"dirty{i}.h")
    p = subprocess.run(["cmake", f"-DSRC={DIRTY}", f"-DOUT={out_h}", "-P", script], stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=60, env=env)
    h = open(out_h).read() if os.path.exists(out_h) else p.stdout
    digests.append(next((ln for ln in h.splitlines() if "TREE_DIGEST" in ln), ""))
check("a modified tree's digest is the same whatever the user's git configuration (diff.noprefix)",
      digests[0] and "CLEAN 0" in h and digests[0] == digests[1] and 'TREE_DIGEST ""' not in digests[0] and
      "MORI_BUILD_TREE_COMMAND" in h, str(digests) + h)

# ---- B. One job, one build -------------------------------------------------------------------------------------
rc, out = mpi("-n", "1", A2A, "--backend", "host", "--timeout-s", "5", ":",
              "-n", "1", PROBE, "--backend", "host", "--timeout-s", "5")
lines = [ln for ln in out.splitlines() if "ranks 0 run mori-a2a, ranks 1 run mori-probe" in ln]
check("a job of two tools: exit 2 on every rank naming the ranks that run each", rc == 2 and len(lines) == 2, out)
for point, what in (("revision.library", "with library"), ("revision.app", "at fa17ed")):
    rc, out = mpi("-n", "2", PROBE, "--backend", "host", "--timeout-s", "5", env={"MORI_FAULT": f"{point}:1"})
    lines = [ln for ln in out.splitlines() if "run different code: ranks 0 run mori-probe at" in ln and
             "ranks 1 run mori-probe at" in ln and what in ln]
    check(f"a rank of another revision ({point}:1): exit 2 on every rank naming rank 1", rc == 2 and len(lines) == 2,
          out)
rc, out = mpi("-n", "1", PROBE, "--backend", "host", "--timeout-s", "5", env={"MORI_FAULT": "revision.library:0"})
check("one rank whose library is another build than its app: exit 2", rc == 2 and "with library" in out, out)

# ---- D. Surprises settled --------------------------------------------------------------------------------------
for arg, text in (("4,,8", "--chunk-kib: item 2 is empty"), ("1,1,1,1", "--chunk-kib: item 2 '1' repeats item 1"),
                  ("1,1024B", "item 2 '1024B' repeats item 1"),
                  ("4X", "'4X' is not a size (item 1; accepted: KiB as a number, or with a unit B, K, M, G")):
    rc, out = mpi("-n", "2", A2A, "--backend", "host", "--timeout-s", "5", "--chunk-kib", arg)
    n = sum(text in ln for ln in out.splitlines())
    check(f"--chunk-kib {arg}: exit 2 naming the item on every rank", rc == 2 and n == 2, out)
a2a_json = os.path.join(TMP, "a2a.json")
rc, out = mpi("-n", "2", A2A, "--backend", "host", "--timeout-s", "20", "--sync", "host", "--iters", "2",
              "--chunk-kib", "4096B,8", "--skew-us", "0", "--json", a2a_json)
cfg = (load(a2a_json) or {}).get("config", {})
check("--chunk-kib 4096B,8: 4096 bytes and 8 KiB", rc == 0 and cfg.get("chunks") == [4096, 8192], out + str(cfg))
for arg in ("nan", "-5", "inf", "-0.5"):
    rc, out = mpi("-n", "2", A2A, "--backend", "host", "--timeout-s", "5", "--skew-us", arg)
    # nan and inf are no plain decimal numbers (docs/usage.md, "Common options"): refused as such, before the range.
    text = (f"--skew-us: '{arg}' is not a plain decimal number" if arg in ("nan", "inf")
            else "--skew-us: must be -1 (the default)")
    n = sum(text in ln for ln in out.splitlines())
    check(f"--skew-us {arg}: exit 2 on every rank", rc == 2 and n == 2, out)

rc, out = mpi("-n", "2", A2A, "--backend", "host", "--timeout-s", "20", "--sync", "host", "--iters", "2",
              "--chunk-kib", "4", "--json", a2a_json, env={"MORI_FAULT": "a2a.timed:99,a2a.stale:1"})
faults = (load(a2a_json) or {}).get("meta", {}).get("faults")
check("MORI_FAULT a2a.timed:99 at 2 ranks: a warning that it never fired; meta.faults records a2a.stale fired on 1",
      "point a2a.timed:99 never fired" in out and
      faults == [{"point": "a2a.timed", "rank": "99", "fired_on": []},
                 {"point": "a2a.stale", "rank": "1", "fired_on": [1]}], out + str(faults))

# 8 ranks, a bound of 10 ms: the job writes the JSON of what happened; --summarize tells it from a crash. Rank 5
# hangs at its first barrier, so that the bound expires whatever the machine's speed (on 16 idle cores the scenario
# can end within 10 ms).
jd = os.path.join(TMP, "j8")
td_json = os.path.join(TMP, "td8.json")
rc, out = mpi("-n", "8", TD, "--backend", "host", "--timeout-s", "0.01", "--journal-dir", jd, "--json", td_json,
              timeout=180, env={"MORI_FAULT": "teardown.barrier.hang:5"})
doc = load(td_json)
# Which rank writes last is a race (every rank whose bound expired writes; mpirun may end rank 0 first), and a
# rank that got through may still write its own report: the job's JSON exists, is of this job, and where an
# expired rank wrote it, it names the wait.
check("8 ranks, --timeout-s 0.01: exit 4 and a JSON of what happened (bound_expired naming the wait where an "
      "expired rank wrote it)",
      rc == 4 and doc is not None and doc["meta"]["world"] == 8
      and (("bound_expired" not in doc) or bool(doc["bound_expired"].get("what"))), out)
# Where the bound expired after the journals began, --summarize calls a rank with an H line a hang, never a crash.
hung = set()
for name in os.listdir(jd) if os.path.isdir(jd) else []:
    if name.startswith("rank-") and name.endswith(".journal"):
        if "\nH\t" in "\n" + open(os.path.join(jd, name)).read():
            hung.add(int(name[5:-8]))
if hung:
    rc, out = run([TD, "--backend", "host", "--summarize", jd, "--json", os.path.join(TMP, "s8.json")])
    sdoc = load(os.path.join(TMP, "s8.json")) or {}
    got = {r["rank"]: r["outcome"] for s in sdoc.get("scenarios", []) for r in s["ranks"]}
    check(f"--summarize after an expired bound: ranks {sorted(hung)} are hang, not crash",
          all(got.get(r) == "hang" for r in hung), out + str(got))

# ---- C. The first failure in time ------------------------------------------------------------------------------
d = os.path.join(TMP, "first")
os.makedirs(d)
for rank, err, t in ((0, "ENOENT", 2000), (1, "EMFILE", 1000), (2, "ENOENT", 3000)):
    with open(os.path.join(d, f"rank-{rank}.journal"), "w") as f:
        f.write(f"O\tdivergent-order\t3\nB\tdivergent-order\tw1.rendezvous\t-1\n"
                f"E\tdivergent-order\tw1.rendezvous\t-1\t{err}\t12.5\t{t}\nD\tdivergent-order\n")
rc, out = run([TD, "--backend", "host", "--summarize", d, "--json", os.path.join(TMP, "first.json")])
sc = ((load(os.path.join(TMP, "first.json")) or {}).get("scenarios") or [{}])[0]
check("the summary names the first failure in time (EMFILE on rank 1), not rank 0's later ENOENT",
      sc.get("detail", "").startswith("w1.rendezvous -> EMFILE on rank 1") and "ranks 0,2 failed after it" in
      sc.get("detail", ""), out)

# The descriptor preflight counts the windows the run holds at once (docs/setup.md, "Large jobs"): 44 is far
# below what 8 windows need, so every rank refuses before any window, naming the limit and the windows, and no
# journal is begun (this job once failed half-way, EMFILE on rank 1, as the journals of case C above say).
jd = os.path.join(TMP, "emfile")
rc, out = mpi("-n", "4", "prlimit", "--nofile=44", TD, "--backend", "host", "--timeout-s", "20", "--scenario",
              "divergent-order", "--windows", "8", "--journal-dir", jd, "--json", os.path.join(TMP, "emfile.json"),
              timeout=180)
journals = [n for n in os.listdir(jd) if n.endswith(".journal")] if os.path.isdir(jd) else []
check("prlimit --nofile=44 at 4 ranks with 8 windows: refused before any window on every "
      "rank (exit 2, the limit and the 8 windows named), no journal begun",
      rc == 2 and out.count("descriptor limit (ulimit -n) is 44") >= 1 and "8 window(s)" in out
      and not journals, out + str(journals))

after = harness.leftovers(TMP)
left = [sorted(a - b) for a, b in zip(after, base)]
left[2] = []  # the temporary folder holds this test's own files until it is removed below
check("nothing left behind (processes, sockets, shm)", not any(left), str(left))
shutil.rmtree(TMP, ignore_errors=True)
finish()
