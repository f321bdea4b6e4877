#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""scripts/amd-kernels where its chroot is missing (docs/amd.md): both checks, the catalog compile and --starts,
skip with their reason (exit 77), and under CI=true fail (exit 1). --starts exited 1 outside CI too, where the
chroot was missing and an AMD build was not.

usage: amd_skip_test.py SCRATCH_DIR   (a folder inside the repository, which is all a chroot would see)
"""
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: harness.py
from harness import check, finish, skip  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "scripts", "amd-kernels")
scratch = os.path.abspath(sys.argv[1]) if len(sys.argv) > 1 else ""
if not (scratch + os.sep).startswith(REPO + os.sep):
    skip(f"the scratch folder {scratch or '(none)'} is not inside the repository {REPO}")
os.makedirs(scratch, exist_ok=True)
build = tempfile.mkdtemp(prefix="fake-amd-build-", dir=scratch)
try:
    # An AMD build as amd-kernels recognises one: an executable mori-probe and a cache saying the platform.
    os.makedirs(os.path.join(build, "bin"))
    with open(os.path.join(build, "CMakeCache.txt"), "w") as f:
        f.write("MORI_GPU_PLATFORM:STRING=amd\n")
    probe = os.path.join(build, "bin", "mori-probe")
    with open(probe, "w") as f:
        f.write("#!/bin/sh\nexit 0\n")
    os.chmod(probe, 0o755)
    missing = tempfile.mkdtemp(prefix="no-amd-cache-")
    for what, extra in (("the catalog compile", []), ("--starts", ["--starts"])):
        for ci, want in (("", 77), ("true", 1)):
            env = dict(os.environ, MORI_AMD_CACHE=os.path.join(missing, "none"), CI=ci)
            p = subprocess.run([SCRIPT, "--chroot", "experimental", *extra, build], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, timeout=120)
            said = "no chroot of experimental" in p.stdout
            check(f"{what} without the chroot, CI={ci or '(unset)'}: exit {want} naming the missing chroot",
                  p.returncode == want and said, f"exit {p.returncode}\n{p.stdout}")
    shutil.rmtree(missing, ignore_errors=True)
finally:
    shutil.rmtree(build, ignore_errors=True)
finish()
