// hiprtc through dlopen: the AMD half of the kernel JIT. Built with ROCm (or compile-checked in CI against
// Debian's HIP headers); other builds use rtc_none.cpp's stub for load_hiprtc. The header only checks the
// shared API table.
#include <hip/hiprtc.h>

#include <cstdlib>

#include "../../rtc_impl.hpp"

namespace mori::symm::detail {

MORI_RTC_CHECK_HEADER(hiprtc, GetCodeSize, GetCode)

std::unique_ptr<RuntimeCompiler> load_hiprtc(std::string* why) {
  const char* rocm = std::getenv("ROCM_PATH");
  RtcLibrary hiprtc;
  hiprtc.name = "hiprtc";
  hiprtc.arch_option = "--offload-arch=";
  hiprtc.code_size = "GetCodeSize";
  hiprtc.code = "GetCode";
  // ROCm 6 and later ship hiprtc as its own library; ROCm 5 (Debian 12's 5.2 included) has its entry points
  // in libamdhip64 itself (docs/amd.md).
  hiprtc.files = {"libhiprtc.so.7", "libhiprtc.so.6", "libhiprtc.so.5", "libhiprtc.so", "libamdhip64.so.5"};
  hiprtc.folders = {rocm ? std::string(rocm) + "/lib" : "", "/opt/rocm/lib"};
  return load_rtc(hiprtc, why);
}

}  // namespace mori::symm::detail
