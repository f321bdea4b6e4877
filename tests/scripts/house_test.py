#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The code's house rules that a compiler does not check (lib/README.md, "House rules"), held to the tree.

usage: house_test.py {sizes|copies|launches|selftest} [ROOT]

sizes:    no function longer than 80 lines and no file longer than 500 lines in lib/, apps/ and kernels/ (a
          function counts from the first line of its signature to its closing brace), nor in the Python of
          scripts/ (a function or method counts from its def line to the last line of its body).
copies:   no block of 10 or more lines stands twice in lib/, apps/ and kernels/, nor in the Python of scripts/
          (lines compared with their indentation and runs of spaces folded; blank lines and lines of comments,
          braces or brackets alone left out, and #include or import lines; C++ against C++, Python against Python).
launches: a kernel is launched only through the typed launch of lib/include/mori/symm/jit/detail/kernel_abi.hpp
          (each kernel's argument struct from kernels/abi.hip): no other file calls the runtime's untyped
          launch(...) or launch_overlapping(...).
selftest: each check run on a small tree made with one violation of it must fail, and pass once it is gone.
The Python of scripts/: every *.py file under it and every file there without an extension whose first line is a
python shebang (the entry points such as scripts/evidence); the files git tracks and the new ones it does not
ignore, so that a file a change adds is held to the rules before it is committed.
Exit 0: the rule holds; 1: every violation named with its file and line.
"""
import ast
import io
import os
import re
import subprocess
import sys
import tokenize

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cxx_text import strip  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FOLDERS = ("lib", "apps", "kernels")
CODE = (".cpp", ".hpp", ".h", ".hip", ".cpp.in")
MAX_FUNCTION, MAX_FILE, MIN_COPY = 80, 500, 10
TYPED_LAUNCH = "lib/include/mori/symm/jit/detail/kernel_abi.hpp"
SCRIPTS = "scripts"
PYTHON_SHEBANG = re.compile(r"#!.*\bpython3?\b")
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


def python_sources(root):
    """The Python files of scripts/: *.py, and the files without an extension that start with a python shebang
    (tracked or new and not ignored; every file under it where git is not there)."""
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "--cached", "--others", "--exclude-standard", SCRIPTS],
                             capture_output=True, text=True, check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        out = [os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(os.path.join(root, SCRIPTS))
               for f in fs]
    found = []
    for f in sorted(set(out)):
        path = os.path.join(root, f)
        if not os.path.isfile(path) or os.path.islink(path):
            continue
        if f.endswith(".py"):
            found.append(f)
        elif "." not in os.path.basename(f):
            with open(path, "rb") as fh:
                if PYTHON_SHEBANG.match(fh.readline(200).decode("utf-8", "replace")):
                    found.append(f)
    return found


def python_functions(text):
    """[(first line, last line, name)] of every function and method (nested ones too, named Class.method or
    outer.inner), from its def line to the last line of its body; a file that does not parse raises SyntaxError."""
    found = []

    def visit(node, prefix):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = prefix + child.name
                if not isinstance(child, ast.ClassDef):
                    found.append((child.lineno, child.end_lineno, name))
                visit(child, name + ".")
            else:
                visit(child, prefix)

    visit(ast.parse(text), "")
    return found


def line_count(text):
    return text.count("\n") + (0 if text.endswith("\n") else 1)


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
    for f, find in [(f, functions) for f in sources(root)] + [(f, python_functions) for f in python_sources(root)]:
        with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
            text = fh.read()
        lines = line_count(text)
        if lines > MAX_FILE:
            bad.append(f"{f}: {lines} lines, over {MAX_FILE}")
        try:
            found = find(text)
        except SyntaxError as e:
            bad.append(f"{f}:{e.lineno}: does not parse as Python ({e.msg}): its functions cannot be measured")
            continue
        for start, end, name in found:
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


def python_meaningful(text):
    """[(line number, normalized line)] of the Python lines that count for copies: comments left out, and lines
    of brackets alone and import lines."""
    lines = text.split("\n")
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                row, col = tok.start
                lines[row - 1] = lines[row - 1][:col]
    except (tokenize.TokenError, SyntaxError):
        pass  # the lines as they are: a file that does not parse is named by sizes
    out = []
    for i, raw in enumerate(lines, 1):
        s = " ".join(raw.split())
        if s and not re.fullmatch(r"[\[\](){}:;,\s]*", s) and not re.match(r"(import|from)\s", s):
            out.append((i, s))
    return out


def check_copies(root):
    bad = []
    for files, rows_of in ((sources(root), meaningful), (python_sources(root), python_meaningful)):
        bad += copies(root, files, rows_of)
    return bad


def copies(root, files, rows_of):
    """The blocks of MIN_COPY lines that stand twice among files, each line as rows_of gives it."""
    seen, bad = {}, []
    for f in files:
        with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
            rows = rows_of(fh.read())
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


def selftest_cases():
    """(name, check, files planted, the first file's text once fixed, violations wanted): a function of 81 lines,
    a file of 501, ten lines twice, an untyped launch; in C++ and in the Python of scripts/ (a shell script of 600
    lines there is not Python and is left alone; a Python function of 80 lines is within the rule)."""
    body = "".join(f"  x += {i};\n" for i in range(79))
    method = "".join(f"        x += {i}\n" for i in range(79))  # with its def and return: 81 lines
    within = "".join(f"    x += {i}\n" for i in range(78))  # 80 lines
    block = "".join(f"    g({i}, 's')  # {i}\n" for i in range(10))
    fixed = "int f() {\n  return 0;\n}\n"
    return [
        ("sizes", check_sizes, [("lib/src/a.cpp", "int f(int x) {\n" + body + "  return x;\n}\n"),
                                ("lib/src/b.cpp", "// x\n" * 501)], fixed, 2),
        ("sizes (Python)", check_sizes, [
            ("scripts/lib_a.py", "class A:\n    def f(self, x):\n" + method + "        return x\n"),
            ("scripts/tool", "#!/usr/bin/env python3\n" + "x = 1\n" * 500),
            ("scripts/shell-tool", "#!/usr/bin/env bash\n" + "true\n" * 600)],
         "def f(x):\n" + within + "    return x\n", 2),
        ("copies", check_copies, [
            ("lib/src/a.cpp", "void f() {\n" + "".join(f"  g({i}, \"s\");\n" for i in range(10)) + "}\n"),
            ("apps/b.cpp", "void h() {\n" + "".join(f"  g({i}, \"s\");\n" for i in range(10)) + "}\n")], fixed, 1),
        ("copies (Python)", check_copies, [("scripts/lib_a.py", "def f():\n" + block),
                                           ("scripts/lib_b/c.py", "def h():\n" + block.replace("# ", "# other "))],
         "def f():\n    return 0\n", 1),
        ("launches", check_launches,
         [("lib/src/a.cpp", "void f(Runtime& rt) { rt.launch(fn, {1}, {1}, 0, s, args); }\n")], fixed, 1),
    ]


def selftest():
    """Each check fails on a planted violation and passes on the same tree without it."""
    import tempfile
    bad = []
    for name, check, files, fixed, want in selftest_cases():
        with tempfile.TemporaryDirectory() as tmp:
            for path, text in files:
                os.makedirs(os.path.dirname(os.path.join(tmp, path)), exist_ok=True)
                with open(os.path.join(tmp, path), "w") as fh:
                    fh.write(text)
            found = check(tmp)
            print(f"{'PASS' if len(found) == want else 'FAIL'}: {name} flags the planted violation(s): {found}")
            bad += [] if len(found) == want else [name]
            with open(os.path.join(tmp, files[0][0]), "w") as fh:
                fh.write(fixed)
            for path, _ in files[1:]:
                os.remove(os.path.join(tmp, path))
            left = check(tmp)
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
