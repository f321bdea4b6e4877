# SPDX-License-Identifier: MIT
"""The modules of scripts/evidence (docs/evidence.md), one job each; the entry point keeps its command line:

  common.py      its folders, the manifest's schema, the statuses that count as run, the machine kinds, Usage
  jobs.py        running one command under the guard within a bound (sh, git), the boot id, the stop signals
  gpus.py        this machine's GPUs: nvidia-smi's account before and after a step, the count, the folder's name
  plan.py        the presets (scripts/evidence_presets.json): --list, each folder's suffix, the steps for a kind
  tools.py       the tree's revision and clean state, building the tools or checking those --bin gives
  folder.py      the evidence folder: its manifest, one writer, the lock, opening it, --resume, --archive
  steps.py       one command run as a step against the deadline, and the tool, command, faults, matrix-sweep and
                 summary steps
  teardown.py    the teardown matrix: every scenario at each world, merged into one report
  references.py  the references (nccl-tests, torch through scripts/compare), missing or waived
  summary.py     the end of a run: complete or partial, the summary rendered again, the verdict and exit code
  run.py         Evidence: a run from its checks to its exit code, the steps in the preset's order

Import from a script with sys.path.insert(0, <scripts dir>); only the standard library and the scripts' own
modules (scripts/mori_results, scripts/mori_launcher.py, scripts/mori_mps.py) are needed.
"""
