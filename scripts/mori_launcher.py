"""The launcher line the scripts start jobs with (docs/setup.md, "Launching"): MORI_MPIRUN where it is set (one
command line, split as a shell would), else the launcher of the MPI the tools were built with, read from their
build's CMakeCache.txt (MORI_MPI_VENDOR, MORI_MPIEXEC: tests/CMakeLists.txt): MPICH's mpiexec for an MPICH build,
`mpirun --oversubscribe` (Open MPI) otherwise.

    python3 scripts/mori_launcher.py BIN_DIR    prints that line (for the shell scripts)
"""
import os
import shlex
import sys

OPEN_MPI_DEFAULT = ["mpirun", "--oversubscribe"]


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
    """The launcher and its options, as a list: MORI_MPIRUN, else the built MPI's launcher."""
    line = os.environ.get("MORI_MPIRUN", "").strip()
    if line:
        return shlex.split(line)
    vendor, launcher = built_with(bin_dir) if bin_dir else (None, None)
    if vendor == "MPICH":
        return [launcher or "mpiexec.mpich"]
    return list(OPEN_MPI_DEFAULT)


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        sys.exit(0 if len(sys.argv) == 2 else 2)
    print(shlex.join(mpirun_command(sys.argv[1])))
