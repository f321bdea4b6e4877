"""The scripts' command-line rules, in one place (docs/reliability.md, "Files the scripts write"):

- a usage error is one line on stderr, `NAME: what is wrong (--help for usage)`, and exit 2 (Parser.error);
- an option given an empty value (`--json ''`, `--out=`) is a usage error, never "not given" (Parser);
- a number is plain decimal: digits, an optional '-' and, for a decimal, one '.' (integer, decimal); no blank
  around it, no '+', no hex, no exponent, no 'nan' or 'inf'.
"""
import argparse
import re
import sys

from .constants import EXIT_BAD_INPUT

_INTEGER = re.compile(r"-?[0-9]+")
_DECIMAL = re.compile(r"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")


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


def integer(text):
    """A whole number in decimal digits (argparse type)."""
    if not _INTEGER.fullmatch(text):
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number in decimal digits")
    return int(text)


def decimal(text):
    """A number in decimal digits, with or without a fraction (argparse type)."""
    if not _DECIMAL.fullmatch(text):
        raise argparse.ArgumentTypeError(f"'{text}' is not a number in decimal digits")
    return float(text)


def integer_list(text, what="a list of whole numbers"):
    """'4,8' -> [4, 8]: comma-separated whole numbers in decimal digits, none empty (argparse type)."""
    parts = text.split(",")
    bad = next((p for p in parts if not _INTEGER.fullmatch(p)), None)
    if bad is not None:
        raise argparse.ArgumentTypeError(f"'{text}' is not {what}: '{bad}' is not a whole number in decimal digits")
    return [int(p) for p in parts]
