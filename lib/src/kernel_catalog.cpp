// The kernels the suite compiles (lib/README.md, JIT cache): every instantiation per kernel file and arch.
#include <string>
#include <vector>

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
  KernelSpec a2a{"a2a.hip", {"a2a_fill", "a2a_verify", "a2a_delay", "a2a_ll<0>", "a2a_ll<1>"}};
  for (const char* lsa : {"0", "1"})
    for (const char* sync : {"0", "1"})
      for (const char* unroll : {"4", "8"})
        for (const char* direct : {"0", "1"})
          for (const char* evict_first : {"0", "1"})
            a2a.instantiations.push_back(std::string("a2a_push<") + lsa + ", " + sync + ", " + unroll + ", " +
                                         direct + ", " + evict_first + ">");
  KernelSpec matrix{"matrix.hip", {"matrix_pingpong<0>", "matrix_pingpong<1>"}};
  for (const char* lsa : {"0", "1"}) {
    for (const char* unroll : {"4", "8", "16"})
      for (const char* stream : {"0", "1"})
        matrix.instantiations.push_back(std::string("matrix_copy<") + lsa + ", " + unroll + ", " + stream +
                                        ">");
    // Defined only where the prelude sets MORI_BULK_COPY (NVIDIA sm_90 and newer).
    if (arch_has_bulk_copy(arch))
      for (const char* tma : {"0", "1"})
        matrix.instantiations.push_back(std::string("matrix_bulk<") + lsa + ", " + tma + ">");
  }
  return {a2a, matrix};
}

}  // namespace mori::symm
