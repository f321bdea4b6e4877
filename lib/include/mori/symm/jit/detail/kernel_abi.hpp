// The host's side of the kernel ABI (docs/layout.md "Kernel ABI"): kernels/abi.hip (the layout, the signal
// pad, the mutation ids, the kernel names, with their compile-time checks) and, in one place, the typed
// launch arguments of every kernel the library launches, in the order of the kernel's parameters.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "abi.hip"  // kernels/abi.hip: the same file the JIT prepends to every kernel source

namespace mori::symm::detail {

// The receive layout the kernels read (kernels/abi.hip MoriA2aLayout): one type on both sides.
using A2aLayout = ::MoriA2aLayout;
static_assert(sizeof(A2aLayout) == MORI_A2A_LAYOUT_BYTES);

// The instantiation names that the catalog compiles and the engines look up (one builder each).
std::string a2a_push_name(bool lsa, bool sync, int unroll, bool direct, bool evict_first);
std::string a2a_ll_name(bool lsa);
std::string matrix_copy_name(bool lsa, int unroll, bool stream);
std::string matrix_bulk_name(bool lsa, bool tma);
std::string matrix_pingpong_name(bool lsa);
inline const char* a2a_fill_name() {
  return MORI_KERNEL_NAME(MORI_K_A2A_FILL);
}
inline const char* a2a_verify_name() {
  return MORI_KERNEL_NAME(MORI_K_A2A_VERIFY);
}
inline const char* a2a_delay_name() {
  return MORI_KERNEL_NAME(MORI_K_A2A_DELAY);
}

// Launch arguments, one struct per kernel, fields in the kernel's parameter order (kernels/a2a.hip,
// kernels/matrix.hip); args() is the array Runtime::launch takes. The kernel's u64 is 8 bytes and its int and
// u32 4, as the static_asserts below hold.
static_assert(sizeof(std::uint64_t) == sizeof(unsigned long long) && sizeof(int) == 4);

// a2a_push and a2a_ll: a2a_push reads the first 13 (its cache policy is a template argument), a2a_ll all 14.
// slow_cycles is test-only (MORI_FAULT a2a.slow-kernel; 0 = off): clock64() cycles each block waits before
// its final signal.
struct A2aPushArgs {
  const void* src = nullptr;
  void* const* peers = nullptr;
  char* lsa_base = nullptr;
  std::uint64_t stride = 0;
  int world = 1, me = 0;
  A2aLayout layout{};
  int blocks_per_peer = 1;
  std::uint64_t timeout_ns = 0;
  std::uint32_t mutate = 0;
  std::uint64_t slow_cycles = 0;
  void* status = nullptr;
  int device_scope = 0;
  int source_evict_first = 0;
  std::array<void*, 14> args() {
    return {&src,          &peers,
            &lsa_base,     &stride,
            &world,        &me,
            &layout,       &blocks_per_peer,
            &timeout_ns,   &mutate,
            &slow_cycles,  &status,
            &device_scope, &source_evict_first};
  }
};

// a2a_fill(src, world, me, L, epoch)
struct A2aFillArgs {
  void* src = nullptr;
  int world = 1, me = 0;
  A2aLayout layout{};
  const void* epoch = nullptr;
  std::array<void*, 5> args() { return {&src, &world, &me, &layout, &epoch}; }
};

// a2a_verify(win, world, me, L, epoch, out)
struct A2aVerifyArgs {
  const void* win = nullptr;
  int world = 1, me = 0;
  A2aLayout layout{};
  const void* epoch = nullptr;
  void* out = nullptr;
  std::array<void*, 6> args() { return {&win, &world, &me, &layout, &epoch, &out}; }
};

// a2a_delay(ns)
struct A2aDelayArgs {
  std::uint64_t ns = 0;
  std::array<void*, 1> args() { return {&ns}; }
};

// matrix_copy(peers, lsa_base, stride, idx, read, local, n16)
struct MatrixCopyArgs {
  void* const* peers = nullptr;
  char* lsa_base = nullptr;
  std::uint64_t stride = 0;
  int idx = 0, read = 0;
  void* local = nullptr;
  std::uint64_t n16 = 0;
  std::array<void*, 7> args() { return {&peers, &lsa_base, &stride, &idx, &read, &local, &n16}; }
};

// matrix_bulk(peers, lsa_base, stride, idx, local, bytes, tile)
struct MatrixBulkArgs {
  void* const* peers = nullptr;
  char* lsa_base = nullptr;
  std::uint64_t stride = 0;
  int idx = 0;
  const void* local = nullptr;
  std::uint64_t bytes = 0;
  std::uint32_t tile = 0;
  std::array<void*, 7> args() { return {&peers, &lsa_base, &stride, &idx, &local, &bytes, &tile}; }
};

// matrix_pingpong(peers, lsa_base, stride, idx, signal_offset, my_pad, initiator, first_round, rounds,
// timeout_ns, times, result)
struct MatrixPingpongArgs {
  void* const* peers = nullptr;
  char* lsa_base = nullptr;
  std::uint64_t stride = 0;
  int idx = 0;
  std::uint64_t signal_offset = 0;
  void* my_pad = nullptr;
  int initiator = 0;
  std::uint32_t first_round = 0, rounds = 0;
  std::uint64_t timeout_ns = 0;
  void* times = nullptr;
  void* result = nullptr;
  std::array<void*, 12> args() {
    return {&peers,     &lsa_base,    &stride, &idx,        &signal_offset, &my_pad,
            &initiator, &first_round, &rounds, &timeout_ns, &times,         &result};
  }
};

}  // namespace mori::symm::detail
