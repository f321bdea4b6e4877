// SPDX-License-Identifier: MIT
// The kernels the suite compiles (lib/README.md, JIT cache): every instantiation per kernel file and arch.
#include <string>
#include <utility>
#include <vector>

#include "mori/symm/jit/detail/kernel_abi.hpp"
#include "mori/symm/jit/jit.hpp"

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

std::string arch_name_problem(const std::string& arch) {
  if (arch.empty()) return "an empty entry";
  if (arch.rfind("sm_", 0) == 0) {
    // sm_<number>[a|f], the number 50 or more (what NVRTC has compiled for since CUDA 12).
    const std::size_t end = arch.find_first_not_of("0123456789", 3);
    const std::string suffix = end == std::string::npos ? "" : arch.substr(end);
    const int n = sm_number(arch);
    if (n < 0 || (suffix != "" && suffix != "a" && suffix != "f") || arch[3] == '0')
      return "not an NVIDIA arch like sm_90 or sm_90a";
    if (n < 50) return "below sm_50, the oldest arch NVRTC compiles for";
    return {};
  }
  if (arch.rfind("gfx", 0) == 0) {
    // gfx<major><minor><stepping>: gfx90a, gfx942, gfx1100.
    const std::string id = arch.substr(3);
    if (id.size() < 3 || id.size() > 4 || id[0] < '1' || id[0] > '9' ||
        id.find_first_not_of("0123456789abcdef") != std::string::npos)
      return "not an AMD arch like gfx942 or gfx90a";
    return {};
  }
  return "not an arch like sm_90 or gfx942";
}

bool arch_has_bulk_copy(const std::string& arch) {
  return sm_number(arch) >= 90;
}

bool arch_has_l2_cache_hints(const std::string& arch) {
  return sm_number(arch) >= 80;
}

namespace {
// Every instantiation of the kernel files, with the feature each needs ("" = none, built for every arch).
// The names come from kernels/abi.hip's builders (jit/detail/kernel_abi.hpp), shared with the engines.
struct Instantiation {
  std::string name;
  const char* needs;
};
const char* const kBulkCopy = "TMA bulk copies (NVIDIA sm_90 and newer)";

std::vector<std::pair<std::string, std::vector<Instantiation>>> all_instantiations() {
  using namespace detail;
  std::vector<Instantiation> a2a{{a2a_fill_name().name, ""},
                                 {a2a_verify_name().name, ""},
                                 {a2a_delay_name().name, ""},
                                 {a2a_ll_name(false).name, ""},
                                 {a2a_ll_name(true).name, ""}};
  // kEvictFirst = 1 is built everywhere: without L2 cache hints (AMD, NVIDIA before sm_80) its loads are
  // plain ones, and the host never launches it there (docs/amd.md).
  for (bool lsa : {false, true})
    for (bool sync : {false, true})
      for (int unroll : {4, 8})
        for (bool direct : {false, true})
          for (bool evict_first : {false, true})
            a2a.push_back({a2a_push_name(lsa, sync, unroll, direct, evict_first).name, ""});
  std::vector<Instantiation> matrix{{matrix_pingpong_name(false).name, ""},
                                    {matrix_pingpong_name(true).name, ""}};
  for (bool lsa : {false, true}) {
    for (int unroll : {4, 8, 16})
      for (bool stream : {false, true}) matrix.push_back({matrix_copy_name(lsa, unroll, stream).name, ""});
    // Defined only where the prelude sets MORI_BULK_COPY (NVIDIA sm_90 and newer).
    for (bool tma : {false, true}) matrix.push_back({matrix_bulk_name(lsa, tma).name, kBulkCopy});
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
