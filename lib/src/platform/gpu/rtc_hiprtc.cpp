// hiprtc through dlopen: the AMD half of the kernel JIT. Built with ROCm (or compile-checked in CI against
// Debian's HIP headers); other builds use rtc_none.cpp's stub for load_hiprtc.
#include <hip/hiprtc.h>

#include "../../rtc_impl.hpp"

namespace mori::symm::detail {
namespace {

struct HiprtcApi {
  using Program = hiprtcProgram;
  static constexpr const char* kName = "hiprtc";
  static constexpr const char* kPrefix = "hiprtc";
  static constexpr const char* kArchOption = "--offload-arch=";
  MORI_RTC_COMMON_ENTRY_POINTS(MORI_RTC_DECLARE, hiprtc)
  decltype(&hiprtcGetCodeSize) code_size;
  decltype(&hiprtcGetCode) code;
};

}  // namespace

std::unique_ptr<RuntimeCompiler> load_hiprtc(std::string* why) {
  const char* rocm = std::getenv("ROCM_PATH");
  std::string path;
  void* lib = open_first({"libhiprtc.so.6", "libhiprtc.so.5", "libhiprtc.so"},
                         {rocm ? std::string(rocm) + "/lib" : "", "/opt/rocm/lib"}, &path, why);
  if (!lib) return nullptr;
  HiprtcApi api{};
  bool ok = true;
  MORI_RTC_COMMON_ENTRY_POINTS(MORI_RTC_RESOLVE, hiprtc)
  MORI_RTC_RESOLVE(code_size, hiprtcGetCodeSize)
  MORI_RTC_RESOLVE(code, hiprtcGetCode)
  if (!ok) return nullptr;
  return std::make_unique<RtcCompiler<HiprtcApi>>(api, path);
}

}  // namespace mori::symm::detail
