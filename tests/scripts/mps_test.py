#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""scripts/mori_mps.py and scripts/mps without a GPU, against a stand-in nvidia-cuda-mps-control
(tests/fixtures/fake-mps): a placement starts a private daemon under its folder, carries it to every rank (mpirun
-x) and stops it; a daemon already answering is used and left running; a daemon that does not start is an error
naming its log; scripts/mps start|status|stop|exec and --help.

usage: mps_test.py
"""
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: harness.py
from harness import check, finish  # noqa: E402

TESTS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # tests/: harness.py, fixtures/
ROOT = os.path.dirname(TESTS)
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import mori_mps  # noqa: E402

os.environ["PATH"] = os.path.join(TESTS, "fixtures", "fake-mps") + os.pathsep + os.environ["PATH"]
for k in ("CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY", "CUDA_VISIBLE_DEVICES"):
    os.environ.pop(k, None)
tmp = tempfile.mkdtemp(prefix="mori-mps-test-")
os.environ["MORI_MPS_DIR"] = os.path.join(tmp, "default")

base = os.path.join(tmp, "private")
p = mori_mps.Placement(8, gpu=0, base=base)
check("no daemon answers: the placement is a private one", p.private and mori_mps.active_daemon() is None)
with p:
    check("start(): the daemon answers, its folder is private (0700)", p.started and p.daemon.running() and
          (os.stat(base).st_mode & 0o777) == 0o700)
    args = p.mpirun_args()
    check("launcher args: -n 8 and env with the variables every rank needs (any launcher)", args == [
        "-n", "8", "env", "CUDA_VISIBLE_DEVICES=0", f"CUDA_MPS_PIPE_DIRECTORY={base}/pipe",
        f"CUDA_MPS_LOG_DIRECTORY={base}/log"], str(args))
check("leaving the block stops the daemon it started", not p.daemon.running())
os.environ["CUDA_VISIBLE_DEVICES"] = "3,5"
check("GPU 0 of CUDA_VISIBLE_DEVICES=3,5 is 3", p.env()["CUDA_VISIBLE_DEVICES"] == "3", str(p.env()))
del os.environ["CUDA_VISIBLE_DEVICES"]

# A daemon already answering (started by scripts/mps) is used and left running.
rc = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "mps"), "start"], stdout=subprocess.PIPE,
                    text=True)
check("scripts/mps start: exit 0 and the export line", rc.returncode == 0 and rc.stdout.startswith(
    "export CUDA_MPS_PIPE_DIRECTORY=" + os.path.join(tmp, "default", "pipe")), rc.stdout)
q = mori_mps.Placement(2, base=os.path.join(tmp, "unused"))
with q:
    check("a running daemon is used, none started", not q.private and not q.started and
          q.env()["CUDA_MPS_PIPE_DIRECTORY"] == os.path.join(tmp, "default", "pipe"))
check("... and left running", mori_mps.Daemon().running())
st = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "mps"), "status"], stdout=subprocess.PIPE,
                    text=True)
check("scripts/mps status: exit 0, running", st.returncode == 0 and st.stdout.startswith("running"), st.stdout)
ex = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "mps"), "exec", "--", "sh", "-c",
                     "echo $CUDA_MPS_PIPE_DIRECTORY"], stdout=subprocess.PIPE, text=True)
check("scripts/mps exec -- CMD runs CMD with the variables set", ex.returncode == 0 and
      ex.stdout.strip() == os.path.join(tmp, "default", "pipe"), ex.stdout)
sp = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "mps"), "stop"])
st = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "mps"), "status"], stdout=subprocess.PIPE,
                    text=True)
check("scripts/mps stop: exit 0; then status exits 1", sp.returncode == 0 and st.returncode == 1, st.stdout)

# A daemon that does not come up: MpsError naming the log folder.
os.environ["FAKE_MPS_FAIL"] = "1"
r = mori_mps.Placement(4, base=os.path.join(tmp, "failing"))
try:
    r.start()
    check("a daemon that does not start raises MpsError", False)
except mori_mps.MpsError as e:
    check("a daemon that does not start raises MpsError naming its log", os.path.join(tmp, "failing", "log") in
          str(e), str(e))
del os.environ["FAKE_MPS_FAIL"]
u = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "mps"), "bogus"], stderr=subprocess.PIPE,
                   text=True)
h = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "mps"), "--help"], stdout=subprocess.PIPE,
                   text=True)
check("scripts/mps: unknown command exit 2; --help exit 0 with usage", u.returncode == 2 and h.returncode == 0 and
      "usage:" in h.stdout and not os.path.exists(os.path.join(tmp, "default", "pipe", "control")))
shutil.rmtree(tmp, ignore_errors=True)
finish()
