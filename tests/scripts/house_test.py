#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The code's house rules that a compiler does not check (lib/README.md, "House rules"), held to the tree.

usage: house_test.py {sizes|copies|launches|selftest} [ROOT]

sizes:    no function longer than 80 lines and no file longer than 500 lines in lib/, apps/ and kernels/ (a
          function counts from the first line of its signature to its closing brace).
copies:   no block of 10 or more lines stands twice in lib/, apps/ and kernels/ (lines compared with their
          indentation and runs of spaces folded; blank lines and lines of comments or braces alone left out).
launches: a kernel is launched only through the typed launch of lib/include/mori/symm/jit/detail/kernel_abi.hpp
          (each kernel's argument struct from kernels/abi.hip): no other file calls the runtime's untyped
          launch(...) or launch_overlapping(...).
selftest: each check run on a small tree made with one violation of it must fail, and pass once it is gone.
Exit 0: the rule holds; 1: every violation named with its file and line.
"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cxx_text import strip  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FOLDERS = ("lib", "apps", "kernels")
CODE = (".cpp", ".hpp", ".h", ".hip", ".cpp.in")
MAX_FUNCTION, MAX_FILE, MIN_COPY = 80, 500, 10
TYPED_LAUNCH = "lib/include/mori/symm/jit/detail/kernel_abi.hpp"
CONTROL = re.compile(r"\b(if|for|while|switch|catch|return|sizeof|decltype|alignas)\s*\(")


def sources(root):
    """The tracked code files under the folders (every file under them where git is not there)."""
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", *FOLDERS], capture_output=True, text=True,
                             check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        out = [os.path.relpath(os.path.join(d, f), root) for folder in FOLDERS
               for d, _, fs in os.walk(os.path.join(root, folder)) for f in fs]
    return sorted(f for f in out if f.endswith(CODE) and os.path.isfile(os.path.join(root, f)))


def functions(text):
    """[(first line, last line, name)] of every function body that is not inside another function (1-based)."""
    code = strip(text)
    found, stack = [], []  # stack: (is_function, start line, name) per open brace
    stmt_start, stmt = None, []
    line = 1
    for c in code:
        if c == "\n":
            line += 1
        if c == "{":
            sig = "".join(stmt).strip()
            tail = sig.rsplit(")", 1)
            is_fn = (sig.endswith(")") or re.search(r"\)\s*(const|noexcept|override|final|mutable|->[^;{]*)"
                                                      r"(\s+\w+)*\s*$", sig) is not None) \
                and not CONTROL.search(sig[-200:].split("\n")[-1] if "\n" in sig else sig) \
                and "=" not in tail[-1] and not sig.startswith(("namespace", "extern"))
            inside_fn = any(s[0] for s in stack)
            name = re.findall(r"([~\w:]+)\s*\(", sig)
            stack.append((is_fn and not inside_fn, stmt_start or line, name[0] if name else sig[:40]))
            stmt, stmt_start = [], None
        elif c == "}":
            if stack:
                fn, start, name = stack.pop()
                if fn:
                    found.append((start, line, name))
            stmt, stmt_start = [], None
        elif c == ";":
            stmt, stmt_start = [], None
        else:
            if stmt_start is None and not c.isspace():
                stmt_start = line
            stmt.append(c)
    return found


def check_sizes(root):
    bad = []
    for f in sources(root):
        with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        lines = text.count("\n") + (0 if text.endswith("\n") else 1)
        if lines > MAX_FILE:
            bad.append(f"{f}: {lines} lines, over {MAX_FILE}")
        for start, end, name in functions(text):
            if end - start + 1 > MAX_FUNCTION:
                bad.append(f"{f}:{start}: {name} is {end - start + 1} lines, over {MAX_FUNCTION}")
    return bad


def meaningful(text):
    """[(line number, normalized line)] of the lines that count for copies."""
    out = []
    for i, raw in enumerate(strip(text, strings=False).split("\n"), 1):
        s = " ".join(raw.split())
        if s and not re.fullmatch(r"[{}();,\s]*", s) and not s.startswith("#include"):
            out.append((i, s))
    return out


def check_copies(root):
    seen, bad = {}, []
    for f in sources(root):
        with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
            rows = meaningful(fh.read())
        last_end = {}
        for k in range(len(rows) - MIN_COPY + 1):
            key = "\n".join(s for _, s in rows[k:k + MIN_COPY])
            where = (f, rows[k][0], rows[k + MIN_COPY - 1][0])
            first = seen.setdefault(key, where)
            if first is where:
                continue
            if first[0] == f and first[2] >= where[1]:
                continue  # overlaps itself (a run of identical lines)
            if last_end.get(first[0], (0, 0))[1] >= where[1]:
                continue  # the same copy, one line further
            last_end[first[0]] = (where[1], where[2])
            bad.append(f"{f}:{where[1]}-{where[2]} repeats {first[0]}:{first[1]}-{first[2]} "
                       f"({MIN_COPY}+ lines)")
    return bad


def check_launches(root):
    bad = []
    call = re.compile(r"(\.|->)\s*(launch|launch_overlapping)\s*\(\s*[^)\s]")  # with arguments: not a graph's
    for f in sources(root):
        if f == TYPED_LAUNCH or f.startswith("lib/src/platform/") or f.startswith("lib/include/mori/symm/platform/"):
            continue  # the typed launch itself, and the runtimes that implement the untyped one
        with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
            code = strip(fh.read())
        for i, line in enumerate(code.split("\n"), 1):
            if call.search(line):
                bad.append(f"{f}:{i}: an untyped kernel launch; launch through {TYPED_LAUNCH} (detail::launch)")
    return bad


def selftest():
    """Each check fails on a planted violation (a function of 81 lines, a file of 501, ten lines twice, an
    untyped launch) and passes on the same tree without it."""
    import tempfile
    bad = []
    body = "".join(f"  x += {i};\n" for i in range(79))
    cases = {
        "sizes": [("lib/src/a.cpp", "int f(int x) {\n" + body + "  return x;\n}\n"),
                  ("lib/src/b.cpp", "// x\n" * 501)],
        "copies": [("lib/src/a.cpp", "void f() {\n" + "".join(f"  g({i}, \"s\");\n" for i in range(10)) + "}\n"),
                   ("apps/b.cpp", "void h() {\n" + "".join(f"  g({i}, \"s\");\n" for i in range(10)) + "}\n")],
        "launches": [("lib/src/a.cpp", "void f(Runtime& rt) { rt.launch(fn, {1}, {1}, 0, s, args); }\n")],
    }
    check = {"sizes": check_sizes, "copies": check_copies, "launches": check_launches}
    for name, files in cases.items():
        with tempfile.TemporaryDirectory() as tmp:
            for path, text in files:
                os.makedirs(os.path.dirname(os.path.join(tmp, path)), exist_ok=True)
                with open(os.path.join(tmp, path), "w") as fh:
                    fh.write(text)
            found = check[name](tmp)
            want = len(files) if name == "sizes" else 1
            print(f"{'PASS' if len(found) == want else 'FAIL'}: {name} flags the planted violation(s): {found}")
            bad += [] if len(found) == want else [name]
            with open(os.path.join(tmp, files[0][0]), "w") as fh:
                fh.write("int f() {\n  return 0;\n}\n")
            for path, _ in files[1:]:
                os.remove(os.path.join(tmp, path))
            left = check[name](tmp)
            print(f"{'PASS' if not left else 'FAIL'}: {name} passes once the violation is gone: {left}")
            bad += [name] if left else []
    return bad


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "selftest":
        bad = selftest()
        return 1 if bad else 0
    if len(sys.argv) < 2 or sys.argv[1] not in ("sizes", "copies", "launches"):
        print(__doc__)
        return 2
    root = sys.argv[2] if len(sys.argv) > 2 else ROOT
    bad = {"sizes": check_sizes, "copies": check_copies, "launches": check_launches}[sys.argv[1]](root)
    for b in bad:
        print(f"FAIL: {b}")
    print(f"house {sys.argv[1]}: {'ok' if not bad else str(len(bad)) + ' violation(s)'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
