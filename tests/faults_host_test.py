#!/usr/bin/env python3
"""scripts/h200-faults on the host runtime (no GPU): no-launch, a rank dying between rendezvous steps and a rank
SIGKILLed in the device-sync timed loop, 4 ranks. Every case: the job fails (mpirun non-zero) within T + 5 s of
the fault, the faulty rank (1) is named by the survivors or mpirun, the bystander job and the all-to-all after
the case run clean, and nothing of the run is left (processes, sockets, /dev/shm, temp files). no-launch
specifically: mpirun and the survivors exit 4 and their timeout messages name rank 1. The document validates against
results/schema/faults.schema.json where jsonschema is importable.

usage: faults_host_test.py BIN_DIR MPIRUN...
"""
import json
import os
import shlex
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from harness import check, finish  # noqa: E402

ROOT = os.path.join(HERE, "..")
BIN, MPIRUN = sys.argv[1], sys.argv[2:]
T = 3
CASES = ["no-launch", "die-in-rendezvous", "kill-timed-device"]

with tempfile.TemporaryDirectory(prefix="mori-faults-test-") as tmp:
    out_json = os.path.join(tmp, "faults.json")
    cmd = [sys.executable, os.path.join(ROOT, "scripts", "h200-faults"), "--backend", "host", "--bin", BIN,
           "--worlds", "4", "--cases", ",".join(CASES), "--timeout-s", str(T), "--bystander-chunk-kib", "16",
           "--mpirun", shlex.join(MPIRUN), "--json", out_json]
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=240)
        out, rc = p.stdout, p.returncode
    except subprocess.TimeoutExpired as e:
        out, rc = str(e.stdout or ""), None
    print(out[-4000:])
    check(f"h200-faults --backend host exits 0 (got {rc})", rc == 0, out)
    try:
        with open(out_json) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        check(f"the document is written and parses: {e}", False, out)
        finish()
    check("schema mori.faults/1, tool h200-faults, host backend, one case per requested case",
          doc.get("schema") == "mori.faults/1" and doc["meta"]["tool"] == "h200-faults" and
          doc["meta"]["backend"] == "host" and [c["name"] for c in doc["cases"]] == CASES, json.dumps(doc)[:3000])
    for c in doc["cases"]:
        name, dump = c["name"], json.dumps(c, indent=1)
        check(f"{name}: job failed (mpirun exit {c['mpirun_rc']}) {c['job_seconds']} s after the fault, "
              f"within T + 5 = {T + 5} s", c["mpirun_rc"] not in (0, None) and not c["hung"] and
              c["job_seconds"] is not None and c["job_seconds"] <= T + 5, dump)
        check(f"{name}: the faulty rank 1 is named ({c['named_by']})", c["named_missing"], dump)
        check(f"{name}: nothing left behind {c['left_behind']}", c["nothing_left"] and
              not any(c["left_behind"][k] for k in ("processes", "sockets", "shm", "temp_files")), dump)
        check(f"{name}: the concurrent bystander job survived", c["other_mps_clients_survived"] is True, dump)
        u = c["gpu_usable_after"]
        check(f"{name}: the all-to-all after the case ran clean (rc {u['rc']}, wrong {u['wrong']})",
              u["rc"] == 0 and u["wrong"] == 0, dump)
        if name == "no-launch":
            codes = [s["exit_code"] for s in c["survivors"]]
            # The bounded waits' messages: "timed out" (bootstrap steps) or "waited more than" (device barrier).
            named = all(1 in s["names_missing"] and any("timed out" in x or "waited more than" in x
                                                         for x in s["lines"]) for s in c["survivors"] if s["lines"])
            check(f"no-launch: mpirun exit 4, survivors exit 4 naming rank 1 (codes {codes})",
                  c["mpirun_rc"] == 4 and "ranks" in c["named_by"] and named and
                  all(x in (4, None) for x in codes) and 4 in codes, dump)
    try:
        import jsonschema  # noqa: F401
        v = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "validate-json"), "--require", out_json],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=60)
        check("the document validates against faults.schema.json", v.returncode == 0, v.stdout)
    except ImportError:
        print("NOTE: jsonschema not importable; schema validation skipped")
finish()
