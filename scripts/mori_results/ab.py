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
"""
import dataclasses
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field

from .a2a import ABSENT
from .errors import Malformed

PLACEHOLDERS = ("{bin}", "{json}")


class RunFailed(Exception):
    """A command of the job failed (not bad input: exit 3)."""


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


def check_plan(plan):
    """Usage checks before anything runs (Malformed: exit 2)."""
    if plan.runs < 2:
        raise Malformed(None, f"--runs {plan.runs}: at least 2 (the allowance needs the baseline's spread)")
    if not plan.command:
        raise Malformed(None, "--ab needs the command after --, with {bin} (the tools' folder) and {json}")
    joined = " ".join(plan.command)
    missing = [p for p in PLACEHOLDERS if p not in joined]
    if missing:
        raise Malformed(None, f"--ab: the command must name {' and '.join(missing)}")
    for name, d in (("--current-bin", plan.current_bin), ("--baseline-bin", plan.baseline_bin)):
        if d and not os.path.isdir(d):
            raise Malformed(d, f"{name}: not a folder")
    if not os.path.exists(os.path.join(plan.repo, ".git")):
        if not plan.baseline_bin:
            raise Malformed(None, f"--ab {plan.revision}: {plan.repo} has no .git, so the revision cannot be checked "
                                  "out and built; give --baseline-bin DIR (tools built from it: the revision is then "
                                  "recorded as stated)")
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
    try:
        p = subprocess.run(shlex.split(plan.build_cmd), cwd=tree, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=plan.timeout_s)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise RunFailed(f"building {plan.commit[:12]} ({plan.build_cmd}): {e}")
    if p.returncode != 0:
        raise RunFailed(f"building {plan.commit[:12]} ({plan.build_cmd}) exited {p.returncode}: "
                        f"{' | '.join(p.stdout.strip().splitlines()[-5:])}")
    b = os.path.join(tree, "build", "bin")
    if not os.path.isdir(b):
        raise RunFailed(f"building {plan.commit[:12]} left no build/bin")
    return b


def remove_worktree(plan, work):
    tree = os.path.join(work, "baseline-tree")
    if os.path.isdir(tree):
        git(plan.repo, "worktree", "remove", "--force", tree)
        git(plan.repo, "worktree", "prune")


def interleave(plan, bins, out_dir):
    """Runs the command plan.runs times per side, alternating the order; -> {side: folder of its JSON}."""
    folders = {side: os.path.join(out_dir, side) for side in bins}
    for f in folders.values():
        os.makedirs(f, exist_ok=True)
    for i in range(plan.runs):
        order = ("baseline", "current") if i % 2 == 0 else ("current", "baseline")
        for side in order:
            path = os.path.join(folders[side], f"run-{i + 1}.json")
            argv = [a.replace("{bin}", bins[side]).replace("{json}", path) for a in plan.command]
            try:
                p = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   timeout=plan.timeout_s, env=dict(os.environ, **plan.env[side]))
            except (OSError, subprocess.TimeoutExpired) as e:
                raise RunFailed(f"{side} run {i + 1}: {e}")
            # exit 1 (wrong elements) still wrote its report: the gate judges it
            if p.returncode not in (0, 1) or not os.path.exists(path):
                raise RunFailed(f"{side} run {i + 1} exited {p.returncode}: "
                                f"{' | '.join(p.stdout.strip().splitlines()[-5:])}")
            plan.order.append(f"{side}:{i + 1}")
    return folders


def run_ab(plan, keep=None):
    """Builds (or takes) both sides' tools and interleaves their runs; -> (baseline folder, current folder, work)."""
    check_plan(plan)
    work = keep or tempfile.mkdtemp(prefix="mori-ab-")
    os.makedirs(work, exist_ok=True)
    try:
        base_bin = plan.baseline_bin or build_baseline(plan, work)
        folders = interleave(plan, {"baseline": os.path.abspath(base_bin),
                                    "current": os.path.abspath(plan.current_bin)}, os.path.join(work, "runs"))
    finally:
        remove_worktree(plan, work)
    return folders["baseline"], folders["current"], work


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
