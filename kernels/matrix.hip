// SPDX-License-Identifier: MIT
// Peer matrix kernels (mori-probe --matrix): bandwidth and put-with-signal latency between two ranks through
// a symmetric window. kLsa = 0 forms the peer address from the pointer array, kLsa = 1 from base + idx *
// stride. The write kernels are selected at run time (docs/mori-probe.md "Peer matrix": --write-kernel). On
// the host runtime a memcpy stands in for the writes and the ping-pong runs in C++ (lib/src/matrix/matrix.cpp).
//
// Signal pad words used here (each rank's pad, at signal_offset inside its slot):
//   [0] ping: the round the initiator last signalled to this rank
//   [1] pong: the round the responder last signalled
// Rounds grow over the whole run, so the pads never need resetting between pairs.

template <int kLsa>
__device__ __forceinline__ char* mx_peer(void* const* peers, char* lsa_base, u64 stride, int idx) {
  return kLsa ? lsa_base + stride * static_cast<u64>(idx) : static_cast<char*>(peers[idx]);
}

template <int kStream>
__device__ __forceinline__ void mx_store(uint4* p, uint4 v) {
  if (kStream)
    mori_store_nt(p, v);
  else
    *p = v;
}

// read = 0: local -> peer (write bandwidth); read = 1: peer -> local (read bandwidth). n16 = bytes / 16.
// kUnroll: 16-byte loads in flight per thread, all issued before the first store; kStream = 1: streaming
// stores (mori_store_nt). The read direction always runs <kLsa, 4, 0>.
// Each kernel takes its struct (kernels/abi.hip) and hands the fields to a body with its former parameters,
// so that the compiled code stays what it was (kernels/a2a.hip says why).
template <int kLsa, int kUnroll, int kStream>
__device__ __forceinline__ void mx_copy_body(void* const* peers, char* lsa_base, u64 stride, int idx,
                                             int read, uint4* local, u64 n16) {
  uint4* remote = reinterpret_cast<uint4*>(mx_peer<kLsa>(peers, lsa_base, stride, idx));
  const uint4* src = read ? remote : local;
  uint4* dst = read ? local : remote;
  const u64 step = static_cast<u64>(gridDim.x) * blockDim.x;
  for (u64 i = static_cast<u64>(blockIdx.x) * blockDim.x + threadIdx.x; i < n16; i += kUnroll * step) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (i + u * step < n16) v[u] = src[i + u * step];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (i + u * step < n16) mx_store<kStream>(dst + i + u * step, v[u]);
  }
}

template <int kLsa, int kUnroll, int kStream>
__global__ void __launch_bounds__(512) MORI_K_MATRIX_COPY(const MoriMatrixCopyArgs a) {
  mx_copy_body<kLsa, kUnroll, kStream>(a.peers, a.lsa_base, a.stride, a.idx, a.read,
                                       static_cast<uint4*>(a.local), a.n16);
}

#if MORI_BULK_COPY
// Bulk-copy write (NVIDIA sm_90 and newer; docs/mori-probe.md "Peer matrix"): block b moves the tiles b,
// b + grid, ... of `tile` bytes (a multiple of 16) from `local` to the peer's slot through two shared-memory
// buffers of `tile` bytes (dynamic shared memory, 2 x tile). Each tile goes to the peer as one bulk copy from
// shared memory, which overlaps the staging of the next tile into the other buffer.
//   kTma = 0: every thread of the block stages the tile with 16-byte loads (launch with 512 threads);
//   kTma = 1: one thread stages it with a bulk copy global -> shared completed on an mbarrier (32 threads).
// Writes are complete (wait_group 0) before the kernel ends, so the event after it times them all.
__device__ __forceinline__ void mx_bulk_by_loads(char* remote, const char* local, u64 bytes, u32 tile,
                                                 char* stage) {
  u32 j = 0;  // tiles this block has handled
  for (u64 t = blockIdx.x; t * tile < bytes; t += gridDim.x, ++j) {
    const u64 off = t * tile;
    const u32 n = bytes - off < tile ? static_cast<u32>(bytes - off) : tile;
    char* buf = stage + (j & 1) * tile;
    // The copy issued from this buffer two tiles ago (one group before the newest) must have read it.
    if (j >= 2 && threadIdx.x == 0) mori_bulk_wait_read<1>();
    __syncthreads();
    const uint4* s = reinterpret_cast<const uint4*>(local + off);
    uint4* d = reinterpret_cast<uint4*>(buf);
#pragma unroll 4
    for (u32 i = threadIdx.x; i < n / 16; i += blockDim.x) d[i] = s[i];
    mori_fence_proxy_async_smem();
    __syncthreads();
    if (threadIdx.x == 0) {
      mori_bulk_store(remote + off, buf, n);
      mori_bulk_commit();
    }
  }
  if (threadIdx.x == 0) mori_bulk_wait_all();
}

__device__ __forceinline__ void mx_bulk_by_tma(char* remote, const char* local, u64 bytes, u32 tile,
                                               char* stage, u64* bar) {
  if (threadIdx.x != 0) return;
  mori_mbar_init(bar + 0, 1);
  mori_mbar_init(bar + 1, 1);
  mori_fence_mbar_init();
  mori_fence_proxy_async_smem();
  const u64 tiles = (bytes + tile - 1) / tile;
  const u64 mine = tiles > blockIdx.x ? (tiles - blockIdx.x + gridDim.x - 1) / gridDim.x : 0;
  auto span = [&](u64 j, u64* off) {  // the block's j-th tile: offset and size
    *off = (blockIdx.x + j * gridDim.x) * tile;
    return bytes - *off < tile ? static_cast<u32>(bytes - *off) : tile;
  };
  auto load = [&](u64 j) {
    u64 off;
    const u32 n = span(j, &off);
    mori_mbar_arrive_expect(bar + (j & 1), n);
    mori_bulk_load(stage + (j & 1) * tile, local + off, n, bar + (j & 1));
  };
  if (mine) load(0);
  for (u64 j = 0; j < mine; ++j) {
    while (!mori_mbar_try_wait(bar + (j & 1), static_cast<u32>(j >> 1) & 1)) {
    }
    u64 off;
    const u32 n = span(j, &off);
    mori_bulk_store(remote + off, stage + (j & 1) * tile, n);
    mori_bulk_commit();
    if (j + 1 < mine) {
      mori_bulk_wait_read<1>();  // the copy out of the other buffer (tile j - 1) has read it
      load(j + 1);
    }
  }
  mori_bulk_wait_all();
}

template <int kLsa, int kTma>
__device__ __forceinline__ void mx_bulk_body(void* const* peers, char* lsa_base, u64 stride, int idx,
                                             const char* local, u64 bytes, u32 tile) {
  extern __shared__ __align__(128) char mx_stage[];
  __shared__ __align__(8) u64 mx_bar[2];
  char* remote = mx_peer<kLsa>(peers, lsa_base, stride, idx);
  if (kTma)
    mx_bulk_by_tma(remote, local, bytes, tile, mx_stage, mx_bar);
  else
    mx_bulk_by_loads(remote, local, bytes, tile, mx_stage);
}

template <int kLsa, int kTma>
__global__ void __launch_bounds__(512) MORI_K_MATRIX_BULK(const MoriMatrixBulkArgs a) {
  mx_bulk_body<kLsa, kTma>(a.peers, a.lsa_base, a.stride, a.idx, static_cast<const char*>(a.local), a.bytes,
                           a.tile);
}
#endif

// Waits (bounded) until *flag has reached round v; false on timeout.
__device__ __forceinline__ bool mx_wait(const u32* flag, u32 v, u64 t0, u64 timeout_ns) {
  while (static_cast<int>(mori_load_acquire_sys(flag) - v) < 0) {
    if (mori_now_ns() - t0 > timeout_ns) return false;
  }
  return true;
}

// One thread on each side. The initiator puts 8 bytes and a ping signal into the peer's slot and waits for
// the pong; the responder waits for the ping and answers the same way. times[r] = the initiator's round trip
// (ns). result[0] = 0 when every round completed, else the round (1-based) that timed out. No trap: the host
// reports.
template <int kLsa>
__device__ __forceinline__ void mx_pingpong_body(void* const* peers, char* lsa_base, u64 stride, int idx,
                                                 u64 signal_offset, u32* my_pad, int initiator,
                                                 u32 first_round, u32 rounds, u64 timeout_ns, u64* times,
                                                 u64* result) {
  char* peer = mx_peer<kLsa>(peers, lsa_base, stride, idx);
  u32* peer_pad = reinterpret_cast<u32*>(peer + signal_offset);
  u64* payload = reinterpret_cast<u64*>(peer);
  result[0] = 0;
  for (u32 r = 0; r < rounds; ++r) {
    const u32 v = first_round + r;
    const u64 t0 = mori_now_ns();
    if (!initiator && !mx_wait(my_pad + 0, v, t0, timeout_ns)) {
      result[0] = r + 1;
      return;
    }
    *payload = v;
    mori_fence_system();
    mori_store_relaxed_sys(peer_pad + (initiator ? 0 : 1), v);
    if (initiator) {
      if (!mx_wait(my_pad + 1, v, t0, timeout_ns)) {
        result[0] = r + 1;
        return;
      }
      times[r] = mori_now_ns() - t0;
    }
  }
}

template <int kLsa>
__global__ void MORI_K_MATRIX_PINGPONG(const MoriMatrixPingpongArgs a) {
  mx_pingpong_body<kLsa>(a.peers, a.lsa_base, a.stride, a.idx, a.signal_offset, a.my_pad, a.initiator,
                         a.first_round, a.rounds, a.timeout_ns, a.times, a.result);
}
