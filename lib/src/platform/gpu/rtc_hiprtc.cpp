// SPDX-License-Identifier: MIT
// hiprtc through dlopen: the AMD half of the kernel JIT. Built with ROCm (or compile-checked in CI against
// Debian's HIP headers); other builds use rtc_none.cpp's stub for load_hiprtc. The header only checks the
// shared API table.
#include <glob.h>
#include <hip/hiprtc.h>

#include "mori/symm/base/env.hpp"

#include <cstdlib>

#include "../rtc_impl.hpp"

namespace mori::symm::detail {

MORI_RTC_CHECK_HEADER(hiprtc, GetCodeSize, GetCode)

std::unique_ptr<RuntimeCompiler> load_hiprtc(std::string* why) {
  const char* rocm = env_read("ROCM_PATH");
  RtcLibrary hiprtc;
  hiprtc.name = "hiprtc";
  hiprtc.arch_option = "--offload-arch=";
  hiprtc.code_size = "GetCodeSize";
  hiprtc.code = "GetCode";
  // ROCm 6 and later ship hiprtc as its own library; ROCm 5 (Debian 12's 5.2 included) has its entry points
  // in libamdhip64 itself (docs/amd.md).
  hiprtc.files = {"libhiprtc.so.7", "libhiprtc.so.6", "libhiprtc.so.5", "libhiprtc.so", "libamdhip64.so.5"};
  hiprtc.folders = {rocm ? std::string(rocm) + "/lib" : "", "/opt/rocm/lib"};
  // comgr does the compiling (LLVM is in it; newer ones embed the device libraries too), and the device
  // libraries' bitcode is linked into every kernel: both name the toolchain in the JIT cache key. The bitcode
  // lives in ROCm's folder, Debian's multiarch folder, or (newer ROCm, LLVM 20+) LLVM's clang resource folder
  // (docs/amd.md).
  hiprtc.companions = {"libamd_comgr.so.3", "libamd_comgr.so.2"};
  if (rocm) hiprtc.data_folders.push_back(std::string(rocm) + "/amdgcn/bitcode");
  hiprtc.data_folders.insert(
      hiprtc.data_folders.end(),
      {"/opt/rocm/amdgcn/bitcode", "/usr/lib/x86_64-linux-gnu/amdgcn/bitcode", "/usr/lib/amdgcn/bitcode"});
  glob_t g{};
  if (glob("/usr/lib/llvm-*/lib/clang/*/amdgcn/bitcode", GLOB_ONLYDIR, nullptr, &g) == 0)
    for (std::size_t i = 0; i < g.gl_pathc; ++i) hiprtc.data_folders.emplace_back(g.gl_pathv[i]);
  globfree(&g);  // GLOB_NOMATCH and the other failures leave no folder to hash
  return load_rtc(hiprtc, why);
}

}  // namespace mori::symm::detail
