// SPDX-License-Identifier: MIT
// The host's side of the kernel ABI (docs/layout.md "Kernel ABI"): kernels/abi.hip (the layout, the signal
// pad, the mutation ids, every kernel's launch-argument struct, the kernel names, with their compile-time
// checks), and the typed launch: names, loaded kernels and launches that carry the kernel's argument type.
#pragma once

#include <cstddef>
#include <string>
#include <type_traits>

#include "mori/symm/jit/jit.hpp"
#include "mori/symm/platform/runtime.hpp"

#include "abi.hip"  // kernels/abi.hip: the same file the JIT prepends to every kernel source

namespace mori::symm::detail {

// The receive layout the kernels read (kernels/abi.hip MoriA2aLayout): one type on both sides.
using A2aLayout = ::MoriA2aLayout;
static_assert(sizeof(A2aLayout) == MORI_A2A_LAYOUT_BYTES);

// Launch arguments: one struct per kernel, defined once in kernels/abi.hip (the kernels take the same struct
// by value). The host value-initialises them (`A2aPushArgs a{};`).
using A2aPushArgs = ::MoriA2aPushArgs;  // a2a_push and a2a_ll
using A2aFillArgs = ::MoriA2aFillArgs;
using A2aVerifyArgs = ::MoriA2aVerifyArgs;
using A2aDelayArgs = ::MoriA2aDelayArgs;
using MatrixCopyArgs = ::MoriMatrixCopyArgs;
using MatrixBulkArgs = ::MoriMatrixBulkArgs;
using MatrixPingpongArgs = ::MoriMatrixPingpongArgs;

// An instantiation name whose kernel takes Args, and a loaded function of that kernel: the type travels from
// the name builder to the launch, so a launch with another kernel's arguments does not compile.
template <class Args>
struct KernelName {
  std::string name;
};
template <class Args>
struct Kernel {
  Function f = nullptr;
};

template <class Args>
Kernel<Args> kernel(const KernelModule& m, const KernelName<Args>& n) {
  return {m.function(n.name)};
}

// The only launches of the library's kernels: one argument, the kernel's struct, by value.
template <class Args>
void launch(Runtime& rt, Kernel<Args> k, Dim3 grid, Dim3 block, std::size_t shared_bytes, Stream s,
            const Args& a) {
  static_assert(std::is_trivially_copyable_v<Args> && std::is_standard_layout_v<Args>);
  void* args[] = {const_cast<Args*>(&a)};
  rt.launch(k.f, grid, block, shared_bytes, s, args);
}
template <class Args>
bool launch_overlapping(Runtime& rt, Kernel<Args> k, unsigned grid, unsigned block, Stream s, const Args& a) {
  void* args[] = {const_cast<Args*>(&a)};
  return rt.launch_overlapping(k.f, grid, block, s, args);
}
template <class Args>
int resident_blocks_per_multiprocessor(Runtime& rt, Kernel<Args> k, unsigned block) {
  return rt.resident_blocks_per_multiprocessor(k.f, block);
}

// The instantiation names that the catalog compiles and the engines look up (one builder each).
KernelName<A2aPushArgs> a2a_push_name(bool lsa, bool sync, int unroll, bool direct, bool evict_first);
KernelName<A2aPushArgs> a2a_ll_name(bool lsa);
KernelName<MatrixCopyArgs> matrix_copy_name(bool lsa, int unroll, bool stream);
KernelName<MatrixBulkArgs> matrix_bulk_name(bool lsa, bool tma);
KernelName<MatrixPingpongArgs> matrix_pingpong_name(bool lsa);
inline KernelName<A2aFillArgs> a2a_fill_name() {
  return {MORI_KERNEL_NAME(MORI_K_A2A_FILL)};
}
inline KernelName<A2aVerifyArgs> a2a_verify_name() {
  return {MORI_KERNEL_NAME(MORI_K_A2A_VERIFY)};
}
inline KernelName<A2aDelayArgs> a2a_delay_name() {
  return {MORI_KERNEL_NAME(MORI_K_A2A_DELAY)};
}

}  // namespace mori::symm::detail
