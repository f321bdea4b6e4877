// SPDX-License-Identifier: MIT
// Built when no GPU headers were found at configure time: the host runtime is the only one.
#include "mori/symm/platform/runtime.hpp"

namespace mori::symm {
std::unique_ptr<Runtime> make_gpu_runtime(std::string* why_not) {
  if (why_not) *why_not = "this build has no GPU runtime (no CUDA or HIP headers at configure time)";
  return nullptr;
}
}  // namespace mori::symm
