# SPDX-License-Identifier: MIT
"""torch SymmetricMemory: a Triton kernel pushes chunk p into peer p's symmetric buffer through the handle's
pointer array, then the handle's device barrier, K of them in one CUDA graph (symm-graph); or the same push, then
torch.cuda.synchronize() + dist.barrier() (symm-host). Where the kernel cannot run: one copy_ per peer, said so."""
import time

from .torch_run import GUARD_ELEMS, POISON, TorchRun


class _TritonLanguageStub:
    constexpr = "constexpr"  # the annotation below must evaluate without Triton (tests import this file)


tl = _TritonLanguageStub()  # rebound to triton.language when the push kernel is first needed


def _symm_push_src(send_ptr, ptrs_ptr, n, dst_off, nblk, BLOCK: tl.constexpr):
    # Program (peer p, block b) copies its slice of chunk p of the local send buffer into peer p's symmetric
    # buffer at element offset dst_off = rank * n; the peers' bases come from a device int64 array.
    p = tl.program_id(0)
    b = tl.program_id(1)
    base = tl.load(ptrs_ptr + p).to(tl.pointer_type(tl.int32))
    src = send_ptr + p.to(tl.int64) * n
    dst = base + dst_off
    for start in range(b * BLOCK, n, nblk * BLOCK):
        offs = start + tl.arange(0, BLOCK)
        m = offs < n
        tl.store(dst + offs, tl.load(src + offs, mask=m), mask=m)


_PUSH_KERNEL = None


def push_kernel():
    global tl, _PUSH_KERNEL
    if _PUSH_KERNEL is None:
        import triton  # noqa: PLC0415
        import triton.language as tl_mod  # noqa: PLC0415
        tl = tl_mod
        _symm_push_src.__annotations__["BLOCK"] = tl_mod.constexpr
        _PUSH_KERNEL = triton.jit(_symm_push_src)
    return _PUSH_KERNEL


class SymmSystems(TorchRun):
    def symm_protocol(self, sync):
        """"ptr-array-push" (the Triton kernel), or "copy-per-peer" where it could not run; the sync is in `sync`."""
        kind = "copy-per-peer" if getattr(self, "symm_copy", None) else "ptr-array-push"
        return kind + ("+entry-barrier" if sync == "device" and self.a.symm_entry_barrier else "")

    def symm_setup(self):
        """One symmetric buffer for the largest chunk (plus the guard), rendezvoused once."""
        if getattr(self, "symm_buf", None) is not None:
            return
        if getattr(self, "symm_setup_error", None):
            raise RuntimeError(f"symmetric buffer setup failed before: {self.symm_setup_error}")
        try:
            self._symm_setup()
        except Exception as e:
            self.symm_setup_error = f"{type(e).__name__}: {e}"
            raise

    def _symm_setup(self):
        torch = self.torch
        import torch.distributed._symmetric_memory as symm_mem  # noqa: PLC0415
        self.symm_mem = symm_mem
        elems = self.world * (max(self.chunks) // 4) + GUARD_ELEMS
        buf = symm_mem.empty(elems, dtype=torch.int32, device=self.dev)
        hdl = symm_mem.rendezvous(buf, self.dist.group.WORLD.group_name)
        if hdl is None:
            raise RuntimeError("symm_mem.rendezvous returned None")
        ptrs = [int(x) for x in hdl.buffer_ptrs]
        # If the handle's pointers are segment bases, the tensor's offset in its segment is the same on every rank.
        off = buf.data_ptr() - ptrs[self.rank]
        bad = 1 if off < 0 or off % 4 or len(ptrs) != self.world else 0
        offs = self.torch.tensor([off, -off, bad], dtype=self.torch.int64)
        self.dist.all_reduce(offs, op=self.dist.ReduceOp.MAX, group=self.ctrl)  # every rank takes the same branch
        if int(offs[2]) or int(offs[0]) != -int(offs[1]):
            raise RuntimeError(f"hdl.buffer_ptrs ({len(ptrs)} of them; mine {ptrs[self.rank]:#x}) vs the tensor's "
                               f"data_ptr {buf.data_ptr():#x}: offset {off} here, not the same valid offset on "
                               "every rank")
        self.symm_off_elems = off // 4
        self.symm_ptrs = torch.tensor([x + off for x in ptrs], dtype=torch.int64, device=self.dev)
        self.symm_buf, self.symm_hdl = buf, hdl
        try:
            self.symm_backend = symm_mem.get_backend(self.dev)
        except Exception:  # noqa: BLE001
            self.symm_backend = None
        self.symm_copy = None  # decided by the first push: Triton kernel, else copy-per-peer
        self.symm_copy_reason = None

    def symm_push_fn(self, send, n):
        """The push for chunk n elements: the Triton pointer-array kernel, else per-peer copy_ (said in the row)."""
        hdl, world, rank = self.symm_hdl, self.world, self.rank
        if self.symm_copy is None:
            try:
                k = push_kernel()
                grid = (world, self.a.blocks_per_peer)
                k[grid](send, self.symm_ptrs, n, rank * n, self.a.blocks_per_peer, BLOCK=4096, num_warps=8)
                self.torch.cuda.synchronize()
                self.symm_copy = False
            except Exception as e:  # noqa: BLE001
                self.symm_copy = True
                self.symm_copy_reason = f"Triton push kernel failed ({type(e).__name__}: {e}); per-peer copy_"
                self.log("torch-symm: " + self.symm_copy_reason)
            # both ranks must use the same protocol
            if self.agree_failed(self.symm_copy):
                self.symm_copy = True
                self.symm_copy_reason = self.symm_copy_reason or "Triton push kernel failed on another rank"
            self.host_sync()
        if not self.symm_copy:
            k = push_kernel()
            grid = (world, self.a.blocks_per_peer)
            nb = self.a.blocks_per_peer
            return lambda: k[grid](send, self.symm_ptrs, n, rank * n, nb, BLOCK=4096, num_warps=8)
        off = self.symm_off_elems
        dsts = [hdl.get_buffer(p, (n,), self.torch.int32, off + rank * n) for p in range(world)]
        srcs = [send[p * n:(p + 1) * n] for p in range(world)]

        def copy():
            for d, s in zip(dsts, srcs):
                d.copy_(s)
        return copy

    def symm_prepare(self, c, step):
        step["s"] = "symmetric buffer (symm_mem.empty + rendezvous)"
        self.symm_setup()
        n = c // 4
        send = self.torch.empty(self.world * n, dtype=self.torch.int32, device=self.dev)
        self.fill_send(send, n, self.next_tag())
        recv_full = self.symm_buf[: self.world * n + GUARD_ELEMS]
        step["s"] = "push kernel"
        push = self.symm_push_fn(send, n)
        return n, send, recv_full, push

    def symm_verify(self, n, send, recv_full, run_once):
        # the receive area is my window: poisoned while no peer writes into it
        return self.verify(n, send, recv_full, run_once, sync_before_poison=True)

    def symm_extra(self):
        e = {"blocks_per_peer": 0 if self.symm_copy else self.a.blocks_per_peer, "symm_backend": self.symm_backend}
        if self.symm_copy_reason:
            e["note"] = self.symm_copy_reason
        return e

    def symm_graph(self, c, step):
        n, send, recv_full, push = self.symm_prepare(c, step)
        hdl, entry = self.symm_hdl, self.a.symm_entry_barrier

        def body():
            if entry:
                hdl.barrier(channel=1)
            push()
            hdl.barrier(channel=0)
        step["s"] = "eager push + hdl.barrier()"
        body()
        self.host_sync()
        g, us = self.timed_graph(body, step, "capture (push + hdl.barrier())")
        step["s"] = "verified replay"
        wrong = self.symm_verify(n, send, recv_full, g.replay)
        del g
        return self.row(c, "torch-symm", "device", True, self.symm_protocol("device"), us,
                        self.replays * self.a.graph, wrong, **self.symm_extra())

    def symm_host(self, c, step):
        n, send, recv_full, push = self.symm_prepare(c, step)
        step["s"] = "warmup"
        for _ in range(max(1, self.a.warmup)):
            push()
            self.host_sync()
        step["s"] = "timed iterations"
        us = []
        for _ in range(self.a.iters):
            t0 = time.perf_counter()
            push()
            self.host_sync()
            us.append((time.perf_counter() - t0) * 1e6)
        step["s"] = "verified iteration"

        def once():
            push()
            self.host_sync()
        wrong = self.symm_verify(n, send, recv_full, once)
        return self.row(c, "torch-symm", "host", False, self.symm_protocol("host"), us, self.a.iters, wrong,
                        **self.symm_extra(),
                        timing="wall time from the push's launch to the end of torch.cuda.synchronize() + "
                               "dist.barrier()")
