#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The evidence under results/ names the code that ran (docs/results.md "Evidence"): every committed document
outside results/lab/ and results/schema/ whose meta (or evidence manifest) records a revision records a commit of
this repository (hex, no `-dirty` suffix, not `unknown`) and does not say its tree was modified (`git_clean` false);
evidence manifests say `clean: true`; the baselines, results/published.json and the expectations cite files that
exist and are not explorations (results/lab/). Where the clone has the history (not shallow), each revision must
also be a commit git knows; in a shallow clone that part is reported as not checked and the rest still runs.

usage: results_revisions_test.py REPO
"""
import json
import os
import re
import subprocess
import sys

REPO = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "scripts"))
from mori_results.errors import Malformed  # noqa: E402
from mori_results.reader import json_files, read_json  # noqa: E402

HEX = re.compile(r"^[0-9a-f]{7,40}$")
failures = []


def fail(path, why):
    failures.append(f"{os.path.relpath(path, REPO)}: {why}")


def git(*args):
    try:
        return subprocess.run(["git", "-C", REPO, *args], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None


def revisions(doc):
    """(revision, clean) pairs a document records: meta.git_revision/git_clean, or a manifest's revision/clean."""
    out = []
    meta = doc.get("meta") if isinstance(doc, dict) else None
    if isinstance(meta, dict) and "git_revision" in meta:
        out.append((meta.get("git_revision"), meta.get("git_clean")))
    if isinstance(doc, dict) and str(doc.get("schema", "")).startswith("mori.evidence/"):
        out.append((doc.get("revision"), doc.get("clean")))
    return out


def cited(path, rel, what):
    full = os.path.join(REPO, rel)
    if rel.startswith("results/lab/") or "/lab/" in rel:
        fail(path, f"{what} {rel} is an exploration (results/lab/)")
    elif not os.path.exists(full):
        fail(path, f"{what} {rel} does not exist")


def main():
    results = os.path.join(REPO, "results")
    p = git("rev-parse", "--is-shallow-repository")
    history = p is not None and p.returncode == 0 and p.stdout.strip() == "false"
    seen, checked = set(), 0
    for path in json_files([results], skip_folders=("schema", "lab")):
        try:
            doc = read_json(path)
        except Malformed as e:
            fail(path, str(e))
            continue
        for rev, clean in revisions(doc):
            checked += 1
            if not isinstance(rev, str) or not HEX.match(rev):
                fail(path, f"revision {rev!r} is not a commit (hex, no suffix)")
                continue
            if clean is False:
                fail(path, f"revision {rev} from a modified tree (clean: false)")
            seen.add(rev)
        if isinstance(doc, dict) and str(doc.get("schema", "")).startswith("mori.evidence/") and doc.get("clean") is not True:
            fail(path, "an evidence manifest outside results/lab/ must say clean: true")
    if history:
        for rev in sorted(seen):
            p = git("cat-file", "-e", f"{rev}^{{commit}}")
            if p is None or p.returncode != 0:
                failures.append(f"revision {rev}: not a commit of this repository")
    for name in sorted(os.listdir(os.path.join(results, "baselines"))):
        path = os.path.join(results, "baselines", name)
        for rel in read_json(path).get("evidence", []):
            cited(path, rel, "evidence")
    pub = os.path.join(results, "published.json")
    for name, table in read_json(pub).get("tables", {}).items():
        cited(pub, table.get("run", ""), f"table {name}'s run")
    for name in sorted(os.listdir(os.path.join(results, "expectations"))):
        path = os.path.join(results, "expectations", name)
        for e in read_json(path).get("entries", []):
            for rel in re.findall(r"results/[\w./-]+\.json", e.get("source", "")):
                cited(path, rel, "source")
    print(f"results_revisions: {checked} recorded revisions in {len(seen)} commits; "
          f"{'each checked against git' if history else 'NOT checked against git: a shallow clone'}")
    for f in failures:
        print(f"FAIL {f}")
    if checked == 0:
        print("FAIL no recorded revision found: the walk read nothing")
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
