// NVRTC through dlopen: the NVIDIA half of the kernel JIT.
#include <nvrtc.h>

#include "../../rtc_impl.hpp"

namespace mori::symm::detail {
namespace {

struct NvrtcApi {
  using Program = nvrtcProgram;
  static constexpr const char* kName = "nvrtc";
  static constexpr const char* kPrefix = "nvrtc";
  // NVRTC wants this spelling; "-arch=sm_90" is refused as an invalid option.
  static constexpr const char* kArchOption = "--gpu-architecture=";
  MORI_RTC_COMMON_ENTRY_POINTS(MORI_RTC_DECLARE, nvrtc)
  decltype(&nvrtcGetCUBINSize) code_size;
  decltype(&nvrtcGetCUBIN) code;
};

}  // namespace

std::unique_ptr<RuntimeCompiler> load_nvrtc(std::string* why) {
  const char* cuda_home = std::getenv("CUDA_HOME");
  const char* cuda_path = std::getenv("CUDA_PATH");
  std::string path;
  void* lib = open_first({"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"},
                         {cuda_home ? std::string(cuda_home) + "/lib64" : "",
                          cuda_path ? std::string(cuda_path) + "/lib64" : "", "/usr/local/cuda/lib64"},
                         &path, why);
  if (!lib) return nullptr;
  NvrtcApi api{};
  bool ok = true;
  MORI_RTC_COMMON_ENTRY_POINTS(MORI_RTC_RESOLVE, nvrtc)
  MORI_RTC_RESOLVE(code_size, nvrtcGetCUBINSize)
  MORI_RTC_RESOLVE(code, nvrtcGetCUBIN)
  if (!ok) return nullptr;
  return std::make_unique<RtcCompiler<NvrtcApi>>(api, path);
}

}  // namespace mori::symm::detail
