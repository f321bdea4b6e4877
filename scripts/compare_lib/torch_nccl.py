# SPDX-License-Identifier: MIT
"""NCCL through torch: dist.all_to_all_single launched from Python each iteration (nccl-eager), and K of them
captured in one CUDA graph (nccl-graph)."""
from .torch_run import GUARD_ELEMS, POISON, TorchRun


class NcclSystems(TorchRun):
    def nccl_buffers(self, c):
        n = c // 4
        send = self.torch.empty(self.world * n, dtype=self.torch.int32, device=self.dev)
        recv_full = self.torch.full((self.world * n + GUARD_ELEMS,), POISON, dtype=self.torch.int32,
                                    device=self.dev)
        return n, send, recv_full, recv_full[: self.world * n]

    def nccl_eager(self, c, step):
        dist = self.dist
        n, send, recv_full, recv = self.nccl_buffers(c)
        step["s"] = "warmup"
        self.fill_send(send, n, self.next_tag())
        for _ in range(max(1, self.a.warmup)):
            dist.all_to_all_single(recv, send)
        self.host_sync()
        step["s"] = "timed iterations"
        us = self.back_to_back(self.a.iters, lambda: dist.all_to_all_single(recv, send))
        self.host_sync()
        step["s"] = "verified iteration"
        wrong = self.verify(n, send, recv_full, lambda: dist.all_to_all_single(recv, send))
        return self.row(c, "nccl", "device", False, "nccl-host", us, self.a.iters, wrong,
                        note="dist.all_to_all_single launched from Python each iteration")

    def nccl_graph(self, c, step):
        dist = self.dist
        n, send, recv_full, recv = self.nccl_buffers(c)
        self.fill_send(send, n, self.next_tag())
        self.host_sync()
        g, us = self.timed_graph(lambda: dist.all_to_all_single(recv, send), step, "capture")
        step["s"] = "verified replay"
        wrong = self.verify(n, send, recv_full, g.replay)
        del g
        return self.row(c, "nccl", "device", True, "nccl-host-graph", us, self.replays * self.a.graph, wrong,
                        note=f"{self.a.graph} all_to_all_single per CUDA graph; a sample is one replay / {self.a.graph}")
