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
  decltype(&hiprtcVersion) version;
  decltype(&hiprtcCreateProgram) create;
  decltype(&hiprtcDestroyProgram) destroy;
  decltype(&hiprtcAddNameExpression) add_name;
  decltype(&hiprtcCompileProgram) compile;
  decltype(&hiprtcGetProgramLogSize) log_size;
  decltype(&hiprtcGetProgramLog) log;
  decltype(&hiprtcGetCodeSize) code_size;
  decltype(&hiprtcGetCode) code;
  decltype(&hiprtcGetLoweredName) lowered_name;
  decltype(&hiprtcGetErrorString) error_string;
};

}  // namespace

std::unique_ptr<RuntimeCompiler> load_hiprtc(std::string* why) {
  const char* rocm = std::getenv("ROCM_PATH");
  std::string path;
  void* lib = open_first({"libhiprtc.so.6", "libhiprtc.so.5", "libhiprtc.so"},
                         {rocm ? std::string(rocm) + "/lib" : "", "/opt/rocm/lib"}, &path, why);
  if (!lib) return nullptr;
  HiprtcApi a{};
  bool ok = resolve<HiprtcApi>(lib, "hiprtcVersion", a.version, why) &&
            resolve<HiprtcApi>(lib, "hiprtcCreateProgram", a.create, why) &&
            resolve<HiprtcApi>(lib, "hiprtcDestroyProgram", a.destroy, why) &&
            resolve<HiprtcApi>(lib, "hiprtcAddNameExpression", a.add_name, why) &&
            resolve<HiprtcApi>(lib, "hiprtcCompileProgram", a.compile, why) &&
            resolve<HiprtcApi>(lib, "hiprtcGetProgramLogSize", a.log_size, why) &&
            resolve<HiprtcApi>(lib, "hiprtcGetProgramLog", a.log, why) &&
            resolve<HiprtcApi>(lib, "hiprtcGetCodeSize", a.code_size, why) &&
            resolve<HiprtcApi>(lib, "hiprtcGetCode", a.code, why) &&
            resolve<HiprtcApi>(lib, "hiprtcGetLoweredName", a.lowered_name, why) &&
            resolve<HiprtcApi>(lib, "hiprtcGetErrorString", a.error_string, why);
  if (!ok) return nullptr;
  return std::make_unique<RtcCompiler<HiprtcApi>>(a, path);
}

}  // namespace mori::symm::detail
