// The kernels the suite compiles (lib/README.md, JIT cache): every instantiation per kernel file and arch.
#include <string>
#include <vector>

#include "mori/symm/detail/kernel_abi.hpp"
#include "mori/symm/jit.hpp"

namespace mori::symm {

namespace {
// The number of an NVIDIA arch name ("sm_90a" -> 90); -1 for anything else.
int sm_number(const std::string& arch) {
  if (arch.rfind("sm_", 0) != 0) return -1;
  const std::size_t digits = arch.find_first_not_of("0123456789", 3);
  const std::string number = arch.substr(3, digits == std::string::npos ? std::string::npos : digits - 3);
  return !number.empty() && number.size() <= 4 ? std::stoi(number) : -1;
}
}  // namespace

bool arch_has_bulk_copy(const std::string& arch) {
  return sm_number(arch) >= 90;
}

bool arch_has_l2_cache_hints(const std::string& arch) {
  return sm_number(arch) >= 80;
}

std::vector<KernelSpec> kernel_catalog(const std::string& arch) {
  using namespace detail;  // the names of kernels/abi.hip (detail/kernel_abi.hpp)
  KernelSpec a2a{
      "a2a.hip",
      {a2a_fill_name(), a2a_verify_name(), a2a_delay_name(), a2a_ll_name(false), a2a_ll_name(true)}};
  for (bool lsa : {false, true})
    for (bool sync : {false, true})
      for (int unroll : {4, 8})
        for (bool direct : {false, true})
          for (bool evict_first : {false, true})
            a2a.instantiations.push_back(a2a_push_name(lsa, sync, unroll, direct, evict_first));
  KernelSpec matrix{"matrix.hip", {matrix_pingpong_name(false), matrix_pingpong_name(true)}};
  for (bool lsa : {false, true}) {
    for (int unroll : {4, 8, 16})
      for (bool stream : {false, true})
        matrix.instantiations.push_back(matrix_copy_name(lsa, unroll, stream));
    // Defined only where the prelude sets MORI_BULK_COPY (NVIDIA sm_90 and newer).
    if (arch_has_bulk_copy(arch))
      for (bool tma : {false, true}) matrix.instantiations.push_back(matrix_bulk_name(lsa, tma));
  }
  return {a2a, matrix};
}

}  // namespace mori::symm
