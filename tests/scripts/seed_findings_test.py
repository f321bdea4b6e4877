#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""docs/seed-findings.md is what scripts/seed-findings renders from the newest committed seed run; a doctored copy
of that run changes the verdicts it should (ptr made slower than LSA, the grid effect removed, the teardown race
breaking at 2 ranks) and no other; a folder that is not a seed run is exit 2 with one line.

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


def main():
    runs = sorted(glob.glob(os.path.join(REPO, "results", "*", "*-seed", "manifest.json")))
    check("a committed run of the seed preset exists", bool(runs), "results/*/*-seed/manifest.json: none")
    if not runs:
        return 1
    rc, out = run("--check")
    check("docs/seed-findings.md is what the newest committed seed run renders", rc == 0, out)
    page = open(os.path.join(REPO, "docs", "seed-findings.md"), encoding="utf-8").read()
    base = verdicts(page)
    check("the page has a verdict for each finding", len(base) >= 12 and all(base.values()), page[:2000])
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.dirname(max(runs, key=lambda m: json.load(open(m)).get("finished") or ""))
        copy = os.path.join(tmp, "run")
        shutil.copytree(src, copy)
        doctor(copy, "a2a-w8", slower_ptr)
        doctor(copy, "grid-bpp-1", no_grid_effect)
        doctor(copy, "teardown-race", breaks_at_2)
        out_md = os.path.join(tmp, "page.md")
        rc, out = run(copy, "--out", out_md)
        new = verdicts(open(out_md).read()) if rc == 0 else {}
        same = all(new.get(k) == v for k, v in base.items() if k not in (3, 4, 5, 9))  # 4 reads grid-bpp-1 too
        check("a doctored run: ptr 1.5x slower -> 3 differs; grid-bpp-1 the fastest -> 5 no grid effect; no-sync "
              "broken at 2 ranks -> 9 breaks at 2 ranks too; the other verdicts unchanged",
              rc == 0 and new.get(3) == "differs" and new.get(5) == "differs: no grid effect"
              and new.get(9) == "differs: breaks at 2 ranks too" and same, f"{out}\nbefore {base}\nafter {new}")
        rc, out = run(copy, "--check")
        check("--check of the committed page against the doctored run: exit 1", rc == 1, out)
        os.unlink(os.path.join(copy, "manifest.json"))
        rc, out = run(copy, "--out", out_md)
        check("a folder without a manifest: exit 2, one line naming it",
              rc == 2 and len(out.strip().splitlines()) == 1 and "manifest.json" in out, out)
        grid = sorted(glob.glob(os.path.join(REPO, "results", "*", "*-grid-shape")))
        if grid:
            rc, out = run(grid[-1], "--out", out_md)
            check("another preset's run: exit 2, one line saying it is not the seed preset",
                  rc == 2 and len(out.strip().splitlines()) == 1 and "seed preset" in out, out)
        rc, out = run(os.path.join(tmp, "nowhere"), "--out", out_md)
        check("a folder that does not exist: exit 2, one line", rc == 2 and len(out.strip().splitlines()) == 1, out)
    print(f"{sum(results)} passed, {len(results) - sum(results)} failed")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
