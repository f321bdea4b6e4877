"""The revision a folder of built tools records (`TOOL --version`, docs/reliability.md "Revisions"): what the
scripts that run the tools and write a document of their own (scripts/faults) record as the document's
meta.git_revision, so that the document names the code that ran, not the tree the script happens to sit in (a
GPU machine gets a copy of the tree without its .git folder)."""
import os
import re
import subprocess

VERSION_LINE = re.compile(r"^\S+ \S+ \(git ([0-9a-f]{7,64}|unknown)(?:, (clean|tracked files changed|clean state unknown))?\)$")


def tools_revision(bin_dir, tool="mori-a2a", timeout=10):
    """-> (commit or None, clean: True/False/None, why or None) from `bin_dir/tool --version`; never raises."""
    path = os.path.join(bin_dir, tool)
    try:
        p = subprocess.run([path, "--version"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                           timeout=timeout, errors="replace")
    except (OSError, subprocess.SubprocessError) as e:
        return None, None, f"{path} --version: {e}"
    line = p.stdout.strip().splitlines()[0] if p.stdout.strip() else ""
    m = VERSION_LINE.match(line)
    if p.returncode != 0 or not m:
        return None, None, f"{path} --version printed {line[:120]!r} (exit {p.returncode})"
    commit, state = m.group(1), m.group(2)
    if commit == "unknown":
        return None, None, f"{path} was built where the revision could not be read"
    clean = {"clean": True, "tracked files changed": False}.get(state)
    return commit, clean, None
