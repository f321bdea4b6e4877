// SPDX-License-Identifier: MIT
// The kernels' instantiation names (mori/symm/jit/detail/kernel_abi.hpp), from the names in kernels/abi.hip.
#include "mori/symm/jit/detail/kernel_abi.hpp"

namespace mori::symm::detail {
namespace {
std::string flag(bool b) {
  return b ? "1" : "0";
}
}  // namespace

KernelName<A2aPushArgs> a2a_push_name(bool lsa, bool sync, int unroll, bool direct, bool evict_first) {
  return {std::string(MORI_KERNEL_NAME(MORI_K_A2A_PUSH)) + "<" + flag(lsa) + ", " + flag(sync) + ", " +
          std::to_string(unroll) + ", " + flag(direct) + ", " + flag(evict_first) + ">"};
}

KernelName<A2aPushArgs> a2a_ll_name(bool lsa) {
  return {std::string(MORI_KERNEL_NAME(MORI_K_A2A_LL)) + "<" + flag(lsa) + ">"};
}

KernelName<MatrixCopyArgs> matrix_copy_name(bool lsa, int unroll, bool stream) {
  return {std::string(MORI_KERNEL_NAME(MORI_K_MATRIX_COPY)) + "<" + flag(lsa) + ", " +
          std::to_string(unroll) + ", " + flag(stream) + ">"};
}

KernelName<MatrixBulkArgs> matrix_bulk_name(bool lsa, bool tma) {
  return {std::string(MORI_KERNEL_NAME(MORI_K_MATRIX_BULK)) + "<" + flag(lsa) + ", " + flag(tma) + ">"};
}

KernelName<MatrixPingpongArgs> matrix_pingpong_name(bool lsa) {
  return {std::string(MORI_KERNEL_NAME(MORI_K_MATRIX_PINGPONG)) + "<" + flag(lsa) + ">"};
}

}  // namespace mori::symm::detail
