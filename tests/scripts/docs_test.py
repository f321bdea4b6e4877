#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The docs against the tools: usage, options, environment variables, JSON fields, exit codes and links.

docs_test.py BIN_DIR            check (exit 0: every check holds; 1: a check failed, each failure on one line)
docs_test.py --update BIN_DIR   rewrite each tool's --help block in docs/<tool>.md from the tool itself, then check
docs_test.py --layouts          check the help comparison against the fixtures of two CLI11 layouts (no tools)

Checks, each failure naming the file and what is missing where:
- help:    docs/<tool>.md holds the tool's `--help` output verbatim between <!-- mori-help:begin TOOL --> and
           <!-- mori-help:end TOOL --> (the usage line, every option with its default as the tool shows it).
- options: every option in a tool's --help is explained outside that block: a tool-specific one in a backtick
           span of docs/<tool>.md, one that every tool has in the common-options table of docs/usage.md; every option
           that README.md or docs/*.md give a tool (`mori-a2a --chunk-kib ...` in code or backticks, or a
           backtick span starting with an option in docs/<tool>.md) is one its --help lists.
- env:     every MORI_* variable the library and tools read (lib/, apps/) is a row of docs/environment.md's table,
           and every row there names a variable something in the repository reads.
- schema:  every field of results/schema/*.json is named in a backtick span or code block of README.md/docs/*.md.
- scripts: every executable in scripts/ is named in docs/usage.md (its scripts table).
- exit:    docs/usage.md's exit-code table lists exactly the codes of ExitCode (lib/include/mori/symm/base/error.hpp).
- links:   every relative link in the repository's Markdown (outside build folders) resolves, anchors included;
           every repository path in a backtick span of README.md/docs/*.md exists (braces expanded).
"""
import glob
import os
import re
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
TOOLS = ["mori-probe", "mori-a2a", "mori-teardown-repro"]
DOCS = ["README.md"] + sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))
OPT = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*|-[a-zA-Z])(?![\w-])")
failures = []


def fail(msg):
    failures.append(msg)


def read(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return f.read()


def help_text(bin_dir, tool):
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_btl="self")
    p = subprocess.run([os.path.join(bin_dir, tool), "--help"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, timeout=60, env=env)
    if p.returncode != 0:
        raise SystemExit(f"FAIL: {tool} --help exited {p.returncode}: {p.stderr.strip()[-300:]}")
    return p.stdout.rstrip("\n")


def help_model(text):
    """A CLI11 --help as {names: (default, description)}, read the same way from the line layouts of CLI11 2.1
    (`--backend TEXT=auto   Runtime: ...`, header `Options:`) and of later versions (`[auto]` defaults,
    header `OPTIONS:`, descriptions wrapped onto the next lines), so that the docs' block, written with one
    CLI11, is compared by content with the --help of a build against another."""
    model = {}
    section = False
    current = None
    for line in text.splitlines():
        if re.match(r"^[A-Z][A-Za-z ]*:\s*$", line):
            section = line.strip().upper().startswith("OPTIONS")
            current = None
            continue
        if not section or not line.strip():
            current = None if not line.strip() else current
            continue
        tokens = line.split()
        if tokens[0].startswith("-"):
            names, i = [], 0
            while i < len(tokens) and re.fullmatch(r"(-[-\w]+,?)+", tokens[i]):
                names += [n for n in tokens[i].split(",") if n]
                i += 1
            default = None
            if i < len(tokens) and re.fullmatch(r"[A-Z][A-Z0-9_]*(=\S*)?", tokens[i]):
                if "=" in tokens[i]:
                    default = tokens[i].split("=", 1)[1]
                i += 1
            if i < len(tokens) and tokens[i] == "...":
                i += 1
            if i < len(tokens) and re.fullmatch(r"\[[^\]]*\]", tokens[i]):
                default = tokens[i][1:-1]
                i += 1
            current = tuple(sorted(names))
            model[current] = [default, " ".join(tokens[i:])]
        elif current is not None:
            model[current][1] = (model[current][1] + " " + " ".join(tokens)).strip()
    return {k: (v[0], v[1]) for k, v in model.items()}


def help_options(text):
    """The options a CLI11 --help lists (every name: -h and --help both)."""
    return {n for names in help_model(text) for n in names}


def block_bounds(text, tool):
    b = f"<!-- mori-help:begin {tool} -->"
    e = f"<!-- mori-help:end {tool} -->"
    i, j = text.find(b), text.find(e)
    return (i, j + len(e)) if i >= 0 and j > i else None


def render_block(tool, help_out):
    return (f"<!-- mori-help:begin {tool} -->\n```text\n$ {tool} --help\n{help_out}\n```\n"
            f"<!-- mori-help:end {tool} -->")


def block_help(block, tool):
    """The --help text a docs block shows: the lines between its `$ TOOL --help` line and its closing fence,
    without the markers and fences around them (which would otherwise read as the last option's description)."""
    start = f"$ {tool} --help\n"
    i = block.find(start)
    body = block[i + len(start):] if i >= 0 else block
    j = body.rfind("\n```")
    return body[:j] if j >= 0 else body


def help_differences(shown_help, live_help):
    """How two --help texts differ by content (options, defaults, descriptions), whatever CLI11's layout of
    each; "" where they hold the same."""
    live, shown = help_model(live_help), help_model(shown_help)
    if live == shown:
        return ""
    added = sorted(" ".join(k) for k in live.keys() - shown.keys())
    gone = sorted(" ".join(k) for k in shown.keys() - live.keys())
    changed = sorted(f"{' '.join(k)} (default {shown[k][0]} -> {live[k][0]})" for k in
                     live.keys() & shown.keys() if live[k][0] != shown[k][0])
    texts = sorted(" ".join(k) for k in live.keys() & shown.keys() if live[k][1] != shown[k][1])
    return "; ".join(x for x in [
        f"options in --help, not in the block: {', '.join(added)}" if added else "",
        f"options in the block, not in --help: {', '.join(gone)}" if gone else "",
        f"defaults changed: {', '.join(changed)}" if changed else "",
        f"descriptions changed: {', '.join(texts)}" if texts else ""] if x)


def prose_and_code(text):
    """(backtick spans outside code blocks, code block bodies)."""
    parts = re.split(r"^```.*$", text, flags=re.M)
    spans, code = [], []
    for i, part in enumerate(parts):
        if i % 2:
            code.append(part)
        else:
            spans.extend(re.findall(r"`([^`]+)`", part))
    return spans, code


def check_help_and_options(bin_dir, update):
    helps = {t: help_text(bin_dir, t) for t in TOOLS}
    opts = {t: help_options(h) for t, h in helps.items()}
    common = set.intersection(*opts.values())
    readme = read("docs/usage.md")
    m = re.search(r"^## Common options.*?(?=^## )", readme, flags=re.M | re.S)
    common_rows = set()
    if not m:
        fail("docs/usage.md: no '## Common options' section (the table of the options every tool has)")
    else:
        for row in re.findall(r"^\|\s*`([^`]+)`", m.group(0), flags=re.M):
            common_rows.update(OPT.findall(row))
    for o in sorted(common - common_rows):
        fail(f"docs/usage.md: option {o} (in the --help of every tool) is not a row of the common-options table")
    for o in sorted(common_rows - common):
        fail(f"docs/usage.md: the common-options table lists {o}, which not every tool's --help lists "
             f"(tools without it: {', '.join(t for t in TOOLS if o not in opts[t])})")
    for tool in TOOLS:
        page = f"docs/{tool}.md"
        text = read(page)
        bounds = block_bounds(text, tool)
        want = render_block(tool, helps[tool])
        if bounds is None:
            fail(f"{page}: no <!-- mori-help:begin {tool} --> ... <!-- mori-help:end {tool} --> block "
                 f"(run: python3 tests/scripts/docs_test.py --update BIN_DIR after adding the two markers)")
            continue
        have = text[bounds[0]:bounds[1]]
        what = help_differences(block_help(have, tool), helps[tool]) if have != want else ""
        if have != want and (update or what):
            if update:
                text = text[:bounds[0]] + want + text[bounds[1]:]
                with open(os.path.join(ROOT, page), "w", encoding="utf-8") as f:
                    f.write(text)
                print(f"updated: {page}: the --help block of {tool}")
                bounds = block_bounds(text, tool)
            else:
                fail(f"{page}: the --help block of {tool} differs from `{tool} --help` "
                     f"({what or 'the description or usage line changed'}); "
                     f"regenerate: python3 tests/scripts/docs_test.py --update BIN_DIR")
        outside = text[:bounds[0]] + text[bounds[1]:]
        spans, code = prose_and_code(outside)
        named = set()
        for s in spans:
            named.update(OPT.findall(s))
        for o in sorted(opts[tool] - common):
            if o.startswith("--") and o not in named:
                fail(f"{page}: option {o} of {tool} (in its --help) is not explained: name it in a backtick "
                     f"span outside the --help block")
        # A span that starts with an option on a tool's own page gives that tool the option.
        for s in spans:
            first = s.split()[0] if s.split() else ""
            if OPT.fullmatch(first) and first.startswith("--") and first not in opts[tool]:
                fail(f"{page}: `{s}` names {first}, which `{tool} --help` does not list")
    # Every invocation of a tool in README/docs: its options must be the tool's.
    inv = re.compile(r"(?:^|[\s/`(])(" + "|".join(map(re.escape, TOOLS)) + r")\b([^\n`|#]*)")
    for rel in DOCS:
        spans, code = prose_and_code(read(rel))
        for chunk in spans + code:
            for m in inv.finditer(chunk):
                tool, rest = m.group(1), m.group(2)
                if rest.startswith(":"):  # a tool's own message ("mori-probe: error ..."), not an invocation
                    continue
                for o in OPT.findall(rest):
                    if o not in opts[tool]:
                        fail(f"{rel}: `{tool}{rest.rstrip()}` uses {o}, which `{tool} --help` does not list")
    return opts


def check_help_layouts():
    """The help comparison against the layouts of two CLI11 versions: tests/fixtures/cli11-help/ holds the --help
    of one program printed by CLI11 2.1 (Debian 12) and by CLI11 2.4 (`TEXT=auto` against `TEXT [auto]`, a
    description moved to the next line where the left column is 30 wide or more). A block written with either
    holds the same content as the other's --help; a changed description is still seen, the last option's too."""
    fx = {v: read(f"tests/fixtures/cli11-help/help-cli11-{v}.txt").rstrip("\n") for v in ("2.1", "2.4")}
    models = {v: help_model(t) for v, t in fx.items()}
    if fx["2.1"] == fx["2.4"]:
        fail("cli11-help fixtures: the 2.1 and 2.4 layouts are the same text (nothing to compare)")
    for v, m in models.items():
        if m.get(("--launch",)) != ("programmatic", "programmatic: each push may start launching while the "
                                                    "previous kernel runs | plain"):
            fail(f"cli11-help {v}: --launch read as {m.get(('--launch',))}")
        if m.get(("--health",)) != (None, "Run the probe, the peer matrix and a short all-to-all, then judge them"):
            fail(f"cli11-help {v}: --health read as {m.get(('--health',))}")
        if len(m) != 12:
            fail(f"cli11-help {v}: {len(m)} options read, the fixture has 12")
    for shown, live in (("2.1", "2.4"), ("2.4", "2.1")):
        what = help_differences(block_help(render_block("mori-a2a", fx[shown]), "mori-a2a"), fx[live])
        if what:
            fail(f"cli11-help: a block written with CLI11 {shown} against the --help of CLI11 {live}: {what}")
        edited = fx[live].replace("(default $MORI_GPU_ARCHS)", "(default: none)")
        what = help_differences(block_help(render_block("mori-a2a", fx[shown]), "mori-a2a"), edited)
        if what != "descriptions changed: --archs":
            fail(f"cli11-help: a changed --archs description, block {shown} against --help {live}, read as "
                 f"{what!r}")


def check_env():
    read_vars = set()
    for top in ("lib", "apps"):
        for p in glob.glob(os.path.join(ROOT, top, "**", "*.*"), recursive=True):
            if p.endswith((".cpp", ".hpp", ".in", ".h")):
                with open(p, encoding="utf-8", errors="replace") as f:
                    src = f.read()
                read_vars.update(re.findall(r'(?:getenv|env_on|env_read|env_value)\("(MORI_[A-Z0-9_]+)"', src))
    readme = read("docs/environment.md")
    m = re.search(r"^\| variable \|.*?(?=^\s*$)", readme, flags=re.M | re.S)
    if not m:
        fail("docs/environment.md: no environment table (a table whose first column is 'variable')")
        return
    rows = set()
    for cell in re.findall(r"^\|\s*([^|]+)\|", m.group(0), flags=re.M):
        rows.update(re.findall(r"`((?:MORI|CUDA|ROCM|HWLOC|HIP)_[A-Z0-9_]+)", cell))
    for v in sorted(read_vars - rows):
        fail(f"docs/environment.md: environment variable {v} (read in lib/ or apps/) is not a row of the variables table")
    everything = ""
    for top in ("lib", "apps", "kernels", "scripts", "CMakeLists.txt"):
        for p in ([os.path.join(ROOT, top)] if top.endswith(".txt") else
                  glob.glob(os.path.join(ROOT, top, "**", "*"), recursive=True)):
            if os.path.isfile(p):
                with open(p, encoding="utf-8", errors="replace") as f:
                    everything += f.read()
    for v in sorted(rows):
        if v not in everything:
            fail(f"docs/environment.md: the variables table lists {v}, which nothing in lib/, apps/, kernels/ or scripts/ reads")


def schema_fields(node, path, out):
    if not isinstance(node, dict):
        return
    for k, v in node.get("properties", {}).items():
        out.append(path + [k])
        schema_fields(v, path + [k], out)
    if isinstance(node.get("items"), dict):
        schema_fields(node["items"], path + ["[]"], out)
    if isinstance(node.get("additionalProperties"), dict):
        schema_fields(node["additionalProperties"], path + ["*"], out)
    for key in ("oneOf", "anyOf", "allOf"):
        for n in node.get(key, []):
            schema_fields(n, path, out)
    for key in ("definitions", "$defs"):
        for n in node.get(key, {}).values():
            schema_fields(n, path, out)


def check_schema():
    import json
    words = set()
    for rel in DOCS:
        spans, code = prose_and_code(read(rel))
        for s in spans + code:
            words.update(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", s))
    for p in sorted(glob.glob(os.path.join(ROOT, "results", "schema", "*.json"))):
        with open(p) as f:
            schema = json.load(f)
        fields = []
        schema_fields(schema, [], fields)
        for path in fields:
            if path[-1] not in words:
                fail(f"{os.path.relpath(p, ROOT)}: field `{'.'.join(path)}` is named nowhere in README.md or "
                     f"docs/*.md (document it once: docs/json.md or the tool's page)")


def check_scripts_listed():
    readme = read("docs/usage.md")
    for name in sorted(os.listdir(os.path.join(ROOT, "scripts"))):
        path = os.path.join(ROOT, "scripts", name)
        if os.path.isfile(path) and os.access(path, os.X_OK) and f"scripts/{name}" not in readme:
            fail(f"docs/usage.md: scripts/{name} (an executable in scripts/) is not named (add it to the scripts table)")


def check_exit_codes():
    src = read("lib/include/mori/symm/base/error.hpp")
    m = re.search(r"enum class ExitCode[^{]*\{([^}]*)\}", src)
    codes = {int(v) for v in re.findall(r"=\s*(\d+)", m.group(1))} if m else set()
    readme = read("docs/usage.md")
    t = re.search(r"^\| exit \|.*?(?=^\s*$)", readme, flags=re.M | re.S)
    rows = {int(c) for c in re.findall(r"^\|\s*(\d+)\s*\|", t.group(0), flags=re.M)} if t else set()
    if not t:
        fail("docs/usage.md: no exit-code table (a table whose first column is 'exit')")
    for c in sorted(codes - rows):
        fail(f"docs/usage.md: exit code {c} (ExitCode in lib/include/mori/symm/base/error.hpp) is not in the exit-code table")
    for c in sorted(rows - codes):
        fail(f"docs/usage.md: the exit-code table lists {c}, which ExitCode does not define")


def slug(heading):
    s = heading.strip().lower()
    s = re.sub(r"[`*_~]", "", s) if False else re.sub(r"[`*~]", "", s)
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    text = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
    out = set()
    seen = {}
    for h in re.findall(r"^#{1,6}\s+(.*?)\s*#*\s*$", text, flags=re.M):
        s = slug(h)
        n = seen.get(s, 0)
        seen[s] = n + 1
        out.add(s if n == 0 else f"{s}-{n}")
    return out


def expand(path):
    m = re.search(r"\{([^{}]*)\}", path)
    if not m:
        return [path]
    out = []
    for alt in m.group(1).split(","):
        out.extend(expand(path[:m.start()] + alt + path[m.end():]))
    return out


def check_links():
    mds = []
    for p in glob.glob(os.path.join(ROOT, "**", "*.md"), recursive=True):
        rel = os.path.relpath(p, ROOT)
        if rel.split(os.sep)[0].startswith("build") or rel.startswith(("out" + os.sep, ".")):
            continue
        mds.append(rel)
    for rel in sorted(mds):
        text = read(rel)
        body = re.sub(r"^```.*?^```", "", text, flags=re.M | re.S)
        body = re.sub(r"`[^`]*`", "", body)
        for target in re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", body):
            if re.match(r"^[a-z]+:", target):
                continue
            path, _, frag = target.partition("#")
            dest = os.path.normpath(os.path.join(ROOT, os.path.dirname(rel), path)) if path else \
                os.path.join(ROOT, rel)
            if not os.path.exists(dest):
                fail(f"{rel}: link ({target}) points to {os.path.relpath(dest, ROOT)}, which does not exist")
            elif frag and dest.endswith(".md") and frag not in anchors(dest):
                fail(f"{rel}: link ({target}): no heading with anchor #{frag} in {os.path.relpath(dest, ROOT)}")
    for rel in DOCS:
        spans, _ = prose_and_code(read(rel))
        for s in spans:
            for tok in s.split():
                tok = tok.rstrip(",.;:)")
                if not re.match(r"^(results|docs|scripts|tests|apps|kernels)/", tok):
                    continue
                if re.search(r"[*<>?$]|\.\.\.|[A-Z]{2,}", tok):
                    continue
                for p in expand(tok):
                    if not os.path.exists(os.path.join(ROOT, p)):
                        fail(f"{rel}: `{tok}` names {p}, which does not exist in the repository")


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv else 2
    if argv == ["--layouts"]:
        check_help_layouts()
        for f in failures:
            print("FAIL: " + f)
        print(f"docs_test --layouts: {len(failures)} failure(s)")
        return 1 if failures else 0
    update = argv[0] == "--update"
    args = argv[1:] if update else argv
    if len(args) != 1 or not os.path.isdir(args[0]):
        print("usage: docs_test.py [--update] BIN_DIR | --layouts", file=sys.stderr)
        return 2
    check_help_and_options(os.path.abspath(args[0]), update)
    check_env()
    check_schema()
    check_exit_codes()
    check_scripts_listed()
    check_links()
    for f in failures:
        print("FAIL: " + f)
    print(f"docs_test: {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
