#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""docs/seed-findings.md is what scripts/seed-findings renders from the newest committed seed run (or, with none, the
page of commands); a run put together from committed H100 evidence (results/h100/6c669914f223 and its grid-shape
sweep, under the seed preset's step names) gets a verdict for each finding, and a doctored copy of it changes the
verdicts it should (ptr made slower than LSA, the grid effect removed, the teardown race breaking at 2 ranks) and
no other; a folder that is not a seed run is exit 2 with one line.

usage: seed_findings_test.py [REPO]
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

REPO = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT = os.path.join(REPO, "scripts", "seed-findings")
results = []


def check(name, ok, out=""):
    results.append(ok)
    print(("PASS: " if ok else "FAIL: ") + name)
    if not ok and out:
        print(out[-3000:])


def run(*args):
    p = subprocess.run([sys.executable, SCRIPT, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return p.returncode, p.stdout


def verdicts(page):
    """{row number: verdict} of the page's findings table."""
    out = {}
    for ln in page.splitlines():
        cells = [c.strip() for c in ln.strip().strip("|").split(" | ")]
        if len(cells) == 5 and cells[0].isdigit():
            out[int(cells[0])] = cells[4]
    return out


def doctor(folder, name, fn):
    path = os.path.join(folder, name + ".json")
    with open(path) as f:
        doc = json.load(f)
    fn(doc)
    with open(path, "w") as f:
        json.dump(doc, f)


def slower_ptr(doc):
    for r in doc["results"]:
        if r["addressing"] == "ptr":
            r["time_us"]["p50"] *= 1.5


def no_grid_effect(doc):
    for r in doc["results"]:
        r["time_us"]["p50"] = 0.001


def breaks_at_2(doc):
    for r in doc["scenarios"]:
        if r["world"] == 2:
            r["outcome"], r["as_expected"] = "crash", True


def assemble(dst):
    """A seed run from committed H100 evidence: the grid-shape sweep, the default preset's probe and teardown."""
    h100 = os.path.join(REPO, "results", "h100")
    grid, default = os.path.join(h100, "6c669914f223-grid-shape"), os.path.join(h100, "6c669914f223")
    os.makedirs(dst)
    for f in glob.glob(os.path.join(grid, "grid-bpp-*.json")):
        shutil.copy(f, dst)
    shutil.copy(os.path.join(grid, "grid-bpp-auto.json"), os.path.join(dst, "a2a-w8.json"))
    shutil.copy(os.path.join(default, "probe.json"), dst)
    for name in ("teardown-w4", "teardown-race"):
        shutil.copy(os.path.join(default, "teardown-matrix.json"), os.path.join(dst, name + ".json"))
    with open(os.path.join(grid, "manifest.json")) as f:
        m = json.load(f)
    m["preset"] = "seed"
    with open(os.path.join(dst, "manifest.json"), "w") as f:
        json.dump(m, f)


def main():
    rc, out = run("--check")
    check("docs/seed-findings.md is what scripts/seed-findings renders from what is committed", rc == 0, out)
    committed = open(os.path.join(REPO, "docs", "seed-findings.md"), encoding="utf-8").read()
    check("the page has a row for each finding", len(verdicts(committed)) >= 12, committed[:2000])
    with tempfile.TemporaryDirectory() as tmp:
        copy, out_md = os.path.join(tmp, "run"), os.path.join(tmp, "page.md")
        assemble(copy)
        rc, out = run(copy, "--out", out_md)
        base = verdicts(open(out_md).read()) if rc == 0 else {}
        check("a run from committed H100 evidence: every finding it holds judged, the others named",
              rc == 0 and base.get(1) == "reproduced" and base.get(5, "").startswith("reproduced")
              and base.get(12, "").startswith("not built") and "not measured" not in (base.get(3), base.get(9)),
              f"{out}\n{base}")
        doctor(copy, "a2a-w8", slower_ptr)
        doctor(copy, "grid-bpp-1", no_grid_effect)
        doctor(copy, "teardown-race", breaks_at_2)
        rc, out = run(copy, "--out", out_md)
        new = verdicts(open(out_md).read()) if rc == 0 else {}
        same = all(new.get(k) == v for k, v in base.items() if k not in (3, 4, 5, 9))  # 4 reads grid-bpp-1 too
        check("a doctored run: ptr 1.5x slower -> 3 differs; grid-bpp-1 the fastest -> 5 no grid effect; no-sync "
              "broken at 2 ranks -> 9 breaks at 2 ranks too; the other verdicts unchanged",
              rc == 0 and new.get(3) == "differs" and new.get(5) == "differs: no grid effect"
              and new.get(9) == "differs: breaks at 2 ranks too" and same, f"{out}\nbefore {base}\nafter {new}")
        rc, out = run(copy, "--check")
        check("--check of the committed page against the doctored run: exit 1", rc == 1, out)
        for bad in ("[1, 2]", '{"nodes": 5}'):
            with open(os.path.join(copy, "probe.json"), "w") as f:
                f.write(bad)
            rc, out = run(copy, "--out", out_md)
            check(f"probe.json {bad}: exit 2, one line", rc == 2 and len(out.strip().splitlines()) == 1, out)
        os.unlink(os.path.join(copy, "manifest.json"))
        rc, out = run(copy, "--out", out_md)
        check("a folder without a manifest: exit 2, one line naming it",
              rc == 2 and len(out.strip().splitlines()) == 1 and "manifest.json" in out, out)
        rc, out = run(os.path.join(REPO, "results", "h100", "6c669914f223-grid-shape"), "--out", out_md)
        check("another preset's run: exit 2, one line saying it is not the seed preset",
              rc == 2 and len(out.strip().splitlines()) == 1 and "seed preset" in out, out)
        rc, out = run(os.path.join(tmp, "nowhere"), "--out", out_md)
        check("a folder that does not exist: exit 2, one line", rc == 2 and len(out.strip().splitlines()) == 1, out)
    print(f"{sum(results)} passed, {len(results) - sum(results)} failed")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
