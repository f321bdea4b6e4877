// SPDX-License-Identifier: MIT
// NVRTC through dlopen: the NVIDIA half of the kernel JIT. The header only checks the shared API table.
#include <nvrtc.h>

#include "mori/symm/base/env.hpp"

#include <cstdlib>

#include "../rtc_impl.hpp"

namespace mori::symm::detail {

MORI_RTC_CHECK_HEADER(nvrtc, GetCUBINSize, GetCUBIN)

std::unique_ptr<RuntimeCompiler> load_nvrtc(std::string* why) {
  const char* cuda_home = env_read("CUDA_HOME");
  const char* cuda_path = env_read("CUDA_PATH");
  RtcLibrary nvrtc;
  nvrtc.name = "nvrtc";
  // NVRTC wants this spelling; "-arch=sm_90" is refused as an invalid option.
  nvrtc.arch_option = "--gpu-architecture=";
  nvrtc.code_size = "GetCUBINSize";
  nvrtc.code = "GetCUBIN";
  nvrtc.files = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};
  nvrtc.folders = {cuda_home ? std::string(cuda_home) + "/lib64" : "",
                   cuda_path ? std::string(cuda_path) + "/lib64" : "", "/usr/local/cuda/lib64"};
  return load_rtc(nvrtc, why);
}

}  // namespace mori::symm::detail
