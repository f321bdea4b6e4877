# SPDX-License-Identifier: MIT
"""Malformed: input a script cannot use, named by file and reason. Scripts print it and exit 2. Usage: a value of
the command line a script cannot use (an empty value, an output path that is not a regular file...), also exit 2.
WriteFailed: the system refused to write an output file whose path was fine (the file system full: ENOSPC; a
quota; EIO): a system error, exit 3 in the scripts that write results (docs/reliability.md "Files the scripts
write"), named by its errno name."""
import errno


class Malformed(Exception):
    """Bad input: `path` (file or folder, may be None) and what is wrong with it."""

    def __init__(self, path, why):
        super().__init__(f"{path}: {why}" if path else why)
        self.path = path
        self.why = why


class Usage(Malformed):
    """A usage error (exit 2, like Malformed), its message naming the option: `--json x: a FIFO; ...`."""

    def __init__(self, why):
        super().__init__(None, why)


class WriteFailed(Malformed):
    """An output file that could not be written for a reason of the system, not of its path: `errno_name` (e.g.
    'ENOSPC'). A Malformed, so that a caller that knows no better still reports it in one line; the scripts that
    write results catch it first and exit 3."""

    def __init__(self, path, option, error):
        self.errno_name = errno.errorcode.get(error.errno, "an I/O error") if error.errno else "an I/O error"
        super().__init__(path, f"{option}: cannot write: {self.errno_name} ({error.strerror or error})")
