# SPDX-License-Identifier: MIT
"""The GPU fault suite behind scripts/faults (docs/reliability.md "GPU fault suite").

  procs      the run's processes: found by a mark in their environment, signalled, waited on
  leftovers  what a case can leave behind: sockets, /dev/shm entries, temp files, device memory
  output     reading a job's output: error lines, the ranks they name, announcements, mpirun's reports
  jobs       starting jobs (and the private MPS daemon) and cleaning up after them
  cases      the cases: their command lines, the faults, the checks behind each verdict
  budget     the time budget: each case's worst case, what is skipped and why
  report     the mori.faults/1 document's meta, the table, writing the document
  cli        the command line and the loop over configurations and cases
"""
