# SPDX-License-Identifier: MIT
"""The scripts' command-line rules, in one place (docs/reliability.md, "Files the scripts write"):

- a usage error is one line on stderr, `NAME: what is wrong (--help for usage)`, and exit 2 (Parser.error);
- an option given an empty value (`--json ''`, `--out=`) is a usage error, never "not given" (Parser);
- a number is plain decimal: digits, an optional '-' and, for a decimal, one '.' (integer, decimal); no blank
  around it, no '+', no hex, no exponent, no 'nan' or 'inf';
- a number is also in its option's range, checked by the parser before any work (bounded: positive_integer,
  non_negative_integer, positive_decimal, non_negative_decimal): a count or a bound in seconds is never negative
  (`faults --timeout-s -1`, `scale-sweep --fit-from -3` are usage errors, not runs).
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


def bounded(kind, low, above=False, high=None):
    """An argparse type: a number read by kind (integer or decimal) that is >= low (above: > low) and, where high
    is given, <= high. The one range check of the scripts' number options (a usage error naming the option)."""
    word = "a whole number" if kind is integer else "a number"
    rule = f"{word} {'>' if above else '>='} {low:g}" + (f" and <= {high:g}" if high is not None else "")

    def parse(text):
        v = kind(text)
        if (v <= low if above else v < low) or (high is not None and v > high):
            raise argparse.ArgumentTypeError(f"'{text}' is not {rule}")
        return v
    parse.__name__ = kind.__name__
    return parse


positive_integer = bounded(integer, 0, above=True)
non_negative_integer = bounded(integer, 0)
positive_decimal = bounded(decimal, 0, above=True)
non_negative_decimal = bounded(decimal, 0)
