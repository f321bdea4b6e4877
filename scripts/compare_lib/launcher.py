# SPDX-License-Identifier: MIT
"""Not under torchrun: the command runs itself under torchrun on the visible GPUs and reports the verdict."""
import os
import shlex
import subprocess
import sys

from mori_results.errors import Malformed
from mori_results.machine import visible_gpu_count
from mori_results.reader import read_json

from .options import EXIT_OK, EXIT_RUNTIME, UsageError
from .report import exit_code


def launch(a, argv, script):
    """Runs `script` with argv under torchrun on the visible GPUs, then reports its document's verdict."""
    n = a.nproc or visible_gpu_count()
    if n < 1:
        raise UsageError("no GPU visible (nvidia-smi -L lists none; --nproc N to say how many)")
    # torchrun of this interpreter (the same torch as the one that will be imported)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(n),
           script, *argv]
    print("[compare] " + " ".join(map(shlex.quote, cmd)), file=sys.stderr, flush=True)
    try:
        os.remove(a.json)
    except OSError:
        pass
    rc = subprocess.run(cmd).returncode
    try:
        doc = read_json(a.json)
    except Malformed as e:
        print(f"[compare] torchrun exited {rc} and left no document ({e})", file=sys.stderr)
        return EXIT_RUNTIME
    code = exit_code(doc)
    if rc != 0 and code == EXIT_OK:
        print(f"[compare] torchrun exited {rc}", file=sys.stderr)
        code = EXIT_RUNTIME
    return code
