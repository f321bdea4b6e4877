// SPDX-License-Identifier: MIT
// The kernel JIT (jit.hpp; lib/README.md, JIT cache): kernel sources and their cache key, compiling through
// the run-time compiler, and the kernels this process loaded. The on-disk cache is in cache.cpp.
#include "mori/symm/jit/jit.hpp"
#include "mori/symm/base/env.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>

#include "cache.hpp"
#include "mori/symm/base/detail/text.hpp"
#include "mori/symm/base/error.hpp"
#include "mori/symm/base/files.hpp"
#include "mori/symm/base/log.hpp"
#include "mori/symm/platform/detail/rtc.hpp"

namespace mori::symm {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;
using detail::EntryLock;
using detail::load_entry;
using detail::publish_entry;

bool env_on(const char* name) {
  const char* v = env_read(name);
  if (!v || !*v) return false;
  std::string s(v);
  if (s == "1" || s == "true" || s == "yes" || s == "on") return true;
  if (s == "0" || s == "false" || s == "no" || s == "off") return false;
  throw UsageError(std::string(name) + ": '" + s +
                   "' is not a boolean (accepted: 1, 0, true, false, yes, no)");
}

std::string image_hash(const CompiledKernels& k) {
  return hash_hex({std::string(k.image.begin(), k.image.end())});
}

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

}  // namespace

std::string hash_hex(const std::vector<std::string>& parts) {
  std::uint64_t h = detail::kFnvOffset;
  auto mix = [&](const void* data, std::size_t n) { h = detail::fnv1a(h, data, n); };
  for (const auto& s : parts) {
    const std::uint64_t n = s.size();
    mix(&n, sizeof(n));
    mix(s.data(), s.size());
  }
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

std::string kernel_dir() {
  if (const char* d = env_read("MORI_KERNEL_DIR"); d && *d) {
    if (!fs::is_directory(d)) throw UsageError(std::string("MORI_KERNEL_DIR: '") + d + "' is not a folder");
    return d;
  }
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    fs::path installed = exe.parent_path().parent_path() / "share" / "mori" / "kernels";
    if (fs::exists(installed / "prelude.hip", ec)) return installed.string();
  }
#ifdef MORI_SOURCE_KERNEL_DIR
  if (fs::exists(fs::path(MORI_SOURCE_KERNEL_DIR) / "prelude.hip", ec)) return MORI_SOURCE_KERNEL_DIR;
#endif
  throw ApiError(
      "kernel_dir", __FILE__, __LINE__, "KERNELS_NOT_FOUND",
      "no kernel sources: set MORI_KERNEL_DIR, or install the tools with their share/mori/kernels");
}

std::string target_arch(Runtime& rt, int device) {
  if (const char* a = env_read("MORI_GPU_ARCHS"); a && *a) {
    std::string s(a);
    return s.substr(0, s.find(','));
  }
  return rt.device_info(device).arch;
}
Jit::Jit(std::string arch, std::string platform, std::uint64_t wall_clock_khz)
    : arch_(std::move(arch)),
      platform_(std::move(platform)),
      wall_clock_khz_(platform_ == "amd" && wall_clock_rate_plausible(wall_clock_khz) &&
                              wall_clock_khz != kWallClockDefaultKhz
                          ? wall_clock_khz
                          : 0) {
  if (arch_.empty() || arch_.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") != std::string::npos)
    throw UsageError("MORI_GPU_ARCHS: '" + arch_ + "' is not an arch name like sm_90 or gfx942");
  auto folder = detail::cache_folder(arch_, platform_, true);
  root_ = std::move(folder.folder);
  memory_reason_ = std::move(folder.why_not);
}

Jit::~Jit() = default;

detail::RuntimeCompiler& Jit::compiler() {
  if (!rtc_) {
    std::string why;
    rtc_ = platform_ == "amd" ? detail::load_hiprtc(&why) : detail::load_nvrtc(&why);
    if (!rtc_) throw ApiError("load runtime compiler", __FILE__, __LINE__, "RTC_UNAVAILABLE", why);
    if (env_on("MORI_JIT_VERBOSE"))
      spdlog::info("jit: {} {} from {}", rtc_->name(), rtc_->version(), rtc_->library());
  }
  return *rtc_;
}

std::vector<std::string> jit_defines(const std::string& platform, std::uint64_t wall_clock_khz) {
  std::vector<std::string> d = {"-DMORI_KERNEL_PLATFORM_" + platform};
  // kernels/prelude.hip defines MORI_WALLCLOCK_HZ as 100 MHz where no option does (docs/amd.md).
  if (platform == "amd" && wall_clock_rate_plausible(wall_clock_khz) &&
      wall_clock_khz != kWallClockDefaultKhz)
    d.push_back("-DMORI_WALLCLOCK_HZ=" + std::to_string(wall_clock_khz * 1000) + "ull");
  return d;
}

std::vector<std::string> Jit::options() {
  std::vector<std::string> o = {compiler().arch_option(arch_), "-std=c++17"};
  for (auto& d : jit_defines(platform_, wall_clock_khz_)) o.push_back(std::move(d));
  if (platform_ == "cuda") o.push_back("--use_fast_math");
  return o;
}

namespace {

// The names in `#include "name"` lines of a source (angle-bracket includes are the compiler's own).
std::vector<std::string> quoted_includes(const std::string& text) {
  std::vector<std::string> names;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::size_t i = line.find_first_not_of(" \t");
    if (i == std::string::npos || line[i] != '#') continue;
    i = line.find_first_not_of(" \t", i + 1);
    if (i == std::string::npos || line.compare(i, 7, "include") != 0) continue;
    i = line.find_first_not_of(" \t", i + 7);
    if (i == std::string::npos || line[i] != '"') continue;
    const std::size_t end = line.find('"', i + 1);
    if (end != std::string::npos && end > i + 1) names.push_back(line.substr(i + 1, end - i - 1));
  }
  return names;
}

constexpr std::size_t kMaxKernelHeaders = 64;

}  // namespace

KernelSource Jit::source_of(const KernelSpec& spec) const {
  const std::string dir = kernel_dir();
  if (spec.file.find('/') != std::string::npos) throw UsageError("kernel file names carry no folder");
  KernelSource s;
  // The prelude, then the ABI shared with the host (kernels/abi.hip), then the kernel: all of it is the
  // source the cache key hashes.
  s.text = read_file(dir + "/prelude.hip", kKernelSource) + "\n#line 1 \"abi.hip\"\n" +
           read_file(dir + "/abi.hip", kKernelSource) + "\n#line 1 \"" + spec.file + "\"\n" +
           read_file(dir + "/" + spec.file, kKernelSource);
  // Headers the sources include from the kernel folder are read here, through the same reader, and handed to
  // the compiler by name: it never opens a file of the kernel folder itself, and they are part of the key.
  std::vector<std::string> pending = quoted_includes(s.text);
  std::set<std::string> seen;
  while (!pending.empty()) {
    const std::string name = pending.back();
    pending.pop_back();
    if (!seen.insert(name).second) continue;
    if (seen.size() > kMaxKernelHeaders)
      throw UsageError("kernel sources in '" + dir + "' include more than " +
                       std::to_string(kMaxKernelHeaders) + " headers");
    std::string text;
    if (!read_file_if_present(name[0] == '/' ? name : dir + "/" + name, kKernelSource, text)) continue;
    for (auto& n : quoted_includes(text)) pending.push_back(std::move(n));
    s.headers.emplace_back(name, std::move(text));
  }
  return s;
}

bool Jit::precompile_requested() {
  return env_on("MORI_PRECOMPILE");
}

std::string Jit::key_of(const KernelSpec& spec) {
  return key_of(spec, source_of(spec));
}

std::string jit_key(const KernelSpec& spec, const KernelSource& source,
                    const std::vector<std::string>& compiler, const std::string& arch,
                    const std::string& platform, const std::vector<std::string>& options) {
  // Without headers the key is that of the source alone, as before headers were read.
  std::string text = source.text;
  for (const auto& [name, body] : source.headers) text += std::string(1, '\0') + name + '\0' + body;
  std::vector<std::string> parts = {text};
  for (const auto& c : compiler) parts.push_back(c);
  parts.push_back(arch);
  parts.push_back(platform);
  for (const auto& o : options) parts.push_back(o);
  for (const auto& i : spec.instantiations) parts.push_back(i);
  return hash_hex(parts) + hash_hex({parts[0], spec.file});
}

std::string Jit::key_of(const KernelSpec& spec, const KernelSource& source) {
  return jit_key(spec, source, {compiler().name(), compiler().version(), compiler().identity()}, arch_,
                 platform_, options());
}

CompiledKernels Jit::get(const KernelSpec& spec) {
  const bool verbose = env_on("MORI_JIT_VERBOSE");
  const bool disabled = env_on("MORI_DISABLE_JIT");
  const KernelSource source = source_of(spec);
  CompiledKernels out;
  out.key = key_of(spec, source);
  const auto t0 = Clock::now();

  auto compile = [&](const char* where) {
    if (disabled)
      throw ApiError(
          "jit " + spec.file, __FILE__, __LINE__, "JIT_DISABLED",
          "MORI_DISABLE_JIT=1 and no cached entry " + out.key + (root_.empty() ? "" : " under " + root_));
    if (verbose)
      spdlog::info("jit: compiling {} [{}] for {} ({}) key {}", spec.file, spec.instantiations.size(), arch_,
                   where, out.key);
    auto r = compiler().compile(source.text, spec.file, source.headers, spec.instantiations, options());
    if (!r.log.empty() && verbose) spdlog::info("jit: compiler log for {}:\n{}", spec.file, r.log);
    out.image = std::move(r.image);
    out.lowered = std::move(r.lowered);
    if (verbose) spdlog::info("jit: compiled {} in {:.1f} ms", spec.file, ms_since(t0));
  };

  auto in_memory = [&] {
    compile("in memory");
    record({spec.file, out.key, "memory", ms_since(t0), image_hash(out)});
    return out;
  };
  if (root_.empty()) return in_memory();

  const std::string entry = root_ + "/" + out.key;
  auto try_load = [&] { return load_entry(root_, entry, spec, out); };

  auto loaded = [&] {
    record({spec.file, out.key, "cache", ms_since(t0), image_hash(out)});
    if (verbose)
      spdlog::info("jit: loaded {} from cache in {:.2f} ms, image {}", spec.file, stats_.back().ms,
                   stats_.back().image_hash);
    return out;
  };
  if (try_load()) return loaded();
  // One process compiles; the others wait on the lock (bounded by --timeout-s) and then load.
  std::optional<EntryLock> lock;
  try {
    lock.emplace(root_ + "/" + out.key + ".lock", spec.file);
  } catch (const FileError& e) {
    // The cache folder went away under the job (removed, unmounted), or something that is no lock file lies
    // at the lock's path (a folder, a symlink: named): like a failed publish, a warning. This kernel and the
    // ones after it compile in memory.
    memory_reason_ = detail::lock_trouble(root_, root_ + "/" + out.key + ".lock", e.what());
    spdlog::warn("jit: compiling {} in memory: {}", spec.file, memory_reason_);
    root_.clear();
    return in_memory();
  }
  if (try_load()) return loaded();
  compile("cold");
  publish_entry(root_, entry, out, spec.file);
  record({spec.file, out.key, "compiled", ms_since(t0), image_hash(out)});
  if (verbose)
    spdlog::info("jit: published {} in {:.1f} ms, image {}", spec.file, stats_.back().ms,
                 stats_.back().image_hash);
  return out;
}

namespace {
struct Loaded {
  std::mutex mu;
  std::vector<std::pair<std::string, JitEntryStats>> entries;  // arch, entry
};
Loaded& loaded_kernels() {
  static Loaded l;
  return l;
}
}  // namespace

void Jit::record(JitEntryStats s) {
  {
    std::lock_guard lk(loaded_kernels().mu);
    loaded_kernels().entries.emplace_back(arch_, s);
  }
  stats_.push_back(std::move(s));
}

Json loaded_kernels_json() {
  std::lock_guard lk(loaded_kernels().mu);
  if (loaded_kernels().entries.empty()) return nullptr;
  Json entries = Json::array();
  for (const auto& [arch, s] : loaded_kernels().entries)
    entries.push_back({{"arch", arch},
                       {"file", s.file},
                       {"key", s.key},
                       {"source", s.source},
                       {"image_hash", s.image_hash}});
  return {{"entries", entries}};
}

Json Jit::stats_json() const {
  Json j;
  double cold = 0, load = 0;
  Json entries = Json::array();
  for (const auto& s : stats_) {
    (s.source == "cache" ? load : cold) += s.ms;
    entries.push_back(
        {{"file", s.file}, {"key", s.key}, {"source", s.source}, {"ms", s.ms}, {"image_hash", s.image_hash}});
  }
  j["arch"] = arch_;
  j["compiler"] = rtc_ ? rtc_->name() + " " + rtc_->version() : "not loaded";
  j["cache_dir"] = root_.empty() ? Json(nullptr) : Json(root_);
  j["kernel_dir"] = kernel_dir();
  if (!memory_reason_.empty()) j["in_memory_reason"] = memory_reason_;
  j["cold_compile_ms"] = cold;
  j["cache_load_ms"] = load;
  j["entries"] = entries;
  return j;
}

KernelModule::KernelModule(Runtime& rt, const CompiledKernels& k) : rt_(rt) {
  module_ = rt_.module_load(k.image);
  try {
    for (const auto& [inst, sym] : k.lowered) functions_[inst] = rt_.module_function(module_, sym);
  } catch (...) {
    rt_.module_unload(module_);
    throw;
  }
}

KernelModule::~KernelModule() {
  rt_.module_unload(module_);
}

Function KernelModule::function(const std::string& inst) const {
  auto it = functions_.find(inst);
  if (it == functions_.end())
    throw ApiError("KernelModule::function(" + inst + ")", __FILE__, __LINE__, "NOT_FOUND");
  return it->second;
}

}  // namespace mori::symm
