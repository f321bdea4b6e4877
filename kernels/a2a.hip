// One-shot all-to-all over a symmetric window: every rank pushes chunk p of its source into rank p's window at
// offset me * chunk. Both addressing models from one source:
//   kLsa = 0: the destination base comes from the pointer array, peers[p]
//   kLsa = 1: it is computed, lsa_base + p * stride
// kSync = 1 fuses a device-side barrier over the signal pad into the same kernel: the last block to finish
// signals every peer and waits (bounded) until every peer has signalled it. Flags carry an epoch advanced on
// the device, so a captured graph replays correctly.

// Signal pad layout (per rank, at signal_offset inside its slot).
struct MoriSignalPad {
  u32 arrive;  // blocks of the current launch that finished their stores (reset by the last one)
  u32 epoch;   // launches completed by this rank
  u32 pad[30];
  u32 flags[1];  // flags[q] = the epoch rank q last signalled to this rank (world entries)
};

__device__ __forceinline__ char* mori_peer_base(int lsa, void* const* peers, char* lsa_base, u64 stride, int p) {
  return lsa ? lsa_base + static_cast<u64>(p) * stride : static_cast<char*>(peers[p]);
}

template <int kLsa, int kSync, int kUnroll>
__global__ void __launch_bounds__(512) a2a_push(const uint4* __restrict__ src, void* const* __restrict__ peers,
                                                char* lsa_base, u64 stride, int world, int me, u64 chunk_bytes,
                                                int blocks_per_peer, u64 signal_offset, u64 timeout_ns) {
  const int slot = blockIdx.x / blocks_per_peer;
  const int part = blockIdx.x % blocks_per_peer;
  const int p = (me + slot) % world;  // start with self, then the next ranks: spreads the traffic
  const u64 n = chunk_bytes / 16;
  const uint4* s = src + static_cast<u64>(p) * n;
  uint4* d = reinterpret_cast<uint4*>(mori_peer_base(kLsa, peers, lsa_base, stride, p) +
                                      static_cast<u64>(me) * chunk_bytes);
  const u64 step = static_cast<u64>(blocks_per_peer) * blockDim.x;
  u64 i = static_cast<u64>(part) * blockDim.x + threadIdx.x;
  // kUnroll loads in flight before the stores.
  for (; i + (kUnroll - 1) * step < n; i += kUnroll * step) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = mori_load_nc(s + i + u * step);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) mori_store_nt(d + i + u * step, v[u]);
  }
  for (; i < n; i += step) mori_store_nt(d + i, mori_load_nc(s + i));

  if (kSync) {
    __syncthreads();
    if (threadIdx.x != 0) return;
    MoriSignalPad* mine = reinterpret_cast<MoriSignalPad*>(mori_peer_base(kLsa, peers, lsa_base, stride, me) +
                                                           signal_offset);
    mori_fence_system();  // this block's stores are visible everywhere before it counts as arrived
    if (mori_atomic_add_device(&mine->arrive, 1u) != gridDim.x - 1) return;
    // Last block of this launch: every block's stores are done and fenced.
    mine->arrive = 0;
    const u32 epoch = mine->epoch + 1;
    mine->epoch = epoch;
    // One system-scope fence orders every block's stores (each fenced and counted above) before all the flags;
    // a release per flag would pay that fence world times (measured: ~2.5 us per rank on the H200).
    mori_fence_system();
    for (int q = 0; q < world; ++q) {
      MoriSignalPad* peer =
          reinterpret_cast<MoriSignalPad*>(mori_peer_base(kLsa, peers, lsa_base, stride, q) + signal_offset);
      mori_store_relaxed_sys(&peer->flags[me], epoch);
    }
    const u64 t0 = mori_now_ns();
    for (int q = 0; q < world; ++q) {
      while (static_cast<int>(mori_load_acquire_sys(&mine->flags[q]) - epoch) < 0) {
        mori_spin_pause();
        if (mori_now_ns() - t0 > timeout_ns) {
          for (int r = 0; r < world; ++r)
            if (static_cast<int>(mori_load_acquire_sys(&mine->flags[r]) - epoch) < 0)
              printf("mori a2a device barrier: rank %d timed out after %llu ns waiting for rank %d (epoch %u)\n", me,
                     timeout_ns, r, epoch);
          mori_trap();
        }
      }
    }
  }
}

// Fills the source: element (p, word) = pattern(me, p, word).
__global__ void a2a_fill(u32* src, int world, int me, u64 chunk_bytes) {
  const u64 words = chunk_bytes / 4;
  const u64 total = words * static_cast<u64>(world);
  for (u64 i = blockIdx.x * static_cast<u64>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<u64>(gridDim.x) * blockDim.x)
    src[i] = mori_pattern(static_cast<u32>(me), static_cast<u32>(i / words), i % words);
}

// Counts the words of the local window that differ from what source rank (i / words) should have written.
__global__ void a2a_verify(const u32* win, int world, int me, u64 chunk_bytes, u64* wrong) {
  const u64 words = chunk_bytes / 4;
  const u64 total = words * static_cast<u64>(world);
  u64 bad = 0;
  for (u64 i = blockIdx.x * static_cast<u64>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<u64>(gridDim.x) * blockDim.x)
    bad += win[i] != mori_pattern(static_cast<u32>(i / words), static_cast<u32>(me), i % words);
  if (bad) atomicAdd(wrong, bad);
}
