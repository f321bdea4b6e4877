# SPDX-License-Identifier: MIT
"""The launcher line the scripts start jobs with (docs/setup.md, "Launching"): MORI_MPIRUN where it is set (one
command line, split as a shell would), else the launcher of the MPI the tools were built with, read from their
build's CMakeCache.txt (MORI_MPI_VENDOR, MORI_MPIEXEC: tests/CMakeLists.txt): MPICH's mpiexec for an MPICH build,
`mpirun --oversubscribe` (Open MPI) otherwise.

    python3 scripts/mori_launcher.py BIN_DIR    prints that line (for the shell scripts)

A line that cannot be split (an unbalanced quote) or is empty is BadLauncher: a usage error (exit 2, one line),
which every script checks before any work (split_line).
"""
import os
import shlex
import sys
from mori_results import env as envvars  # scripts/ is on sys.path wherever this module is imported

OPEN_MPI_DEFAULT = ["mpirun", "--oversubscribe"]


class BadLauncher(ValueError):
    """A launcher line that cannot be used: its message is one line naming where it came from."""


def split_line(line, where):
    """line split as a shell would; BadLauncher (naming `where`: MORI_MPIRUN, --mpirun) where it cannot be."""
    try:
        words = shlex.split(line)
    except ValueError as e:
        raise BadLauncher(f"{where} {line!r}: cannot split it as a shell would ({e})")
    if not words:
        raise BadLauncher(f"{where}: an empty launcher line")
    return words


def built_with(bin_dir):
    """(vendor, launcher) recorded by the build whose tools are in bin_dir (its CMakeCache.txt one folder up), or
    (None, None) where there is none."""
    vendor = launcher = None
    try:
        with open(os.path.join(bin_dir, os.pardir, "CMakeCache.txt"), errors="replace") as f:
            for line in f:
                if line.startswith("MORI_MPI_VENDOR:"):
                    vendor = line.split("=", 1)[1].strip()
                elif line.startswith("MORI_MPIEXEC:"):
                    launcher = line.split("=", 1)[1].strip()
    except OSError:
        pass
    return vendor, launcher


def mpirun_command(bin_dir=None):
    """The launcher and its options, as a list: MORI_MPIRUN, else the built MPI's launcher (BadLauncher where
    MORI_MPIRUN cannot be split)."""
    line = envvars.read("MORI_MPIRUN", "").strip()
    if line:
        return split_line(line, "MORI_MPIRUN")
    vendor, launcher = built_with(bin_dir) if bin_dir else (None, None)
    if vendor == "MPICH":
        return [launcher or "mpiexec.mpich"]
    return list(OPEN_MPI_DEFAULT)


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        sys.exit(0 if len(sys.argv) == 2 else 2)
    try:
        print(shlex.join(mpirun_command(sys.argv[1])))
    except BadLauncher as e:
        print(f"mori_launcher.py: {e}", file=sys.stderr)
        sys.exit(2)
