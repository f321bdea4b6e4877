#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""JIT cache behaviour, through the real tool and NVRTC (no GPU needed): mori-probe --jit-precompile.

usage: jit_test.py BIN_DIR KERNEL_DIR MPIRUN... ; each case prints PASS/FAIL, exit 1 on any failure.
"""
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: harness.py
from harness import check, finish  # noqa: E402
import tempfile
import time

BIN, KDIR = sys.argv[1], sys.argv[2]
MPIRUN = sys.argv[3:]
PROBE = os.path.join(BIN, "mori-probe")


def run(env_extra, args, mpi=0):
    env = dict(os.environ, MORI_JIT_VERBOSE="1", **env_extra)
    cmd = ([*MPIRUN, "-n", str(mpi)] if mpi else []) + [PROBE, "--backend", "host", "--jit-precompile", *args]
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
    return p.returncode, p.stdout



def precompile_json(cache, extra=None, args=()):
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    rc, out = run({"MORI_JIT_CACHE_DIR": cache, **(extra or {})}, ["--archs", "sm_90", "--json", path, *args])
    doc = json.load(open(path)) if rc == 0 else None
    os.unlink(path)
    return rc, out, doc


def entry(doc):
    return doc["jit_precompile"][0]["entries"][0]


with tempfile.TemporaryDirectory() as tmp:
    # 1. Every kernel compiles for sm_90 through NVRTC; a second run loads it.
    cache = os.path.join(tmp, "c1")
    rc, out, doc = precompile_json(cache)
    check("every kernel compiles for sm_90", rc == 0 and all(e["source"] == "compiled"
                                                             for e in doc["jit_precompile"][0]["entries"]), out)
    rc, out, doc2 = precompile_json(cache)
    check("second run loads from the cache", rc == 0 and entry(doc2)["source"] == "cache"
          and entry(doc2)["key"] == entry(doc)["key"], out)

    # 2. Four processes started together on an empty cache: one compile, four identical images.
    cache = os.path.join(tmp, "c4")
    rc, out = run({"MORI_JIT_CACHE_DIR": cache}, ["--archs", "sm_90"], mpi=4)
    compiles = len(re.findall(r"jit: compiling a2a.hip", out))
    images = set(re.findall(r"jit: (?:published|loaded) a2a.hip .*image ([0-9a-f]+)", out))
    got = len(re.findall(r"jit: (?:published|loaded) a2a.hip", out))
    check(f"4 processes: {compiles} compile(s), {got} result(s), {len(images)} distinct image(s)",
          rc == 0 and compiles == 1 and got == 4 and len(images) == 1, out)

    # 3. One changed byte of a kernel source changes the key.
    kcopy = os.path.join(tmp, "kernels")
    shutil.copytree(KDIR, kcopy)
    cache = os.path.join(tmp, "c3")
    _, out1, d1 = precompile_json(cache, {"MORI_KERNEL_DIR": kcopy})
    with open(os.path.join(kcopy, "a2a.hip"), "a") as f:
        f.write(" ")
    _, out2, d2 = precompile_json(cache, {"MORI_KERNEL_DIR": kcopy})
    check("one changed byte changes the key", d1 and d2 and entry(d1)["key"] != entry(d2)["key"]
          and entry(d2)["source"] == "compiled", out1 + out2)

    # 4. A truncated cached image is detected and rebuilt.
    cache = os.path.join(tmp, "c5")
    _, _, d = precompile_json(cache)
    img = os.path.join(cache, "sm_90_cuda", entry(d)["key"], "image.bin")
    with open(img, "r+b") as f:
        f.truncate(100)
    rc, out, d = precompile_json(cache)
    check("truncated entry rebuilt", rc == 0 and entry(d)["source"] == "compiled"
          and "unusable" in out and os.path.getsize(img) > 100, out)

    # 5. A world-writable cache root is refused. A job compiles in memory and says so (case 10); a precompile,
    # which would fill nothing, fails naming why, before compiling (docs/mori-probe.md).
    cache = os.path.join(tmp, "c6")
    os.makedirs(cache)
    os.chmod(cache, 0o777)
    rc, out, d = precompile_json(cache)
    check("world-writable root refused: the precompile exits 3 naming why", rc == 3 and "JIT_CACHE_UNUSABLE" in out
          and "refusing cache folder" in out and "compiled" not in out
          and not os.path.exists(os.path.join(cache, "sm_90_cuda")), out)

    # 6. MORI_DISABLE_JIT=1 with an empty cache fails with a clear message.
    cache = os.path.join(tmp, "c7")
    rc, out = run({"MORI_JIT_CACHE_DIR": cache, "MORI_DISABLE_JIT": "1"}, ["--archs", "sm_90"])
    check("MORI_DISABLE_JIT=1 on an empty cache fails", rc == 3 and "JIT_DISABLED" in out
          and "MORI_DISABLE_JIT=1 and no cached entry" in out, out)

    # 7. A malformed boolean is a usage error.
    rc, out = run({"MORI_JIT_CACHE_DIR": cache, "MORI_DISABLE_JIT": "maybe"}, ["--archs", "sm_90"])
    check("malformed MORI_DISABLE_JIT is exit 2", rc == 2 and "MORI_DISABLE_JIT" in out, out)

    def probe(env, args, timeout=120):
        """mori-probe --jit-precompile --archs sm_90 in exactly `env` (no cache variables inherited)."""
        e = {k: v for k, v in os.environ.items() if k not in ("MORI_JIT_CACHE_DIR", "XDG_CACHE_HOME", "HOME")}
        e.update(env)
        t0 = time.monotonic()
        try:
            p = subprocess.run([PROBE, "--backend", "host", "--jit-precompile", "--archs", "sm_90", *args], env=e,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
            return p.returncode, p.stdout, time.monotonic() - t0
        except subprocess.TimeoutExpired as ex:
            return -1, (ex.output or b"").decode(errors="replace") + "(did not end in time)", timeout

    # 8. The lock wait is bounded by --timeout-s and names the holder's pid.
    cache = os.path.join(tmp, "c8")
    rc, out, _ = probe({"MORI_JIT_CACHE_DIR": cache, "MORI_DISABLE_JIT": "1"}, [])
    key = re.search(r"no cached entry ([0-9a-f]+)", out)
    check("lock wait: the entry's key is known", rc == 3 and key, out)
    if key:
        with open(os.path.join(cache, "sm_90_cuda", key.group(1) + ".lock"), "w") as held:
            fcntl.flock(held, fcntl.LOCK_EX)
            rc, out, dt = probe({"MORI_JIT_CACHE_DIR": cache}, ["--timeout-s", "2"], timeout=90)
        check(f"lock held elsewhere, --timeout-s 2: exit 4 after {dt:.1f} s naming pid {os.getpid()}",
              rc == 4 and dt < 60 and f"held by pid {os.getpid()}" in out, out)

    # 9. A symlinked cache root is followed; the checks apply to its target.
    real, link = os.path.join(tmp, "c9-real"), os.path.join(tmp, "c9-link")
    os.makedirs(real, mode=0o700)
    os.symlink(real, link)
    rc, out, _ = probe({"MORI_JIT_CACHE_DIR": link, "MORI_DISABLE_JIT": "1"}, [])
    check("symlinked cache root followed", rc == 3 and "refusing" not in out
          and f"under {real}/sm_90_cuda" in out and os.path.isdir(os.path.join(real, "sm_90_cuda")), out)

    # 10. A missing $HOME is never created: in memory with one warning, or $XDG_CACHE_HOME when set.
    home = os.path.join(tmp, "c10", "a", "b")
    rc, out, _ = probe({"HOME": home, "MORI_DISABLE_JIT": "1"}, [])
    check("missing HOME: not created, one warning that a job would compile in memory",
          rc == 3 and out.count("compiling in memory") == 1 and not os.path.exists(os.path.join(tmp, "c10")), out)
    xdg = os.path.join(tmp, "c10-xdg")
    os.makedirs(xdg)
    rc, out, _ = probe({"HOME": home, "XDG_CACHE_HOME": xdg, "MORI_DISABLE_JIT": "1"}, [])
    check("missing HOME, XDG_CACHE_HOME set: the cache goes there", rc == 3
          and f"under {xdg}/mori/jit/sm_90_cuda" in out and not os.path.exists(os.path.join(tmp, "c10")), out)

    # 11. The bulk-copy write kernels of matrix.hip: compiled to a cubin (NVRTC runs ptxas) for sm_90 and newer
    # only; sm_80 builds the rest without them (the prelude's MORI_BULK_COPY guard).
    cache = os.path.join(tmp, "c11")
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    rc, out = run({"MORI_JIT_CACHE_DIR": cache}, ["--archs", "sm_80,sm_90,sm_100", "--json", path])
    doc = json.load(open(path)) if rc == 0 else None
    os.unlink(path)
    bulk = {}
    for arch_doc in (doc or {}).get("jit_precompile", []):
        e = next(x for x in arch_doc["entries"] if x["file"] == "matrix.hip")
        with open(os.path.join(cache, arch_doc["arch"] + "_cuda", e["key"], "names.txt")) as f:
            names = f.read()
        bulk[arch_doc["arch"]] = ("matrix_bulk<0, 0>" in names and "matrix_bulk<1, 1>" in names,
                                  "matrix_copy<1, 16, 1>" in names)
    check(f"matrix bulk kernels per arch {bulk}", rc == 0 and bulk == {"sm_80": (False, True), "sm_90": (True, True),
                                                                    "sm_100": (True, True)}, out)

    # 12. Archs of the right form that NVRTC does not compile for (sm_91, sm_92a): found by an empty kernel compiled
    # in memory for every arch before anything else, exit 2 with one line naming each; nothing compiled or created.
    cache = os.path.join(tmp, "c12")
    rc, out = run({"MORI_JIT_CACHE_DIR": cache}, ["--archs", "sm_90,sm_91,sm_92a"])
    lines = [l for l in out.splitlines() if l.strip() and "meta.build_stale" not in l]
    check("unsupported archs sm_91, sm_92a: exit 2, one line naming both, nothing compiled or created",
          rc == 2 and len(lines) == 1 and "--archs: 'sm_91' is unsupported by nvrtc" in lines[0]
          and "'sm_92a' is unsupported by nvrtc" in lines[0] and "NVRTC_ERROR_INVALID_OPTION" in lines[0]
          and "'sm_90'" not in lines[0] and "nothing was compiled" in lines[0] and not os.path.exists(cache), out)

    # 13. Every arch's cache folder is checked before the first is made: sm_80's is group-writable, so the run
    # exits 3 naming it and leaves no (empty) sm_90_cuda behind.
    cache = os.path.join(tmp, "c13")
    os.makedirs(os.path.join(cache, "sm_80_cuda"), mode=0o700)
    os.chmod(cache, 0o700)
    os.chmod(os.path.join(cache, "sm_80_cuda"), 0o770)
    rc, out = run({"MORI_JIT_CACHE_DIR": cache}, ["--archs", "sm_90,sm_80"])
    check("sm_80's cache folder unusable: exit 3 naming it, no sm_90_cuda made, nothing compiled",
          rc == 3 and "JIT_CACHE_UNUSABLE" in out and "sm_80_cuda: writable by group or others" in out
          and sorted(os.listdir(cache)) == ["sm_80_cuda"] and "jit: compiling a2a" not in out, out)

    # 14. What is not a lock file at an entry's lock path (a folder; a symlink, here to a name that does not exist)
    # is named as such, never called "the cache folder went away", never followed: the precompile exits 3.
    cache = os.path.join(tmp, "c14")
    rc, out, _ = probe({"MORI_JIT_CACHE_DIR": cache, "MORI_DISABLE_JIT": "1"}, [])
    key = re.search(r"no cached entry ([0-9a-f]+)", out)
    check("hostile lock: the entry's key is known", rc == 3 and key, out)
    if key:
        lock = os.path.join(cache, "sm_90_cuda", key.group(1) + ".lock")
        victim = os.path.join(tmp, "c14-victim")
        for what, make, words in [("a folder", lambda: os.mkdir(lock), "is a folder"),
                                  ("a symlink", lambda: os.symlink(victim, lock), f"is a symlink to {victim}")]:
            if os.path.isfile(lock) and not os.path.islink(lock):
                os.unlink(lock)  # the lock file the first run made
            make()
            rc, out, _ = probe({"MORI_JIT_CACHE_DIR": cache}, ["--timeout-s", "20"], timeout=240)
            check(f"the lock is {what}: exit 3 naming the lock and what it is, not 'went away', nothing followed",
                  rc == 3 and f"the lock {lock} {words}" in out and "went away" not in out
                  and not os.path.lexists(victim), out)
            os.rmdir(lock) if os.path.isdir(lock) and not os.path.islink(lock) else os.unlink(lock)

    # 15. Files and archs compile side by side, one thread per usable core (docs/mori-probe.md): the same entries
    # as a serial run (taskset -c 0: one core), printed and listed in the catalog's order whatever order they
    # finished in, config.jobs the threads that ran.
    def two_archs(name, prefix):
        path = os.path.join(tmp, f"{name}.json")
        cmd = [*prefix, PROBE, "--backend", "host", "--jit-precompile", "--archs", "sm_90,sm_80", "--json", path]
        e = dict(os.environ, MORI_JIT_CACHE_DIR=os.path.join(tmp, name))
        p = subprocess.run(cmd, env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
        doc = json.load(open(path)) if p.returncode == 0 else None
        lines = re.findall(r"^(sm_\d+) +(\S+) +compiled ", p.stdout, re.M)
        listed = [(a["arch"], e["file"], e["key"]) for a in doc["jit_precompile"] for e in a["entries"]] if doc else []
        return p.stdout, doc, lines, listed

    out_p, doc_p, lines_p, listed_p = two_archs("c15-parallel", [])
    first_cpu = str(min(os.sched_getaffinity(0)))  # CPU 0 need not be one this process may use
    out_s, doc_s, lines_s, listed_s = two_archs("c15-serial", ["taskset", "-c", first_cpu])
    units = len(listed_s)
    cores = len(os.sched_getaffinity(0))
    check(f"serial (taskset -c {first_cpu}): config.jobs 1; {units} kernel files of sm_90 then sm_80, printed in that order",
          doc_s and doc_s["config"]["jobs"] == 1 and units >= 4 and lines_s == [(a, f) for a, f, _ in listed_s]
          and [a for a, _, _ in listed_s] == sorted([a for a, _, _ in listed_s], reverse=True), out_s)
    check(f"side by side: config.jobs {min(cores, units)} (the usable cores, at most one per file), the same "
          "entries and keys in the same order, printed in catalog order, wall_ms a number",
          doc_p and doc_p["config"]["jobs"] == min(cores, units) and listed_p == listed_s and lines_p == lines_s
          and isinstance(doc_p["config"]["wall_ms"], (int, float)) and doc_p["config"]["wall_ms"] > 0,
          out_p + json.dumps((doc_p or {}).get("config")))

finish()
