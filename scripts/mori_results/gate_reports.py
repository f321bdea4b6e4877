# SPDX-License-Identifier: MIT
"""perf-check's verdicts for a CI system (docs/ci.md): JUnit XML (a test report every CI renders) and Markdown (a
job summary). One test case per verdict: SLOWER and MISSING fail (MISSING is skipped where --allow-missing said
it may be missing), CANNOT_JUDGE is skipped with its reason, SAME and FASTER pass; wrong elements in the current
run are one more failing case. The text comes from the reports the tools wrote: every character XML 1.0 cannot
carry is replaced, and Markdown's table characters are escaped."""
import re
from xml.sax.saxutils import escape, quoteattr

from .gate import CANNOT_JUDGE

_NOT_XML = re.compile("[^\u0009\u000a\u000d\u0020-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _x(text):
    return _NOT_XML.sub("\ufffd", str(text))


def _case_text(v):
    def num(x):
        return "-" if x is None else f"{x:.2f}"
    delta = "-" if v.delta is None else f"{100 * v.delta:+.1f} %"
    allow = "-" if v.allowance is None else f"{100 * v.allowance:.1f} %"
    return (f"{v.metric}: baseline {num(v.baseline)}, current {num(v.current)}, change {delta}, allowance {allow}, "
            f"{v.baseline_runs} baseline run(s): {v.verdict}")


def _outcome(v, allow_missing):
    """('failure' | 'skipped' | None, message)."""
    if v.verdict == "SLOWER":
        return "failure", _case_text(v)
    if v.verdict == "MISSING":
        return ("skipped", "missing from the current run (--allow-missing)") if allow_missing else (
            "failure", "missing from the current run")
    if v.verdict == CANNOT_JUDGE:
        return "skipped", f"cannot judge: {v.why}"
    return None, _case_text(v)


def junit_xml(verdicts, wrong, allow_missing, seconds=0.0):
    """The JUnit XML text: one testsuite "perf-check", a test case per verdict (class: the metric)."""
    cases, failures, skipped = [], 0, 0
    for v in verdicts:
        kind, msg = _outcome(v, allow_missing)
        head = f'    <testcase classname={quoteattr(_x("perf-check." + v.metric))} name={quoteattr(_x(v.label()))} time="0">'
        if kind is None:
            cases.append(head + f"\n      <system-out>{escape(_x(msg))}</system-out>\n    </testcase>")
            continue
        failures += kind == "failure"
        skipped += kind == "skipped"
        cases.append(head + f"\n      <{kind} message={quoteattr(_x(msg))}/>\n    </testcase>")
    head = '    <testcase classname="perf-check.correctness" name="wrong elements in the current run" time="0">'
    if wrong:
        failures += 1
        cases.append(head + f'\n      <failure message="{int(wrong)} wrong element(s)"/>\n    </testcase>')
    else:
        cases.append(head + "\n    </testcase>")
    n = len(cases)
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            f'<testsuites tests="{n}" failures="{failures}" errors="0" skipped="{skipped}" time="{seconds:.3f}">\n'
            f'  <testsuite name="perf-check" tests="{n}" failures="{failures}" errors="0" skipped="{skipped}" '
            f'time="{seconds:.3f}">\n' + "\n".join(cases) + "\n  </testsuite>\n</testsuites>\n")


def _md(text):
    return _x(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").replace("\r", " ")


ORDER = {"SLOWER": 0, "MISSING": 1, CANNOT_JUDGE: 2, "FASTER": 3, "SAME": 4}


def markdown(verdicts, summary_line, passed, notes=()):
    """A job summary: the verdict line, then a table of the verdicts (failures first), then what cannot be judged
    and why."""
    out = [f"## perf-check: {'PASS' if passed else 'FAIL'}", "", _md(summary_line), ""]
    out += [f"- note: {_md(n)}" for n in notes] + ([""] if notes else [])
    out += ["| verdict | configuration | metric | baseline | current | change | allowance | runs |",
            "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for v in sorted(verdicts, key=lambda v: (ORDER.get(v.verdict, 5), v.label(), v.metric)):
        num = (lambda x: "-" if x is None else f"{x:.2f}")
        out.append(f"| {'**' + v.verdict + '**' if v.verdict in ('SLOWER', 'MISSING') else v.verdict} | "
                   f"{_md(v.label())} | {v.metric} | {num(v.baseline)} | {num(v.current)} | "
                   f"{'-' if v.delta is None else f'{100 * v.delta:+.1f} %'} | "
                   f"{'-' if v.allowance is None else f'{100 * v.allowance:.1f} %'} | {v.baseline_runs} |")
    why = [v for v in verdicts if v.verdict == CANNOT_JUDGE and v.why]
    if why:
        out += ["", "Cannot judge from this baseline (neither a pass nor a failure):", ""]
        out += [f"- {_md(v.label())} ({v.metric}): {_md(v.why)}" for v in why]
    return "\n".join(out) + "\n"


def setups(rows):
    """The machines a side's rows ran on: {(platform, device, GPU count)}."""
    return {(i.platform, i.device, i.gpus) for i in rows}


def setup_text(s):
    return "; ".join(f"{p} {d} x{g}" for p, d, g in sorted(s, key=str))
