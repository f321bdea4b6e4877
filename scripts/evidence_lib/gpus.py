# SPDX-License-Identifier: MIT
"""This machine's GPUs for scripts/evidence: nvidia-smi's account of each before and after a step (what can
explain a changed number), how many the tools use, and the evidence folder's machine name from them."""
import os
import re
import shutil

from evidence_lib.jobs import sh
from mori_results import machine
from mori_results.errors import Malformed

SMI_QUERY = ("index,name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem,power.limit,"
             "temperature.gpu,ecc.mode.current")
SMI_REASONS = ("clocks_event_reasons.active", "clocks_throttle_reasons.active")  # newer, older drivers


def gpu_state():
    """nvidia-smi's account of every GPU (None where nvidia-smi is absent): what can explain a changed number."""
    if not shutil.which("nvidia-smi"):
        return None
    state = {"gpus": [], "processes": []}
    keys = SMI_QUERY.split(",")
    rc, out = sh(["nvidia-smi", f"--query-gpu={SMI_QUERY}", "--format=csv,noheader,nounits"], timeout=30)
    if rc != 0:
        return {"error": out.strip()[-500:]}
    for line in out.strip().splitlines():
        state["gpus"].append(dict(zip(keys, [v.strip() for v in line.split(",")])))
    for field in SMI_REASONS:
        rc, out = sh(["nvidia-smi", f"--query-gpu={field}", "--format=csv,noheader"], timeout=30)
        if rc == 0:
            for g, v in zip(state["gpus"], out.strip().splitlines()):
                g["throttle_reasons"] = v.strip()
            break
    rc, out = sh(["nvidia-smi", "--query-compute-apps=gpu_uuid,pid,process_name,used_memory",
                  "--format=csv,noheader"], timeout=30)
    if rc == 0:
        state["processes"] = [ln.strip() for ln in out.strip().splitlines() if ln.strip()]
    return state


def count_gpus(bin_dir, work):
    """GPUs the tools use, as mori-probe finds them (0: the host runtime); and the first GPU's name
    (scripts/mori_results/machine.py reads its report)."""
    path = os.path.join(work, "probe-count.json")
    sh([os.path.join(bin_dir, "mori-probe"), "--backend", "auto", "--json", path], timeout=120)
    try:
        return machine.tools_gpus(machine.probe_node(path))
    except Malformed:
        return 0, None


def machine_name(kind, ngpu, gpu_name):
    if kind == "host":
        return "host"
    words = re.findall(r"[A-Za-z0-9]+", gpu_name or "gpu")
    # The model: the first word that is letters then digits ("NVIDIA H100 80GB HBM3" -> h100, "MI300X" -> mi300x).
    base = next((w.lower() for w in words if re.match(r"[A-Za-z]+\d", w)), words[-1].lower() if words else "gpu")
    return base if ngpu == 1 else f"{base}x{ngpu}"
