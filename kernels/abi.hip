/* The ABI between the host C++ and the JIT-compiled kernels (docs/layout.md "Kernel ABI"): the all-to-all's
 * receive layout and signal pad, the verification's mutation ids, and the kernels' names. One file, plain
 * C-compatible, no includes (the runtime compilers ship no standard headers). The JIT prepends it to every
 * kernel source after kernels/prelude.hip, so it is part of every kernel's cache key; the host includes it
 * (lib/include/mori/symm/detail/kernel_abi.hpp). The static_asserts at the end check it on both sides. Named
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
#endif
#endif

#endif /* MORI_KERNEL_ABI_H */
