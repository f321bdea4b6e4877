"""The scripts' command-line rules, in one place (docs/reliability.md, "Files the scripts write"):

- a usage error is one line on stderr, `NAME: what is wrong (--help for usage)`, and exit 2 (Parser.error);
- an option given an empty value (`--json ''`, `--out=`) is a usage error, never "not given" (Parser).
"""
import argparse
import re
import sys

from .constants import EXIT_BAD_INPUT


class Parser(argparse.ArgumentParser):
    """argparse.ArgumentParser with the rules above. `name` is the word the messages start with (default: the
    last part of prog)."""

    def __init__(self, *args, name=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.name = name or self.prog.split()[-1].rsplit("/", 1)[-1]

    def error(self, message):
        message = re.sub(r"^argument ([^:]+): ", r"\1: ", message)  # "--iters: ...", as the tools say it
        print(f"{self.name}: {message} (--help for usage)", file=sys.stderr)
        sys.exit(EXIT_BAD_INPUT)

    # The one place every option's value passes through (groups' options included), before its type or choices.
    def _get_values(self, action, arg_strings):
        if action.option_strings and action.nargs != argparse.REMAINDER and "" in arg_strings:
            self.error(f"{max(action.option_strings, key=len)}: an empty value")
        return super()._get_values(action, arg_strings)

