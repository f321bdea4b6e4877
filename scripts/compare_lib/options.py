# SPDX-License-Identifier: MIT
"""What the command line may say: exit codes, the usage error, chunk sizes and the torch systems."""
import re

EXIT_OK, EXIT_WRONG, EXIT_USAGE, EXIT_RUNTIME = 0, 1, 2, 3
TORCH_SYSTEMS = ("nccl-eager", "nccl-graph", "symm-graph", "symm-host")
MAX_WORLD = 16  # the pattern keeps 4 bits for each rank


class UsageError(Exception):
    pass


def parse_chunk_kib(text):
    """'256,4096' -> [262144, 4194304] bytes; UsageError on anything else (a blank, a sign, hex: decimal digits
    only, as every number the scripts take: scripts/mori_results/cli.py)."""
    out = []
    for part in str(text).split(","):
        if not re.fullmatch(r"[0-9]+", part) or int(part) <= 0:
            raise UsageError(f"--chunk-kib: '{part}' is not a positive integer of KiB (e.g. 256,4096,65536)")
        out.append(int(part) * 1024)
    if len(set(out)) != len(out):
        raise UsageError("--chunk-kib: a size is listed twice")
    return out


def parse_systems(text):
    names = [s.strip() for s in str(text).split(",") if s.strip()]
    bad = [s for s in names if s not in TORCH_SYSTEMS]
    if bad or not names:
        raise UsageError(f"--systems: unknown {bad or text!r} (accepted: {','.join(TORCH_SYSTEMS)})")
    return names
