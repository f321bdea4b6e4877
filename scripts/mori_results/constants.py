# SPDX-License-Identifier: MIT
"""Constants shared by every script that reads results: defined here once."""

# Addressing modes of mori-a2a's own rows; any other addressing is another system (scripts/compare). As the row
# declares them (lib/src/a2a/row.cpp): scripts/a2a-row --check (CTest results.a2a_row) compares the two.
MORI_ADDRESSING = ("ptr", "lsa")

# A row whose total bandwidth exceeds this multiple of its same-run ceiling shows a ceiling that is not a bound
# (docs/mori-a2a.md "References").
CEILING_BOUND = 1.05

# Timed samples every mori row must carry (DESIGN §9).
MIN_SAMPLES = 20

# Verification mutants (MORI_FAULT values) whose runs must report wrong elements.
MUTANT_FAULTS = ("a2a.no-barrier", "a2a.stale", "a2a.overrun")

# Schemas the model reads: name -> accepted versions.
SCHEMAS = {
    "mori.a2a": (1, 2, 3),
    "mori.probe": (1,),
    "mori.teardown": (1,),
    "mori.faults": (1,),
    "mori.matrix-sweep": (1,),
    "mori.evidence": (1,),
    "mori.baseline": (1,),
    "mori.published": (1,),
    "mori.expectations": (1,),
    "mori.a2a-plan-table": (1,),
    "mori.perf-check": (3, 4),
}

# Schema files under results/schema/ by schema name (scripts/validate-json).
SCHEMA_FILES = {
    "mori.probe": "probe.schema.json",
    "mori.a2a": "a2a.schema.json",
    "mori.teardown": "teardown.schema.json",
    "mori.faults": "faults.schema.json",
    "mori.matrix-sweep": "matrix-sweep.schema.json",
    "mori.baseline": "baseline.schema.json",
    "mori.evidence": "evidence.schema.json",
    "mori.published": "published.schema.json",
    "mori.expectations": "expectations.schema.json",
    "mori.a2a-plan-table": "a2a-plan-table.schema.json",
    "mori.perf-check": "perf-check.schema.json",
    "mori.scale-sweep": "scale-sweep.schema.json",
}

# Bounds of the reader.
MAX_JSON_BYTES = 64 << 20
MAX_JSON_DEPTH = 64

# Exit codes of the scripts (docs/perf-check.md "Exit codes").
EXIT_OK = 0
EXIT_FAIL = 1
EXIT_BAD_INPUT = 2
EXIT_RUNTIME = 3  # perf-check --ab: the baseline's build or a run failed
EXIT_SKIP = 77  # CTest's SKIP_RETURN_CODE (validate-json --require-or-skip)

# perf-check's allowance rule (docs/perf-check.md "The allowance"): max(3 x the spread across the baseline's runs,
# the row's own p95/p50 spread within a run + the run-to-run margin). The margin is what two runs of one revision
# differ by beyond that spread (device sync; host sync, whose time includes a host barrier: two runs of one
# evidence job at 06dc2e1b2f4d differ by 34 % beyond the row's own spread, so one run cannot judge a host-sync row
# (its allowance is over GATE_JUDGE_LIMIT) and only a change beyond 40 % plus that spread is SLOWER).
GATE_FLOOR_DEVICE_SYNC = 0.03
GATE_FLOOR_HOST_SYNC = 0.40
GATE_SPREAD_FACTOR = 3.0
# The change the gate is meant to resolve from one baseline run: a row whose allowance is wider is "cannot judge"
# (unless its change is beyond even that allowance), never SAME; so SAME means a 10 % change would have shown.
GATE_JUDGE_LIMIT = 0.10
# A/B (perf-check --ab, docs/perf-check.md "The A/B rule"): both sides measured interleaved in one job, so a change
# is judged by a rank test of the per-run values, not by the baseline's spread: slower when the current median is
# worse by more than the A/B floor AND a one-sided Mann-Whitney test puts it on the worse side at
# GATE_AB_ALPHA / (the number of configurations compared).
GATE_AB_FLOOR_DEVICE_SYNC = 0.02
GATE_AB_FLOOR_HOST_SYNC = 0.04
GATE_AB_ALPHA = 0.01
GATE_AB_MIN_RUNS = 5
GATE_SCHEMA = "mori.perf-check/4"
GATE_EXIT_CODES_VERSION = 1

# Marker pairs around generated tables in Markdown.
MARK_BEGIN = "<!-- mori-results:begin {} -->"
MARK_END = "<!-- mori-results:end {} -->"
