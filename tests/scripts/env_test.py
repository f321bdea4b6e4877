#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The environment variables are declared once (scripts/mori_results/environment.json; docs/environment.md), and
the code reads them only through that table:

- the table: every entry has a name, type, default, doc, foreign and read_by, names are unique, and no text would
  break the library's built-in copy of it (lib/src/base/env_table.h.in);
- C++ (lib/, apps/, kernels/): getenv is called in lib/src/base/env.cpp alone; every name given to env_read,
  env_value or setenv is declared;
- Python (scripts/): os.environ and os.getenv are read or written by name in scripts/mori_results/env.py alone
  (copies such as dict(os.environ, ...) are not reads by name); every name given to read, put or is_set is declared;
- shell (scripts/, .ci/): every $MORI_... a script reads is declared;
- every declared variable is named somewhere in the code (no entry outlives its last reader);
- docs/environment.md's table, between its markers, is the one this test writes from the table (--write).

usage: env_test.py [ROOT] [--write]
Exit 0: all hold; 1: a violation, each named with its file and line.
"""
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from licence_test import kind_of, tracked  # noqa: E402

TABLE = "scripts/mori_results/environment.json"
KEYS = {"name", "type", "default", "doc", "foreign", "read_by"}
TYPES = {"level", "text", "path", "flag", "count", "list", "command"}
READERS = {"library", "scripts"}
BEGIN, END = "<!-- env:begin -->", "<!-- env:end -->"
CXX_GETENV_HOME = "lib/src/base/env.cpp"
PY_ENV_HOME = "scripts/mori_results/env.py"

CXX_GETENV = re.compile(r"\b(?:secure_)?getenv\s*\(")
CXX_NAMED = re.compile(r"\b(?:env_read|env_value|setenv)\s*\(\s*\"([^\"]+)\"")
PY_RAW = re.compile(r"os\.environ\s*(?:\.get\s*\(|\[|\.setdefault\s*\(|\.pop\s*\()|os\.(?:getenv|putenv)\s*\(|"
                    r"\bin\s+os\.environ\b")
PY_NAMED = re.compile(r"\benvvars\.(?:read|put|is_set)\s*\(\s*\"([^\"]+)\"")
SH_NAMED = re.compile(r"\$\{?(MORI_[A-Z0-9_]+)")

failures = []


def fail(msg):
    failures.append(msg)
    print(f"FAIL: {msg}")


def load_table(root):
    with open(os.path.join(root, TABLE), encoding="utf-8") as f:
        text = f.read()
    if "@" in text or ")mori_env\"" in text:
        fail(f"{TABLE}: holds '@' or ')mori_env\"', which the library's built-in copy cannot carry")
    out = {}
    for i, v in enumerate(json.loads(text)["variables"]):
        where = f"{TABLE}: variables[{i}]"
        if set(v) != KEYS:
            fail(f"{where}: keys {sorted(v)}, wanted {sorted(KEYS)}")
            continue
        if v["type"] not in TYPES:
            fail(f"{where} ({v['name']}): type {v['type']!r} is not one of {sorted(TYPES)}")
        if not set(v["read_by"]) <= READERS or not v["read_by"]:
            fail(f"{where} ({v['name']}): read_by {v['read_by']} is not a non-empty part of {sorted(READERS)}")
        if not isinstance(v["foreign"], bool) or not v["doc"].strip():
            fail(f"{where} ({v['name']}): foreign must be true or false and doc must say something")
        if v["name"] in out:
            fail(f"{where}: {v['name']} declared twice")
        out[v["name"]] = v
    return out


def lines_of(root, path):
    try:
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            return f.read().split("\n")
    except OSError:
        return []


def code_lines(line, kind):
    """The line without its comment (a rough cut: enough for names in calls)."""
    if kind == "cxx":
        return line.split("//")[0]
    return line if line.lstrip().startswith(("#!",)) else re.sub(r"(?:^|\s)#.*$", "", line)


def check_line(where, code, path, raw, home, named, declared, advice):
    """One line of code: a raw access outside its home file, and every name it gives the table's reader."""
    if raw.search(code) and path != home:
        fail(f"{where}: outside {home}: {advice}")
    for name in named.findall(code):
        if name not in declared:
            fail(f"{where}: {name} is not declared in {TABLE}")


def check_code(root, declared):
    named_anywhere = set()
    for path in tracked(root):
        if path == TABLE or path.startswith(("tests/", "results/", "docs/")):
            continue
        kind = kind_of(path, root)
        top = path.split("/")[0]
        if kind is None or top not in ("lib", "apps", "kernels", "scripts", ".ci", "CMakeLists.txt", "cmake"):
            continue
        lines = lines_of(root, path)
        text = "\n".join(lines)
        named_anywhere.update(n for n in declared if n in text)
        python = path.endswith(".py") or (kind == "hash" and lines and "python" in lines[0])
        shell = kind == "hash" and lines and re.match(r"#!.*\b(bash|sh)\b", lines[0])
        for n, line in enumerate(lines, 1):
            code = code_lines(line, "cxx" if kind == "cxx" else "hash")
            where = f"{path}:{n}"
            if kind == "cxx":
                check_line(where, code, path, CXX_GETENV, CXX_GETENV_HOME, CXX_NAMED, declared,
                           "getenv: read the variable with env_read (lib/include/mori/symm/base/env.hpp)")
            elif python:
                check_line(where, code, path, PY_RAW, PY_ENV_HOME, PY_NAMED, declared,
                           "the environment read or written by name: use envvars.read / put / is_set "
                           "(from mori_results import env as envvars)")
            elif shell or path == ".ci/run":
                for name in SH_NAMED.findall(code):
                    if name not in declared:
                        fail(f"{where}: {name} is not declared in {TABLE}")
    for name in sorted(set(declared) - named_anywhere):
        fail(f"{TABLE}: {name} is declared but nothing in lib/, apps/, kernels/, scripts/ or .ci/ names it")


def cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def docs_table(declared):
    rows = ["| variable | type | default | read by | what it does |", "| --- | --- | --- | --- | --- |"]
    for v in declared.values():
        name = f"`{v['name']}`" + (" (foreign)" if v["foreign"] else "")
        default = f"`{v['default']}`" if v["default"] and v["type"] != "text" and " " not in v["default"] \
            else cell(v["default"])
        rows.append(f"| {name} | {v['type']} | {default} | {', '.join(v['read_by'])} | {cell(v['doc'])} |")
    return "\n".join(rows)


def check_docs(root, declared, write):
    path = os.path.join(root, "docs", "environment.md")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    if text.count(BEGIN) != 1 or text.count(END) != 1:
        fail(f"docs/environment.md: needs one {BEGIN} and one {END}")
        return
    head, rest = text.split(BEGIN)
    body, tail = rest.split(END)
    want = "\n" + docs_table(declared) + "\n"
    if body == want:
        return
    if write:
        with open(path, "w", encoding="utf-8") as f:
            f.write(head + BEGIN + want + END + tail)
        print("docs/environment.md: the table rewritten")
    else:
        fail(f"docs/environment.md: the table is not what {TABLE} declares (run tests/scripts/env_test.py --write)")


def main(argv):
    write = "--write" in argv
    args = [a for a in argv[1:] if a != "--write"]
    root = os.path.abspath(args[0] if args else os.path.join(os.path.dirname(__file__), "..", ".."))
    declared = load_table(root)
    check_code(root, declared)
    check_docs(root, declared, write)
    print(f"env: {len(declared)} variables declared, {len(failures)} problem(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
