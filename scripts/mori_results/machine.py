# SPDX-License-Identifier: MIT
"""Facts of this machine that the scripts run jobs by (scripts/run-main, scripts/evidence, scripts/compare,
scripts/faults): each found here, in one way, without torch.

  smi_gpus()               [(index, name)] of the GPUs nvidia-smi -L lists ([] without nvidia-smi)
  visible_gpu_count()      the GPUs a job started here sees: CUDA_VISIBLE_DEVICES's entries, else nvidia-smi -L's
  probe_node(path)         the first node of a mori-probe report, read by the results model's strict reader
  tools_gpus(node)         (the GPUs the tools use, the first one's name) from that node: 0 on the host runtime
  smi_driver_version()     the driver nvidia-smi reports (None without it); driver_version(): else NVML's, "unknown"
  mps_active()             whether an MPS daemon answers (its default pipe folder, or nvidia-cuda-mps-control)
  needs_mps(ranks, gpus)   whether ranks share a GPU; mps_placement(...): then all on GPU 0 under a private daemon
  tree_revision()          the commit of the source tree this script sits in (MORI_GIT_REV, else git)
  tools_revision(bin)      the commit and clean state the built tools report (`mori-a2a --version`)

One word per concept, in every script:
  mps_placement     where ranks go under MPS: N ranks on one GPU under a private daemon (scripts/mori_mps.py
                    MpsPlacement), which the launcher line carries to every rank;
  device placement  which GPUs a job's ranks use: one rank per GPU, all on GPU 0, a CUDA_VISIBLE_DEVICES subset
                    (scripts/faults' configurations one-gpu, per-gpu, host; scripts/evidence's "gpus" steps);
  plan placement    the a2a plan's placement class that every mori-a2a row records in its field "placement"
                    (one_gpu, one_rank_per_gpu, host, ...: docs/mori-a2a.md), which the plan check holds to
                    the machine (docs/evidence.md "The plan check").
"""
import os
import re
import shutil
import subprocess

from .errors import Malformed
from .reader import read_json
from . import env as envvars

VERSION_LINE = re.compile(r"^\S+ \S+ \(git ([0-9a-f]{7,64}|unknown)(?:, (clean|tracked files changed|clean state unknown))?\)$")
SMI_GPU_LINE = re.compile(r"^GPU (\d+): (.*?)(?: \(UUID.*)?$", re.M)


def _run(cmd, timeout, stdin=None):
    """(exit code, stdout) of cmd; (None, "") where it cannot start or does not end within timeout."""
    try:
        p = subprocess.run(cmd, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                           errors="replace", timeout=timeout)
        return p.returncode, p.stdout
    except (OSError, subprocess.SubprocessError):
        return None, ""


# ---- GPUs ----------------------------------------------------------------------------------------------------
def smi_gpus():
    """[(index, name)] from nvidia-smi -L, [] without it."""
    if shutil.which("nvidia-smi") is None:
        return []
    rc, out = _run(["nvidia-smi", "-L"], timeout=30)
    return [(int(m.group(1)), m.group(2)) for m in SMI_GPU_LINE.finditer(out)]


def visible_gpu_count():
    """The GPUs a job started here sees: the entries of CUDA_VISIBLE_DEVICES where it is set and not blank, else
    those nvidia-smi -L lists (0 without it)."""
    vis = envvars.read("CUDA_VISIBLE_DEVICES")
    if vis is not None and vis.strip():
        return len([x for x in vis.split(",") if x.strip()])
    return len(smi_gpus())


def probe_node(path):
    """The first node of the mori-probe report at path, through the results model's reader (Malformed where it is
    missing, not strict JSON or holds no node)."""
    doc = read_json(path)
    try:
        node = doc["nodes"][0]
    except (KeyError, IndexError, TypeError):
        raise Malformed(path, "not a mori-probe report: no nodes[0]")
    if not isinstance(node, dict):
        raise Malformed(path, "not a mori-probe report: nodes[0] is not an object")
    return node


def tools_gpus(node):
    """(GPUs the tools use, the first GPU's name or None) of a mori-probe node: 0 on the host runtime."""
    if (node.get("runtime") or "host") == "host":
        return 0, None
    devs = node.get("devices") or []
    return len(devs), (devs[0].get("name") if devs and isinstance(devs[0], dict) else None)


def smi_driver_version():
    """The driver version nvidia-smi reports (the first GPU's), or None."""
    rc, out = _run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"], timeout=30)
    v = out.strip().splitlines()
    return v[0].strip() if rc == 0 and v else None


def driver_version():
    """nvidia-smi's driver version, else NVML's (pynvml), else "unknown"."""
    v = smi_driver_version()
    if v:
        return v
    try:
        import pynvml  # noqa: PLC0415
        pynvml.nvmlInit()
        v = pynvml.nvmlSystemGetDriverVersion()
        return v.decode() if isinstance(v, bytes) else str(v)
    except Exception:  # noqa: BLE001
        return "unknown"


# ---- MPS -------------------------------------------------------------------------------------------------------
def mps_active():
    """Whether an MPS daemon answers: a control pipe in CUDA_MPS_PIPE_DIRECTORY (default /tmp/nvidia-mps), or a
    server list from nvidia-cuda-mps-control."""
    pipe = envvars.read("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps")
    if os.path.exists(os.path.join(pipe, "control")):
        return True
    rc, out = _run(["nvidia-cuda-mps-control"], timeout=10, stdin="get_server_list\n")
    return rc == 0 and any(t.strip().isdigit() for t in out.split())


def needs_mps(ranks, gpus, one_gpu_machines_only=False):
    """Whether `ranks` ranks on a machine of `gpus` GPUs the tools use share a GPU, and so go under MPS: ranks
    sharing a GPU without it time-slice their contexts, and their numbers would measure that (docs/mori-a2a.md).
    Never on the host runtime (gpus 0). one_gpu_machines_only: only on a machine of one GPU (scripts/evidence: on 2+
    GPUs a larger world is spread over them, each rank on GPU local rank mod GPUs)."""
    return gpus >= 1 and ranks > gpus and (gpus == 1 or not one_gpu_machines_only)


def mps_placement(ranks, gpus, base, one_gpu_machines_only=False):
    """The mps_placement of `ranks` ranks where they share a GPU (needs_mps): all of them on GPU 0 under a private
    MPS daemon whose folders go under `base` (a path, or a function that makes one: called only then), not started
    yet (scripts/mori_mps.py MpsPlacement.start); None where each rank has a GPU of its own, or on the host runtime:
    then the launcher's -n says all."""
    if not needs_mps(ranks, gpus, one_gpu_machines_only):
        return None
    import mori_mps  # noqa: PLC0415 (scripts/, on sys.path in every script that imports this module)
    return mori_mps.MpsPlacement(ranks, gpu=0, base=base() if callable(base) else base)


# ---- Revisions -------------------------------------------------------------------------------------------------
def tree_revision():
    """The commit of the source tree this script sits in (12 digits), MORI_GIT_REV where it is set, else "unknown"
    (a copy of the tree without .git)."""
    if envvars.read("MORI_GIT_REV"):
        return envvars.read("MORI_GIT_REV")
    rc, out = _run(["git", "-C", os.path.dirname(os.path.abspath(__file__)), "rev-parse", "--short=12", "HEAD"],
                   timeout=10)
    return out.strip() or "unknown"


def tools_revision(bin_dir, tool="mori-a2a", timeout=10):
    """The revision a folder of built tools records (`TOOL --version`, docs/reliability.md "Revisions"): what a
    script that runs the tools and writes a document of its own records as meta.git_revision, so that the document
    names the code that ran, not the tree the script sits in (a GPU machine gets a copy of the tree without its
    .git folder). -> (commit or None, clean: True/False/None, why or None); never raises."""
    path = os.path.join(bin_dir, tool)
    try:
        p = subprocess.run([path, "--version"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                           timeout=timeout, errors="replace")
    except (OSError, subprocess.SubprocessError) as e:
        return None, None, f"{path} --version: {e}"
    line = p.stdout.strip().splitlines()[0] if p.stdout.strip() else ""
    m = VERSION_LINE.match(line)
    if p.returncode != 0 or not m:
        return None, None, f"{path} --version printed {line[:120]!r} (exit {p.returncode})"
    commit, state = m.group(1), m.group(2)
    if commit == "unknown":
        return None, None, f"{path} was built where the revision could not be read"
    clean = {"clean": True, "tracked files changed": False}.get(state)
    return commit, clean, None
