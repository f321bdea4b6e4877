#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The results model (scripts/mori_results) and the scripts' command lines over it, on hostile input.

Unit checks: the bounded reader refuses FIFOs, devices and oversize files without blocking; strict JSON refuses
NaN/Infinity, overflowing numbers, duplicate keys and deep nesting and names truncation; schema and version are
checked first; typed rows refuse negative, fractional and mistyped counts and zero times; the row identity treats a
field an older document lacks as a value of its own; runs are grouped only within one revision; the gate's
allowance rule. Command lines: check-results and validate-json on the issue's cases (NaN bandwidths, a document
that is a list, deep nesting) exit 2 naming the file, never a pass or a traceback.
"""
import copy
import json
import os
import subprocess
import sys
import tempfile

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/: harness.py, fixtures/
ROOT = os.path.join(TESTS, "..")
sys.path.insert(0, TESTS)
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from harness import check, finish  # noqa: E402
from mori_results import a2a, constants, documents, gate, reader  # noqa: E402
from mori_results.errors import Malformed  # noqa: E402

FIX = os.path.join(ROOT, "tests", "fixtures")
BASE = json.load(open(os.path.join(FIX, "h200-a2a-w2-r1.json")))


def refused(fn, *args, want=""):
    """(True, message) when fn(*args) raises Malformed whose text contains want."""
    try:
        fn(*args)
    except Malformed as e:
        return want in str(e), str(e)
    except Exception as e:  # noqa: BLE001
        return False, f"{type(e).__name__}: {e}"
    return False, "accepted"


def script(name, *args, timeout=60):
    try:
        p = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", name), *args], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None, "timed out"
    return p.returncode, p.stdout


with tempfile.TemporaryDirectory() as tmp:
    def put(name, text):
        p = os.path.join(tmp, name)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(text if isinstance(text, str) else json.dumps(text))
        return p

    # ---- reader ----
    fifo = os.path.join(tmp, "fifo.json")
    os.mkfifo(fifo)
    ok, msg = refused(reader.read_json, fifo, want="FIFO")
    check("a FIFO is refused without blocking", ok, msg)
    ok, msg = refused(reader.read_json, "/dev/zero", want="character device")
    check("/dev/zero is refused (a device)", ok, msg)
    link = os.path.join(tmp, "zero.json")
    os.symlink("/dev/zero", link)
    ok, msg = refused(reader.read_json, link, want="zero.json")
    check("a link to /dev/zero is refused, named by the link", ok, msg)
    ok, msg = refused(reader.read_json, tmp, want="folder")
    check("a folder is refused", ok, msg)
    big = put("big.json", "[" + "0," * 600 + "0]")
    ok, msg = refused(reader.read_json, big, 1000, want="limit")
    check("a file over the size cap is refused", ok, msg)
    for name, text, want in (("nan", '{"a": NaN}', "NaN"), ("inf", '{"a": -Infinity}', "Infinity"),
                             ("e400", '{"a": 1e400}', "not finite"), ("dup", '{"a": 1, "a": 2}', "duplicate"),
                             ("deep", "[" * 100000 + "]" * 100000, "deep"), ("cut", '{"a": [1, 2', "truncated"),
                             ("cutstr", '{"a": "abc', "truncated"), ("bad", "{not json", "not valid JSON"),
                             ("utf", None, "UTF-8")):
        p = os.path.join(tmp, f"{name}.json")
        with open(p, "wb") as f:
            f.write(b'{"a": "\xff"}' if text is None else text.encode())
        ok, msg = refused(reader.read_json, p, want=want)
        check(f"strict JSON refuses {name} ({want}), naming the file", ok and p in msg, msg)
    check("brackets inside strings do not count as nesting", reader.nesting_depth('{"a": "[[[[{{{{"}') == 1)
    check("65 levels are refused, 64 read",
          refused(reader.parse_json, "[" * 65 + "]" * 65, "x", want="deep")[0]
          and reader.parse_json("[" * 64 + "]" * 64, "x") is not None)
    ok, msg = refused(reader.json_files, [os.path.join(tmp, "nope", "x.json")], want="no such file")
    check("a missing path is refused, naming the missing folder", ok and "no folder" in msg, msg)

    # ---- documents: schema first ----
    for name, doc, want in (("list", [1], "an array"), ("noschema", {"a": 1}, "no schema"),
                            ("badver", {"schema": "mori.a2a/x"}, "not a positive integer"),
                            ("future", {"schema": "mori.a2a/9"}, "versions 1, 2")):
        ok, msg = refused(documents.load_document, put(f"{name}.json", doc), want=want)
        check(f"schema checked first: {name}", ok, msg)
    check("another tool's schema is left to its reader (None)",
          documents.load_document(put("other.json", {"schema": "someone.else/1"})) is None)

    # ---- typed rows ----
    def row_doc(field, value, sub=None):
        d = copy.deepcopy(BASE)
        (d["results"][0][sub] if sub else d["results"][0])[field] = value
        return documents.load_document(put("row.json", d))

    for field, value, want in (("wrong", -7, "negative count"), ("wrong", 7.5, "non-negative integer"),
                               ("wrong", 7.0, "non-negative integer"), ("wrong", True, "non-negative integer"),
                               ("wrong", "0", "non-negative integer"), ("chunk_bytes", 0, "zero"),
                               ("total_bw_gbps", 0, "not positive"), ("total_bw_gbps", "fast", "expected a number"),
                               ("graph", 1, "true or false"), ("samples", -1, "negative")):
        ok, msg = refused(a2a.load_run, row_doc(field, value), want=want)
        check(f"a row with {field} = {value!r} is refused ({want}), naming the field",
              ok and f"results[0].{field}" in msg, msg)
    ok, msg = refused(a2a.load_run, row_doc("p50", 0, sub="time_us"), want="not positive")
    check("a p50 of 0 is refused", ok, msg)
    d = copy.deepcopy(BASE)
    d["meta"]["world"] = 2.5
    ok, msg = refused(a2a.load_run, documents.load_document(put("w.json", d)), want="meta.world")
    check("a fractional world is refused", ok, msg)

    run = a2a.load_run(documents.load_document(put("base.json", BASE)))
    r0 = run.rows[0]
    check("typed row: counts and times as numbers", isinstance(r0.wrong, int) and r0.p50 > 0 and r0.identity.world == 2)
    newer = copy.deepcopy(BASE)
    for r in newer["results"]:
        r["launch"] = "plain"
    run2 = a2a.load_run(documents.load_document(put("newer.json", newer)))
    check("a field an older document lacks is ABSENT, never equal to a recorded value",
          r0.identity.launch is a2a.ABSENT and run2.rows[0].identity.launch == "plain"
          and r0.identity != run2.rows[0].identity, repr((r0.identity, run2.rows[0].identity)))
    kd = copy.deepcopy(BASE)
    kd["meta"]["env"]["MORI_KERNEL_DIR"] = "/tmp/k"
    run3 = a2a.load_run(documents.load_document(put("kd.json", kd)))
    check("another kernel source is another identity", run3.rows[0].identity != r0.identity)
    names = {f for f, _ in r0.identity.items()}
    check("the identity holds every field that changes what ran",
          {"world", "ranks_per_gpu", "mps", "chunk_bytes", "addressing", "sync", "protocol", "graph",
           "blocks_per_peer", "unroll", "launch", "signal_scope", "source_cache", "kernel_dir", "platform",
           "device", "gpus"} <= names, repr(names))
    other_rev = copy.deepcopy(BASE)
    other_rev["meta"]["git_revision"] = "abcdef0"
    run4 = a2a.load_run(documents.load_document(put("rev.json", other_rev)))
    groups = a2a.group_runs([run, run4])
    check("runs are grouped only within one revision",
          len(groups) == 2 * len(run.rows) and all(len(v) == 1 for v in groups.values()))

    mut = copy.deepcopy(BASE)
    mut["meta"]["env"]["MORI_FAULT"] = "a2a.distinct-policy:0,a2a.no-barrier:*"
    run6 = a2a.load_run(documents.load_document(put("mut.json", mut)))
    plain = copy.deepcopy(BASE)
    plain["meta"]["env"]["MORI_FAULT"] = "a2a.distinct-policy:0"
    run7 = a2a.load_run(documents.load_document(put("nomut.json", plain)))
    check("a mutant among other MORI_FAULT points is a mutant; another point alone is not",
          run6.is_mutant and not run7.is_mutant and run7.side_run)

    # ---- the gate's allowance rule ----
    side = gate.collect("baseline", [run], False)
    ident = r0.identity
    allow, floor, between, within, n = gate.allowance(side.rows[ident], "time_p50_us", None)
    want_floor = constants.GATE_FLOOR_HOST_SYNC if r0.sync == "host" else constants.GATE_FLOOR_DEVICE_SYNC
    check("one run: allowance = its p95/p50 spread + the margin, no spread across runs",
          n == 1 and between == 0 and floor == want_floor
          and abs(allow - (want_floor + (r0.p95 / r0.p50 - 1))) < 1e-12, repr((allow, floor, within)))
    slower = copy.deepcopy(BASE)
    slower["results"][0]["time_us"]["p50"] *= 1.2
    run5 = a2a.load_run(documents.load_document(put("slower.json", slower)))
    allow2, _, between2, _, n2 = gate.allowance(gate.collect("b", [run, run5], False).rows[ident], "time_p50_us", None)
    check("two runs 20% apart: the allowance is at least 3x their spread", n2 == 2 and allow2 >= 3 * between2 > 0.5,
          repr((allow2, between2)))
    check("one definition of each constant: MORI_ADDRESSING and the ceiling bound",
          constants.MORI_ADDRESSING == ("ptr", "lsa") and constants.CEILING_BOUND == 1.05)

    # ---- check-results and validate-json on the cases ----
    nan = copy.deepcopy(BASE)
    text = json.dumps(nan)
    for k in ("total_bw_gbps", "agg_bw_gbps", "algbw_gbps", "busbw_gbps"):
        text = text.replace(f'"{k}": ', f'"{k}": NaN, "{k}_was": ')
    p = put("cr-nan/a.json", text)
    rc, out = script("check-results", os.path.dirname(p))
    check("check-results: every bandwidth NaN: exit 2 naming the file, not a pass",
          rc == 2 and "a.json" in out and "NaN" in out and "0 failed claims" not in out, out)
    rc, out = script("check-results", put("cr-list/list.json", [BASE]))
    check("check-results: a document that is a list: exit 2, no traceback",
          rc == 2 and "list.json" in out and "Traceback" not in out, out)
    nulls = copy.deepcopy(BASE)
    nulls["results"][0]["total_bw_gbps"] = None
    rc, out = script("check-results", put("cr-null/a.json", nulls))
    check("check-results: a mori row without a total bandwidth is a failed claim (exit 1)",
          rc == 1 and "no total bandwidth" in out, out)
    neg = copy.deepcopy(BASE)
    neg["results"][1]["wrong"] = -7
    rc, out = script("check-results", put("cr-neg/a.json", neg))
    check('check-results: "wrong": -7: exit 2', rc == 2 and "negative" in out, out)
    rc, out = script("check-results", os.path.join(tmp, "cr-missing"))
    check("check-results: a missing folder: exit 2", rc == 2 and "cr-missing" in out, out)
    rc, out = script("check-results", put("cr-ok/a.json", BASE))
    check("check-results: the real fixture holds", rc == 0 and "0 failed claims" in out, out)
    rc, out = script("validate-json", put("vj/deep.json", "[" * 100000 + "]" * 100000))
    check("validate-json: 100,000-deep nesting: exit 2 naming the file, no RecursionError",
          rc == 2 and "deep.json" in out and "Traceback" not in out, out)
    os.makedirs(os.path.join(tmp, "vj-fifo"))
    os.mkfifo(os.path.join(tmp, "vj-fifo", "x.json"))
    rc, out = script("validate-json", os.path.join(tmp, "vj-fifo"))
    check("validate-json: a folder holding a FIFO: exit 2, no hang", rc == 2 and "FIFO" in out, out)
    # An integer beyond the range of a double ("p50": 1 and 400 zeros): refused by the reader, as 1e400 is, so
    # that no script overflows turning it into a float and validate-json does not call it valid.
    huge_int = "1" + "0" * 400
    check("the reader refuses an integer beyond a double's range, naming the file",
          refused(reader.read_json, put("int400.json", '{"a": %s}' % huge_int), want="range of a double")[0])
    check("... and reads the largest integer a double holds (and its negative)",
          reader.parse_json('[%d, -%d]' % (int(sys.float_info.max), int(sys.float_info.max)), "x")[0] > 0)
    big_p50 = json.dumps(BASE).replace('"p50": ', f'"p50": {huge_int}, "p50_was": ', 1)
    good = put("int-good/a.json", BASE)
    for name, args in (("perf-check", [good, put("int-pc/a.json", big_p50)]),
                       ("render-results", ["--results", os.path.dirname(put("int-rr/a.json", big_p50))]),
                       ("validate-json", [put("int-vj/a.json", big_p50)])):
        rc, out = script(name, *args)
        check(f'{name}: "p50": 1 followed by 400 zeros: exit 2 naming the file, no traceback',
              rc == 2 and "a.json" in out and "range of a double" in out and "Traceback" not in out, out)
    # One rule for a count, in the results model, for every script: "wrong": 7.0 is refused by perf-check,
    # check-results and validate-json alike (a JSON schema's "integer" would let 7.0 through).
    float_count = copy.deepcopy(BASE)
    float_count["wrong"] = 7.0
    fc = put("fc/a.json", float_count)
    for name, args, code in (("perf-check", [good, fc], 2), ("check-results", [os.path.dirname(fc)], 2),
                             ("validate-json", [fc], 1)):
        rc, out = script(name, *args)
        check(f'{name}: "wrong": 7.0 refused (exit {code}) naming the field, by the results model\'s rule',
              rc == code and "wrong: expected a non-negative integer" in out and ": valid" not in out, out)
    for name in ("perf-check", "check-results", "validate-json", "render-results"):
        rc, out = script(name, "--help")
        check(f"{name} --help: usage, exit 0", rc == 0 and "usage" in out.lower(), out)

finish()
