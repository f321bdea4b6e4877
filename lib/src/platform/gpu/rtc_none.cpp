// SPDX-License-Identifier: MIT
// Stubs for the compilers this build does not carry.
#include "mori/symm/platform/detail/rtc.hpp"

namespace mori::symm::detail {
#ifndef MORI_HAVE_NVRTC
std::unique_ptr<RuntimeCompiler> load_nvrtc(std::string* why) {
  if (why) *why = "this build has no NVRTC support (no CUDA headers at configure time)";
  return nullptr;
}
#endif
#ifndef MORI_HAVE_HIPRTC
std::unique_ptr<RuntimeCompiler> load_hiprtc(std::string* why) {
  if (why) *why = "this build has no hiprtc support (not built against ROCm)";
  return nullptr;
}
#endif
}  // namespace mori::symm::detail
