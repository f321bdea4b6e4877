// The kernels the suite compiles (lib/README.md, JIT cache): every instantiation per kernel file and arch.
#include <string>
#include <utility>
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

namespace {
// Every instantiation of the kernel files, with the feature each needs ("" = none, built for every arch).
struct Instantiation {
  std::string name;
  const char* needs;
};
const char* const kBulkCopy = "TMA bulk copies (NVIDIA sm_90 and newer)";

std::vector<std::pair<std::string, std::vector<Instantiation>>> all_instantiations() {
  std::vector<Instantiation> a2a{
      {"a2a_fill", ""}, {"a2a_verify", ""}, {"a2a_delay", ""}, {"a2a_ll<0>", ""}, {"a2a_ll<1>", ""}};
  // kEvictFirst = 1 is built everywhere: without L2 cache hints (AMD, NVIDIA before sm_80) its loads are
  // plain ones, and the host never launches it there (docs/amd.md).
  for (const char* lsa : {"0", "1"})
    for (const char* sync : {"0", "1"})
      for (const char* unroll : {"4", "8"})
        for (const char* direct : {"0", "1"})
          for (const char* evict_first : {"0", "1"})
            a2a.push_back({std::string("a2a_push<") + lsa + ", " + sync + ", " + unroll + ", " + direct +
                               ", " + evict_first + ">",
                           ""});
  std::vector<Instantiation> matrix{{"matrix_pingpong<0>", ""}, {"matrix_pingpong<1>", ""}};
  for (const char* lsa : {"0", "1"}) {
    for (const char* unroll : {"4", "8", "16"})
      for (const char* stream : {"0", "1"})
        matrix.push_back({std::string("matrix_copy<") + lsa + ", " + unroll + ", " + stream + ">", ""});
    // Defined only where the prelude sets MORI_BULK_COPY (NVIDIA sm_90 and newer).
    for (const char* tma : {"0", "1"})
      matrix.push_back({std::string("matrix_bulk<") + lsa + ", " + tma + ">", kBulkCopy});
  }
  return {{"a2a.hip", a2a}, {"matrix.hip", matrix}};
}

bool arch_has(const std::string& arch, const char* needs) {
  return !*needs || (needs == kBulkCopy && arch_has_bulk_copy(arch));
}
}  // namespace

std::vector<KernelSpec> kernel_catalog(const std::string& arch) {
  std::vector<KernelSpec> out;
  for (const auto& [file, list] : all_instantiations()) {
    out.push_back({file, {}});
    for (const auto& i : list)
      if (arch_has(arch, i.needs)) out.back().instantiations.push_back(i.name);
  }
  return out;
}

std::vector<KernelLeftOut> kernels_left_out(const std::string& arch) {
  std::vector<KernelLeftOut> out;
  for (const auto& [file, list] : all_instantiations())
    for (const auto& i : list)
      if (!arch_has(arch, i.needs)) out.push_back({file, i.name, i.needs});
  return out;
}

}  // namespace mori::symm
