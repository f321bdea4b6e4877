# SPDX-License-Identifier: MIT
"""Markdown from the results model: the per-configuration tables of results/README.md, like-for-like comparisons,
probe and teardown sections, one evidence folder's summary.md, and the published tables between doc markers.

Every table pools runs only within one revision; a published table comes from one run (docs/perf-check.md
"Generated tables").
"""
import os
import statistics
import textwrap

from .a2a import ABSENT, fmt_chunk, group_runs, load_run
from .constants import CEILING_BOUND, MARK_BEGIN, MARK_END
from .documents import load_document, load_documents
from .errors import Malformed
from .evidence import load_manifest, same_revision
from .row_fields import row_fields

INTRO = ("Medians over the runs of one revision of the p50 iteration time (us); `push alone` is the same push with "
         "no synchronisation and `sync alone` the synchronisation with no bytes, same launch mode; bandwidths in "
         "GB/s (10^9 B/s); `total` counts every chunk including the one a rank sends itself; `ceiling` is the best "
         "the platform does with the same bytes in the same run (kind: sm_copy, copy_engine or host_memcpy; "
         "graph-captured or plain; ± the spread between its two rounds); `ratio` = total / ceiling; `physical` is "
         "the hardware limit with its source (`L2`: the working set fits in L2, so HBM is not the limit).")


def med(rs, f):
    vs = [v for v in (f(r) for r in rs) if v is not None]
    return statistics.median(vs) if vs else None


def num(v, f="{:.1f}"):
    return "-" if v is None else f.format(v)


def broken(r):
    """A row whose total beats its same-run ceiling by more than CEILING_BOUND (the ceiling is not a bound)."""
    t, c = r.total_bw_gbps, r.ceiling_bw_gbps
    return t is not None and bool(c) and t > CEILING_BOUND * c


def system_label(r):
    """One label per system and configuration, the same for its graph and eager rows."""
    s = r.system
    proto = r.protocol or ""
    if s != "mori-a2a" and proto.endswith("-graph"):
        proto = proto[:-len("-graph")]
    if s == "mori-a2a":
        return f"mori-a2a {r.addressing} {r.sync}-sync {proto}".strip()
    if s == "nccl-tests":
        return f"nccl-tests {r.addressing} {proto}".strip()
    if r.addressing == "nccl":
        return f"NCCL all_to_all_single {proto}".strip()
    return f"torch SymmetricMemory {r.sync}-sync {proto}".strip()


def time_cell(r):
    """p50 of a row; a one-sample row (nccl-tests: one timer over all iterations) says it is a mean."""
    t = r.p50
    if t is None:
        return "-"
    if (r.samples or 0) == 1:
        return f"{t:.2f} (mean of {'?' if r.iters is None else r.iters})"
    return f"{t:.2f}"


def ceiling_cell(rs):
    c = med(rs, lambda r: r.ceiling_bw_gbps)
    if c is None:
        return "-"
    kinds = sorted({str(r.ceiling_kind) if "ceiling_kind" in r.recorded else "?" for r in rs})
    graphs = {r.ceiling_graph for r in rs} - {None}
    g = "" if not graphs else (" graph" if graphs == {True} else (" plain" if graphs == {False} else " graph/plain"))
    sp = med(rs, lambda r: r.ceiling_spread)
    return f"{c:.0f} ({'/'.join(kinds)}{g}{'' if sp is None else f', ±{100 * sp:.1f}%'})"


# ---- per-configuration tables --------------------------------------------------------------------------------------

def group_of(run, ident):
    rev = run.revision if run.revision is not None and run.revision is not ABSENT else "unknown revision"
    if run.meta.get("git_clean") is False and not rev.endswith("-dirty"):
        rev += "-dirty"
    return (ident.device, ident.platform, ident.gpus, ident.world, ident.version, " MPS" if ident.mps else "", rev)


def short_rev(rev):
    """A commit shown by its first 12 digits (a suffix such as -dirty kept)."""
    head, dash, tail = str(rev).partition("-")
    return (head[:12] if all(c in "0123456789abcdef" for c in head) else head) + dash + tail


def group_title(g):
    name, platform, gpus, world, version, mps, rev = g
    dirty = " (built from a modified tree: not a published figure)" if str(rev).endswith("-dirty") else ""
    short = short_rev(rev)
    return (f"{name} ({platform}), {gpus} device{'s' if gpus > 1 else ''}, world {world}"
            f"{' (' + mps.strip() + ')' if mps else ''}, mori.a2a/{version}, revision {short}{dirty}")


def plot_name(g):
    name, platform, gpus, world, version, mps, rev = g
    tag = f"{name.replace(' ', '_')}-{platform}-{gpus}_device{'s' if gpus > 1 else ''}-w{world}" \
          f"{'-mps' if mps else ''}{'' if version == 2 else '-v' + str(version)}-{short_rev(rev).replace(' ', '_')}"
    return f"a2a-{tag}.png"


def launch_cell(ident):
    parts = []
    if ident.launch is not ABSENT:
        parts.append(str(ident.launch))
    if ident.blocks_per_peer is not ABSENT:
        parts.append(f"{ident.blocks_per_peer} bpp")
    return ", ".join(parts) or "-"


def a2a_groups(runs):
    """group -> identity -> [rows] over the mori-a2a runs (not comparisons), within one revision each."""
    out = {}
    for (rev, ident), pairs in group_runs([r for r in runs if not r.is_comparison]).items():
        g = group_of(pairs[0][0], ident)
        out.setdefault(g, {})[ident] = [row for _, row in pairs]
    return out


def a2a_table(rows):
    """The lines of one group's table: identity -> rows."""
    out = ["| chunk | addressing | sync | protocol | graph | launch | p50 us | push alone us | sync alone us | "
           "total GB/s | ceiling GB/s (kind, spread) | ratio | physical GB/s | L2 | wrong | runs |",
           "| ---: | --- | --- | --- | ---: | --- | ---: | ---: | ---: | ---: | --- | ---: | ---: | --- | ---: | ---: |"]
    for ident in sorted(rows, key=lambda i: i.sort_key()):
        rs = rows[ident]
        tot = med(rs, lambda r: r.total_bw_gbps)
        ceil = med(rs, lambda r: r.ceiling_bw_gbps)
        ratio = f"{tot / ceil:.2f}" if tot is not None and ceil else "-"
        if any(broken(r) for r in rs):
            ratio += " **BROKEN CEILING**"
        l2 = {r.l2_resident for r in rs} - {None}
        proto = "-" if ident.protocol is ABSENT else ident.protocol
        out.append(f"| {fmt_chunk(ident.chunk_bytes)} | {ident.addressing} | {ident.sync} | {proto} | "
                   f"{ident.graph or '-'} | {launch_cell(ident)} | {num(med(rs, lambda r: r.p50))} | "
                   f"{num(med(rs, lambda r: r.push_only_us))} | {num(med(rs, lambda r: r.sync_only_us))} | "
                   f"{num(tot, '{:.0f}')} | {ceiling_cell(rs)} | {ratio} | "
                   f"{num(med(rs, lambda r: r.physical_bw_gbps), '{:.0f}')} | "
                   f"{'L2' if True in l2 else ('-' if not l2 else 'no')} | {sum(r.wrong for r in rs)} | "
                   f"{len(rs)} |")
    out.append("")
    sources = sorted({r.physical_source for rs in rows.values() for r in rs if r.physical_source})
    out += [f"Physical limit: {s}" for s in sources] + ([""] if sources else [])
    return out


def broken_lines(runs, root):
    out = []
    for run in runs:
        for r in run.rows:
            if broken(r):
                out.append(f"- `{os.path.relpath(run.path, root)}`: {system_label(r)} {fmt_chunk(r.chunk_bytes)} "
                           f"[{r.mode}]: total {r.total_bw_gbps:.0f} GB/s > {CEILING_BOUND} x ceiling "
                           f"{r.ceiling_bw_gbps:.0f} GB/s")
    if not out:
        return []
    return [f"> **BROKEN CEILING: {len(out)} row(s) beat their ceiling by more than "
            f"{round(100 * (CEILING_BOUND - 1))} %.** A ceiling must be a bound; these numbers are not to be trusted "
            "until the ceiling is fixed.", ""] + out + [""]


# ---- like-for-like comparisons -------------------------------------------------------------------------------------

def comparison(run, root):
    """A like-for-like table per chunk of a document holding several systems, and speedups between like modes."""
    m = run.meta
    out = [f"## Like-for-like comparison: {os.path.relpath(run.path, root)}", "",
           f"{m['ranks'][0]['device_name']} ({m['platform']}), world {m['world']}"
           f"{', MPS' if m.get('mps_active') else ''}; {m.get('version', '')}, revision {run.revision}. Times in "
           "us: p50 of the run's samples, or the mean where a tool reports one timer over all iterations "
           "(\"mean of N\"). Speedups pair only like modes: graph vs graph, eager (no graph) vs eager.", ""]
    rows = [r for r in run.rows if not r.error]
    errors = [r for r in run.rows if r.error]
    for c in sorted({r.chunk_bytes for r in rows}):
        at = [r for r in rows if r.chunk_bytes == c]
        systems = {}
        for r in at:
            systems.setdefault(system_label(r), {}).setdefault(r.mode, []).append(r)
        out += [f"### {fmt_chunk(c)} per peer", "", "| system | graph us | graph GB/s | eager us | eager GB/s |",
                "| --- | ---: | ---: | ---: | ---: |"]
        for label in sorted(systems, key=lambda s: (not s.startswith("mori"), s)):
            cells = []
            for md in ("graph", "eager"):
                rs = systems[label].get(md)
                if not rs:
                    cells += ["-", "-"]
                    continue
                best = min(rs, key=lambda r: r.p50)
                cells += [time_cell(best) + (" **BROKEN CEILING**" if broken(best) else ""),
                          num(best.total_bw_gbps, "{:.0f}")]
            out.append(f"| {label} | {' | '.join(cells)} |")
        out.append("")
        lines = []
        for md in ("graph", "eager"):
            mine = [r for r in at if r.system == "mori-a2a" and r.mode == md]
            if not mine:
                continue
            others = {}
            for r in at:
                if r.system != "mori-a2a" and r.mode == md:
                    lab = system_label(r)
                    if lab not in others or r.p50 < others[lab].p50:
                        others[lab] = r
            for lab in sorted(others):
                o = others[lab]
                same = [r for r in mine if r.sync == o.sync] or mine
                best = min(same, key=lambda r: r.p50)
                x = o.p50 / best.p50
                lines.append(f"- speedup, {md} vs {md}: {system_label(best)} [{best.mode}] {time_cell(best)} us vs "
                             f"{lab} [{o.mode}] {time_cell(o)} us: {x:.2f}x "
                             f"({'mori-a2a faster' if x > 1 else 'mori-a2a not faster'})")
        out += lines + ([""] if lines else [])
    for r in errors:
        out.append(f"- {system_label(r)} {fmt_chunk(r.chunk_bytes)} [{r.mode}]: error: {r.error}")
    if errors:
        out.append("")
    return out


# ---- probe and teardown ----------------------------------------------------------------------------------------

def _shape(document, fn, *args):
    """fn(document, ...) with a document that lacks what fn reads reported as Malformed, not a traceback."""
    try:
        return fn(document, *args)
    except (KeyError, TypeError, IndexError, AttributeError, ValueError) as e:
        raise Malformed(document.path, f"not a valid {document.tag} document ({type(e).__name__}: {e})")


def _probe(document, root, plot):
    d = document.doc
    out = [f"## mori-probe: {os.path.relpath(document.path, root)}", "",
           "| node | device | arch | VMM | granularity | posix_fd attr / works | fabric attr / works | chosen | reason |",
           "| --- | --- | --- | --- | ---: | --- | --- | --- | --- |"]
    for n in d["nodes"]:
        for dev in n["devices"]:
            h = dev["handle_types"]
            attr = lambda x: "-" if x["attribute"] is None else str(int(x["attribute"]))  # noqa: E731
            out.append(f"| {n['host']} | {dev['name']} | {dev['arch']} | {dev['vmm_supported']} | "
                       f"{dev['granularity']['recommended'] >> 10} KiB | {attr(h['posix_fd'])} / "
                       f"{h['posix_fd']['usable']} | {attr(h['fabric'])} / {h['fabric']['usable']} | "
                       f"{dev['chosen_handle_type']} | {dev['reason']} |")
    out.append("")
    if d.get("diagnoses"):
        out += ["| diagnosis | severity | ranks | evidence |", "| --- | --- | --- | --- |"]
        out += [f"| `{x['id']}` | {x['severity']} | {','.join(map(str, x['ranks']))} | {x['evidence']} |"
                for x in d["diagnoses"]]
        out.append("")
    m = d.get("matrix")
    if not m or not m["rows"]:
        return out
    f = lambda v, fm: "-" if v is None else fm.format(v)  # noqa: E731
    out += [f"Peer matrix ({m['bytes'] >> 20} MiB transfers, latency = p50 of {m['rounds']} round trips / 2):", "",
            "| src -> dst | addressing | write GB/s | read GB/s | latency us | link GB/s |",
            "| --- | --- | ---: | ---: | ---: | ---: |"]
    for r in m["rows"]:
        out.append(f"| {r['src']} -> {r['dst']} | {r['addressing']} | {f(r['write_gbps'], '{:.1f}')} | "
                   f"{f(r['read_gbps'], '{:.1f}')} | {f(r['latency_us_p50'], '{:.2f}')} | "
                   f"{f(r['link_gbps'], '{:.1f}')} |")
    out.append("")
    if plot:
        out += plot(document.path, m)
    return out


def probe_section(document, root, plot=None):
    return _shape(document, _probe, root, plot)


def _teardown(document, root):
    out = [f"## mori-teardown-repro: {os.path.relpath(document.path, root)}", "",
           "| scenario | world | outcome | expected | detail |", "| --- | ---: | --- | --- | --- |"]
    for s in document.doc["scenarios"]:
        out.append(f"| {s['name']} | {s['world']} | {s['outcome']} | {s.get('expected', '?')} | "
                   f"{s.get('detail', '')} |")
    out.append("")
    return out


def teardown_section(document, root):
    return _shape(document, _teardown, root)


# ---- one evidence folder: summary.md ---------------------------------------------------------------------------------

def summary(folder):
    """summary.md of one evidence folder: the manifest's steps, then the tools' JSON of the folder, each table from
    this one run (one revision, one machine start)."""
    man = load_manifest(folder)
    docs = load_documents([folder], skip_folders=("schema", "lab"))
    runs, others = [], []
    for d in docs:
        if d.schema == "mori.a2a":
            run = load_run(d)
            if run.revision not in (None, "unknown") and not same_revision(run.revision, man.revision):
                raise Malformed(d.path, f"revision {run.revision}, but the folder's manifest names {man.revision}: "
                                        "one evidence folder holds one revision")
            runs.append(run)
        elif d.schema != "mori.evidence":
            others.append(d)
    rev = man.revision[:12]
    asked = man.doc.get("steps_requested")
    state = "complete" if man.complete else (
        f"a partial run (--steps {','.join(map(str, asked))}: the preset's other steps not run)"
        if man.doc.get("partial") is True and isinstance(asked, list) else "INCOMPLETE")
    out = [f"# Evidence: {man.machine} at {rev}", "",
           f"Revision {man.revision} ({'clean tree' if man.clean else 'DIRTY tree: not for tables'}), machine "
           f"{man.machine}, start {man.start_id or '-'}, {state}. Written by "
           "`scripts/render-results --summary` from `manifest.json` and the tools' JSON in this folder.", "",
           "| step | status | exit | wall s | outputs |", "| --- | --- | ---: | ---: | --- |"]
    for s in man.steps:
        wall = s.get("wall_s")
        out.append(f"| {s['name']} | {s['status']} | {'-' if s.get('exit_code') is None else s['exit_code']} | "
                   f"{'-' if wall is None else f'{wall:.1f}'} | {', '.join(s['outputs']) or '-'} |")
    out.append("")
    for key, title in (("skipped", "Skipped"), ("waived", "Waived")):
        items = getattr(man, key)
        if items:
            out += [f"{title}:", ""] + [f"- {x['name']}: {x.get('reason', '-')}" for x in items] + [""]
    root = os.path.abspath(folder)
    out += broken_lines(runs, root)
    groups = a2a_groups([r for r in runs if not r.is_mutant])
    for g in sorted(groups):
        out += [f"## mori-a2a on {group_title(g)}", ""] + a2a_table(groups[g])
    mutants = [r for r in runs if r.is_mutant]
    if mutants:
        out += ["## Verification mutants", "", "| file | fault | device-sync rows | with wrong elements |",
                "| --- | --- | ---: | ---: |"]
        for r in mutants:
            dev = [x for x in r.rows if x.sync == "device"]
            out.append(f"| {os.path.relpath(r.path, root)} | {r.fault} | {len(dev)} | {sum(x.wrong > 0 for x in dev)} |")
        out.append("")
    for r in runs:
        if r.is_comparison:
            out += comparison(r, root)
    for d in others:
        if d.schema == "mori.probe":
            out += probe_section(d, root)
        elif d.schema == "mori.teardown":
            out += teardown_section(d, root)
        else:
            out += [f"- `{os.path.relpath(d.path, root)}`: {d.tag}", ""]
    return "\n".join(out).rstrip("\n") + "\n"


# ---- published tables between markers ----------------------------------------------------------------------------

PUBLISHED = os.path.join("results", "published.json")
DOCS = ("README.md", os.path.join("docs", "results.md"), os.path.join("results", "README.md"))


def load_published(repo):
    path = os.path.join(repo, PUBLISHED)
    d = load_document(path, accept=["mori.published"])
    if d is None:
        raise Malformed(path, "not a mori.published document")
    tables = d.doc.get("tables")
    if not isinstance(tables, dict) or not all(isinstance(v, dict) for v in tables.values()):
        raise Malformed(path, "tables: expected an object of table specifications")
    return path, tables


def _spec(path, name, spec, key, kind, required=True):
    v = spec.get(key)
    if v is None and not required:
        return None
    if not isinstance(v, kind) or isinstance(v, bool) and kind is not bool:
        raise Malformed(path, f"tables.{name}.{key}: expected {kind.__name__}")
    return v


def published_table(repo, name, spec, path):
    """The Markdown of one published table: rows of ONE run (a mori.a2a file), filtered by spec["where"], at the
    chunks spec["chunks"]; where several rows of a chunk match, the fastest (its protocol named)."""
    run_path = _spec(path, name, spec, "run", str)
    where = _spec(path, name, spec, "where", dict, required=False) or {}
    unknown = [k for k in where if k not in row_fields()]
    if unknown:
        raise Malformed(path, f"tables.{name}.where.{unknown[0]}: not a field of the row (row_fields.py)")
    chunks = _spec(path, name, spec, "chunks", list, required=False)
    title = _spec(path, name, spec, "title", str)
    full = os.path.join(repo, run_path)
    d = load_document(full, accept=["mori.a2a"])
    if d is None:
        raise Malformed(full, f"published table {name!r}: not a mori.a2a document")
    run = load_run(d)
    rev = run.revision or ""
    if not rev or rev == "unknown" or rev.endswith("-dirty") or run.meta.get("git_clean") is False:
        raise Malformed(full, f"published table {name!r}: revision {rev or '(none)'} is not a clean commit; evidence "
                              "from a dirty tree never reaches a table")
    picked = []
    for c in chunks or sorted({r.chunk_bytes for r in run.rows}):
        rows = [r for r in run.rows if r.chunk_bytes == c and r.error is None
                and all((getattr(r, k) if k != "graph" else r.identity.graph) == v for k, v in where.items())]
        if not rows:
            raise Malformed(full, f"published table {name!r}: no row at {fmt_chunk(c)} where {where}")
        picked.append(min(rows, key=lambda r: r.p50))
    launches = sorted({str(r.launch) for r in picked if r.launch})
    wrong = sum(r.wrong for r in picked)
    cond = ", ".join(f"{v} sync" if k == "sync" else (f"graph of {v}" if k == "graph" and v else f"{v}")
                     for k, v in where.items())
    prose = (f"{title}, revision {short_rev(rev)}, one run: `{run_path}` ({cond}"
             f"{', ' + '/'.join(launches) + ' launches' if launches else ''}; "
             f"{'every element verified' if not wrong else f'{wrong} WRONG elements'}). p50 µs per all-to-all "
             "iteration; the ceiling is the best copy of the same bytes measured in the same run.")
    out = textwrap.wrap(prose, 115, break_on_hyphens=False, break_long_words=False) + [""]
    out += ["| chunk per peer | protocol | p50 µs | total GB/s | ceiling GB/s (kind) | ratio | wrong |",
            "| ---: | --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in picked:
        ceil = r.ceiling_bw_gbps
        kind = r.ceiling_kind or "-"
        g = r.ceiling_graph
        kind += "" if g is None else (", graph" if g else ", plain")
        ratio = f"{r.total_bw_gbps / ceil:.2f}" if ceil and r.total_bw_gbps else "-"
        proto = r.identity.protocol  # ABSENT before mori.a2a/2, as the identity reads it
        out.append(f"| {fmt_chunk(r.chunk_bytes)} | {'-' if proto is ABSENT else proto} | {r.p50:.2f} | "
                   f"{num(r.total_bw_gbps, '{:.0f}')} | {num(ceil, '{:.0f}')} ({kind}) | {ratio} | {r.wrong} |")
    return "\n".join(out)


def marked(text, path):
    """[(name, start, end)] of the regions between begin/end markers in text (start/end: the content's offsets)."""
    begin, end = MARK_BEGIN.format("\0"), MARK_END.format("\0")
    bpre, bpost = begin.split("\0")
    epre, epost = end.split("\0")
    out, pos = [], 0
    while True:
        i = text.find(bpre, pos)
        if i < 0:
            return out
        j = text.find(bpost, i + len(bpre))
        if j < 0:
            raise Malformed(path, "an unterminated mori-results:begin marker")
        name = text[i + len(bpre):j]
        if not name or any(ch.isspace() for ch in name):
            raise Malformed(path, f"marker name {name!r}: a name has no spaces")
        close = f"{epre}{name}{epost}"
        k = text.find(close, j)
        if k < 0:
            raise Malformed(path, f"marker {name!r}: no matching {close}")
        nested = text.find(bpre, j, k)
        if nested >= 0:
            raise Malformed(path, f"marker {name!r}: another begin marker before its end")
        out.append((name, j + len(bpost), k))
        pos = k + len(close)


def update_docs(repo, docs=DOCS, write=True):
    """Regenerates every marked table in docs (paths relative to repo). -> (changed: [(doc, name)], seen names).
    A marker whose name results/published.json does not list is Malformed."""
    from .files import check_output_file, write_text
    from .reader import read_bytes
    ppath, tables = load_published(repo)
    cache, changed, seen = {}, [], []
    for rel in docs if write else ():  # a doc that is a link, a FIFO or a device: refused before any is rewritten
        if os.path.lexists(os.path.join(repo, rel)):
            check_output_file(os.path.join(repo, rel), "--update-docs")
    for rel in docs:
        path = os.path.join(repo, rel)
        if not os.path.lexists(path):
            continue
        try:
            text = read_bytes(path).decode("utf-8")
        except UnicodeDecodeError:
            raise Malformed(path, "not UTF-8 text")
        new, pos = [], 0
        for name, s, e in marked(text, path):
            if name not in tables:
                raise Malformed(path, f"marker {name!r}: {PUBLISHED} has no table of that name")
            if name not in cache:
                cache[name] = published_table(repo, name, tables[name], ppath)
            body = "\n" + cache[name] + "\n"
            if text[s:e] != body:
                changed.append((rel, name))
            new += [text[pos:s], body]
            pos = e
            seen.append((rel, name))
        new.append(text[pos:])
        out = "".join(new)
        if write and out != text:
            write_text(path, out, "--update-docs")
    return changed, seen
