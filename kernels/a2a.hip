// SPDX-License-Identifier: MIT
// One-shot all-to-all over a symmetric window (docs/mori-a2a.md "The contract"). Every rank pushes chunk p of
// its source into rank p's window, slot `me` of the receive buffer of the current parity; then all ranks
// synchronise. Both addressing models from one source:
//   kLsa = 0: the destination base comes from the pointer array, peers[p]
//   kLsa = 1: it is computed, lsa_base + p * stride
// kSync = 1 fuses a device-side barrier over the signal pad into the same kernel.
// device_scope = 1 gives the signals GPU scope instead of system scope: the host asks for it only where every
// rank runs on this GPU (docs/mori-a2a.md "Signal scope"). kEvictFirst = 1 (a2a_ll: source_evict_first = 1)
// marks the source loads evict-first in L2 (docs/mori-a2a.md "Source cache").
//
// Reusable contract: launch n (n = the epoch in the signal pad when it starts) writes receive buffer n & 1.
// A rank starts launch n + 1 only after every peer signalled the end of its launch n, which that peer started
// after its stream-ordered consumer of launch n - 1; so nobody writes a buffer that its owner may still read.
// The epoch is advanced on the device by the last block of each launch, so a captured graph replays
// correctly.
//
// Host runtime: lib/src/a2a/host_engine.cpp runs the same algorithm over the same layout with the same pattern.

// The signal pad (MoriSignalPad), the receive layout (MoriA2aLayout), the mutation ids (MORI_MUTATE_*) and
// the kernel names (MORI_K_*) are the host's too: kernels/abi.hip, which the JIT prepends to this file.

// Status written by a kernel whose bounded wait expired: word 0 = the epoch that launch was completing (never
// 0), word 1 + q = 1 for each rank q it waited for in vain.
//
// A bounded wait's verdict: 0 = wait on; 1 = this launch's bound expired (the caller records the ranks it
// still misses); 2 = an earlier launch of this rank expired, so this one, queued behind it, stops at once and
// names nobody: its misses are the consequence of that timeout (peers that gave up too), not its cause, and
// without the shortcut a rank that never arrives would hold the stream for launches x bound.
__device__ __forceinline__ int mori_wait_verdict(u64 t0, u64 timeout_ns, u32 epoch, u32* status) {
  const u32 mark = epoch ? epoch : 1u;
  const u32 first = *reinterpret_cast<volatile u32*>(status);
  if (first != 0 && first != mark) return 2;
  if (mori_now_ns() - t0 <= timeout_ns) return 0;
  status[0] = mark;
  return 1;
}

// A launch that starts after an earlier launch of this rank timed out sends nothing and waits for nothing
// (its words would land in buffers that peers, slow but alive, may still be reading for an earlier epoch); it
// only advances the epoch. The host reports the timeout once the stream is synchronised. (The copy protocol's
// copies are enqueued by the host and cannot see this: docs/mori-a2a.md "Synchronisation and protocols".)
__device__ __forceinline__ bool mori_abandoned(u32* status) {
  return *reinterpret_cast<volatile u32*>(status) != 0;
}

__device__ __forceinline__ MoriSignalPad* mori_pad(char* base, u64 signal_offset) {
  return reinterpret_cast<MoriSignalPad*>(base + signal_offset);
}

__device__ __forceinline__ char* mori_peer_base(int lsa, void* const* peers, char* lsa_base, u64 stride,
                                                int p) {
  return lsa ? lsa_base + static_cast<u64>(p) * stride : static_cast<char*>(mori_load_ptr_nc(peers + p));
}

// Signal every peer with this rank's epoch, then wait (bounded) until every peer has signalled it. On timeout
// the wait stops, the missing ranks are recorded in `status` and the kernel returns (no trap: under MPS a
// trap would take every client of the GPU down).
template <int kLsa>
__device__ void mori_barrier_signal_wait(void* const* peers, char* lsa_base, u64 stride, int world, int me,
                                         u64 signal_offset, u32 epoch, u64 timeout_ns, u32 mutate,
                                         u32* status, bool dev) {
  MoriSignalPad* mine = mori_pad(mori_peer_base(kLsa, peers, lsa_base, stride, me), signal_offset);
  for (int q = 0; q < world; ++q)
    mori_store_relaxed(&mori_pad(mori_peer_base(kLsa, peers, lsa_base, stride, q), signal_offset)->flags[me],
                       epoch, dev);
  if (mutate & MORI_MUTATE_NO_WAIT) return;
  const u64 t0 = mori_now_ns();
  for (int q = 0; q < world; ++q) {
    while (static_cast<int>(mori_load_acquire(&mine->flags[q], dev) - epoch) < 0) {
      mori_spin_pause();
      const int verdict = mori_wait_verdict(t0, timeout_ns, epoch, status);
      if (verdict == 0) continue;
      if (verdict == 1) status[1 + q] = 1;  // even if its flag lands during the loop below
      if (verdict == 1)
        for (int r = 0; r < world; ++r)
          if (static_cast<int>(mori_load_acquire(&mine->flags[r], dev) - epoch) < 0) status[1 + r] = 1;
      return;
    }
  }
}

// Direct signalling ("direct" protocol): after its stores, every block adds 1 with release semantics to the
// destination's counter for this source (pad word flags[world + source]); the last local block then waits
// until every source's counter has grown by blocks_per_peer since the last launch (flags[2 * world + source]
// keeps that base, local). No system-wide fence on the critical path, and signals overlap other blocks' data.
__device__ void mori_counter_wait(MoriSignalPad* mine, int world, u32 blocks_per_peer, u32 epoch,
                                  u64 timeout_ns, u32 mutate, u32* status, bool dev) {
  const int q = threadIdx.x;
  if (q >= world) return;
  u32* counters = mine->flags + world;
  u32* base = mine->flags + 2 * world;
  const u32 want = base[q] + blocks_per_peer;
  base[q] = want;
  if (mutate & MORI_MUTATE_NO_WAIT) return;
  const u64 t0 = mori_now_ns();
  while (static_cast<int>(mori_load_acquire(&counters[q], dev) - want) < 0) {
    mori_spin_pause();
    const int verdict = mori_wait_verdict(t0, timeout_ns, epoch, status);
    if (verdict == 0) continue;
    if (verdict == 1) status[1 + q] = 1;
    return;
  }
}

// A 16-byte load of the source: evict-first in L2 (kEvictFirst; docs/mori-a2a.md "Source cache") or plain
// read-only.
template <bool kEvictFirst>
__device__ __forceinline__ uint4 mori_load_source(const uint4* p, u64 policy) {
  return kEvictFirst ? mori_load_evict_first(p, policy) : mori_load_nc(p);
}

// Copies one chunk (this block's share: part of blocks_per_peer) from s to dbytes, kUnroll 16-byte loads in
// flight per thread before its stores, evict-first loads with kEvictFirst; the chunk's last (chunk % 16)
// bytes one byte per thread of part 0. Honours the stale (no stores) and overrun (16 bytes past the chunk)
// mutations. (The choice is a template parameter: a runtime branch here cost 2% at 256 KiB,
// results/lab/h200/source-cache/.)
template <int kUnroll, bool kEvictFirst>
__device__ __forceinline__ void mori_copy_chunk(const uint4* s, char* dbytes, u64 chunk, int part,
                                                int blocks_per_peer, u32 mutate) {
  if (mutate & MORI_MUTATE_STALE) return;
  uint4* d = reinterpret_cast<uint4*>(dbytes);
  const u64 n = chunk / 16;
  const u64 step = static_cast<u64>(blocks_per_peer) * blockDim.x;
  const u64 policy = kEvictFirst ? mori_evict_first_policy() : 0;
  u64 i = static_cast<u64>(part) * blockDim.x + threadIdx.x;
  for (; i + (kUnroll - 1) * step < n; i += kUnroll * step) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = mori_load_source<kEvictFirst>(s + i + u * step, policy);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) mori_store_nt(d + i + u * step, v[u]);
  }
  for (; i < n; i += step) mori_store_nt(d + i, mori_load_source<kEvictFirst>(s + i, policy));
  const u64 tail = chunk % 16;
  if (part == 0 && threadIdx.x < tail) {
    const u64 b = n * 16 + threadIdx.x;
    dbytes[b] = reinterpret_cast<const char*>(s)[b];
  }
  if ((mutate & MORI_MUTATE_OVERRUN) && part == 0 && threadIdx.x == 0) {
    uint4 junk;
    junk.x = 1, junk.y = 2, junk.z = 3, junk.w = 4;
    mori_store_nt(reinterpret_cast<uint4*>(dbytes + ((chunk + 15) / 16) * 16), junk);
  }
}

// Test-only (MORI_FAULT a2a.slow-kernel, docs/perf-check.md "A/B"): the calling thread waits `cycles` of the
// counter clock64() reads (the host converts the delay from the device's clock rate), so that each block's
// final signal, and the launch, come that much later. 0 (the fault off): one uniform branch per block. The
// push calls it first thing, where nothing else is live: called before its final signal (after the stores),
// its registers took the ptr host-sync push from 32 to 40 per thread, 3 resident blocks per multiprocessor
// instead of 4, and so a plan of 6 blocks per peer instead of 8 (docs/mori-a2a.md "Replaying a GPU run").
__device__ __forceinline__ void mori_fault_slow(u64 cycles) {
  if (!cycles) return;
  const u64 t0 = static_cast<u64>(clock64());
  while (static_cast<u64>(clock64()) - t0 < cycles) {
  }
}

// Counts this block's arrival; true in the one block that arrives last, after every block of the launch has
// read the epoch and finished its stores. That block then advances the epoch (thread 0).
__device__ __forceinline__ bool mori_arrive_last(MoriSignalPad* mine) {
  __shared__ u32 last;
  __syncthreads();
  if (threadIdx.x == 0) last = mori_atomic_add_device(&mine->arrive, 1u) == gridDim.x - 1;
  __syncthreads();
  if (!last) return false;
  __syncthreads();
  if (threadIdx.x == 0) {
    mine->arrive = 0;
    mine->epoch = mine->epoch + 1;
  }
  return true;
}

// The kernels take their arguments as one struct (kernels/abi.hip) and hand its fields to a body with the
// parameters it always had: after inlining, the compiler sees the same restrict-qualified pointers as before,
// and generates the same code (the same registers and loads).
template <int kLsa, int kSync, int kUnroll, int kDirect, int kEvictFirst>
__device__ __forceinline__ void mori_a2a_push_body(const uint4* __restrict__ src,
                                                   void* const* __restrict__ peers, char* lsa_base,
                                                   u64 stride, int world, int me, MoriA2aLayout L,
                                                   int blocks_per_peer, u64 timeout_ns, u32 mutate,
                                                   u64 slow_cycles, u32* status, int device_scope) {
  mori_grid_wait_previous();
  mori_grid_allow_next();
  if (threadIdx.x == 0) mori_fault_slow(slow_cycles);  // thread 0's stores, and so the block's end, wait
  const bool dev = device_scope != 0;
  const int slot = blockIdx.x / blocks_per_peer;
  const int part = blockIdx.x % blocks_per_peer;
  const int p = (me + slot) % world;  // start with self, then the next ranks: spreads the traffic
  char* peer = mori_peer_base(kLsa, peers, lsa_base, stride, p);
  MoriSignalPad* mine = mori_pad(mori_peer_base(kLsa, peers, lsa_base, stride, me), L.signal_offset);
  const u32 epoch = *reinterpret_cast<volatile u32*>(&mine->epoch);
  const u32 parity = epoch & 1u;
  const bool abandoned = mori_abandoned(status);
  if (!abandoned)
    mori_copy_chunk<kUnroll, kEvictFirst != 0>(src + static_cast<u64>(p) * (L.pitch / 16),
                                               peer + parity * L.region + static_cast<u64>(me) * L.pitch,
                                               L.chunk, part, blocks_per_peer, mutate);
  __syncthreads();
  if (threadIdx.x == 0) {
    if (kSync && kDirect && !abandoned) {
      mori_red_add_release(mori_pad(peer, L.signal_offset)->flags + world + me, 1u, dev);
    } else {
      // This block's stores are ordered before its arrival at GPU scope; the last block's fence at the signal
      // scope then orders every counted block's stores before the flags (causality is transitive across
      // scopes).
      __threadfence();
    }
  }
  if (!mori_arrive_last(mine) || !kSync || abandoned) return;
  if (kDirect) {
    mori_counter_wait(mine, world, static_cast<u32>(blocks_per_peer), epoch + 1u, timeout_ns, mutate, status,
                      dev);
    return;
  }
  if (threadIdx.x != 0) return;
  mori_fence(dev);
  mori_barrier_signal_wait<kLsa>(peers, lsa_base, stride, world, me, L.signal_offset, mine->epoch, timeout_ns,
                                 mutate, status, dev);
}

template <int kLsa, int kSync, int kUnroll, int kDirect, int kEvictFirst>
__global__ void __launch_bounds__(512) MORI_K_A2A_PUSH(const MoriA2aPushArgs a) {
  mori_a2a_push_body<kLsa, kSync, kUnroll, kDirect, kEvictFirst>(
      static_cast<const uint4*>(a.src), a.peers, a.lsa_base, a.stride, a.world, a.me, a.layout,
      a.blocks_per_peer, a.timeout_ns, a.mutate, a.slow_cycles, a.status, a.device_scope);
}

// Low-latency protocol ("ll"; docs/mori-a2a.md "Synchronisation and protocols"). The flag travels in the
// data: each 32-bit word of a chunk goes out as one 64-bit word (flag << 32 | data), flag = the epoch this
// launch completes, and the receiver unpacks a word once its flag is there. An aligned 64-bit relaxed access
// is single-copy atomic, so the word's data comes with its flag: no fence, no counter and no barrier on the
// critical path, at the price of twice the bytes on the link. Block (slot, part) sends its part of the chunk
// for rank me + slot, then receives the same part from rank me - slot (whose block of the same index sends
// it) and writes it into the receive buffer of the current parity, where every consumer reads it as with the
// other protocols. Slot 0 copies the rank's own chunk directly. Staging alternates by parity as the receive
// buffers do: a sender at launch n has received every peer's launch n - 1 words, which that peer sent after
// its launch n - 2, the last reader of this parity, ended. All blocks wait, so the grid must be resident at
// once: the driver keeps world x blocks_per_peer x ranks per device within the multiprocessors.
__device__ __forceinline__ u64 mori_ll_word(u32 data, u32 flag) {
  return (static_cast<u64>(flag) << 32) | data;
}

// A word carries this launch's flag or a later one. Later ones only come from a sender that broke the
// contract (a mutant that skips its wait; a launch queued behind a timeout sends nothing, see
// mori_abandoned); accepting them lets the verification report it instead of a hang. (The signed difference
// holds while epochs stay below 2^31 in one window's life, about 2 x 10^9 launches.)
__device__ __forceinline__ bool mori_ll_reached(u64 word, u32 flag) {
  return static_cast<int>(static_cast<u32>(word >> 32) - flag) >= 0;
}

// Receives groups (4 words each) first, first + step, ... of one source's staging into dst; false when the
// bounded wait expired (status records the source) or another launch already timed out.
__device__ bool mori_ll_receive(const u64* in, char* dst, u64 chunk, u64 groups, u64 first, u64 step,
                                u32 flag, int source, u64 timeout_ns, u32 mutate, u32* status, bool dev) {
  const u64 t0 = mori_now_ns();
  for (u64 g = first; g < groups; g += step) {
    u64 a, b, c, d;
    for (u32 spins = 1;; ++spins) {
      mori_load2_relaxed(in + 4 * g, &a, &b, dev);
      mori_load2_relaxed(in + 4 * g + 2, &c, &d, dev);
      if ((mutate & MORI_MUTATE_NO_WAIT) || (mori_ll_reached(a, flag) && mori_ll_reached(b, flag) &&
                                             mori_ll_reached(c, flag) && mori_ll_reached(d, flag)))
        break;
      if ((spins & 63) == 0) {
        const int verdict = mori_wait_verdict(t0, timeout_ns, flag, status);
        if (verdict == 1) status[1 + source] = 1;
        if (verdict != 0) return false;
      }
    }
    if (mutate & MORI_MUTATE_STALE) continue;
    uint4 v;
    v.x = static_cast<u32>(a), v.y = static_cast<u32>(b), v.z = static_cast<u32>(c),
    v.w = static_cast<u32>(d);
    const u64 off = g * 16;
    if (off + 16 <= chunk) {
      *reinterpret_cast<uint4*>(dst + off) = v;
    } else {
      const char* vb = reinterpret_cast<const char*>(&v);
      for (u64 i = 0; off + i < chunk; ++i) dst[off + i] = vb[i];
    }
  }
  return true;
}

template <int kLsa>
__device__ __forceinline__ void mori_a2a_ll_body(const uint4* __restrict__ src,
                                                 void* const* __restrict__ peers, char* lsa_base, u64 stride,
                                                 int world, int me, MoriA2aLayout L, int blocks_per_peer,
                                                 u64 timeout_ns, u32 mutate, u64 slow_cycles, u32* status,
                                                 int device_scope, int source_evict_first) {
  mori_grid_wait_previous();
  mori_grid_allow_next();
  const bool dev = device_scope != 0;
  const int slot = blockIdx.x / blocks_per_peer;
  const int part = blockIdx.x % blocks_per_peer;
  const int p = (me + slot) % world;          // this block sends to p ...
  const int q = (me + world - slot) % world;  // ... and receives from q
  char* mybase = mori_peer_base(kLsa, peers, lsa_base, stride, me);
  MoriSignalPad* mine = mori_pad(mybase, L.signal_offset);
  const u32 epoch = *reinterpret_cast<volatile u32*>(&mine->epoch);
  const u32 parity = epoch & 1u, flag = epoch + 1u;
  char* recv = mybase + parity * L.region;
  const u64 staging = L.ll_offset + static_cast<u64>(parity) * world * L.ll_pitch;
  if (mori_abandoned(status)) {
    // nothing sent, nothing received: the epoch still advances below
  } else if (slot == 0) {
    const uint4* s = src + static_cast<u64>(me) * (L.pitch / 16);
    char* d = recv + static_cast<u64>(me) * L.pitch;
    if (source_evict_first)
      mori_copy_chunk<4, true>(s, d, L.chunk, part, blocks_per_peer, mutate);
    else
      mori_copy_chunk<4, false>(s, d, L.chunk, part, blocks_per_peer, mutate);
  } else {
    const u64 words = (L.chunk + 3) / 4;
    const u64 groups = words ? (words + 3) / 4 : 1;  // a zero-byte chunk still sends one group: the flags
    const u64 step = static_cast<u64>(blocks_per_peer) * blockDim.x;
    const u64 first = static_cast<u64>(part) * blockDim.x + threadIdx.x;
    const uint4* s = src + static_cast<u64>(p) * (L.pitch / 16);
    u64* out = reinterpret_cast<u64*>(mori_peer_base(kLsa, peers, lsa_base, stride, p) + staging +
                                      static_cast<u64>(me) * L.ll_pitch);
    const u64 policy = source_evict_first ? mori_evict_first_policy() : 0;
    for (u64 g = first; g < groups; g += step) {
      uint4 v;
      v.x = v.y = v.z = v.w = 0;
      if (words) v = source_evict_first ? mori_load_evict_first(s + g, policy) : mori_load_nc(s + g);
      mori_store2_relaxed(out + 4 * g, mori_ll_word(v.x, flag), mori_ll_word(v.y, flag), dev);
      mori_store2_relaxed(out + 4 * g + 2, mori_ll_word(v.z, flag), mori_ll_word(v.w, flag), dev);
    }
    char* dst = recv + static_cast<u64>(q) * L.pitch;
    const u64* in = reinterpret_cast<const u64*>(mybase + staging + static_cast<u64>(q) * L.ll_pitch);
    if (mori_ll_receive(in, dst, L.chunk, groups, first, step, flag, q, timeout_ns, mutate, status, dev) &&
        (mutate & MORI_MUTATE_OVERRUN) && part == 0 && threadIdx.x == 0) {
      uint4 junk;
      junk.x = 1, junk.y = 2, junk.z = 3, junk.w = 4;
      *reinterpret_cast<uint4*>(dst + ((L.chunk + 15) / 16) * 16) = junk;
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    mori_fault_slow(slow_cycles);
    __threadfence();  // this block's reads of the epoch before its arrival
  }
  mori_arrive_last(mine);
}

template <int kLsa>
__global__ void __launch_bounds__(512) MORI_K_A2A_LL(const MoriA2aPushArgs a) {
  mori_a2a_ll_body<kLsa>(static_cast<const uint4*>(a.src), a.peers, a.lsa_base, a.stride, a.world, a.me,
                         a.layout, a.blocks_per_peer, a.timeout_ns, a.mutate, a.slow_cycles, a.status,
                         a.device_scope, a.source_evict_first);
}

// Spins one thread for `ns` nanoseconds: rank skew for the verification (a rank that is late to its push).
__global__ void MORI_K_A2A_DELAY(const MoriA2aDelayArgs a) {
  const u64 ns = a.ns;
  if (threadIdx.x != 0) return;
  const u64 t0 = mori_now_ns();
  while (mori_now_ns() - t0 < ns) mori_spin_pause();
}

// Fills the source for the next launch: slot p, word i = pattern(me, p, i, tag), tag = the epoch that launch
// will complete (read from the pad on the device, so a captured graph gets a new tag each replay).
__device__ __forceinline__ void mori_a2a_fill_body(u32* src, int world, int me, MoriA2aLayout L,
                                                   const u32* epoch) {
  const u32 tag = *reinterpret_cast<const volatile u32*>(epoch) + 1u;
  const u64 words = (L.chunk + 3) / 4, pitch_words = L.pitch / 4;
  const u64 total = words * static_cast<u64>(world);
  for (u64 i = blockIdx.x * static_cast<u64>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<u64>(gridDim.x) * blockDim.x) {
    const u64 p = i / words, w = i % words;
    src[p * pitch_words + w] = mori_pattern(static_cast<u32>(me), static_cast<u32>(p), w, tag);
  }
}

__global__ void MORI_K_A2A_FILL(const MoriA2aFillArgs a) {
  mori_a2a_fill_body(static_cast<u32*>(a.src), a.world, a.me, a.layout, a.epoch);
}

// Counts the bytes of the receive buffer of the last completed launch that differ from what they should hold:
// slot s, byte b < chunk = byte b of pattern(s, me, b / 4, epoch); chunk <= b < pitch = the 0xFF poison.
// Counted per 32-bit word: a word is wrong when any of its bytes is.
__device__ __forceinline__ void mori_a2a_verify_body(const u32* win, int world, int me, MoriA2aLayout L,
                                                     const u32* epoch_ptr, unsigned long long* wrong) {
  const u32 epoch = *reinterpret_cast<const volatile u32*>(epoch_ptr);
  const u32* buf = win + ((epoch - 1u) & 1u) * (L.region / 4);
  const u64 pitch_words = L.pitch / 4;
  const u64 total = pitch_words * static_cast<u64>(world);
  unsigned long long bad = 0;
  for (u64 i = blockIdx.x * static_cast<u64>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<u64>(gridDim.x) * blockDim.x) {
    const u64 s = i / pitch_words, w = i % pitch_words;
    const u32 want = mori_pattern(static_cast<u32>(s), static_cast<u32>(me), w, epoch);
    u32 expect = 0xFFFFFFFFu;
    for (u32 b = 0; b < 4; ++b)
      if (w * 4 + b < L.chunk) expect = (expect & ~(0xFFu << (8 * b))) | (want & (0xFFu << (8 * b)));
    bad += buf[i] != expect;
  }
  if (bad) atomicAdd(wrong, bad);
}

__global__ void MORI_K_A2A_VERIFY(const MoriA2aVerifyArgs a) {
  mori_a2a_verify_body(static_cast<const u32*>(a.win), a.world, a.me, a.layout, a.epoch, a.wrong);
}
