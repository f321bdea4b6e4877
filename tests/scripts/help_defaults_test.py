#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The defaults the scripts' --help states are the code's: perf-check's margin of the allowance for device-sync and
host-sync rows (scripts/mori_results/constants.py), in the --tolerance option and in the description; and in every
Python script under scripts/ with an argparse parser, each option whose help says "default X" has X as its default
(a number equal to it, a path or word it ends with). A default of None or False is described, not stated (the help
says what the script then does), and a word for a numeric sentinel ("0: all") is a meaning, not a value: both are
left out. The tools' own defaults are printed by CLI11 from the code (docs.help holds the docs to them)."""
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # tests/: harness.py
SCRIPTS = os.path.join(os.path.dirname(os.path.dirname(HERE)), "scripts")
sys.path.insert(0, SCRIPTS)
from harness import check, finish  # noqa: E402
from mori_results.constants import GATE_FLOOR_DEVICE_SYNC, GATE_FLOOR_HOST_SYNC  # noqa: E402

device, host = round(GATE_FLOOR_DEVICE_SYNC * 100), round(GATE_FLOOR_HOST_SYNC * 100)
text = subprocess.run([sys.executable, os.path.join(SCRIPTS, "perf-check"), "--help"], stdout=subprocess.PIPE,
                      stderr=subprocess.STDOUT, text=True, timeout=60).stdout
flat = re.sub(r"\s+", " ", text)
opt = re.search(r"--tolerance PCT .*?\(default (\d+) for device-sync rows, (\d+) for host-sync rows\)", flat)
check(f"--tolerance states the code's defaults ({device} and {host} %)",
      opt is not None and (int(opt.group(1)), int(opt.group(2))) == (device, host), text)
desc = re.search(r"margin = (\d+) % for device-sync rows, (\d+) % for host-sync rows", flat)
check(f"the description states the code's margins ({device} % and {host} %)",
      desc is not None and (int(desc.group(1)), int(desc.group(2))) == (device, host), text)
# Every Python script's parser, read by a stand-in print_help that lists each option's default and help.
PROBE = r"""
import argparse, json, os, runpy, sys
def dump(self, file=None):
    out = [{"opts": a.option_strings, "help": a.help or "",
            "default": a.default if isinstance(a.default, (int, float, str, bool, type(None))) else repr(a.default)}
           for a in self._actions]
    print("@@DEFAULTS@@" + json.dumps(out))
    sys.exit(0)
argparse.ArgumentParser.print_help = dump
script = sys.argv[1]
sys.argv = [script, "--help"]
sys.path.insert(0, os.path.dirname(script))
runpy.run_path(script, run_name="__main__")
"""
stated = 0
for name in sorted(os.listdir(SCRIPTS)):
    path = os.path.join(SCRIPTS, name)
    if not os.path.isfile(path):
        continue
    with open(path, "rb") as f:
        if b"python" not in f.readline():
            continue
    out = subprocess.run([sys.executable, "-c", PROBE, path], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, timeout=60).stdout
    m = re.search(r"@@DEFAULTS@@(.*)", out)
    if not m:  # no argparse help (a parser of its own): nothing to compare
        continue
    for a in __import__("json").loads(m.group(1)):
        said = re.search(r"\bdefault:?\s+([-+\w./]+)", a["help"])
        d = a["default"]
        if not said or d is None or isinstance(d, bool):
            continue
        word = said.group(1).rstrip(".")
        try:
            same = float(word) == float(d)
        except (TypeError, ValueError):
            if isinstance(d, (int, float)) and re.fullmatch(r"[A-Za-z]+", word):
                continue  # a sentinel's meaning ("0 = all")
            same = str(d).endswith(word)
        stated += 1
        check(f"{name} {'/'.join(a['opts'])}: the help's default {word!r} is the code's ({d!r})", same)
check(f"the scripts' help texts state defaults that were compared ({stated})", stated >= 5)
finish()
