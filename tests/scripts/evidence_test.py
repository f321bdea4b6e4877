#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""scripts/evidence rehearsed on the host runtime (preset host, the built tools, written under a temporary --out):
the manifest's fields and every step's status; a run cut short by its deadline leaves a valid folder marked
incomplete, which --resume completes; a dirty tree is refused with nothing written; --help does nothing else; a
copy of the scripts without .git is refused without --revision (and without --bin, whose tools' --version states
it, as from an install) and, without --tree-clean, taken as dirty.

In a tree without .git (a release tarball, a GPU machine's copy) every run states the revision the build recorded
(--revision, and --tree-clean where the build says clean; a stand-in commit where it recorded none) and the dirty
clone, which needs git, is printed NOT RUN: the other checks run, then the test exits 77 (skipped). Under CI=true a
tree without git fails.

usage: evidence_test.py BIN_DIR MPIRUN...
"""
import glob
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: harness.py
from harness import check, evidence_revision, finish, git_checkout, not_run  # noqa: E402

if len(sys.argv) < 3:
    print(__doc__.strip(), file=sys.stderr)
    sys.exit(2)
BIN, MPIRUN = sys.argv[1], sys.argv[2:]
ROOT = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
EVIDENCE = os.path.join(ROOT, "scripts", "evidence")
ENV = dict(os.environ, MORI_MPIRUN=" ".join(MPIRUN))
GIT = git_checkout(ROOT)
STEPS = ["probe", "main-job", "a2a-r1", "a2a-r2", "mutant-none", "mutant-no-barrier", "teardown-ordered", "summary"]


def run(args, cwd=ROOT, timeout=600):
    p = subprocess.run([sys.executable, EVIDENCE, *args], cwd=cwd, env=ENV, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=timeout)
    return p.returncode, p.stdout


def git(*args, cwd=ROOT):
    return subprocess.run(["git", *args], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                          text=True).stdout.strip()


def manifest(folder):
    try:
        with open(os.path.join(folder, "manifest.json")) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        return {"error": str(e)}


tmp = tempfile.mkdtemp(prefix="mori-evidence-test-")
try:
    rc, out = run(["--help"])
    check("--help: exit 0, usage, nothing run", rc == 0 and "usage:" in out and "evidence:" not in out, out)

    if GIT:
        head = git("rev-parse", "HEAD")
        clean = git("status", "--porcelain") == ""
        stated = []
    else:  # no .git: the caller states the revision (docs/evidence.md), here the one the build recorded
        head, clean, stated = evidence_revision(BIN)
    # The tree this test runs from may carry uncommitted work: then the rehearsal is a lab run (--allow-dirty).
    dirty = [] if clean else ["--allow-dirty"]
    out_dir = os.path.join(tmp, "results")
    folder = os.path.join(out_dir, "host", head[:12]) if clean else os.path.join(out_dir, "lab", "host",
                                                                                    head[:12] + "-dirty")
    common = ["--preset", "host", "--backend", "host", "--bin", BIN, "--out", out_dir, *stated, *dirty]

    # A copy of the scripts without .git: the revision must be stated; without --tree-clean it is not known clean.
    bare = os.path.join(tmp, "no-git")
    shutil.copytree(os.path.join(ROOT, "scripts"), os.path.join(bare, "scripts"),
                    ignore=shutil.ignore_patterns("__pycache__"))
    bare_out = os.path.join(tmp, "bare-out")
    bare_run = [sys.executable, os.path.join(bare, "scripts", "evidence"), "--preset", "host", "--backend", "host",
                "--bin", BIN, "--out", bare_out]
    no_bin = [x for i, x in enumerate(bare_run) if x != "--bin" and (i == 0 or bare_run[i - 1] != "--bin")]
    p = subprocess.run(no_bin, cwd=bare, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=120)
    check("without .git, --revision and --bin: exit 2, one line naming --revision, nothing written",
          p.returncode == 2 and "no git metadata" in p.stdout and "--revision" in p.stdout and
          len(p.stdout.strip().splitlines()) == 1 and not os.path.exists(bare_out), p.stdout)
    # An install: no .git, the tools given: their --version states the revision and whether it was clean.
    tools_head = evidence_revision(BIN)[0]
    table = os.path.join(ROOT, "results", "expectations", "a2a-plan.json")
    p = subprocess.run([*bare_run, "--deadline-s", "5", "--allow-dirty", "--plan-table", table], cwd=bare, env=ENV,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    ms = glob.glob(os.path.join(bare_out, "**", "manifest.json"), recursive=True)
    mb = json.load(open(ms[0])) if ms else {}
    check("without .git and --revision, with --bin: the revision the tools' --version reports (clean_by says so)",
          p.returncode == 4 and mb.get("revision") == tools_head and "--version" in mb.get("clean_by", ""),
          p.stdout + json.dumps(mb)[:1000])
    shutil.rmtree(bare_out, ignore_errors=True)
    p = subprocess.run([*bare_run, "--revision", head], cwd=bare, env=ENV, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True, timeout=120)
    check("without .git, --revision but no --tree-clean: refused as dirty (exit 2), nothing written",
          p.returncode == 2 and "dirty" in p.stdout and "--tree-clean" in p.stdout and not os.path.exists(bare_out),
          p.stdout)

    # Cut short: a deadline no step fits in.
    rc, out = run([*common, "--deadline-s", "5"])
    m = manifest(folder)
    check(f"a run cut short by its deadline exits 4 and leaves {folder}/manifest.json with complete false",
          rc == 4 and m.get("complete") is False and m.get("schema") == "mori.evidence/1", out + json.dumps(m))
    check("... every step it did not run is listed in skipped[] with the reason",
          sorted(s["name"] for s in m.get("skipped", [])) == sorted(STEPS) and
          all("deadline" in s["reason"] for s in m.get("skipped", [])), json.dumps(m))
    rc2, out2 = run([*common])
    check("a second run without --resume refuses the existing folder (exit 2)", rc2 == 2 and "--resume" in out2, out2)

    # Resumed: every step runs now.
    rc, out = run([*common, "--resume"])
    m = manifest(folder)
    steps = {s["name"]: s for s in m.get("steps", [])}
    check("--resume completes the folder: complete true, nothing skipped, one resume recorded",
          m.get("complete") is True and m.get("skipped") == [] and len(m.get("resumes", [])) == 1, out)
    check("manifest fields: revision (HEAD" + ("" if GIT else ", as stated") + "), clean, machine host, start_id, "
          "preset, waived []",
          m.get("revision") == head and m.get("clean") is clean and m.get("machine") == "host" and
          m.get("kind") == "host" and bool(m.get("start_id")) and m.get("preset") == "host" and
          m.get("waived") == [], json.dumps(m)[:3000])
    if not GIT:
        check("no .git: clean_by says the cleanliness was stated, not checked",
              m.get("clean_by") == ("--tree-clean (stated by the caller; no .git here)" if clean
                                    else "unknown (no .git here)"), json.dumps(m)[:3000])
    try:
        import jsonschema
    except ImportError:
        jsonschema = None
        not_run("the manifest validates against results/schema/evidence.schema.json",
                "python jsonschema is not importable (scripts/deps installs it)")
    if jsonschema:
        with open(os.path.join(ROOT, "results", "schema", "evidence.schema.json")) as f:
            errors = [e.message for e in jsonschema.Draft7Validator(json.load(f)).iter_errors(m)]
        check("the manifest validates against results/schema/evidence.schema.json", not errors, "\n".join(errors))
    for name in STEPS[:-1]:
        s = steps.get(name, {})
        check(f"step {name}: ok, with command, wall_s, exit_code and outputs that exist",
              s.get("status") == "ok" and isinstance(s.get("command"), list) and s.get("wall_s", -1) >= 0 and
              isinstance(s.get("exit_code"), int) and
              all(os.path.exists(os.path.join(folder, o)) for o in s.get("outputs", ["?"])), json.dumps(s) + out)
    s = steps.get("mutant-no-barrier", {})
    check("the mutant counts as ok because it exits 1 with wrong > 0", s.get("exit_code") == 1, json.dumps(s))
    with open(os.path.join(folder, "main-job.json")) as f:
        doc = json.load(f)
    check("the main job's report has best[] (one per chunk) and no graph rows on the host runtime",
          len(doc.get("best", [])) == 1 and not any(r.get("graph") for r in doc["results"]) and
          doc["config"].get("graph") == 0 and doc["config"].get("graph_auto") is True, json.dumps(doc)[:2000])
    with open(os.path.join(folder, "main-job.txt")) as f:
        text = f.read()
    check("the main job ends with one 'best' line per chunk", text.count("# best  chunk 65536 B:") == 1, text)
    # The summary comes from scripts/render-results --summary; where that mode exists it must succeed, and where
    # it does not the step is recorded as failed, never faked.
    p = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "render-results"), "--help"],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    s = steps.get("summary", {})
    if "--summary" in p.stdout:
        check("summary: ok and summary.md written", s.get("status") == "ok" and
              os.path.exists(os.path.join(folder, "summary.md")), json.dumps(s))
        check("the resumed run exits 0", rc == 0, out)
    else:
        check("summary: recorded as failed where render-results has no --summary (exit 1)",
              s.get("status") == "failed" and rc == 1, json.dumps(s) + out)

    # ---- hostile inputs: exit 2 and one line, never a hang or a traceback ----
    def quick(args, env=ENV, timeout=120):
        try:
            p = subprocess.run([sys.executable, EVIDENCE, *args], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return None, "timed out"
        return p.returncode, p.stdout

    def one_line_2(rc, out, want):
        return rc == 2 and want in out and "Traceback" not in out and len(out.strip().splitlines()) == 1

    hostile = os.path.join(tmp, "hostile")
    os.makedirs(hostile)
    fifo = os.path.join(hostile, "table.fifo")
    os.mkfifo(fifo)
    rc, out = quick([*common, "--out", os.path.join(hostile, "o1"), "--plan-table", fifo], timeout=60)
    check("--plan-table FIFO: exit 2 at once, one line naming it, no hang", one_line_2(rc, out, "FIFO"), out)
    deep = os.path.join(hostile, "deep.json")
    with open(deep, "w") as f:
        f.write("[" * 100000 + "]" * 100000)
    rc, out = quick([*common, "--out", os.path.join(hostile, "o2"), "--plan-table", deep])
    check("--plan-table nested 100,000 deep: exit 2, one line", one_line_2(rc, out, "deep.json"), out)
    a_file = os.path.join(hostile, "a-file")
    with open(a_file, "w") as f:
        f.write("x\n")
    loop = os.path.join(hostile, "loop")
    os.symlink(loop, loop)
    for what, path in (("a file", a_file), ("a FIFO", fifo), ("/dev/null", "/dev/null"), ("a link loop", loop),
                       ("a folder no one can make (under /proc)", "/proc/mori-evidence-test-out")):
        rc, out = quick([*common, "--out", path])
        check(f"--out {what}: exit 2, one line naming it, nothing written", one_line_2(rc, out, "--out")
              and not os.path.exists("/proc/mori-evidence-test-out"), out)
    if os.geteuid() != 0:  # root writes through permissions: then only a read-only mount would show it
        ro = os.path.join(hostile, "ro")
        os.makedirs(ro)
        os.chmod(ro, 0o555)
        rc, out = quick([*common, "--out", ro])
        check("--out a read-only folder: exit 2, one line", one_line_2(rc, out, "not writable"), out)
    for steps in ("", ","):
        rc, out = quick([*common, "--out", os.path.join(hostile, "o3"), "--steps", steps])
        check(f"--steps {steps!r}: exit 2, one line, nothing run",
              one_line_2(rc, out, "--steps") and not os.path.exists(os.path.join(hostile, "o3")), out)

    # --resume reads its manifest strictly: each bad one is exit 2 naming it, the folder left as it was.
    good_man = json.dumps(dict(manifest(folder), steps=[{"name": "probe", "command": [], "wall_s": 1.5,
                                                          "exit_code": 0, "status": "ok", "outputs": []}]))
    bad_manifests = {"truncated": good_man[:len(good_man) // 2], "empty": "", "deep": "[" * 100000 + "]" * 100000,
                     "wrong-typed": json.dumps(dict(json.loads(good_man), steps={"probe": "ok"})),
                     "NaN wall_s": good_man.replace('"wall_s": 1.5', '"wall_s": NaN')}
    for name, text in bad_manifests.items():
        out_r = os.path.join(hostile, "r-" + name.replace(" ", "-"))
        f_r = os.path.join(out_r, os.path.relpath(folder, out_dir))
        os.makedirs(f_r)
        with open(os.path.join(f_r, "manifest.json"), "w") as f:
            f.write(text)
        rc, out = quick([*common, "--out", out_r, "--resume"])
        with open(os.path.join(f_r, "manifest.json")) as f:
            kept = f.read() == text
        check(f"--resume on a {name} manifest.json: exit 2, one line naming it, the manifest left as it was",
              one_line_2(rc, out, "manifest.json") and kept and os.listdir(f_r) == ["manifest.json"], out)

    # One run per folder: a second --resume while the first runs is refused; the first, a --steps subset, exits
    # 0 (its named steps ok) and says that it is a partial run.
    out_l = os.path.join(tmp, "locked")
    rc, out = run([*common, "--out", out_l, "--deadline-s", "5"])
    f_l = os.path.join(out_l, os.path.relpath(folder, out_dir))
    slow = os.path.join(tmp, "slow-mpirun")
    with open(slow, "w") as f:
        f.write("#!/bin/sh\nsleep 8\nexec " + " ".join(shlex.quote(x) for x in MPIRUN) + ' "$@"\n')
    os.chmod(slow, 0o755)
    first = subprocess.Popen([sys.executable, EVIDENCE, *common, "--out", out_l, "--resume", "--steps", "probe"],
                             cwd=ROOT, env=dict(ENV, MORI_MPIRUN=slow), stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    head_line = first.stdout.readline()  # printed once the folder is locked, before the first step
    rc2, out2 = quick([*common, "--out", out_l, "--resume"])
    rest, _ = first.communicate(timeout=300)
    check("a second --resume on a folder another run holds: exit 2, one line naming it",
          head_line.startswith("evidence: host") and one_line_2(rc2, out2, "another scripts/evidence"),
          head_line + out2)
    m = manifest(f_l)
    check("--resume --steps probe: exit 0 (the named step ok), the manifest partial with steps_requested",
          first.returncode == 0 and m.get("partial") is True and m.get("steps_requested") == ["probe"]
          and m.get("complete") is False and "partial run" in rest and "INCOMPLETE" not in rest,
          head_line + rest + json.dumps({k: m.get(k) for k in ("partial", "steps_requested", "complete")}))
    check("... and only the probe and the summary ran",
          sorted(s["name"] for s in m.get("steps", [])) == ["probe", "summary"], json.dumps(m)[:2000])
    summary_md = os.path.join(f_l, "summary.md")
    with open(summary_md) as f:
        text = f.read()
    check("... and summary.md calls it a partial run, not INCOMPLETE",
          "a partial run (--steps probe" in text and "INCOMPLETE" not in text, text[:1000])

    # A dirty tree is refused: a clone of HEAD with one untracked file.
    name = "a dirty tree is refused: exit 2, nothing written"
    if GIT:
        clone = os.path.join(tmp, "clone")
        subprocess.run(["git", "clone", "-q", "--shared", ROOT, clone], check=True)
        with open(os.path.join(clone, "untracked.txt"), "w") as f:
            f.write("x\n")
        p = subprocess.run([sys.executable, os.path.join(clone, "scripts", "evidence"), "--preset", "host",
                            "--backend", "host", "--bin", BIN, "--out", os.path.join(tmp, "dirty")], cwd=clone,
                           env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
        check(name, p.returncode == 2 and "dirty" in p.stdout and not os.path.exists(os.path.join(tmp, "dirty")),
              p.stdout)
    else:  # (the tree without .git and without --tree-clean is refused as dirty: checked above)
        not_run(name + " (a clone with an untracked file)", f"needs a git checkout; {ROOT} has no .git")
finally:
    shutil.rmtree(tmp, ignore_errors=True)
finish()
