# SPDX-License-Identifier: MIT
"""A process under torchrun from start to end: the torch systems by the names --systems takes, run one after the
other (the document rewritten after each), the teardown, then on rank 0 alone nccl-tests, mori-a2a's rows and
the table."""
import sys

from .mori_a2a import load_mori, merge_mori
from .nccl_tests import run_nccl_tests
from .options import EXIT_OK, EXIT_RUNTIME, EXIT_USAGE, UsageError, parse_systems
from .report import document, exit_code, write
from .rows import table
from .torch_nccl import NcclSystems
from .torch_symm import SymmSystems


class Run(NcclSystems, SymmSystems):
    def system_fn(self, name):
        return {"nccl-eager": self.nccl_eager, "nccl-graph": self.nccl_graph, "symm-graph": self.symm_graph,
                "symm-host": self.symm_host}[name]

    def system_meta(self, name):
        return {"nccl-eager": ("nccl", "device", False, "nccl-host"),
                "nccl-graph": ("nccl", "device", True, "nccl-host-graph"),
                "symm-graph": ("torch-symm", "device", True, self.symm_protocol("device")),
                "symm-host": ("torch-symm", "host", False, self.symm_protocol("host"))}[name]


def _teardown(run):
    try:
        run.torch.cuda.synchronize()
        run.dist.barrier(group=run.ctrl)
        run.symm_buf = run.symm_hdl = None
        run.dist.destroy_process_group()
        run.torch.cuda.empty_cache()
    except Exception as e:  # noqa: BLE001
        print(f"[compare r{run.rank}] teardown: {type(e).__name__}: {e}", file=sys.stderr)


def _rank0_document(run, a, chunks, meta, mori):
    """Rank 0 alone: nccl-tests (the other processes have left their collectives), mori's rows, the table."""
    rows = run.rows
    if a.nccl_tests:
        rows += run_nccl_tests(a, run.world, chunks, lambda m: print(m, file=sys.stderr, flush=True))
    doc = document(meta, a, chunks, rows, run.replays)
    if mori is not None:
        rows += merge_mori(rows, mori)
        doc = document(meta, a, chunks, rows, run.replays)
    write(a.json, doc)
    print()
    print(table(rows))
    code = exit_code(doc)
    print(f"\n[compare] {a.json}: {len(rows)} rows, wrong {doc['wrong']}, exit {code}", file=sys.stderr)
    return code


def run_job(a, chunks):
    """This process's part of the comparison; the exit code."""
    try:
        run = Run(a, chunks)
    except Exception as e:  # noqa: BLE001
        print(f"compare: process group / device setup failed: {type(e).__name__}: {e}", file=sys.stderr)
        return EXIT_RUNTIME
    mori = None
    if a.mori_json:
        try:
            mori = load_mori(a.mori_json, run.world)
        except UsageError as e:
            print(f"compare: {e}", file=sys.stderr)
            return EXIT_USAGE
    meta = run.meta(sys.argv)
    for name in parse_systems(a.systems):
        run.system(name, run.system_fn(name))
        if run.rank == 0:
            write(a.json, document(meta, a, chunks, run.rows, run.replays))
    _teardown(run)
    if run.rank != 0:
        return EXIT_OK
    return _rank0_document(run, a, chunks, meta, mori)
