#!/usr/bin/env python3
"""scripts/evidence rehearsed on the host runtime (preset host, the built tools, written under a temporary --out):
the manifest's fields and every step's status; a run cut short by its deadline leaves a valid folder marked
incomplete, which --resume completes; a dirty tree is refused with nothing written; --help does nothing else.

usage: evidence_test.py BIN_DIR MPIRUN...
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import check, finish  # noqa: E402

if len(sys.argv) < 3:
    print(__doc__.strip(), file=sys.stderr)
    sys.exit(2)
BIN, MPIRUN = sys.argv[1], sys.argv[2:]
ROOT = os.path.realpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
EVIDENCE = os.path.join(ROOT, "scripts", "evidence")
ENV = dict(os.environ, MORI_MPIRUN=" ".join(MPIRUN))
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

    head = git("rev-parse", "HEAD")
    clean = git("status", "--porcelain") == ""
    # The tree this test runs from may carry uncommitted work: then the rehearsal is a lab run (--allow-dirty).
    dirty = [] if clean else ["--allow-dirty"]
    out_dir = os.path.join(tmp, "results")
    folder = os.path.join(out_dir, "host", head[:12]) if clean else os.path.join(out_dir, "lab", "host",
                                                                                    head[:12] + "-dirty")
    common = ["--preset", "host", "--backend", "host", "--bin", BIN, "--out", out_dir, *dirty]

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
    check("manifest fields: revision (HEAD), clean, machine host, start_id, preset, waived []",
          m.get("revision") == head and m.get("clean") is clean and m.get("machine") == "host" and
          m.get("kind") == "host" and bool(m.get("start_id")) and m.get("preset") == "host" and
          m.get("waived") == [], json.dumps(m)[:3000])
    try:
        import jsonschema
    except ImportError:
        jsonschema = None
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

    # A dirty tree is refused: a clone of HEAD with one untracked file.
    clone = os.path.join(tmp, "clone")
    subprocess.run(["git", "clone", "-q", "--shared", ROOT, clone], check=True)
    with open(os.path.join(clone, "untracked.txt"), "w") as f:
        f.write("x\n")
    p = subprocess.run([sys.executable, os.path.join(clone, "scripts", "evidence"), "--preset", "host", "--backend",
                        "host", "--bin", BIN, "--out", os.path.join(tmp, "dirty")], cwd=clone, env=ENV,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
    check("a dirty tree is refused: exit 2, nothing written",
          p.returncode == 2 and "dirty" in p.stdout and not os.path.exists(os.path.join(tmp, "dirty")), p.stdout)
finally:
    shutil.rmtree(tmp, ignore_errors=True)
finish()
