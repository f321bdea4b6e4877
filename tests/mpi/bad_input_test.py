#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The bad-input suite: every case must exit with its code (2, or 3 where the environment is at fault), print
one line naming the option on every rank, and leave nothing behind (no socket, no /dev/shm object, no temp file,
no journal folder).

usage: bad_input_test.py BIN_DIR MPIRUN...  (--markdown: print the case table for docs/reliability.md instead)
"""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: harness.py
import harness  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
MD = "--markdown" in sys.argv
ARGS = [a for a in sys.argv[1:] if a != "--markdown"]
BIN = ARGS[0] if ARGS else ""
MPIRUN = ARGS[1:]
TMP = tempfile.mkdtemp(prefix="mori-bad-")
# "MISSING" in a case stands for a name this test makes missing: inside its own fresh temporary folder, so that
# no case depends on what exists on the machine (/nonexistent does exist where a tool once created it).
MISSING = os.path.join(TMP, "missing")
LONG = "n" * 40

# (tool, ranks, args, env, code, text every rank's error line must contain)
CASES = [
    ("mori-a2a", 2, ["--chunk-kib", "0"], {}, 2, "chunk size: must be > 0"),
    ("mori-a2a", 2, ["--chunk-kib", "-4"], {}, 2, "--chunk-kib: '-4' is not a size"),
    ("mori-a2a", 2, ["--chunk-kib", "abc"], {}, 2, "--chunk-kib: 'abc' is not a size"),
    ("mori-a2a", 2, ["-b", "100", "-e", "10"], {}, 2, "-b/-e: need 0 < begin <= end"),
    ("mori-a2a", 2, ["--chunk-kib", "99999999999"], {}, 2, "exceeds 16 GiB"),
    # One chunk limit (a2a/chunk.hpp), named with the item where the options give it: before, the parser had a
    # limit of its own (2^40 KiB, "too large") and the sweep's sizes were refused later without their item.
    ("mori-a2a", 2, ["--chunk-kib", "64,1099511627777"], {}, 2,
     "--chunk-kib item 2 '1099511627777': chunk size: 1125899906843648 bytes exceeds 16 GiB, the limit"),
    ("mori-a2a", 2, ["-b", "1K", "-e", "64G"], {}, 2,
     "-b/-e/-f size 26 (-b 1K -e 64G -f 2): chunk size: 34359738368 bytes exceeds 16 GiB, the limit"),
    # Depends on the machine's size, so it takes its rank count from it: 16 GiB chunks need 3 x world x 16 GiB per
    # rank, refused beyond 90% of the host runtime's device memory (physical pages x page size) shared by the
    # ranks. 2 ranks suffice below 213 GiB (this machine); a 512-560 GiB host needs 4, where 2 would be accepted
    # (96 GiB per rank against 90% of 256-280 GiB) and then try to allocate them.
    ("mori-a2a", next(n for n in range(2, 65) if 3 * n * (16 << 30) > 0.9 * os.sysconf("SC_PHYS_PAGES") *
                      os.sysconf("SC_PAGE_SIZE") / n), ["--chunk-kib", "16777216"], {}, 2,
     "more than 90% of the device"),
    ("mori-a2a", 2, ["--addressing", "flat"], {}, 2, "--addressing: unknown value 'flat'"),
    ("mori-a2a", 2, ["--sync", "never"], {}, 2, "--sync: unknown value 'never'"),
    ("mori-a2a", 2, ["--sync", "host", "--graph", "4"], {}, 2, "--graph: needs --sync device"),
    ("mori-a2a", 2, ["--graph", "-1"], {}, 2, "--graph: must be in 0..10000"),
    ("mori-a2a", 2, ["--iters", "0"], {}, 2, "--iters: must be in 1..1000000"),
    ("mori-a2a", 2, ["--warmup", "-1"], {}, 2, "--warmup: must be in 0..100000"),
    ("mori-a2a", 2, ["--blocks-per-peer", "70000"], {}, 2, "--blocks-per-peer: must be in 0..65535"),
    ("mori-a2a", 2, ["--unroll", "3"], {}, 2, "--unroll: must be 0 (auto), 4 or 8"),
    ("mori-a2a", 2, ["--timeout-s", "0"], {}, 2, "--timeout-s: must be in (0, 86400]"),
    ("mori-a2a", 2, ["--timeout-s", "abc"], {}, 2, "--timeout-s"),
    ("mori-a2a", 2, ["--json", "MISSING/x.json"], {}, 2, "--json: folder 'MISSING' does not exist"),
    ("mori-a2a", 2, ["--json", "/tmp"], {}, 2, "--json: '/tmp' is a directory"),
    ("mori-a2a", 2, ["--handle-type", "dmabuf"], {}, 2, "--handle-type: unknown value 'dmabuf'"),
    ("mori-a2a", 2, ["--backend", "tpu"], {}, 2, "--backend: unknown value 'tpu'"),
    ("mori-a2a", 2, ["--device", "-5"], {}, 2, "--device: must be in 0..1023"),
    ("mori-a2a", 2, ["--stride-quantum", "3K"], {}, 2, "--stride-quantum: 3072 is not a multiple of the allocation granularity"),
    ("mori-a2a", 2, ["-b", "1M"], {}, 2, "-b/-e: give both"),
    ("mori-a2a", 2, ["-b", "1M", "-e", "4M", "-f", "1"], {}, 2, "-f: the factor must be in (1, 1024]"),
    ("mori-a2a", 2, ["--signal-scope", "gpu"], {}, 2, "--signal-scope: unknown value 'gpu'"),
    ("mori-a2a", 2, ["--signal-scope", "device"], {}, 2, "--signal-scope device: needs every rank on one NVIDIA GPU"),
    ("mori-a2a", 2, ["--source-cache", "hot"], {}, 2, "--source-cache: unknown value 'hot'"),
    ("mori-a2a", 2, ["--source-cache", "evict-first"], {}, 2, "--source-cache evict-first: needs an NVIDIA GPU"),
    ("mori-a2a", 2, ["--no-such-option"], {}, 2, "--no-such-option"),
    ("mori-a2a", 2, [], {"MORI_LOG_LEVEL": "loud"}, 2, "MORI_LOG_LEVEL: unknown level 'loud'"),
    ("mori-a2a", 2, [], {"MORI_NODE_ID": LONG}, 2, "MORI_NODE_ID: at most 31 characters"),
    ("mori-a2a", 2, ["MPMD"], {}, 2, "command-line options differ between ranks: ranks 0 run with '--backend host --chunk-kib 64', ranks 1 run with '--backend host --chunk-kib 128'"),
    ("mori-a2a", 2, ["--stride-quantum", "4611686018427387904"], {}, 2, "--stride-quantum: the flat span"),
    ("mori-a2a", 2, [], {"MORI_FAULT": "rendezvous.nope:1"}, 2, "MORI_FAULT: unknown point 'rendezvous.nope'"),
    ("mori-probe", 1, ["--deep-mib", "1"], {}, 2, "--deep-mib: must be in [2, 65536]"),
    ("mori-probe", 1, ["--jit-precompile", "--archs", "bogus"], {}, 2, "--archs: 'bogus' is not an arch"),
    ("mori-probe", 1, ["--jit-precompile"], {}, 2, "--jit-precompile: name the archs"),
    ("mori-probe", 1, ["--jit-precompile", "--archs", "sm_90"], {"MORI_KERNEL_DIR": "MISSING"}, 2,
     "MORI_KERNEL_DIR: 'MISSING' is not a folder"),
    ("mori-probe", 1, ["--jit-precompile", "--archs", "sm_90"], {"MORI_DISABLE_JIT": "maybe"}, 2,
     "MORI_DISABLE_JIT: 'maybe' is not a boolean"),
    ("mori-probe", 1, ["--jit-precompile"], {"MORI_GPU_ARCHS": "sm 90!"}, 2, "is not an arch"),
    ("mori-teardown-repro", 2, ["--scenario", "nope"], {}, 2, "--scenario: unknown 'nope'"),
    ("mori-teardown-repro", 2, ["--windows", "0"], {}, 2, "--windows: must be in 1..64"),
    ("mori-teardown-repro", 2, ["--cycles", "0"], {}, 2, "--cycles: must be in 1..100000"),
    ("mori-teardown-repro", 2, ["--size", "0"], {}, 2, "--size: must be in 1 byte..64 GiB"),
    ("mori-teardown-repro", 2, ["--size", "1Q"], {}, 2, "--size: '1Q' has an unknown unit"),
    ("mori-teardown-repro", 1, ["--summarize", "MISSING"], {}, 2, "--summarize: 'MISSING' is not a folder"),
    ("mori-teardown-repro", 2, ["--journal-dir", "USED"], {}, 2, "already holds journals"),
    ("perf-check", 0, ["GARBAGE", "GARBAGE"], {}, 2, "malformed input"),
    ("perf-check", 0, ["MISSING", "MISSING"], {}, 2, "no such file or folder"),
    ("validate-json", 0, ["GARBAGE"], {}, 2, "cannot read as JSON"),
]


def leftovers():
    # Only what this test's own processes hold: other tests may run on the machine at the same time.
    return harness.leftovers(TMP)


def fill(v):
    return v.replace("MISSING", MISSING)


def fixed_paths():
    """Absolute paths a case names that are not on this machine: each would be a missing path the test did not
    make missing itself."""
    return [(i, v) for i, (_, _, args, env, _, _) in enumerate(CASES, 1) for v in [*args, *env.values()]
            if v.startswith("/") and not os.path.exists(v)]


def run(case):
    tool, n, args, env, _, _ = case
    args = [fill(a) for a in args]
    env = {k: fill(v) for k, v in env.items()}
    e = dict(os.environ, **env)
    garbage = os.path.join(TMP, "garbage.json")
    with open(garbage, "w") as f:
        f.write("{ this is not json")
    args = [garbage if a == "GARBAGE" else a for a in args]
    if "USED" in args:
        used = os.path.join(TMP, "used-journal")
        os.makedirs(used, exist_ok=True)
        open(os.path.join(used, "rank-0.journal"), "w").close()
        args = [used if a == "USED" else a for a in args]
    if tool in ("perf-check", "validate-json"):
        cmd = [sys.executable, os.path.join(ROOT, "scripts", tool), *args]
    elif args == ["MPMD"]:
        exe = os.path.join(BIN, tool)
        cmd = [*MPIRUN, "-n", "1", exe, "--backend", "host", "--chunk-kib", "64", ":",
               "-n", "1", exe, "--backend", "host", "--chunk-kib", "128"]
    elif n == 1 and tool != "mori-teardown-repro":
        cmd = [os.path.join(BIN, tool), "--backend", "host", *args]
    else:
        cmd = [*MPIRUN, "-n", str(max(n, 1)), os.path.join(BIN, tool), "--backend", "host", *args]
    rc, out, _ = harness.job(cmd, e, timeout=240, cwd=TMP)
    return rc, out


def main():
    if MD:
        print("| # | tool | input | exit | message contains |\n| ---: | --- | --- | ---: | --- |")
        for i, (tool, n, args, env, code, text) in enumerate(CASES, 1):
            inp = " ".join([f"{k}={v if len(v) < 20 else v[:8] + '...'}" for k, v in env.items()] + args)
            inp = "two ranks with different options" if args == ["MPMD"] else inp
            print(f"| {i} | {tool} | `{inp or '(env only)'}` | {code} | {text.replace('|', '/')} |")
        return 0
    failures = skipped = 0
    assert not os.path.exists(MISSING)
    fixed = fixed_paths()
    print(f"{'FAIL' if fixed else 'PASS'}: every missing path lies in this test's own temporary folder {fixed}")
    failures += bool(fixed)
    before = leftovers()
    mem_kib = int(next(l.split()[1] for l in open("/proc/meminfo") if l.startswith("MemTotal:")))
    for i, case in enumerate(CASES, 1):
        tool, n, args, env, code, text = case
        if "16777216" in args and mem_kib > 200 * 1024 * 1024:
            print(f"SKIP: #{i} {tool} {' '.join(args)}: this machine has enough memory for it (not counted)")
            skipped += 1
            continue
        rc, out = run(case)
        ranks = max(n, 1) if tool not in ("perf-check", "validate-json") else 1
        if args == ["MPMD"]:
            ranks = 2
        lines = [l for l in out.splitlines() if fill(text) in l]
        after = leftovers()
        left = [sorted(a - b) for a, b in zip(after, before)]
        left[2] = [f for f in left[2] if not f.endswith(("garbage.json", "used-journal", "rank-0.journal"))]
        ok = rc == code and len(lines) >= ranks and not any(left)
        failures += not ok
        print(f"{'PASS' if ok else 'FAIL'}: #{i} {tool} {' '.join(args)} {env or ''} -> exit {rc}, "
              f"{len(lines)}/{ranks} rank line(s){', LEFT BEHIND ' + str(left) if any(left) else ''}")
        if not ok:
            print(out[-2500:])
    print(f"{len(CASES) - failures - skipped} passed, {failures} failed" + (f", {skipped} skipped" if skipped else ""))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
