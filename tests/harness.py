"""The check-and-count harness the Python test scripts share: each check prints PASS/FAIL (with the output of a
failing one), and finish() prints "N passed, N failed" and exits 1 on any failure."""
import sys

_checks, _failures = [], []


def check(name, ok, out="", tail=3000):
    _checks.append(name)
    print(f"{'PASS' if ok else 'FAIL'}: {name}")
    if not ok:
        print(out[-tail:])
        _failures.append(name)


def finish():
    print(f"{len(_checks) - len(_failures)} passed, {len(_failures)} failed")
    sys.exit(1 if _failures or not _checks else 0)


SKIP_RETURN_CODE = 77  # what CTest reports as skipped (SKIP_RETURN_CODE 77 on the test); never counted as passed


def skip(reason):
    """Ends a test that cannot run here as skipped, with the reason on the first line of its output."""
    print(f"SKIPPED: {reason}")
    sys.exit(SKIP_RETURN_CODE)
