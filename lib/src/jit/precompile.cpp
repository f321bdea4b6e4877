// SPDX-License-Identifier: MIT
// mori-probe --jit-precompile (precompile.hpp; docs/mori-probe.md): the arch list checked whole, every arch's
// cache folder checked before any is made, then the kernel catalog compiled into the cache per arch.
#include "mori/symm/jit/precompile.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <vector>

#include "cache.hpp"
#include "mori/symm/base/error.hpp"
#include "mori/symm/jit/jit.hpp"
#include "mori/symm/platform/detail/rtc.hpp"

namespace mori::symm {
namespace {

const char* platform_of(const std::string& arch) {
  return arch.rfind("sm_", 0) == 0 ? "cuda" : "amd";
}

// The entries of a comma-separated list, empty ones included.
std::vector<std::string> split_list(const std::string& archs) {
  std::vector<std::string> list;
  for (std::size_t pos = 0; pos <= archs.size();) {
    const std::size_t end = std::min(archs.find(',', pos), archs.size());
    list.push_back(archs.substr(pos, end - pos));
    pos = end + 1;
  }
  return list;
}

// A bad list, on one line: "SOURCE: 'a' is ..., 'b' is ... (in 'LIST'; nothing was compiled)".
[[noreturn]] void refuse(const std::string& source, const std::vector<std::string>& bad,
                         const std::string& archs) {
  std::string names;
  for (const auto& b : bad) names += (names.empty() ? "" : ", ") + b;
  throw UsageError(source + ": " + names + " (in '" + archs + "'; nothing was compiled)");
}

// Every entry a well-formed arch name, and none repeated.
void check_names(const std::vector<std::string>& list, const std::string& source, const std::string& archs) {
  std::vector<std::string> bad;
  for (std::size_t i = 0; i < list.size(); ++i) {
    std::string why = arch_name_problem(list[i]);
    const auto before = list.begin() + static_cast<std::ptrdiff_t>(i);
    if (why.empty() && std::find(list.begin(), before, list[i]) != before) why = "a repeat";
    if (!why.empty()) bad.push_back("'" + list[i] + "' is " + why);
  }
  if (!bad.empty()) refuse(source, bad, archs);
}

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// Why `rtc` does not compile for `arch` ("" where it does): it refuses an empty kernel for that arch, as an
// invalid option (NVRTC: an arch it does not know, e.g. sm_91) or in the compile itself. Other failures
// throw.
std::string unsupported(detail::RuntimeCompiler& rtc, const std::string& arch) {
  const std::string option = rtc.arch_option(arch);
  try {
    rtc.compile("extern \"C\" __global__ void mori_arch_check() {}\n", "arch_check.hip", {}, {},
                {option, "-std=c++17"});
  } catch (const ApiError& e) {
    if (!ends_with(e.api_error(), "_ERROR_INVALID_OPTION") && !ends_with(e.api_error(), "_ERROR_COMPILATION"))
      throw;
    return "unsupported by " + rtc.name() + " " + rtc.version() + " (" + option + ": " + e.api_error() + ")";
  }
  return {};
}

// Every arch compiled for by its platform's run-time compiler, before anything is compiled into a cache.
void check_supported(const std::vector<std::string>& list, const std::string& source,
                     const std::string& archs) {
  std::map<std::string, std::unique_ptr<detail::RuntimeCompiler>> compilers;
  std::vector<std::string> bad;
  for (const auto& arch : list) {
    auto& rtc = compilers[platform_of(arch)];
    if (!rtc) {
      std::string why;
      rtc = platform_of(arch) == std::string("amd") ? detail::load_hiprtc(&why) : detail::load_nvrtc(&why);
      if (!rtc) throw ApiError("load runtime compiler", __FILE__, __LINE__, "RTC_UNAVAILABLE", why);
    }
    if (auto why = unsupported(*rtc, arch); !why.empty()) bad.push_back("'" + arch + "' is " + why);
  }
  if (!bad.empty()) refuse(source, bad, archs);
}

// One Jit per arch, every arch's cache folder checked before the first is made: a cache that cannot be used
// fails the run (exit 3, naming why), since compiling in memory would fill nothing.
std::vector<std::unique_ptr<Jit>> open_jits(Runtime& rt, int device, const std::vector<std::string>& list,
                                            std::uint64_t wall_clock_khz) {
  for (const auto& arch : list) {
    const auto folder = detail::cache_folder(arch, platform_of(arch), false);
    if (folder.folder.empty())
      throw ApiError("--jit-precompile " + arch, __FILE__, __LINE__, "JIT_CACHE_UNUSABLE", folder.why_not);
  }
  // The AMD kernels' clock (docs/amd.md, `%globaltimer`): --wall-clock-khz, else this device's rate where the
  // arch is its own, else the prelude's 100 MHz.
  std::uint64_t own_khz = 0;
  std::string own_arch;
  if (rt.platform() == Platform::amd) {
    const DeviceInfo info = rt.device_info(device);
    own_khz = info.wall_clock_khz;
    own_arch = info.arch;
  }
  std::vector<std::unique_ptr<Jit>> jits;
  for (const auto& arch : list) {
    const std::uint64_t khz = wall_clock_khz ? wall_clock_khz : arch == own_arch ? own_khz : 0;
    jits.push_back(std::make_unique<Jit>(arch, platform_of(arch), khz));
    if (jits.back()->cache_dir().empty())
      throw ApiError("--jit-precompile " + arch, __FILE__, __LINE__, "JIT_CACHE_UNUSABLE",
                     jits.back()->memory_reason());
  }
  return jits;
}

// Every kernel of the catalog for one arch, into its cache: the arch's document of jit_precompile[].
Json compile_arch(Jit& jit, const std::function<void(const std::string&)>& print) {
  const std::string& arch = jit.arch();
  char line[512];
  Json instantiations = Json::object();
  for (const auto& spec : kernel_catalog(arch)) {
    jit.get(spec);
    instantiations[spec.file] = spec.instantiations.size();
    // In the cache, or the run failed: a publish that failed or a folder that went away is a warning to a
    // job, but here it means nothing was precompiled.
    const auto& got = jit.stats().back();
    std::error_code ec;
    if (jit.cache_dir().empty() ||
        !std::filesystem::exists(jit.cache_dir() + "/" + got.key + "/manifest", ec))
      throw ApiError("--jit-precompile " + arch + " " + spec.file, __FILE__, __LINE__, "JIT_CACHE_UNUSABLE",
                     "the entry " + got.key + " is not in the cache" +
                         (jit.memory_reason().empty() ? "" : ": " + jit.memory_reason()));
    std::snprintf(line, sizeof(line), "%-8s %-10s %-9s %8.1f ms  key %s  (%zu instantiations)\n",
                  arch.c_str(), spec.file.c_str(), got.source.c_str(), got.ms, got.key.c_str(),
                  spec.instantiations.size());
    print(line);
  }
  // What this arch does not get, by design (docs/amd.md "Which kernels exist for which vendor").
  Json left_out = Json::array();
  for (const auto& k : kernels_left_out(arch)) {
    left_out.push_back({{"file", k.file}, {"instantiation", k.instantiation}, {"needs", k.needs}});
    std::snprintf(line, sizeof(line), "%-8s %-10s left out: %s (needs %s)\n", arch.c_str(), k.file.c_str(),
                  k.instantiation.c_str(), k.needs.c_str());
    print(line);
  }
  Json doc = jit.stats_json();
  doc["instantiations"] = instantiations;
  doc["left_out"] = left_out;
  doc["wall_clock_khz"] = jit.wall_clock_khz() ? Json(jit.wall_clock_khz()) : Json(nullptr);
  return doc;
}

}  // namespace

Precompiled precompile_kernels(Runtime& rt, int device, const PrecompileOptions& o,
                               const std::function<void(const std::string&)>& print) {
  std::string archs = o.archs;
  if (archs.empty())
    if (const char* a = std::getenv("MORI_GPU_ARCHS"); a && *a) archs = a;
  if (archs.empty() && rt.platform() != Platform::host) archs = rt.device_info(device).arch;
  if (archs.empty())
    throw UsageError("--jit-precompile: name the archs with --archs or MORI_GPU_ARCHS (e.g. sm_90)");
  // The whole list is checked before anything is compiled or created: a bad entry anywhere is exit 2 naming
  // every bad entry, with no cache folder left behind (docs/mori-probe.md).
  const std::string source = o.archs.empty() && archs != o.archs ? "MORI_GPU_ARCHS" : "--archs";
  const auto list = split_list(archs);
  check_names(list, source, archs);
  check_supported(list, source, archs);
  Precompiled out{archs, Json::array()};
  for (auto& jit : open_jits(rt, device, list, o.wall_clock_khz))
    out.per_arch.push_back(compile_arch(*jit, print));
  return out;
}

}  // namespace mori::symm
