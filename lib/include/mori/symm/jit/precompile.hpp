// SPDX-License-Identifier: MIT
// Precompiling the kernel catalog into the JIT cache (mori-probe --jit-precompile; docs/mori-probe.md): every
// kernel of kernel_catalog for every arch asked for, no GPU needed.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "mori/symm/base/json.hpp"
#include "mori/symm/platform/runtime.hpp"

namespace mori::symm {

struct PrecompileOptions {
  std::string archs;  // --archs, comma separated; "" = $MORI_GPU_ARCHS, else the device's arch
  std::uint64_t wall_clock_khz =
      0;  // --wall-clock-khz (AMD archs); 0 = the device's where the arch is its own
};

struct Precompiled {
  std::string archs;  // the list compiled, as given (the report's config.archs)
  Json
      per_arch;  // jit_precompile[] (docs/json.md): the Jit's stats, instantiations, left_out, wall_clock_khz
  unsigned jobs = 1;   // the threads that compiled: the usable cores, at most one per kernel file and arch
  double wall_ms = 0;  // the compile's wall-clock time, all archs
};

// The whole list is checked before anything is compiled or any cache folder made: every entry's name
// (arch_name_problem, repeats), then whether the run-time compiler compiles for it (an empty kernel, compiled
// in memory), each a UsageError naming every bad entry on one line; then every arch's cache folder, where a
// cache that cannot be used (a job would compile in memory) is ApiError JIT_CACHE_UNUSABLE naming why. Then
// every kernel file of every arch is compiled into the cache by as many threads as this process has cores
// (its CPU affinity: `taskset -c 0` is serial), NVRTC compiles at once, hiprtc's one after another (comgr
// serialises them within a process); one not in the cache afterwards is JIT_CACHE_UNUSABLE too, and the first
// failure in catalog order is thrown once every compile that started has ended.
// `print` gets one line (with its newline) per kernel file and per instantiation the arch leaves out, in the
// catalog's order, one call at a time but from the compiling threads; an exception it throws ends the compile
// and is thrown here once every thread has ended.
Precompiled precompile_kernels(Runtime& rt, int device, const PrecompileOptions& o,
                               const std::function<void(const std::string&)>& print);

}  // namespace mori::symm
