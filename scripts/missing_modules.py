# SPDX-License-Identifier: MIT
"""The Python modules of a list that this interpreter cannot import (scripts/deps' check).

usage: python3 scripts/missing_modules.py MODULE...

Prints the names of the modules that importlib cannot find, space separated, on one line (an empty line when
every one is there). Exit 0 either way; 2: usage.
"""
import importlib.util
import sys


def missing(names):
    return [m for m in names if importlib.util.find_spec(m) is None]


def main(argv):
    if argv[:1] in (["-h"], ["--help"]):
        print(__doc__.strip())
        return 0
    names = " ".join(argv).split()
    if any(n.startswith("-") for n in names):
        print("missing_modules: " + __doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    print(" ".join(missing(names)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
