// SPDX-License-Identifier: MIT
/* The ABI between the host C++ and the JIT-compiled kernels (docs/layout.md "Kernel ABI"): the all-to-all's
 * receive layout and signal pad, the verification's mutation ids, every kernel's launch arguments, and the
 * kernels' names. One file, plain
 * C-compatible, no includes (the runtime compilers ship no standard headers). The JIT prepends it to every
 * kernel source after kernels/prelude.hip, so it is part of every kernel's cache key; the host includes it
 * (lib/include/mori/symm/jit/detail/kernel_abi.hpp). The static_asserts at the end check it on both sides. Named
 * .hip like the prelude, so that every copy and install of the kernel sources carries it. */
#ifndef MORI_KERNEL_ABI_H
#define MORI_KERNEL_ABI_H

/* Signal pad (per rank, at signal_offset inside its slot). */
struct MoriSignalPad {
  unsigned int arrive; /* blocks of the current launch that finished their stores (reset by the last one) */
  unsigned int epoch;  /* launches completed by this rank */
  unsigned int pad[30];
  unsigned int flags[1]; /* flags[q] = the epoch rank q last signalled to this rank (simple protocol); then
                            world counters and world bases of the direct protocol (see mori_counter_wait) */
};
#define MORI_SIGNAL_PAD_EPOCH_WORD 1
#define MORI_SIGNAL_PAD_FLAGS_WORD 32
/* Bytes of one rank's signal pad for `world` ranks: 32 words, then flags, counters and bases per rank. */
#define MORI_SIGNAL_PAD_BYTES(world) (32ull * 4ull + 3ull * 4ull * (unsigned long long)(world))

/* Receive layout: two buffers (parity 0 and 1) of `world` slots each. Slot s holds the chunk from rank s at
 * offset s * pitch; pitch leaves a gap of at least 16 bytes after each chunk, which stays poisoned (a guard).
 */
struct MoriA2aLayout {
  unsigned long long chunk;  /* bytes per (source, destination) */
  unsigned long long pitch;  /* bytes between slots (multiple of 256, > chunk) */
  unsigned long long region; /* bytes of one parity buffer = world * pitch */
  unsigned long long signal_offset;
  unsigned long long
      ll_offset; /* low-latency protocol: start of its staging (two parity buffers of world slots) */
  unsigned long long
      ll_pitch; /* bytes between staging slots: 8 per 32-bit word of the chunk, in groups of 4 */
};
#define MORI_A2A_LAYOUT_BYTES 48

/* Launch arguments: every kernel takes one of these structs by value, the only definition of its parameters
 * (the host launches through the typed layer of lib/include/mori/symm/jit/detail/kernel_abi.hpp, which takes
 * the same struct: a launch with other arguments does not compile). Plain C: no default values (the host
 * value-initialises), 64-bit pointers. Sizes are checked on both sides and offsets on the host, below. */

/* a2a_push<...> and a2a_ll<...> (kernels/a2a.hip). slow_cycles is test-only (MORI_FAULT a2a.slow-kernel; 0 =
 * off): clock64() cycles each block waits before its final signal. source_evict_first is a2a_ll's (a2a_push
 * has it as a template argument). status: word 0 the epoch of a launch whose wait timed out, 1 + q rank q
 * missing in it. */
struct MoriA2aPushArgs {
  const void* src;    /* this rank's source: world chunks at the layout's pitch */
  void* const* peers; /* the window's pointer array on the device */
  char* lsa_base;     /* the LSA window: rank p at lsa_base + p * stride */
  unsigned long long stride;
  int world, me;
  struct MoriA2aLayout layout;
  int blocks_per_peer;
  unsigned long long timeout_ns;
  unsigned int mutate; /* MORI_MUTATE_* */
  unsigned long long slow_cycles;
  unsigned int* status;
  int device_scope; /* 1: signals at device scope (every rank on one GPU) */
  int source_evict_first;
};
#define MORI_A2A_PUSH_ARGS_BYTES 136

/* a2a_fill: the source for the next launch, tagged with the epoch it completes (read at *epoch on the
 * device). */
struct MoriA2aFillArgs {
  void* src;
  int world, me;
  struct MoriA2aLayout layout;
  const unsigned int* epoch;
};
#define MORI_A2A_FILL_ARGS_BYTES 72

/* a2a_verify: counts wrong words of the last completed launch's receive buffer into *wrong. */
struct MoriA2aVerifyArgs {
  const void* win;
  int world, me;
  struct MoriA2aLayout layout;
  const unsigned int* epoch;
  unsigned long long* wrong;
};
#define MORI_A2A_VERIFY_ARGS_BYTES 80

/* a2a_delay: one thread spins for ns nanoseconds (rank skew for the verification). */
struct MoriA2aDelayArgs {
  unsigned long long ns;
};
#define MORI_A2A_DELAY_ARGS_BYTES 8

/* matrix_copy<...> (kernels/matrix.hip): read = 0 local -> peer idx, 1 peer -> local; n16 = bytes / 16. */
struct MoriMatrixCopyArgs {
  void* const* peers;
  char* lsa_base;
  unsigned long long stride;
  int idx, read;
  void* local;
  unsigned long long n16;
};
#define MORI_MATRIX_COPY_ARGS_BYTES 48

/* matrix_bulk<...>: local -> peer idx in tiles of `tile` bytes through shared memory. */
struct MoriMatrixBulkArgs {
  void* const* peers;
  char* lsa_base;
  unsigned long long stride;
  int idx;
  const void* local;
  unsigned long long bytes;
  unsigned int tile;
};
#define MORI_MATRIX_BULK_ARGS_BYTES 56

/* matrix_pingpong<...>: put-with-signal round trips with peer idx; times[r] the initiator's round trip (ns),
 * result[0] 0 or the round (1-based) that timed out. */
struct MoriMatrixPingpongArgs {
  void* const* peers;
  char* lsa_base;
  unsigned long long stride;
  int idx;
  unsigned long long signal_offset;
  unsigned int* my_pad;
  int initiator;
  unsigned int first_round, rounds;
  unsigned long long timeout_ns;
  unsigned long long* times;
  unsigned long long* result;
};
#define MORI_MATRIX_PINGPONG_ARGS_BYTES 88

/* Mutations for the verification's own tests (MORI_FAULT a2a.no-barrier / a2a.stale / a2a.overrun). */
#define MORI_MUTATE_NO_WAIT 1u /* signal the peers but do not wait for them */
#define MORI_MUTATE_STALE 2u   /* skip every data store of this launch */
#define MORI_MUTATE_OVERRUN 4u /* write 16 bytes past the end of each chunk */

/* Kernel names: the kernel sources define them through these macros and the host builds the names it looks
 * up from the same ones (MORI_KERNEL_NAME), so a rename is one edit. Template arguments, in order:
 *   a2a_push<kLsa, kSync, kUnroll, kDirect, kEvictFirst>   a2a_ll<kLsa>
 *   matrix_copy<kLsa, kUnroll, kStream>   matrix_bulk<kLsa, kTma>   matrix_pingpong<kLsa> */
#define MORI_K_A2A_FILL a2a_fill
#define MORI_K_A2A_VERIFY a2a_verify
#define MORI_K_A2A_DELAY a2a_delay
#define MORI_K_A2A_PUSH a2a_push
#define MORI_K_A2A_LL a2a_ll
#define MORI_K_MATRIX_COPY matrix_copy
#define MORI_K_MATRIX_BULK matrix_bulk
#define MORI_K_MATRIX_PINGPONG matrix_pingpong
#define MORI_KERNEL_NAME_STR(x) #x
#define MORI_KERNEL_NAME(x) MORI_KERNEL_NAME_STR(x)

/* Sizes on both sides; offsets on the host (the runtime compilers have no offsetof), where the same text
 * compiles to the same layout. */
#ifdef __cplusplus
static_assert(sizeof(MoriA2aLayout) == MORI_A2A_LAYOUT_BYTES, "MoriA2aLayout: six 64-bit fields");
static_assert(sizeof(MoriSignalPad) == 4 * (MORI_SIGNAL_PAD_FLAGS_WORD + 1),
              "MoriSignalPad: 32 words, then flags");
static_assert(sizeof(unsigned long long) == 8 && sizeof(unsigned int) == 4, "the ABI's integer widths");
static_assert(sizeof(void*) == 8, "the ABI's pointers are 64-bit");
static_assert(sizeof(MoriA2aPushArgs) == MORI_A2A_PUSH_ARGS_BYTES, "MoriA2aPushArgs");
static_assert(sizeof(MoriA2aFillArgs) == MORI_A2A_FILL_ARGS_BYTES, "MoriA2aFillArgs");
static_assert(sizeof(MoriA2aVerifyArgs) == MORI_A2A_VERIFY_ARGS_BYTES, "MoriA2aVerifyArgs");
static_assert(sizeof(MoriA2aDelayArgs) == MORI_A2A_DELAY_ARGS_BYTES, "MoriA2aDelayArgs");
static_assert(sizeof(MoriMatrixCopyArgs) == MORI_MATRIX_COPY_ARGS_BYTES, "MoriMatrixCopyArgs");
static_assert(sizeof(MoriMatrixBulkArgs) == MORI_MATRIX_BULK_ARGS_BYTES, "MoriMatrixBulkArgs");
static_assert(sizeof(MoriMatrixPingpongArgs) == MORI_MATRIX_PINGPONG_ARGS_BYTES, "MoriMatrixPingpongArgs");
#if !defined(MORI_KERNEL_PLATFORM_cuda) && !defined(MORI_KERNEL_PLATFORM_amd)
static_assert(__builtin_offsetof(MoriA2aLayout, pitch) == 8, "MoriA2aLayout.pitch");
static_assert(__builtin_offsetof(MoriA2aLayout, region) == 16, "MoriA2aLayout.region");
static_assert(__builtin_offsetof(MoriA2aLayout, signal_offset) == 24, "MoriA2aLayout.signal_offset");
static_assert(__builtin_offsetof(MoriA2aLayout, ll_offset) == 32, "MoriA2aLayout.ll_offset");
static_assert(__builtin_offsetof(MoriA2aLayout, ll_pitch) == 40, "MoriA2aLayout.ll_pitch");
static_assert(__builtin_offsetof(MoriSignalPad, epoch) == 4 * MORI_SIGNAL_PAD_EPOCH_WORD,
              "MoriSignalPad.epoch");
static_assert(__builtin_offsetof(MoriSignalPad, flags) == 4 * MORI_SIGNAL_PAD_FLAGS_WORD,
              "MoriSignalPad.flags");
static_assert(__builtin_offsetof(MoriA2aPushArgs, stride) == 24 &&
                  __builtin_offsetof(MoriA2aPushArgs, me) == 36 &&
                  __builtin_offsetof(MoriA2aPushArgs, layout) == 40 &&
                  __builtin_offsetof(MoriA2aPushArgs, blocks_per_peer) == 88 &&
                  __builtin_offsetof(MoriA2aPushArgs, timeout_ns) == 96 &&
                  __builtin_offsetof(MoriA2aPushArgs, mutate) == 104 &&
                  __builtin_offsetof(MoriA2aPushArgs, slow_cycles) == 112 &&
                  __builtin_offsetof(MoriA2aPushArgs, status) == 120 &&
                  __builtin_offsetof(MoriA2aPushArgs, device_scope) == 128 &&
                  __builtin_offsetof(MoriA2aPushArgs, source_evict_first) == 132,
              "MoriA2aPushArgs offsets");
static_assert(__builtin_offsetof(MoriA2aFillArgs, layout) == 16 &&
                  __builtin_offsetof(MoriA2aFillArgs, epoch) == 64,
              "MoriA2aFillArgs offsets");
static_assert(__builtin_offsetof(MoriA2aVerifyArgs, layout) == 16 &&
                  __builtin_offsetof(MoriA2aVerifyArgs, epoch) == 64 &&
                  __builtin_offsetof(MoriA2aVerifyArgs, wrong) == 72,
              "MoriA2aVerifyArgs offsets");
static_assert(__builtin_offsetof(MoriMatrixCopyArgs, idx) == 24 &&
                  __builtin_offsetof(MoriMatrixCopyArgs, read) == 28 &&
                  __builtin_offsetof(MoriMatrixCopyArgs, local) == 32 &&
                  __builtin_offsetof(MoriMatrixCopyArgs, n16) == 40,
              "MoriMatrixCopyArgs offsets");
static_assert(__builtin_offsetof(MoriMatrixBulkArgs, local) == 32 &&
                  __builtin_offsetof(MoriMatrixBulkArgs, bytes) == 40 &&
                  __builtin_offsetof(MoriMatrixBulkArgs, tile) == 48,
              "MoriMatrixBulkArgs offsets");
static_assert(__builtin_offsetof(MoriMatrixPingpongArgs, signal_offset) == 32 &&
                  __builtin_offsetof(MoriMatrixPingpongArgs, my_pad) == 40 &&
                  __builtin_offsetof(MoriMatrixPingpongArgs, initiator) == 48 &&
                  __builtin_offsetof(MoriMatrixPingpongArgs, first_round) == 52 &&
                  __builtin_offsetof(MoriMatrixPingpongArgs, rounds) == 56 &&
                  __builtin_offsetof(MoriMatrixPingpongArgs, timeout_ns) == 64 &&
                  __builtin_offsetof(MoriMatrixPingpongArgs, result) == 80,
              "MoriMatrixPingpongArgs offsets");
#endif
#endif

#endif /* MORI_KERNEL_ABI_H */
