// SPDX-License-Identifier: MIT
// Kernel JIT (lib/README.md, JIT cache): kernels/*.hip compiled at first use for the exact device by NVRTC or
// hiprtc, with a shared on-disk cache that several processes can fill at once.
//
// Cache entry: <root>/<arch>_<platform>/<key>/{image.bin, names.txt, manifest}; key = hash of every source
// byte (the prelude and the headers it includes from the kernel folder), the compiler and its version, the
// options and the instantiations. Entries are published by an atomic rename; a per-key flock makes N
// processes compile each entry once. A truncated or corrupt entry (manifest size/hash mismatch) is rebuilt. A
// root that is not ours or is group/world-writable is refused, and an unwritable one is skipped: both compile
// in memory with one warning. A symlinked root is followed (the checks apply to its target). The default root
// is $HOME/.mori/jit, or $XDG_CACHE_HOME/mori/jit when $HOME is not a folder (a relative $XDG_CACHE_HOME is
// ignored, as the XDG Base Directory specification says); a missing home is never created. A cache folder
// that goes away while a job compiles is a warning: the kernels are compiled in memory.
//
// Environment: MORI_JIT_CACHE_DIR, MORI_DISABLE_JIT=1 (fail unless cached), MORI_JIT_VERBOSE=1 (commands and
// timings), MORI_GPU_ARCHS (override the arch; a list for precompiling), MORI_KERNEL_DIR (kernel sources).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "mori/symm/base/json.hpp"
#include "mori/symm/platform/runtime.hpp"

namespace mori::symm {

namespace detail {
class RuntimeCompiler;
}

// One compilation unit: a kernel file and the template instantiations to emit from it.
struct KernelSpec {
  std::string file;                         // e.g. "a2a.hip" (the prelude is prepended)
  std::vector<std::string> instantiations;  // e.g. "a2a_push<1, 1>"
};

struct JitEntryStats {
  std::string file;
  std::string key;
  std::string source;  // "compiled" | "cache" | "memory"
  double ms = 0;
  std::string image_hash;  // of the code image, to compare what several processes got
};

// A kernel as the compiler sees it: the prelude and the kernel file in one text, and every header they
// include
// (`#include "name"`) from the kernel folder, by name. All of it is read through read_file (files.hpp).
struct KernelSource {
  std::string text;
  std::vector<std::pair<std::string, std::string>> headers;  // include name -> its text
};

struct CompiledKernels {
  std::vector<char> image;
  std::map<std::string, std::string> lowered;  // instantiation -> symbol
  std::string key;
};

class Jit {
 public:
  // arch: "sm_90", "gfx942"; platform: "cuda" | "amd". Loads the matching runtime compiler lazily.
  // wall_clock_khz: AMD, the rate of the device's wall_clock64() (DeviceInfo::wall_clock_khz); 0 = unknown,
  // the prelude's 100 MHz. It is a compile option, so part of the cache key (jit_defines).
  Jit(std::string arch, std::string platform, std::uint64_t wall_clock_khz = 0);
  ~Jit();
  Jit(const Jit&) = delete;
  Jit& operator=(const Jit&) = delete;

  // From the cache, or compiled (and cached). Throws ApiError on a compile error or with MORI_DISABLE_JIT=1.
  CompiledKernels get(const KernelSpec& spec);
  // The cache key of a spec without compiling (needs the compiler's version).
  std::string key_of(const KernelSpec& spec);
  std::string key_of(const KernelSpec& spec, const KernelSource& source);

  const std::vector<JitEntryStats>& stats() const noexcept { return stats_; }
  const std::string& arch() const noexcept { return arch_; }
  // The wall-clock rate the kernels are compiled for (kHz): 0 where they keep the prelude's default.
  std::uint64_t wall_clock_khz() const noexcept { return wall_clock_khz_; }
  // <root>/<arch>_<platform> where entries are published; "" when this Jit compiles in memory, and then
  // memory_reason() says why (the cache folder is missing, refused or unwritable).
  const std::string& cache_dir() const noexcept { return root_; }
  const std::string& memory_reason() const noexcept { return memory_reason_; }
  Json stats_json() const;
  // MORI_PRECOMPILE=1: the caller should build every kernel of the catalog up front.
  static bool precompile_requested();

 private:
  detail::RuntimeCompiler& compiler();
  KernelSource source_of(const KernelSpec& spec) const;
  std::vector<std::string> options();
  void record(JitEntryStats s);  // in stats_ and in what this process loaded (loaded_kernels_json)

  std::string arch_, platform_;
  std::uint64_t wall_clock_khz_ = 0;  // 0, or a plausible rate other than the prelude's 100 MHz
  std::unique_ptr<detail::RuntimeCompiler> rtc_;
  std::string root_;  // <root>/<arch>_<platform>, or "" = in memory
  std::string memory_reason_;
  std::vector<JitEntryStats> stats_;
};

// The -D options of a kernel compile for `platform`: MORI_KERNEL_PLATFORM_<platform>, and on AMD
// MORI_WALLCLOCK_HZ=<hz>ull where wall_clock_khz is plausible and not the prelude's 100 MHz default
// (docs/amd.md,
// `%globaltimer`). The default compiles without it, so its cache entries are those of an unknown rate.
std::vector<std::string> jit_defines(const std::string& platform, std::uint64_t wall_clock_khz);
// The cache key of a spec: a hash of its source and headers, the compiler (`compiler`: name, version,
// identity), the arch, the platform, every compile option and the instantiations (lib/README.md, JIT cache).
std::string jit_key(const KernelSpec& spec, const KernelSource& source,
                    const std::vector<std::string>& compiler, const std::string& arch,
                    const std::string& platform, const std::vector<std::string>& options);

// Every kernel image any Jit of this process compiled or loaded: {"entries": [{arch, file, key, source,
// image_hash}]}, for meta.jit (docs/json.md); null where none was.
Json loaded_kernels_json();

// Bound on waiting for another process's compile lock (default 300 s; the tools set --timeout-s). On expiry:
// TimeoutError naming the lock and the pid that holds it.
void set_jit_wait_bound(double seconds) noexcept;

// Every kernel the suite uses for `arch`, with its instantiations: what MORI_PRECOMPILE=1 and precompiling
// build. The bulk-copy kernels of matrix.hip are listed only where arch_has_bulk_copy(arch).
std::vector<KernelSpec> kernel_catalog(const std::string& arch);
// What kernel_catalog(arch) leaves out of the kernel files because the arch lacks a feature they need: today
// the bulk-copy kernels of matrix.hip everywhere but NVIDIA sm_90 and newer (AMD included; docs/amd.md).
struct KernelLeftOut {
  std::string file;
  std::string instantiation;
  std::string needs;  // the feature, in words
};
std::vector<KernelLeftOut> kernels_left_out(const std::string& arch);
// Why `arch` is not an arch name the JIT can compile for ("" when it is one): sm_<number>[a|f] from sm_50, or
// gfx<id> of 3 or 4 hex digits (gfx90a, gfx942, gfx1100). A check of the name only, made before anything is
// compiled or created (mori-probe --jit-precompile checks its whole list first; docs/mori-probe.md).
std::string arch_name_problem(const std::string& arch);
// NVIDIA sm_90 and newer ("sm_90", "sm_90a", "sm_100"): the kernels may use the bulk copies of the Tensor
// Memory Accelerator (kernels/prelude.hip sets MORI_BULK_COPY for them). False for AMD and "host".
bool arch_has_bulk_copy(const std::string& arch);
// NVIDIA sm_80 and newer: L2 cache hints (createpolicy, .L2::cache_hint) exist, so the a2a kernels'
// evict-first source loads are what they say (kernels/prelude.hip; docs/mori-a2a.md "Source cache"). False
// for AMD and "host".
bool arch_has_l2_cache_hints(const std::string& arch);

// Folder of the kernel sources: $MORI_KERNEL_DIR, <exe>/../share/mori/kernels, the source tree.
std::string kernel_dir();
// The arch a kernel should be built for on `device`: MORI_GPU_ARCHS's first entry, else what the device
// reports.
std::string target_arch(Runtime& rt, int device);
// 64-bit FNV-1a, in hex, over several strings (each length-prefixed).
std::string hash_hex(const std::vector<std::string>& parts);

// Loaded kernels: a module in a runtime plus functions by instantiation name. Unloads in the destructor.
class KernelModule {
 public:
  KernelModule(Runtime& rt, const CompiledKernels& k);
  ~KernelModule();
  KernelModule(const KernelModule&) = delete;
  KernelModule& operator=(const KernelModule&) = delete;
  Function function(const std::string& instantiation) const;

 private:
  Runtime& rt_;
  Module module_ = nullptr;
  std::map<std::string, Function> functions_;
};

}  // namespace mori::symm
