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
  decltype(&nvrtcVersion) version;
  decltype(&nvrtcCreateProgram) create;
  decltype(&nvrtcDestroyProgram) destroy;
  decltype(&nvrtcAddNameExpression) add_name;
  decltype(&nvrtcCompileProgram) compile;
  decltype(&nvrtcGetProgramLogSize) log_size;
  decltype(&nvrtcGetProgramLog) log;
  decltype(&nvrtcGetCUBINSize) code_size;
  decltype(&nvrtcGetCUBIN) code;
  decltype(&nvrtcGetLoweredName) lowered_name;
  decltype(&nvrtcGetErrorString) error_string;
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
  NvrtcApi a{};
  bool ok = resolve<NvrtcApi>(lib, "nvrtcVersion", a.version, why) &&
            resolve<NvrtcApi>(lib, "nvrtcCreateProgram", a.create, why) &&
            resolve<NvrtcApi>(lib, "nvrtcDestroyProgram", a.destroy, why) &&
            resolve<NvrtcApi>(lib, "nvrtcAddNameExpression", a.add_name, why) &&
            resolve<NvrtcApi>(lib, "nvrtcCompileProgram", a.compile, why) &&
            resolve<NvrtcApi>(lib, "nvrtcGetProgramLogSize", a.log_size, why) &&
            resolve<NvrtcApi>(lib, "nvrtcGetProgramLog", a.log, why) &&
            resolve<NvrtcApi>(lib, "nvrtcGetCUBINSize", a.code_size, why) &&
            resolve<NvrtcApi>(lib, "nvrtcGetCUBIN", a.code, why) &&
            resolve<NvrtcApi>(lib, "nvrtcGetLoweredName", a.lowered_name, why) &&
            resolve<NvrtcApi>(lib, "nvrtcGetErrorString", a.error_string, why);
  if (!ok) return nullptr;
  return std::make_unique<RtcCompiler<NvrtcApi>>(a, path);
}

}  // namespace mori::symm::detail
