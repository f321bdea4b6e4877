# SPDX-License-Identifier: MIT
"""The modules of scripts/compare (docs/results.md "Comparing with NCCL and torch"), one file per concern:

  options.py     exit codes, UsageError, --chunk-kib and --systems
  stats.py       percentiles, time statistics, bandwidths, the fields of a failed row
  rows.py        rows side by side: mori's or not, graph or eager, like-mode pairs, labels, the printed table
  report.py      the mori.a2a/2 document: building, writing, its exit code
  mori_a2a.py    mori-a2a's own document: loading it and merging its rows and reference fields
  nccl_tests.py  nccl-tests' alltoall_perf: running it and reading its -J JSON into rows
  launcher.py    spawning torchrun over this machine's GPUs when not started under it
  torch_run.py   one torchrun process: process group, data pattern and check, timing, rows, one system's loop
  torch_nccl.py  NCCL through torch: dist.all_to_all_single eager and in a CUDA graph
  torch_symm.py  torch SymmetricMemory: the Triton pointer-array push, with a device or a host barrier
  job.py         the torch systems by name, and a torchrun process's job from setup to rank 0's document

The facts of the machine (driver, MPS, the tree's revision, the GPU count) come from the scripts' one machine
module, scripts/mori_results/machine.py. Only torch_run.py, torch_nccl.py and torch_symm.py touch torch or Triton,
and only once a run starts: everything imports without them (tests/scripts/compare_test.py checks it).
"""
