// SPDX-License-Identifier: MIT
// Device prelude: the few platform differences, so one kernel source compiles with NVRTC and hiprtc.
// Prepended to every kernel file by the JIT (and hashed into its cache key). No includes: the runtime
// compilers ship no standard headers.
#pragma once

typedef unsigned int u32;
typedef unsigned long long u64;

#if defined(MORI_KERNEL_PLATFORM_cuda)
// ---- NVIDIA (NVRTC) ------------------------------------------------------------------------------------------
#define MORI_WAVE_SIZE 32
extern "C" __device__ int printf(const char*, ...);
__device__ __forceinline__ u64 mori_now_ns() {
  u64 t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
// Signals at one of two memory scopes, chosen per launch by the host (docs/mori-a2a.md "Signal scope"):
// system (`dev` false: peers on other devices) or device (`dev` true: every rank's kernel runs on this GPU,
// ranks sharing it under MPS; why that holds is the hardware's one L2, not the PTX model). The branch is uniform.
__device__ __forceinline__ void mori_fence(bool dev) {
  if (dev)
    __threadfence();
  else
    __threadfence_system();
}
__device__ __forceinline__ void mori_fence_system() { mori_fence(false); }
__device__ __forceinline__ u32 mori_load_acquire(const u32* p, bool dev) {
  u32 v;
  if (dev)
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  else
    asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ u32 mori_load_acquire_sys(const u32* p) { return mori_load_acquire(p, false); }
// Store with no ordering of its own: for flags written right after one mori_fence(), which already orders
// every earlier write before them (one fence instead of one release per flag).
__device__ __forceinline__ void mori_store_relaxed(u32* p, u32 v, bool dev) {
  if (dev)
    asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
  else
    asm volatile("st.relaxed.sys.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ void mori_store_relaxed_sys(u32* p, u32 v) { mori_store_relaxed(p, v, false); }
__device__ __forceinline__ u32 mori_atomic_add_device(u32* p, u32 v) { return atomicAdd(p, v); }
// Adds with release semantics: every earlier write of this thread (and what it observed) is visible to whoever
// observes the addition at that scope.
__device__ __forceinline__ void mori_red_add_release(u32* p, u32 v, bool dev) {
  if (dev)
    asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
  else
    asm volatile("red.release.sys.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
// Two 64-bit words with relaxed semantics. The memory model treats a vector access as one access per element,
// and an aligned 64-bit relaxed access is single-copy atomic: a reader sees each word whole, old or new (the
// low-latency protocol in kernels/a2a.hip relies on exactly this, and on nothing about wider accesses).
__device__ __forceinline__ void mori_store2_relaxed(u64* p, u64 a, u64 b, bool dev) {
  if (dev)
    asm volatile("st.relaxed.gpu.global.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(a), "l"(b) : "memory");
  else
    asm volatile("st.relaxed.sys.global.v2.u64 [%0], {%1, %2};" ::"l"(p), "l"(a), "l"(b) : "memory");
}
__device__ __forceinline__ void mori_load2_relaxed(const u64* p, u64* a, u64* b, bool dev) {
  if (dev)
    asm volatile("ld.relaxed.gpu.global.v2.u64 {%0, %1}, [%2];" : "=l"(*a), "=l"(*b) : "l"(p) : "memory");
  else
    asm volatile("ld.relaxed.sys.global.v2.u64 {%0, %1}, [%2];" : "=l"(*a), "=l"(*b) : "l"(p) : "memory");
}
// Streaming (evict-first) 16-byte store: the data is not read again by this kernel.
__device__ __forceinline__ void mori_store_nt(uint4* p, uint4 v) { __stcs(p, v); }
__device__ __forceinline__ uint4 mori_load_nc(const uint4* p) { return __ldg(p); }
// A pointer from a read-only table (the window's peer pointers) through the read-only path, as the compiler
// did by itself while the table was a restrict-qualified kernel parameter (kernels/abi.hip: now a field).
__device__ __forceinline__ void* mori_load_ptr_nc(void* const* p) {
  return reinterpret_cast<void*>(__ldg(reinterpret_cast<const unsigned long long*>(p)));
}
// Read-only 16-byte load marked evict-first in L2 with `policy` (mori_evict_first_policy): for sources this
// launch reads once and that cannot stay in L2 for the next one anyway (docs/mori-a2a.md "Source cache").
// createpolicy and L2 cache hints need sm_80; before that the policy is 0 and this is mori_load_nc.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
__device__ __forceinline__ u64 mori_evict_first_policy() {
  u64 policy;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}
__device__ __forceinline__ uint4 mori_load_evict_first(const uint4* p, u64 policy) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p), "l"(policy));
  return v;
}
#else
__device__ __forceinline__ u64 mori_evict_first_policy() { return 0; }
__device__ __forceinline__ uint4 mori_load_evict_first(const uint4* p, u64) { return __ldg(p); }
#endif
__device__ __forceinline__ void mori_trap() { __trap(); }
// Back-off inside bounded spin loops, so that spinning blocks leave memory bandwidth to the others.
__device__ __forceinline__ void mori_spin_pause() { __nanosleep(32); }
// Programmatic dependent launch (sm_90 and newer): a kernel launched with Runtime::launch_overlapping may start
// while its predecessor on the stream still runs; mori_grid_wait_previous returns once that predecessor has
// completed and its memory operations are visible, exactly what stream order gives, so it must come before
// anything else. mori_grid_allow_next lets the successor start launching (it waits the same way).
__device__ __forceinline__ void mori_grid_wait_previous() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void mori_grid_allow_next() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
// ---- sm_90 and newer: the Tensor Memory Accelerator's non-tensor bulk copies (PTX ISA, cp.async.bulk) ---
// Sizes and addresses are multiples of 16 bytes. MORI_BULK_COPY is 1 only here; the JIT instantiates the
// kernels that use these only for such archs (arch_has_bulk_copy, lib/include/mori/symm/jit/jit.hpp).
#define MORI_BULK_COPY 1
__device__ __forceinline__ u32 mori_smem(const void* p) {
  return static_cast<u32>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mori_mbar_init(u64* bar, u32 arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(mori_smem(bar)), "r"(arrivals) : "memory");
}
// Makes this thread's generic-proxy writes to shared memory (data, or a barrier's initialisation) visible to
// the bulk copies it issues afterwards.
__device__ __forceinline__ void mori_fence_proxy_async_smem() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
__device__ __forceinline__ void mori_fence_mbar_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
// Arrives on the barrier and expects `bytes` more to be completed on it by bulk copies.
__device__ __forceinline__ void mori_mbar_arrive_expect(u64* bar, u32 bytes) {
  asm volatile(
      "{\n .reg .b64 st;\n mbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n}" ::"r"(mori_smem(bar)),
      "r"(bytes)
      : "memory");
}
__device__ __forceinline__ bool mori_mbar_try_wait(u64* bar, u32 parity) {
  u32 done;
  asm volatile(
      "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
      : "=r"(done)
      : "r"(mori_smem(bar)), "r"(parity)
      : "memory");
  return done != 0;
}
// global -> shared, completed on `bar` (tx bytes). A block's own shared memory is a valid shared::cluster
// address.
__device__ __forceinline__ void mori_bulk_load(void* smem, const void* gmem, u32 bytes, u64* bar) {
  const u32 dst = mori_smem(smem), b = mori_smem(bar);
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
      "l"(gmem), "r"(bytes), "r"(b)
      : "memory");
}
// shared -> global (peer memory included), tracked by bulk groups: commit, then wait.
__device__ __forceinline__ void mori_bulk_store(void* gmem, const void* smem, u32 bytes) {
  const u32 src = mori_smem(smem);
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(gmem), "r"(src), "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mori_bulk_commit() {
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}
// Until at most kPending committed groups still read their shared-memory source.
template <int kPending>
__device__ __forceinline__ void mori_bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(kPending) : "memory");
}
// Until every committed group has completed, its writes included.
__device__ __forceinline__ void mori_bulk_wait_all() {
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}
#endif
#elif defined(MORI_KERNEL_PLATFORM_amd)
// ---- AMD (hiprtc) ---------------------------------------------------------------------------------------------
// 64 on CDNA (gfx9), 32 on RDNA. No kernel uses it (docs/amd.md "The 64-lane wavefront"; scripts/amd-wave-check):
// warpSize is not a compile-time constant in newer ROCm, so it must not size an array or a template argument.
#define MORI_WAVE_SIZE warpSize
// The rate of wall_clock64(): the JIT passes the device's (hipDeviceAttributeWallClockRate) where it is
// known and not 100 MHz, the rate documented for gfx90a and gfx942 (docs/amd.md, `%globaltimer`).
#ifndef MORI_WALLCLOCK_HZ
#define MORI_WALLCLOCK_HZ 100000000ull
#endif
#if MORI_WALLCLOCK_HZ == 0
#error "MORI_WALLCLOCK_HZ must not be 0"
#endif
#if 1000000000ull % MORI_WALLCLOCK_HZ == 0
// A rate that divides 1 GHz (100 MHz, 25 MHz): one multiplication.
__device__ __forceinline__ u64 mori_now_ns() { return wall_clock64() * (1000000000ull / MORI_WALLCLOCK_HZ); }
#else
// Any other rate (37.5 MHz, 1.6 GHz): whole seconds and the remainder apart, so exact to the nanosecond and
// without overflow for centuries of uptime (the remainder times 1e9 stays below 1e19 up to 10 GHz).
__device__ __forceinline__ u64 mori_now_ns() {
  const u64 t = static_cast<u64>(wall_clock64());
  const u64 s = t / MORI_WALLCLOCK_HZ, rest = t % MORI_WALLCLOCK_HZ;
  return s * 1000000000ull + rest * 1000000000ull / MORI_WALLCLOCK_HZ;
}
#endif
// AMD keeps system scope whatever `dev` says: device scope there was never measured (docs/mori-a2a.md
// "Signal scope").
__device__ __forceinline__ void mori_fence(bool) { __threadfence_system(); }
__device__ __forceinline__ void mori_fence_system() { __threadfence_system(); }
__device__ __forceinline__ u32 mori_load_acquire(const u32* p, bool) {
  return __hip_atomic_load(p, __ATOMIC_ACQUIRE, __HIP_MEMORY_SCOPE_SYSTEM);
}
__device__ __forceinline__ u32 mori_load_acquire_sys(const u32* p) { return mori_load_acquire(p, false); }
__device__ __forceinline__ void mori_store_relaxed(u32* p, u32 v, bool) {
  __hip_atomic_store(p, v, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
}
__device__ __forceinline__ void mori_store_relaxed_sys(u32* p, u32 v) { mori_store_relaxed(p, v, false); }
__device__ __forceinline__ u32 mori_atomic_add_device(u32* p, u32 v) { return atomicAdd(p, v); }
__device__ __forceinline__ void mori_red_add_release(u32* p, u32 v, bool) {
  __hip_atomic_fetch_add(p, v, __ATOMIC_RELEASE, __HIP_MEMORY_SCOPE_SYSTEM);
}
__device__ __forceinline__ void mori_store2_relaxed(u64* p, u64 a, u64 b, bool) {
  __hip_atomic_store(p, a, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
  __hip_atomic_store(p + 1, b, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
}
__device__ __forceinline__ void mori_load2_relaxed(const u64* p, u64* a, u64* b, bool) {
  *a = __hip_atomic_load(p, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
  *b = __hip_atomic_load(p + 1, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_SYSTEM);
}
__device__ __forceinline__ void mori_store_nt(uint4* p, uint4 v) {
  __builtin_nontemporal_store(v.x, &p->x);
  __builtin_nontemporal_store(v.y, &p->y);
  __builtin_nontemporal_store(v.z, &p->z);
  __builtin_nontemporal_store(v.w, &p->w);
}
__device__ __forceinline__ uint4 mori_load_nc(const uint4* p) { return *p; }
__device__ __forceinline__ void* mori_load_ptr_nc(void* const* p) { return *p; }
// No cache hint here: the host never asks for one on AMD (docs/mori-a2a.md "Source cache").
__device__ __forceinline__ u64 mori_evict_first_policy() { return 0; }
__device__ __forceinline__ uint4 mori_load_evict_first(const uint4* p, u64) { return *p; }
__device__ __forceinline__ void mori_trap() { __builtin_trap(); }
__device__ __forceinline__ void mori_spin_pause() { __builtin_amdgcn_s_sleep(1); }
__device__ __forceinline__ void mori_grid_wait_previous() {}  // no overlapping launches here
__device__ __forceinline__ void mori_grid_allow_next() {}
#else
#error "compile with -DMORI_KERNEL_PLATFORM_cuda or -DMORI_KERNEL_PLATFORM_amd"
#endif
#ifndef MORI_BULK_COPY
#define MORI_BULK_COPY 0  // AMD, and NVIDIA before sm_90: no bulk copies
#endif

// The verification pattern: unique per (source rank, destination rank, 32-bit word, iteration tag), top bit
// clear so that it never equals the 0xFFFFFFFF poison. lib/src/a2a/host_engine.cpp computes the same function.
__device__ __forceinline__ u32 mori_pattern(u32 src, u32 dst, u64 word, u32 tag) {
  u64 x = (static_cast<u64>(src) << 48) ^ (static_cast<u64>(dst) << 32) ^ word;
  x ^= static_cast<u64>(tag) * 0x9e3779b97f4a7c15ull;
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return static_cast<u32>(x) & 0x7fffffffu;
}
