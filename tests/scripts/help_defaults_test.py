#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The defaults perf-check's --help states are the code's (scripts/mori_results/constants.py): the margin of the
allowance for device-sync and host-sync rows, in the --tolerance option and in the description."""
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
finish()
