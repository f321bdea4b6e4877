# SPDX-License-Identifier: MIT
"""The revision a folder of built tools records: now in machine.py (tools_revision, with the other facts of the
machine the scripts share); this name stays for the callers that import it from here (tests/harness.py)."""
from .machine import VERSION_LINE, tools_revision  # noqa: F401
