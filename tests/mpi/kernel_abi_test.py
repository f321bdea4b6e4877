#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The kernel ABI header (kernels/abi.hip) as the JIT sees it, through the real tool and NVRTC (no GPU needed).

usage: kernel_abi_test.py BIN_DIR KERNEL_DIR ; each case prints PASS/FAIL, exit 1 on any failure.

The JIT prepends kernels/abi.hip to every kernel source after kernels/prelude.hip, and the cache key hashes that
whole source (lib/src/jit/jit.cpp Jit::key_of: the source is its first part), so a change to the header must
change every kernel's key; and the header's compile-time checks must hold inside the JIT as on the host.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: harness.py
from harness import check, finish  # noqa: E402

if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
    print(__doc__)
    sys.exit(0)
BIN, KDIR = sys.argv[1], sys.argv[2]
PROBE = os.path.join(BIN, "mori-probe")


def probe(kdir, cache, disable):
    env = {k: v for k, v in os.environ.items() if k not in ("MORI_JIT_CACHE_DIR", "XDG_CACHE_HOME")}
    env.update({"MORI_KERNEL_DIR": kdir, "MORI_JIT_CACHE_DIR": cache, "MORI_JIT_VERBOSE": "1"})
    if disable:
        env["MORI_DISABLE_JIT"] = "1"
    p = subprocess.run([PROBE, "--backend", "host", "--jit-precompile", "--archs", "sm_90"], env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=280)
    return p.returncode, p.stdout


def key(kdir, cache):
    """The key of the first kernel file, without compiling (MORI_DISABLE_JIT=1 names the missing entry)."""
    rc, out = probe(kdir, cache, True)
    m = re.search(r"no cached entry ([0-9a-f]+)", out)
    return (m.group(1) if rc == 3 and m else None), out


with tempfile.TemporaryDirectory() as tmp:
    kcopy = os.path.join(tmp, "kernels")
    shutil.copytree(KDIR, kcopy)
    abi = os.path.join(kcopy, "abi.hip")
    k1, out1 = key(kcopy, os.path.join(tmp, "c1"))
    with open(abi, "a") as f:
        f.write(" ")
    k2, out2 = key(kcopy, os.path.join(tmp, "c2"))
    check("one changed byte of kernels/abi.hip changes the cache key", k1 and k2 and k1 != k2, out1 + out2)

    # A layout that no longer matches its declared size fails the JIT's compile at the header's static_assert.
    with open(abi) as f:
        text = f.read()
    with open(abi, "w") as f:
        f.write(text.replace("#define MORI_A2A_LAYOUT_BYTES 48", "#define MORI_A2A_LAYOUT_BYTES 56"))
    rc, out = probe(kcopy, os.path.join(tmp, "c3"), False)
    check("a layout size the header does not declare fails the JIT compile",
          rc == 3 and "MoriA2aLayout: six 64-bit fields" in out, out)
finish()
