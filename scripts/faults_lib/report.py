# SPDX-License-Identifier: MIT
"""The mori.faults/1 document (results/schema/faults.schema.json): its meta, writing it, and the printed table."""
import datetime
import json
import os
import socket
import sys

from .procs import sh

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from mori_results.files import write_text  # noqa: E402
from mori_results.machine import smi_driver_version, tools_revision  # noqa: E402

SCHEMA = "mori.faults/1"


def revision(a):
    """The revision of the mori-a2a that ran (its --version), not of the tree this script sits in: the GPU machines
    get a copy of the tree without its .git folder (docs/reliability.md "Revisions")."""
    commit, clean, why = tools_revision(a.bin)
    out = {"git_revision": commit or "unknown", "git_clean": clean}
    if why:
        out["git_revision_reason"] = why
    return out


def meta(a, gpu_list):
    m = {"tool": "faults", **revision(a), "argv": sys.argv[1:],
         "time": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
         "host": socket.gethostname(), "backend": a.backend, "timeout_s": a.timeout_s,
         "gpus": [{"index": i, "name": n} for i, n in gpu_list],
         "driver_version": smi_driver_version() if gpu_list else None}
    rc, out = sh([*a.mpirun[:1], "--version"], timeout=10)
    m["mpirun"] = out.splitlines()[0] if rc == 0 and out else None
    return m


def finish(doc, path):
    """Sets the document's ok (every case ok, none skipped, not interrupted) and writes it."""
    doc["ok"] = (bool(doc["cases"]) and all(c["ok"] for c in doc["cases"]) and not doc["skipped"] and
                 not doc.get("interrupted"))
    write_text(path, json.dumps(doc, indent=1) + "\n", "--json")


def landed(c):
    f = c.get("fault", {})
    if "in_timed_loop" not in f:
        return "-"
    return "loop" if f["in_timed_loop"] else f.get("landed", "elsewhere")


def usable(u):
    if u["usable"]:
        return "yes"
    after = u.get("recovered_after_s")
    return f"NO, ok {after:.0f}s later" if after is not None else "NO"


def table(doc):
    rows = [("case", "config", "W", "rc", "secs", "named", "landed", "bystander", "usable", "left", "wall", "ok")]
    for c in doc["cases"]:
        lb = c["left_behind"]
        left = ",".join(k for k in ("processes", "sockets", "shm", "temp_files") if lb[k]) or "-"
        mem = lb.get("device_memory_mib")
        if mem and mem.get("delta") and any(d > 0 for d in mem["delta"]):
            left += f" +{max(mem['delta'])}MiB"
        rows.append((c["name"], c["config"], str(c["world"]), str(c["mpirun_rc"]),
                     "hung" if c["hung"] else str(c["job_seconds"]), "yes" if c["named_missing"] else "no",
                     landed(c), {True: "ok", False: "DIED", None: "-"}[c["other_mps_clients_survived"]],
                     usable(c["gpu_usable_after"]), left, str(c["wall_seconds"]),
                     "ok" if c["ok"] else "FAIL"))
    w = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(x.ljust(w[i]) for i, x in enumerate(r)).rstrip())
    for s in doc["skipped"]:
        print(f"skipped: {s['name']} ({s['config']}, {s['world']} ranks): {s['reason']}")
