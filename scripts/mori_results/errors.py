"""Malformed: input a script cannot use, named by file and reason. Scripts print it and exit 2. Usage: a value of
the command line a script cannot use (an empty value, an output path that is not a regular file...), also exit 2."""


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
