// Peer matrix kernels (mori-probe --matrix): bandwidth and put-with-signal latency between two ranks through a
// symmetric window. kLsa = 0 forms the peer address from the pointer array, kLsa = 1 from base + idx * stride.
// The host runtime runs the same algorithm in C++ (lib/src/matrix.cpp).
//
// Signal pad words used here (each rank's pad, at signal_offset inside its slot):
//   [0] ping: the round the initiator last signalled to this rank    [1] pong: the round the responder last signalled
// Rounds grow over the whole run, so the pads never need resetting between pairs.

template <int kLsa>
__device__ __forceinline__ char* mx_peer(void* const* peers, char* lsa_base, u64 stride, int idx) {
  return kLsa ? lsa_base + stride * static_cast<u64>(idx) : static_cast<char*>(peers[idx]);
}

// read = 0: local -> peer (write bandwidth); read = 1: peer -> local (read bandwidth). n16 = bytes / 16.
template <int kLsa>
__global__ void __launch_bounds__(512) matrix_copy(void* const* peers, char* lsa_base, u64 stride, int idx,
                                                   int read, uint4* local, u64 n16) {
  uint4* remote = reinterpret_cast<uint4*>(mx_peer<kLsa>(peers, lsa_base, stride, idx));
  const uint4* src = read ? remote : local;
  uint4* dst = read ? local : remote;
  const u64 step = static_cast<u64>(gridDim.x) * blockDim.x;
  u64 i = static_cast<u64>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (; i + 3 * step < n16; i += 4 * step) {  // four loads in flight per thread
    uint4 a = src[i], b = src[i + step], c = src[i + 2 * step], d = src[i + 3 * step];
    dst[i] = a;
    dst[i + step] = b;
    dst[i + 2 * step] = c;
    dst[i + 3 * step] = d;
  }
  for (; i < n16; i += step) dst[i] = src[i];
}

// Waits (bounded) until *flag has reached round v; false on timeout.
__device__ __forceinline__ bool mx_wait(const u32* flag, u32 v, u64 t0, u64 timeout_ns) {
  while (static_cast<int>(mori_load_acquire_sys(flag) - v) < 0) {
    if (mori_now_ns() - t0 > timeout_ns) return false;
  }
  return true;
}

// One thread on each side. The initiator puts 8 bytes and a ping signal into the peer's slot and waits for the
// pong; the responder waits for the ping and answers the same way. times[r] = the initiator's round trip (ns).
// result[0] = 0 when every round completed, else the round (1-based) that timed out. No trap: the host reports.
template <int kLsa>
__global__ void matrix_pingpong(void* const* peers, char* lsa_base, u64 stride, int idx, u64 signal_offset,
                                u32* my_pad, int initiator, u32 first_round, u32 rounds, u64 timeout_ns,
                                u64* times, u64* result) {
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
