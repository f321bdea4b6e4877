# SPDX-License-Identifier: MIT
"""Bounded reads of regular files and strict JSON.

A path is stat'ed first and must be a regular file (after following links) of at most the size cap: FIFOs,
devices, sockets and folders are refused without being opened. The file is then opened with O_NONBLOCK (so a
FIFO swapped in between cannot block), fstat'ed again and read to at most the cap. JSON is parsed only after a
scan shows its nesting is within the depth limit; NaN, Infinity, numbers that overflow to infinity, integers
beyond the range of a double (which every reader would turn into a float) and duplicate keys are refused. Every failure is a Malformed naming the file.
"""
import json
import math
import os
import re
import stat
import sys

from .constants import MAX_JSON_BYTES, MAX_JSON_DEPTH
from .errors import Malformed

_KIND = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
         (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def _kind(mode):
    return next((name for test, name in _KIND if test(mode)), "not a regular file")


def read_bytes(path, max_bytes=MAX_JSON_BYTES):
    """The bytes of the regular file at path, at most max_bytes (Malformed otherwise)."""
    try:
        st = os.stat(path)
    except OSError as e:
        raise Malformed(path, f"cannot read: {e.strerror or e}")
    if not stat.S_ISREG(st.st_mode):
        raise Malformed(path, f"{_kind(st.st_mode)}, not a regular file")
    if st.st_size > max_bytes:
        raise Malformed(path, f"{st.st_size} bytes, more than the {max_bytes}-byte limit")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise Malformed(path, f"cannot open: {e.strerror or e}")
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Malformed(path, f"{_kind(st.st_mode)}, not a regular file")
        chunks, total = [], 0
        while True:
            b = os.read(fd, min(1 << 20, max_bytes + 1 - total))
            if not b:
                break
            chunks.append(b)
            total += len(b)
            if total > max_bytes:
                raise Malformed(path, f"more than the {max_bytes}-byte limit")
        return b"".join(chunks)
    except OSError as e:
        raise Malformed(path, f"cannot read: {e.strerror or e}")
    finally:
        os.close(fd)


_STRINGS = re.compile(r'"(?:[^"\\]|\\.)*"', re.S)
_BRACKETS = re.compile(r"[\[\]{}]")


def nesting(text):
    """(deepest, final) nesting of arrays and objects in JSON text (brackets inside strings do not count); a final
    depth above 0 means the text ends inside an array or object."""
    depth = deepest = 0
    for m in _BRACKETS.finditer(_STRINGS.sub("", text)):
        depth += 1 if m.group() in "[{" else -1
        deepest = max(deepest, depth)
    return deepest, depth


def nesting_depth(text):
    return nesting(text)[0]


def _refuse_constant(name):
    raise ValueError(f"non-finite number {name}")


def _finite_float(text):
    v = float(text)
    if not math.isfinite(v):
        raise ValueError(f"number {text[:40]} is not finite")
    return v


_MAX_INT = int(sys.float_info.max)


def _bounded_int(text):
    """An integer a double can hold: one beyond it (1 followed by 400 zeros) overflows wherever a reader mixes it
    with floats, so it is refused here, as 1e400 is."""
    if len(text.lstrip("-")) > len(str(_MAX_INT)) or abs(int(text)) > _MAX_INT:
        raise ValueError(f"integer {text[:40]}{'...' if len(text) > 40 else ''} is beyond the range of a double")
    return int(text)


class Number(float):
    """A parsed JSON number that keeps its own text (parse_json(..., keep_text=True)): a writer that must
    reproduce the JSON's bytes (render-results --csv) writes .text, not Python's repr of the double, which
    differs where the writer of the JSON chose another of the texts that round-trip to the same double."""

    def __new__(cls, value, text):
        v = super().__new__(cls, value)
        v.text = text
        return v


class Integer(int):
    """A parsed JSON integer that keeps its own text, as Number does."""

    def __new__(cls, value, text):
        v = super().__new__(cls, value)
        v.text = text
        return v


def _no_duplicates(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise ValueError(f"duplicate key {k!r}")
        out[k] = v
    return out


def parse_json(text, path, max_depth=MAX_JSON_DEPTH, keep_text=False):
    """Strict JSON of text (from path, for the message). keep_text: every number is a Number or an Integer that
    keeps its own text."""
    depth, _ = nesting(text)
    if depth > max_depth:
        raise Malformed(path, f"JSON nested {depth} deep, more than the limit of {max_depth}")
    pf, pi = _finite_float, _bounded_int
    if keep_text:
        pf, pi = (lambda t: Number(_finite_float(t), t)), (lambda t: Integer(_bounded_int(t), t))
    try:
        return json.loads(text, parse_constant=_refuse_constant, parse_float=pf, parse_int=pi,
                          object_pairs_hook=_no_duplicates)
    except RecursionError:
        raise Malformed(path, "JSON nested too deep")
    except json.JSONDecodeError as e:
        cut = e.pos >= len(text.rstrip()) or e.msg.startswith("Unterminated string")
        raise Malformed(path, f"{'truncated' if cut else 'not valid'} JSON: {e}")
    except ValueError as e:  # the hooks above, integer digit limits
        raise Malformed(path, f"not valid JSON: {e}")


def read_json(path, max_bytes=MAX_JSON_BYTES, max_depth=MAX_JSON_DEPTH, keep_text=False):
    """The parsed JSON of the regular file at path, read within the bounds (keep_text: as parse_json)."""
    raw = read_bytes(path, max_bytes)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise Malformed(path, f"not UTF-8 text ({e.reason} at byte {e.start})")
    return parse_json(text, path, max_depth, keep_text)


def json_files(paths, skip_folders=("schema",)):
    """The *.json files named by paths: a file stands for itself, a folder for every *.json under it (sorted,
    links to folders not followed, folders named in skip_folders left out). A path that does not exist is
    Malformed; what a *.json entry is (FIFO, device, link) is judged when it is read."""
    out = []
    for p in paths:
        if os.path.isdir(p):
            def fail(e):
                raise Malformed(getattr(e, "filename", None) or p, f"cannot list: {e.strerror or e}")
            for folder, subs, names in os.walk(p, onerror=fail):
                subs[:] = sorted(s for s in subs if s not in skip_folders)
                out += [os.path.join(folder, n) for n in sorted(names) if n.endswith(".json")]
        elif os.path.lexists(p):
            out.append(p)
        else:
            parent = os.path.dirname(os.path.abspath(p))
            raise Malformed(p, "no such file or folder" + ("" if os.path.isdir(parent) else f" (no folder {parent})"))
    return out
