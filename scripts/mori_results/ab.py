# SPDX-License-Identifier: MIT
"""A/B runs for scripts/perf-check --ab (docs/perf-check.md "A/B"): the baseline revision built in a temporary
git worktree beside the current build, the two sides' runs interleaved in one job (one machine start, the order
alternating A B / B A so that a drift in time falls on both), then gated like any baseline of several runs.

A side may run with its own environment (--current-env, --baseline-env NAME=VALUE): the treatment of an A/B, such
as a test-only fault point that slows the kernel. Where it sets a variable that is part of the row identity
(MORI_FAULT, MORI_KERNEL_DIR), that field is left out of both sides' identities, so that the treated rows are
compared with the untreated ones instead of being MISSING.

The revision REV: in a tree with a .git (folder, or file of a git worktree) it must name a commit, resolved by
git. In a copy of the tree without .git (a GPU machine that gets the files only) REV cannot be checked out, so
--baseline-bin is required and REV is recorded as stated, unchecked (ab.revision_checked false); the baseline
side's reports then say which revision their tools were built from (ab.baseline_report_revisions).

Cleanup on every exit (docs/perf-check.md "A/B"): the build and every run are started as their own process group
under the guard (guard.py: the group also ends if this script is killed outright); past --run-timeout-s, or when
SIGTERM, SIGINT or SIGHUP stops the script (stop_on_signals: the signal becomes Interrupted, so that every
finally-block runs), the whole group is killed and waited for. The worktree is removed (git worktree remove
--force, then git worktree prune) and the work folder too (unless --keep) whether the A/B succeeds, fails or is
stopped (session()).
"""
import contextlib
import dataclasses
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
from dataclasses import dataclass, field

from .a2a import ABSENT
from .errors import Malformed, Usage
from .files import check_output_folder, make_folders
# Interrupted is read from here too: perf-check catches ab.Interrupted.
from .guard import STOP_SIGNALS, Interrupted, end_job, guarded  # noqa: F401
from .guard import stop_handler as _stop

PLACEHOLDERS = ("{bin}", "{json}")


class RunFailed(Exception):
    """A command of the job failed (not bad input: exit 3)."""


def stop_on_signals():
    """From here on SIGTERM, SIGINT and SIGHUP raise Interrupted (the cleanup then runs in finally-blocks)."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, _stop)


def _end_group(p):
    """Kills the job of the guard p (its process tree and group, guard.end_job) and reaps p, bounded."""
    end_job(p.pid)
    try:  # bounded: a process that left the group may still hold the pipe
        p.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()


def run_group(argv, what, timeout, **kwargs):
    """(exit code, stdout + stderr) of argv run as its own process group under the guard; past timeout (RunFailed)
    or on any exception here (Interrupted) the whole group is killed first."""
    try:
        p = subprocess.Popen(guarded(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             errors="replace", start_new_session=True, **kwargs)
    except OSError as e:
        raise RunFailed(f"{what}: {e}")
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _end_group(p)
        raise RunFailed(f"{what}: did not end within {timeout:g} s (--run-timeout-s): its process group killed")
    except BaseException:
        _end_group(p)
        raise
    return p.returncode, out


@dataclass
class Plan:
    repo: str
    revision: str            # as given
    commit: str = ""         # the full commit it names
    runs: int = 3
    command: list = field(default_factory=list)
    current_bin: str = ""
    baseline_bin: str = ""   # prebuilt baseline tools ('' : build the revision in a worktree)
    build_cmd: str = "scripts/build"
    build_argv: list = field(default_factory=list)  # build_cmd split as a shell would (check_plan)
    timeout_s: float = 600.0
    order: list = field(default_factory=list)
    env: dict = field(default_factory=lambda: {"baseline": {}, "current": {}})  # side -> {NAME: VALUE}
    revision_checked: bool = True  # False: no .git, REV recorded as stated


# Row-identity fields read from a report's meta.env (a2a.py load_run): an A/B side env that sets one is the
# treatment, not another configuration.
IDENTITY_ENV = {"MORI_FAULT": "fault", "MORI_KERNEL_DIR": "kernel_dir"}
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def parse_env(items, option):
    """NAME=VALUE items of --current-env / --baseline-env -> {NAME: VALUE} (Malformed: exit 2)."""
    out = {}
    for item in items:
        name, eq, value = item.partition("=")
        if not eq or not ENV_NAME.match(name):
            raise Malformed(None, f"{option} {item!r}: not NAME=VALUE (NAME letters, digits and _)")
        if "\0" in value:
            raise Malformed(None, f"{option} {name}: the value holds a NUL byte")
        if name in out:
            raise Malformed(None, f"{option} {name}: given twice")
        out[name] = value
    return out


def env_text(env):
    return " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())


def untreated(runs, plan):
    """The runs with the identity fields that a side env sets (IDENTITY_ENV) left out, on both sides alike."""
    names = set(plan.env["baseline"]) | set(plan.env["current"])
    blank = {IDENTITY_ENV[n]: ABSENT for n in names if n in IDENTITY_ENV}
    if blank:
        for run in runs:
            for row in run.rows:
                row.identity = dataclasses.replace(row.identity, **blank)
    return runs


def git(repo, *args, timeout=120):
    try:
        p = subprocess.run(["git", "-C", repo, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise RunFailed(f"git {' '.join(args)}: {e}")
    return p.returncode, p.stdout.strip()


def check_plan(plan, keep=None):
    """Usage checks before anything runs (Malformed: exit 2)."""
    try:
        plan.build_argv = shlex.split(plan.build_cmd)
    except ValueError as e:
        raise Usage(f"--build-cmd {plan.build_cmd!r}: cannot split it as a shell would ({e})")
    if not plan.build_argv:
        raise Usage("--build-cmd: no command")
    check_output_folder(keep, "--keep")
    if plan.runs < 2:
        raise Malformed(None, f"--runs {plan.runs}: at least 2 (the allowance needs the baseline's spread)")
    if not plan.command:
        raise Malformed(None, "--ab needs the command after --, with {bin} (the tools' folder) and {json}")
    joined = " ".join(plan.command)
    missing = [p for p in PLACEHOLDERS if p not in joined]
    if missing:
        raise Malformed(None, f"--ab: the command must name {' and '.join(missing)}")
    checkout = os.path.exists(os.path.join(plan.repo, ".git"))
    # No checkout (an install, a copy of the files) is said first, before a missing default --current-bin.
    if not checkout and not plan.baseline_bin:
        raise Malformed(None, f"--ab {plan.revision}: {plan.repo} has no .git, so the revision cannot be checked "
                              "out and built; give --baseline-bin DIR (tools built from it: the revision is then "
                              "recorded as stated)")
    for name, d in (("--current-bin", plan.current_bin), ("--baseline-bin", plan.baseline_bin)):
        if d and not os.path.isdir(d):
            raise Malformed(d, f"{name}: not a folder")
    if not checkout:
        plan.commit, plan.revision_checked = plan.revision, False
        return
    rc, out = git(plan.repo, "rev-parse", "--verify", "--quiet", f"{plan.revision}^{{commit}}")
    if rc != 0:
        raise Malformed(None, f"--ab {plan.revision}: not a commit of {plan.repo}")
    plan.commit = out


def build_baseline(plan, work):
    """The baseline revision checked out in a worktree under work and built there; -> its tools' folder."""
    tree = os.path.join(work, "baseline-tree")
    rc, out = git(plan.repo, "worktree", "add", "--detach", tree, plan.commit)
    if rc != 0:
        raise RunFailed(f"git worktree add {plan.commit[:12]}: {out[-500:]}")
    env = dict(os.environ, MORI_BUILD_DIR="build")
    rc, out = run_group(plan.build_argv, f"building {plan.commit[:12]} ({plan.build_cmd})", plan.timeout_s,
                        cwd=tree, env=env)
    if rc != 0:
        raise RunFailed(f"building {plan.commit[:12]} ({plan.build_cmd}) exited {rc}: "
                        f"{' | '.join(out.strip().splitlines()[-5:])}")
    b = os.path.join(tree, "build", "bin")
    if not os.path.isdir(b):
        raise RunFailed(f"building {plan.commit[:12]} left no build/bin")
    return b


def remove_worktree(plan, work):
    """The baseline's worktree removed and unregistered: also one whose `git worktree add` was cut short."""
    if plan.baseline_bin:  # no worktree was made
        return
    tree = os.path.join(work, "baseline-tree")
    # A `git worktree add` cut short leaves its worktree locked ("initializing"): unlocked first, then removed
    # (--force twice removes a locked one), its folder removed, and every registration without a folder pruned.
    git(plan.repo, "worktree", "unlock", tree)
    if os.path.isdir(tree):
        git(plan.repo, "worktree", "remove", "--force", "--force", tree)
        shutil.rmtree(tree, ignore_errors=True)
    git(plan.repo, "worktree", "prune")


def interleave(plan, bins, out_dir):
    """Runs the command plan.runs times per side, alternating the order; -> {side: folder of its JSON}."""
    folders = {side: os.path.join(out_dir, side) for side in bins}
    for f in folders.values():  # a full file system: WriteFailed (exit 3), not a traceback
        make_folders(f, "--keep")
    for i in range(plan.runs):
        order = ("baseline", "current") if i % 2 == 0 else ("current", "baseline")
        for side in order:
            path = os.path.join(folders[side], f"run-{i + 1}.json")
            argv = [a.replace("{bin}", bins[side]).replace("{json}", path) for a in plan.command]
            rc, out = run_group(argv, f"{side} run {i + 1}", plan.timeout_s, env=dict(os.environ, **plan.env[side]))
            # exit 1 (wrong elements) still wrote its report: the gate judges it
            if rc not in (0, 1) or not os.path.exists(path):
                raise RunFailed(f"{side} run {i + 1} exited {rc}: {' | '.join(out.strip().splitlines()[-5:])}")
            plan.order.append(f"{side}:{i + 1}")
    return folders


@contextlib.contextmanager
def session(plan, keep=None):
    """The A/B's work folder (keep, else a fresh /tmp/mori-ab-*), after the usage checks (check_plan): on every
    way out of the block, success, failure or Interrupted, the worktree is removed and the work folder too unless
    it is keep (then only a folder this call made is removed where nothing was run into it)."""
    check_plan(plan, keep)
    made = make_folders(keep, "--keep") if keep else None
    work = keep or tempfile.mkdtemp(prefix="mori-ab-")
    ran = False
    try:
        yield work
        ran = True
    finally:
        try:
            remove_worktree(plan, work)
        finally:
            if not keep:
                discard(work)
            elif made and not ran and not os.path.isdir(os.path.join(work, "runs")):
                discard(made)


def run_ab(plan, work):
    """Builds (or takes) both sides' tools and interleaves their runs in work; -> (baseline folder, current
    folder). The worktree is removed here already (session() removes it again on any way out)."""
    try:
        base_bin = plan.baseline_bin or build_baseline(plan, work)
        folders = interleave(plan, {"baseline": os.path.abspath(base_bin),
                                    "current": os.path.abspath(plan.current_bin)}, os.path.join(work, "runs"))
    finally:
        remove_worktree(plan, work)
    return folders["baseline"], folders["current"]


def report_revisions(runs):
    """The distinct meta.git_revision of a side's reports."""
    return sorted({str(r.revision) for r in runs if r.revision is not None})


def revision_notes(plan, revisions, reports=0):
    """Notes on how REV relates to the revisions the baseline side's reports name (of `reports` reports). Reports
    that name another revision than a hexadecimal REV are bad input (Malformed: exit 2): the A/B would measure
    another change than the one named. With --baseline-bin, REV counts as checked (plan.revision_checked) only
    where every baseline report names it."""
    notes = []
    if not plan.revision_checked:
        notes.append(f"--ab {plan.revision}: taken as stated, not checked (no .git in {plan.repo}); the baseline's "
                     f"reports say revision {', '.join(revisions) or '(none)'}")

    def commit(r):  # a report's revision may carry a suffix (an older "-dirty"); "unknown" names none
        h = re.match(r"[0-9a-f]*", r.lower()).group(0)
        return h if len(h) >= 7 else None

    named = [r for r in revisions if commit(r)]
    rev = plan.commit.lower()
    if re.fullmatch(r"[0-9a-f]{7,40}", rev):
        other = [r for r in named if not (commit(r).startswith(rev) or rev.startswith(commit(r)))]
        if other:
            raise Malformed(None, f"--ab {plan.revision}: the baseline's reports say revision {', '.join(other)}, "
                                  f"not {plan.commit[:12]} (--baseline-bin built from another revision: build "
                                  "REV's tools, or name the revision they were built from)")
    if plan.baseline_bin and plan.revision_checked and (len(named) < len(revisions) or not revisions) and reports:
        plan.revision_checked = False
        notes.append(f"--ab {plan.revision}: --baseline-bin's reports do not all name a commit (meta.git_revision: "
                     f"{', '.join(revisions) or 'none'}), so that its tools were built from it is not checked")
    return notes


def discard(work):
    shutil.rmtree(work, ignore_errors=True)
