# SPDX-License-Identifier: MIT
"""One torchrun process (torch imported when the run starts): the process group and its gloo control group, the
data pattern every system sends and checks, the timing of back-to-back launches and graph replays, and the loop
that runs one system over every chunk. The systems themselves: torch_nccl.py, torch_symm.py."""
import datetime
import os
import socket
import sys
import traceback

from mori_results.machine import driver_version, mps_active, tree_revision

from .rows import fmt_size
from .stats import bandwidths, failed_fields, time_stats
from mori_results import env as envvars

GUARD_ELEMS = 4096  # int32 elements after every receive area that must stay poisoned
POISON = -1


class TorchRun:
    def __init__(self, a, chunks):
        import torch  # noqa: PLC0415
        import torch.distributed as dist  # noqa: PLC0415
        self.torch, self.dist, self.a, self.chunks = torch, dist, a, chunks
        dist.init_process_group("nccl", timeout=datetime.timedelta(seconds=a.timeout_s))
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.local = int(envvars.read("LOCAL_RANK", self.rank))
        torch.cuda.set_device(self.local)
        self.dev = torch.device("cuda", self.local)
        self.ctrl = dist.new_group(backend="gloo")  # bookkeeping off the GPU, so a broken NCCL path cannot hang it
        self.tag = 0
        self.rows = []
        self.replays = a.replays or max(20, -(-a.iters // a.graph))

    # -- collectives on the gloo group ------------------------------------------------------------------------
    def max_over_ranks(self, us):
        t = self.torch.tensor(us, dtype=self.torch.float64)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX, group=self.ctrl)
        return t.tolist()

    def sum_over_ranks(self, v):
        t = self.torch.tensor([int(v)], dtype=self.torch.int64)
        self.dist.all_reduce(t, group=self.ctrl)
        return int(t.item())

    def agree_failed(self, failed):
        return self.sum_over_ranks(1 if failed else 0) > 0

    def log(self, msg):
        print(f"[compare r{self.rank}] {msg}", file=sys.stderr, flush=True)

    # -- pattern ----------------------------------------------------------------------------------------------
    # int32 element (dst p, offset i) sent by s in iteration tag: tag<<24 | s<<20 | p<<16 | low16(i), where
    # low16(i) = (i + (i >> 16) * 40503) & 0xffff also changes when an element lands a multiple of 64 Ki away;
    # non-negative (tag < 128), never the poison -1.
    def next_tag(self):
        self.tag = self.tag % 120 + 1
        return self.tag

    def low16(self, n):
        i = self.torch.arange(n, device=self.dev, dtype=self.torch.int32)
        return (i + (i >> 16) * 40503) & 0xFFFF

    def fill_send(self, send, n, tag):
        torch = self.torch
        i = self.low16(n)
        p = torch.arange(self.world, device=self.dev, dtype=torch.int32).unsqueeze(1) << 16
        send.view(self.world, n).copy_(p + i.unsqueeze(0) + ((tag << 24) | (self.rank << 20)))

    def count_wrong(self, recv_full, n, tag):
        torch = self.torch
        i = self.low16(n)
        s = torch.arange(self.world, device=self.dev, dtype=torch.int32).unsqueeze(1) << 20
        expect = s + i.unsqueeze(0) + ((tag << 24) | (self.rank << 16))
        body = recv_full[: self.world * n].view(self.world, n)
        wrong = int((body != expect).sum().item())
        wrong += int((recv_full[self.world * n: self.world * n + GUARD_ELEMS] != POISON).sum().item())
        return wrong

    def verify(self, n, send, recv_full, run_once, sync_before_poison=False):
        """Wrong elements of one checked iteration: a fresh tag sent (in place: a graph reads the send buffer),
        the receive area and its guard poisoned, run_once(), every element compared. sync_before_poison: a host
        barrier before the poisoning too, for a receive area peers write into (a symmetric buffer)."""
        tag = self.next_tag()
        self.fill_send(send, n, tag)
        if sync_before_poison:
            self.host_sync()
        recv_full.fill_(POISON)
        self.host_sync()
        run_once()
        self.torch.cuda.synchronize()
        wrong = self.count_wrong(recv_full, n, tag)
        self.host_sync()
        return wrong

    # -- timing -----------------------------------------------------------------------------------------------
    def back_to_back(self, n, one):
        """Per-launch microseconds of n back-to-back launches with an event between each (as mori-a2a)."""
        torch = self.torch
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(n + 1)]
        for k in range(n):
            ev[k].record()
            one()
        ev[n].record()
        ev[n].synchronize()
        return [1000.0 * ev[k].elapsed_time(ev[k + 1]) for k in range(n)]

    def capture(self, body, warm):
        """K x body() in one CUDA graph; warmed up on a side stream first, as PyTorch asks for NCCL capture."""
        torch = self.torch
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(max(1, warm)):
                body()
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g, capture_error_mode="thread_local"):
            for _ in range(self.a.graph):
                body()
        torch.cuda.synchronize()
        return g

    def timed_graph(self, body, step, capture_step):
        """K x body() captured (step `capture_step`), one warmup replay, the timed replays: (graph, us), a sample
        being one replay / K."""
        step["s"] = capture_step
        g = self.capture(body, self.a.warmup)
        self.host_sync()
        step["s"] = "graph warmup"
        g.replay()
        self.host_sync()
        step["s"] = "timed replays"
        us = [x / self.a.graph for x in self.back_to_back(self.replays, g.replay)]
        self.host_sync()
        return g, us

    def host_sync(self):
        self.torch.cuda.synchronize()
        self.dist.barrier(device_ids=[self.local])

    # -- rows -------------------------------------------------------------------------------------------------
    def _row_head(self, chunk, addressing, sync, graph, protocol):
        return {"chunk_bytes": chunk, "addressing": addressing, "sync": sync, "graph": graph,
                "graph_iters": self.a.graph if graph else 0, "protocol": protocol}

    def row(self, chunk, addressing, sync, graph, protocol, us, iters, wrong, **extra):
        us = self.max_over_ranks(us)  # per iteration: the slowest rank
        t = time_stats(us)
        r = {**self._row_head(chunk, addressing, sync, graph, protocol), "iters": iters, "samples": len(us),
             "time_us": t, **bandwidths(self.world, chunk, t["p50"]), "wrong": self.sum_over_ranks(wrong)}
        r.update(extra)
        return r

    def error_row(self, chunk, addressing, sync, graph, protocol, msg, **extra):
        r = {**self._row_head(chunk, addressing, sync, graph, protocol), **failed_fields(self.world, chunk, msg)}
        r.update(extra)
        return r

    # -- one system over all chunks -------------------------------------------------------------------------
    def system_meta(self, name):
        """(addressing, sync, graph, protocol) of system `name`'s rows, for its error rows (job.Run knows them)."""
        raise NotImplementedError

    def _one_chunk(self, name, one_chunk, c):
        """(row, None) or (None, error message) of one_chunk(c, step) on this rank."""
        step = {"s": "setup"}
        try:
            return one_chunk(c, step), None
        except Exception as e:  # noqa: BLE001
            err = f"{name}, chunk {fmt_size(c)}, step '{step['s']}': {type(e).__name__}: {e}"
            self.log("FAILED " + err)
            traceback.print_exc(file=sys.stderr)
            try:
                self.torch.cuda.synchronize()
            except Exception:  # noqa: BLE001
                pass
            return None, err

    def system(self, name, one_chunk):
        """Runs one_chunk(chunk) for every chunk; a failure on any rank becomes an error row and the next system
        runs."""
        for c in self.chunks:
            row, err = self._one_chunk(name, one_chunk, c)
            # Every rank must agree before any collective of the next step.
            if self.agree_failed(err is not None):
                self.rows.append(self.error_row(c, *self.system_meta(name), err or f"{name}: failed on another rank"))
            else:
                self.rows.append(row)
                if self.rank == 0:
                    t = row["time_us"]
                    print(f"{name:<11} w{self.world} {fmt_size(c):>8}  p50 {t['p50']:9.2f} us  p95 {t['p95']:9.2f}"
                          f"  total {row['total_bw_gbps']:8.1f} GB/s  samples {row['samples']}  wrong {row['wrong']}",
                          flush=True)

    # -- document ---------------------------------------------------------------------------------------------
    def meta(self, argv):
        torch = self.torch
        me = {"rank": self.rank, "host": socket.gethostname(), "pid": os.getpid(), "device": self.local,
              "device_name": torch.cuda.get_device_name(self.dev),
              "arch": "sm_%d%d" % torch.cuda.get_device_capability(self.dev), "node": 0}
        ranks = [None] * self.world
        self.dist.all_gather_object(ranks, me, group=self.ctrl)
        try:
            nccl = ".".join(map(str, torch.cuda.nccl.version()))
        except Exception:  # noqa: BLE001
            nccl = "unknown"
        try:
            import triton  # noqa: PLC0415
            triton_v = triton.__version__
        except Exception:  # noqa: BLE001
            triton_v = None
        return {"tool": "compare", "version": f"torch {torch.__version__}, nccl {nccl}",
                "torch_version": torch.__version__, "nccl_version": nccl, "triton_version": triton_v,
                "cuda_version": torch.version.cuda, "git_revision": tree_revision(), "argv": argv,
                "time": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "world": self.world, "ranks": ranks, "backend": "gpu", "platform": "cuda", "handle_type": "",
                "driver_version": driver_version(), "runtime_version": "nccl " + nccl, "mps_active": mps_active(),
                "env": envvars.with_prefixes(("NCCL_", "TORCH_SYMM", "TORCH_NCCL", "CUDA_VISIBLE"))}
