#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Every repository file a code comment names exists: a comment that cites kernels/a2a_host.cpp after the file
moved sends a reader nowhere. The comments of every source file (C++, HIP, Python, shell, CMake: the files
licence_test.py finds) are searched for paths: a name with a source or doc extension (.cpp, .hpp, .hip, .py,
.md, .json, .sh, .txt, .cmake, .in) or a path under a top-level folder of the repository (kernels/...,
scripts/...). A path resolves as it is, from the commenting file's folder, as the tail of a repository path
(detail/nvml.hpp), or, a bare file name, anywhere. Placeholders in capitals (NAME.txt, DIR/summary.md) and the
few names of files that are not the repository's (EXEMPT, each with its reason) are left alone.

usage: comment_paths_test.py [ROOT]
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from licence_test import kind_of, tracked  # noqa: E402

EXEMPT = {
    "names.txt": "a file of a JIT cache entry (jit/jit.hpp), not of the repository",
    "version.cpp": "generated into the build folder from lib/src/base/version.cpp.in",
    "lib/libnccl.so.2": "a file of the NCCL build scripts/build-nccl-tests makes",
}
EXT = r"(?:cpp|hpp|hip|py|md|json|sh|txt|cmake|in)"


def token_pattern(top_folders):
    tops = "|".join(re.escape(t) for t in sorted(top_folders))
    with_ext = r"(?:[A-Za-z0-9_.-]+/)*[A-Za-z0-9_-][A-Za-z0-9_.-]*\." + EXT
    under_top = r"(?:" + tops + r")/[A-Za-z0-9_./-]*[A-Za-z0-9_]"
    return re.compile(r"(?<![\w./$<{@~-])(" + with_ext + "|" + under_top + r")(?![\w/-])")


def comments(text, kind):
    """(line number, comment text) of each line with a comment."""
    mark = re.compile(r"//(.*)$") if kind == "cxx" else re.compile(r"(?:^|\s)#(.*)$")
    for n, line in enumerate(text.split("\n"), 1):
        m = mark.search(line)
        if m:
            yield n, m.group(1)


def resolves(tok, src, root, files, names):
    tok = tok.rstrip(".")
    if tok in EXEMPT or any(re.fullmatch(r"[A-Z][A-Z0-9_]*", part) for part in re.split(r"[/.]", tok) if part):
        return True
    for cand in (tok, os.path.join(os.path.dirname(src), tok)):
        cand = os.path.normpath(cand)
        if cand in files or os.path.exists(os.path.join(root, cand)):
            return True
    if "/" not in tok:
        return tok in names
    return any(f.endswith("/" + tok) for f in files)


def main(argv):
    root = os.path.abspath(argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(__file__), "..", ".."))
    files = tracked(root)
    fileset, names = set(files), {os.path.basename(f) for f in files}
    pattern = token_pattern({f.split("/")[0] for f in files if "/" in f and not f.startswith(".")})
    bad, seen = [], 0
    for rel in files:
        path = os.path.join(root, rel)
        kind = kind_of(rel, root)
        if not kind or not os.path.isfile(path) or os.path.islink(path):
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        for n, comment in comments(text, kind):
            for m in pattern.finditer(comment):
                seen += 1
                if not resolves(m.group(1), rel, root, fileset, names):
                    bad.append(f"{rel}:{n}: names {m.group(1)}, which is not in the repository")
    for b in bad:
        print(f"comment_paths: {b}")
    print(f"comment_paths: {seen} paths named in comments, {len(bad)} that do not exist")
    return 1 if bad or not seen else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
