# SPDX-License-Identifier: MIT
"""The results model: the one reader of the tools' JSON (docs/perf-check.md "The results model").

Modules, one concern each:

  constants.py  every constant the scripts share (mori addressings, the ceiling bound, exit codes, schemas, caps)
  errors.py     Malformed: bad input, named by file and reason (the scripts' exit 2); Usage: a value the command
                line gave that a script cannot use (also exit 2)
  cli.py        the scripts' command-line rules: one-line usage errors (exit 2), an empty value refused, plain
                decimal numbers (integer, decimal, integer_list: the argparse types every script uses)
  files.py      the one writer of the scripts' output files, and the checks of output paths and folders (only a
                regular file or a new name is written; docs/reliability.md "Files the scripts write")
  guard.py      a job that ends with the script that started it: its own process group, killed when the script
                dies (PR_SET_PDEATHSIG), also when it is killed outright (scripts/evidence, perf-check --ab)
  reader.py     bounded reads of regular files, strict JSON (depth limit, no NaN/Infinity, no duplicate keys),
                the *.json files under folders
  documents.py  a document's schema name and version checked first: Document, load_document, load_documents
  row_fields.py the fields of mori-a2a's rows as the schema declares them (written from the library's one
                table by scripts/a2a-row): role, unit, and the direction perf-check gates each by
  a2a.py        typed mori.a2a rows: Identity (every field that changes what ran), Row, Run, load_run(s),
                group_runs (runs grouped only within one revision); check_document, the same rules for
                validate-json (a count such as "wrong" is an integer: 7.0 refused)
  machine.py    the facts of this machine the scripts run jobs by (GPU counts, driver, MPS and when ranks need
                it, the revision the built tools report), and the words for where ranks go (mps_placement, device
                placement, plan placement)
  tools.py      tools_revision, kept under this name for its callers (it lives in machine.py)
  gate.py       the performance gate behind scripts/perf-check (allowance rule, verdicts, meta differences)
  tables.py     Markdown of one evidence folder (summary.md) and the generated tables between doc markers

Import from a script with sys.path.insert(0, <scripts dir>); only the standard library is needed.
"""
