#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Fails when file I/O other than the one reader and the one writer (lib/include/mori/symm/base/files.hpp)
appears in the tools' C++ sources: lib/, apps/ and any host-side C++ under kernels/.

usage: file_io_audit_test.py [SOURCE_ROOT]   (default: the repository this script lies in)

Comments and string literals are left out before matching. Every raw call that stays has an entry in ALLOWED below
with how many times it may appear in that file and why; a count that differs either way fails, so the list never
outgrows what the code needs.
"""
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cxx_text import strip  # noqa: E402

# The repository this script lies in (it is in tests/scripts/).
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# The reader and the writer themselves.
OWNER = "lib/src/base/files.cpp"

# (file, call) -> (count, why it cannot go through files.hpp). Keep it short.
ALLOWED = {
    # The teardown journal's append writer: its fatal-signal handler writes through the same fd, so every write
    # must be async-signal-safe (no allocation, no exceptions) and go straight to the O_APPEND fd.
    ("lib/src/teardown/journal.cpp", "open"): (1, "the journal's O_APPEND fd, shared with the fatal-signal handler"),
    ("lib/src/teardown/journal.cpp", "write"): (1, "async-signal-safe append of one journal line"),
    # An injected fault's last words on stderr just before _exit(): stdio may be in any state there.
    ("lib/src/base/fault.cpp", "write"): (3, "async-signal-safe message on fd 2 before _exit"),
    # The host runtime's shared memory: a peer's memfd, opened through /proc/<pid>/fd to be mapped, never read.
    ("lib/src/platform/host/host_runtime.cpp", "open"): (1, "import of a peer's memfd for mmap"),
    ("lib/src/platform/host/host_runtime.cpp", "mmap"): (3, "reserving and mapping shared memory"),
    ("lib/src/platform/host/host_runtime.cpp", "memfd_create"): (1, "the host runtime's physical memory"),
    ("lib/src/platform/host/host_runtime.cpp", "ftruncate"): (1, "sizing that memfd"),
    # Not a file: the output of git, spawned to compare the build's tree with the tree now, on a pipe polled
    # within its bound (docs/reliability.md "Revisions").
    ("lib/src/base/revision.cpp", "read"): (1, "git's answer on a pipe from the spawned child, polled within a bound"),
}

# Calls that read or write files without the reader's and writer's checks.
STREAMS = r"std::(?:basic_)?(?:i|o)?fstream|std::filebuf"
STDIO = r"\b(?:std::)?(fopen|freopen|fdopen|tmpfile|popen|fread|fwrite|fgets|fputs|fscanf|fgetc|fputc)\s*\("
# Raw calls: a free function (not a member such as set.read(...) or a name such as launch_write(...)). read and
# write must have an argument list with a comma, so that a lambda called write() is not taken for write(2).
RAW = (r"(?<![\w.>])(?:::)?(open|openat|open64|creat|pread|pwrite|preadv|pwritev|readv|writev|sendfile|splice|"
       r"mmap|truncate|ftruncate|memfd_create|shm_open)\s*\(")
RAW_RW = r"(?<![\w.>])(?:::)?(read|write)\s*\([^;()]*(?:\([^;()]*\)[^;()]*)*,"
FS = r"\b(?:std::filesystem|fs)::(copy|copy_file|resize_file)\s*\("


def calls(text):
    """[(call, line number)] of the file I/O in the stripped text."""
    found = []
    for rx in (STREAMS, STDIO, RAW, RAW_RW, FS):
        for m in re.finditer(rx, text):
            before = re.search(r"(\w+)\s+$", text[max(0, m.start() - 40):m.start()])
            if rx in (RAW, RAW_RW) and before and before.group(1) not in ("return", "else", "do", "throw"):
                continue  # a declaration or definition of a function of that name ("int read(...)"), not a call
            name = m.group(1) if m.groups() else m.group(0)
            found.append((name, text.count("\n", 0, m.start()) + 1))
    return found


def sources(root):
    for top in ("lib", "apps", "kernels"):
        for d, _, files in os.walk(os.path.join(root, top)):
            for f in sorted(files):
                if f.endswith((".cpp", ".hpp", ".h", ".cpp.in", ".cc")):
                    yield os.path.relpath(os.path.join(d, f), root)


def main():
    if any(a in ("-h", "--help") for a in sys.argv[1:]):
        print(__doc__.strip())
        return 0
    root = sys.argv[1] if len(sys.argv) > 1 else ROOT
    seen, failures = {}, []
    files = list(sources(root))
    if OWNER not in files:
        failures.append(f"{OWNER}: missing (the one reader and writer)")
    for rel in files:
        if rel == OWNER:
            continue
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
            text = strip(f.read())
        for name, line in calls(text):
            seen.setdefault((rel, name), []).append(line)
    for key, lines in sorted(seen.items()):
        allowed = ALLOWED.get(key, (0, ""))[0]
        if len(lines) != allowed:
            where = ", ".join(f"{key[0]}:{n}" for n in lines)
            failures.append(f"{key[1]}: {len(lines)} call(s), {allowed} allowed ({where}); read and write files "
                            f"through lib/include/mori/symm/base/files.hpp")
    for key, (count, why) in sorted(ALLOWED.items()):
        if key not in seen:
            failures.append(f"{key[0]}: no {key[1]} call left; remove its allow-list entry ({why})")
    for f in failures:
        print(f"FAIL: {f}")
    print(f"{len(files)} source files checked, {len(failures)} problem(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
