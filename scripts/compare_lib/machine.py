"""Facts of this machine for the document's meta and the launcher, found without torch."""
import os
import subprocess


def driver_version():
    try:
        p = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=30)
        v = p.stdout.strip().splitlines()
        if p.returncode == 0 and v:
            return v[0].strip()
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        import pynvml  # noqa: PLC0415
        pynvml.nvmlInit()
        v = pynvml.nvmlSystemGetDriverVersion()
        return v.decode() if isinstance(v, bytes) else str(v)
    except Exception:  # noqa: BLE001
        return "unknown"


def mps_active():
    pipe = os.environ.get("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps")
    if os.path.exists(os.path.join(pipe, "control")):
        return True
    try:
        p = subprocess.run(["nvidia-cuda-mps-control"], input="get_server_list\n", capture_output=True, text=True,
                           timeout=10)
        return p.returncode == 0 and any(t.strip().isdigit() for t in p.stdout.split())
    except (OSError, subprocess.SubprocessError):
        return False


def git_revision():
    if os.environ.get("MORI_GIT_REV"):
        return os.environ["MORI_GIT_REV"]
    try:
        p = subprocess.run(["git", "-C", os.path.dirname(os.path.abspath(__file__)), "rev-parse", "--short=12",
                            "HEAD"], capture_output=True, text=True, timeout=10)
        return p.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def gpu_count():
    vis = os.environ.get("CUDA_VISIBLE_DEVICES")
    if vis is not None and vis.strip():
        return len([x for x in vis.split(",") if x.strip()])
    try:
        p = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
        return len([ln for ln in p.stdout.splitlines() if ln.startswith("GPU ")])
    except (OSError, subprocess.SubprocessError):
        return 0
