// SPDX-License-Identifier: MIT
// mori-probe --jit-precompile (precompile.hpp; docs/mori-probe.md): the arch list checked whole, every arch's
// cache folder checked before any is made, then the kernel catalog compiled into the cache, files and archs
// at once on the cores this process may use.
#include "mori/symm/jit/precompile.hpp"
#include "mori/symm/base/env.hpp"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
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

// The cores this process may run on (its CPU affinity, which `taskset` and the batch system set), at least 1.
unsigned usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0)
    return static_cast<unsigned>(std::max(1, CPU_COUNT(&set)));
  return std::max(1u, std::thread::hardware_concurrency());
}

// One kernel file for one arch: compiled by a Jit of its own, so that units share no compiler state. Every
// unit's Jit is made before the first compile starts, so no cache folder is made while others compile (a
// folder removed under the run stays removed, as with one Jit per arch).
struct Unit {
  std::size_t arch_index = 0;
  KernelSpec spec;
  std::unique_ptr<Jit> jit;
  std::exception_ptr error;
  std::string line;  // the printed line, once compiled
  bool done = false;
};

// The unit compiled into its arch's cache; throws where it is not there afterwards (a publish that failed or
// a folder that went away is a warning to a job, but here it means nothing was precompiled).
void compile_unit(Unit& u, const std::string& arch) {
  u.jit->get(u.spec);
  const auto& got = u.jit->stats().back();
  std::error_code ec;
  if (u.jit->cache_dir().empty() ||
      !std::filesystem::exists(u.jit->cache_dir() + "/" + got.key + "/manifest", ec))
    throw ApiError("--jit-precompile " + arch + " " + u.spec.file, __FILE__, __LINE__, "JIT_CACHE_UNUSABLE",
                   "the entry " + got.key + " is not in the cache" +
                       (u.jit->memory_reason().empty() ? "" : ": " + u.jit->memory_reason()));
  char line[512];
  std::snprintf(line, sizeof(line), "%-8s %-10s %-9s %8.1f ms  key %s  (%zu instantiations)\n", arch.c_str(),
                u.spec.file.c_str(), got.source.c_str(), got.ms, got.key.c_str(),
                u.spec.instantiations.size());
  u.line = line;
}

// What an arch does not get, by design (docs/amd.md "Which kernels exist for which vendor"): the arch's
// left_out[], and its printed lines.
std::pair<Json, std::string> left_out_of(const std::string& arch) {
  Json left_out = Json::array();
  std::string lines;
  char line[512];
  for (const auto& k : kernels_left_out(arch)) {
    left_out.push_back({{"file", k.file}, {"instantiation", k.instantiation}, {"needs", k.needs}});
    std::snprintf(line, sizeof(line), "%-8s %-10s left out: %s (needs %s)\n", arch.c_str(), k.file.c_str(),
                  k.instantiation.c_str(), k.needs.c_str());
    lines += line;
  }
  return {left_out, lines};
}

// The arch's document of jit_precompile[] from its units' Jits, in catalog order.
Json arch_doc(const Jit& lead, const std::vector<Unit*>& units, Json left_out) {
  Json doc = units.empty() ? lead.stats_json() : units.front()->jit->stats_json();
  Json instantiations = Json::object();
  double cold = 0, load = 0;
  Json entries = Json::array();
  for (const Unit* u : units) {
    const Json one = u->jit->stats_json();
    cold += one["cold_compile_ms"].get<double>();
    load += one["cache_load_ms"].get<double>();
    for (const auto& e : one["entries"]) entries.push_back(e);
    instantiations[u->spec.file] = u->spec.instantiations.size();
  }
  doc["cold_compile_ms"] = cold;
  doc["cache_load_ms"] = load;
  doc["entries"] = entries;
  doc["instantiations"] = instantiations;
  doc["left_out"] = std::move(left_out);
  doc["wall_clock_khz"] = lead.wall_clock_khz() ? Json(lead.wall_clock_khz()) : Json(nullptr);
  return doc;
}

// Every unit compiled by up to `jobs` threads, each taking the next unit in order; NVRTC compiles run at
// once, hiprtc's one at a time (its comgr serialises compiles within a process: threads would gain nothing
// there, and older comgr releases are not safe under them). Each unit's line is printed once it and every
// unit before it are done, so the output keeps the catalog's order (an arch's left-out lines, `after[arch]`,
// after its last unit). After a failure no new unit starts; the first failed unit in order is rethrown once
// every thread has ended. Returns the threads that ran (fewer where the system refused one: not an error).
unsigned compile_units(std::vector<Unit>& units, const std::vector<std::unique_ptr<Jit>>& jits, unsigned jobs,
                       const std::vector<std::string>& after,
                       const std::function<void(const std::string&)>& print) {
  std::mutex mu, amd_mu;
  std::size_t next = 0, printed = 0;
  bool failed = false;
  std::exception_ptr print_error;  // the caller's print threw: no thread may end by an exception
  auto work = [&] {
    for (;;) {
      Unit* u = nullptr;
      {
        std::lock_guard lk(mu);
        if (failed || next == units.size()) return;
        u = &units[next++];
      }
      const Jit& lead = *jits[u->arch_index];
      try {
        std::unique_lock amd(amd_mu, std::defer_lock);
        if (platform_of(lead.arch()) == std::string("amd")) amd.lock();
        compile_unit(*u, lead.arch());
      } catch (...) {
        u->error = std::current_exception();
      }
      std::lock_guard lk(mu);
      u->done = true;
      failed = failed || u->error;
      if (print_error) return;
      try {
        for (; printed < units.size() && units[printed].done && !units[printed].error; ++printed) {
          print(units[printed].line);
          const std::size_t a = units[printed].arch_index;
          if (printed + 1 == units.size() || units[printed + 1].arch_index != a) print(after[a]);
        }
      } catch (...) {
        print_error = std::current_exception();
        failed = true;
        return;
      }
    }
  };
  std::vector<std::thread> threads;
  try {
    while (threads.size() + 1 < jobs) threads.emplace_back(work);
  } catch (const std::system_error&) {  // no thread to be had (a process limit): the ones running do the rest
  }
  work();
  for (auto& t : threads) t.join();
  for (const auto& u : units)
    if (u.error) std::rethrow_exception(u.error);
  if (print_error) std::rethrow_exception(print_error);
  return static_cast<unsigned>(threads.size() + 1);
}

}  // namespace

Precompiled precompile_kernels(Runtime& rt, int device, const PrecompileOptions& o,
                               const std::function<void(const std::string&)>& print) {
  std::string archs = o.archs;
  if (archs.empty())
    if (const char* a = env_read("MORI_GPU_ARCHS"); a && *a) archs = a;
  if (archs.empty() && rt.platform() != Platform::host) archs = rt.device_info(device).arch;
  if (archs.empty())
    throw UsageError("--jit-precompile: name the archs with --archs or MORI_GPU_ARCHS (e.g. sm_90)");
  // The whole list is checked before anything is compiled or created: a bad entry anywhere is exit 2 naming
  // every bad entry, with no cache folder left behind (docs/mori-probe.md).
  const std::string source = o.archs.empty() && archs != o.archs ? "MORI_GPU_ARCHS" : "--archs";
  const auto list = split_list(archs);
  check_names(list, source, archs);
  check_supported(list, source, archs);
  const auto jits = open_jits(rt, device, list, o.wall_clock_khz);
  std::vector<Unit> units;
  for (std::size_t a = 0; a < list.size(); ++a)
    for (auto& spec : kernel_catalog(list[a]))
      units.push_back({a, std::move(spec),
                       std::make_unique<Jit>(list[a], platform_of(list[a]), jits[a]->wall_clock_khz()),
                       nullptr, "", false});
  std::vector<std::pair<Json, std::string>> left_out;
  std::vector<std::string> after;
  for (const auto& arch : list) {
    left_out.push_back(left_out_of(arch));
    after.push_back(left_out.back().second);
  }
  Precompiled out{archs, Json::array(),
                  static_cast<unsigned>(std::min<std::size_t>(usable_cores(), units.size())), 0};
  const auto t0 = std::chrono::steady_clock::now();
  out.jobs = compile_units(units, jits, out.jobs, after, print);
  out.wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  for (std::size_t a = 0; a < list.size(); ++a) {
    std::vector<Unit*> mine;
    for (auto& u : units)
      if (u.arch_index == a) mine.push_back(&u);
    out.per_arch.push_back(arch_doc(*jits[a], mine, left_out[a].first));
  }
  return out;
}

}  // namespace mori::symm
