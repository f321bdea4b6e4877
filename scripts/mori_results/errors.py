"""Malformed: input a script cannot use, named by file and reason. Scripts print it and exit 2."""


class Malformed(Exception):
    """Bad input: `path` (file or folder, may be None) and what is wrong with it."""

    def __init__(self, path, why):
        super().__init__(f"{path}: {why}" if path else why)
        self.path = path
        self.why = why
