// SPDX-License-Identifier: MIT
// The run-time compiler behind the JIT, loaded with dlopen (lib/README.md, JIT cache): the library search and
// the one compiler over the API table that NVRTC and hiprtc share (rtc_impl.hpp).
#include <dlfcn.h>
#include <elf.h>
#include <link.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "mori/symm/base/detail/text.hpp"
#include "mori/symm/base/error.hpp"
#include "mori/symm/base/files.hpp"
#include "mori/symm/platform/detail/rtc.hpp"
#include "rtc_impl.hpp"

namespace mori::symm::detail {

void* open_first(const std::vector<std::string>& names, const std::vector<std::string>& prefixes,
                 std::string* path, std::string* why) {
  for (const auto& n : names) {
    if (void* h = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      *path = n;
      return h;
    }
  }
  for (const auto& p : prefixes) {
    if (p.empty()) continue;
    for (const auto& n : names) {
      std::string full = p + "/" + n;
      if (void* h = dlopen(full.c_str(), RTLD_NOW | RTLD_LOCAL)) {
        *path = full;
        return h;
      }
    }
  }
  if (why) {
    const char* e = dlerror();
    std::string tried;
    for (const auto& n : names) tried += (tried.empty() ? "" : ", ") + n;
    *why = "could not load " + tried + " from the loader path or " + std::to_string(prefixes.size()) +
           " toolkit folders" + (e ? std::string(" (") + e + ")" : "");
  }
  return nullptr;
}

namespace {

std::string hex64(std::uint64_t h) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(h));
  return b;
}

// FNV-1a over a file's bytes into *h; false where it cannot be read (read through files.hpp, bounded).
bool hash_file(const std::string& path, std::uint64_t* h) {
  try {
    const std::string bytes = read_file(path, kCompilerLibrary);
    *h = fnv1a(*h, bytes.data(), bytes.size());
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

// The GNU build id of the loaded object whose load address is `base`, from its PT_NOTE segments in memory.
struct BuildIdSearch {
  ElfW(Addr) base = 0;
  bool found = false;
  std::string id;
};

int find_build_id(dl_phdr_info* info, std::size_t, void* data) {
  auto* s = static_cast<BuildIdSearch*>(data);
  if (info->dlpi_addr != s->base) return 0;
  s->found = true;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    const std::size_t align = ph.p_align == 8 ? 8 : 4;
    auto up = [align](std::size_t n) { return (n + align - 1) & ~(align - 1); };
    const char* p = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
    const char* end = p + ph.p_memsz;
    while (static_cast<std::size_t>(end - p) >= sizeof(ElfW(Nhdr))) {
      ElfW(Nhdr) n;
      std::memcpy(&n, p, sizeof n);
      const char* name = p + sizeof n;
      const char* desc = name + up(n.n_namesz);
      const char* next = desc + up(n.n_descsz);
      if (next > end) break;
      if (n.n_type == NT_GNU_BUILD_ID && n.n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0) {
        static constexpr char kDigits[] = "0123456789abcdef";
        for (std::size_t k = 0; k < n.n_descsz; ++k) {
          const auto c = static_cast<unsigned char>(desc[k]);
          s->id += kDigits[c >> 4];
          s->id += kDigits[c & 15];
        }
        return 1;
      }
      p = next;
    }
  }
  return 1;
}

}  // namespace

std::string object_identity(void* handle) {
  link_map* lm = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &lm) != 0 || !lm || !lm->l_name) {
    const char* e = dlerror();
    return std::string("unknown object (dlinfo: ") + (e ? e : "no link map") + ")";
  }
  std::error_code ec;
  std::string path = std::filesystem::canonical(lm->l_name, ec).string();
  if (ec) path = lm->l_name;
  BuildIdSearch s;
  s.base = lm->l_addr;
  dl_iterate_phdr(find_build_id, &s);
  if (!s.id.empty()) return path + " build-id " + s.id;
  std::uint64_t h = kFnvOffset;
  if (!hash_file(path, &h)) return path + " unreadable (" + errno_name(errno) + ")";
  return path + " fnv " + hex64(h);
}

std::string folder_identity(const std::string& folder) {
  std::error_code ec;
  if (!std::filesystem::is_directory(folder, ec)) return "";
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(folder, ec))
    if (e.is_regular_file(ec)) files.push_back(e.path().filename().string());
  if (ec) return folder + ": unreadable (" + ec.message() + ")";
  std::sort(files.begin(), files.end());
  std::uint64_t h = kFnvOffset;
  for (const auto& f : files) {
    h = fnv1a(h, f.c_str(), f.size() + 1);
    if (!hash_file(folder + "/" + f, &h))
      return folder + "/" + f + ": unreadable (" + errno_name(errno) + ")";
  }
  return folder + ": " + std::to_string(files.size()) + " files fnv " + hex64(h);
}

namespace {

class RtcCompiler final : public RuntimeCompiler {
 public:
  RtcCompiler(RtcApi api, RtcLibrary library, std::string path, std::vector<void*> handles)
      : api_(api), library_(std::move(library)), path_(std::move(path)), handles_(std::move(handles)) {
    int major = 0, minor = 0;
    if (api_.version(&major, &minor) == 0) version_ = std::to_string(major) + "." + std::to_string(minor);
  }
  std::string name() const override { return library_.name; }
  std::string version() const override { return version_; }
  std::string library() const override { return path_; }
  std::string identity() const override {
    std::call_once(identity_once_, [this] {
      for (void* h : handles_) identity_ += object_identity(h) + "\n";
      for (const auto& f : library_.data_folders)
        if (auto id = folder_identity(f); !id.empty()) identity_ += id + "\n";
    });
    return identity_;
  }
  std::string arch_option(const std::string& arch) const override { return library_.arch_option + arch; }

  RtcOutput compile(const std::string& source, const std::string& file_name,
                    const std::vector<std::pair<std::string, std::string>>& headers,
                    const std::vector<std::string>& name_expressions,
                    const std::vector<std::string>& options) const override {
    RtcApi::Program prog = nullptr;
    std::vector<const char*> header_texts, header_names;
    for (const auto& [name, text] : headers) {
      header_names.push_back(name.c_str());
      header_texts.push_back(text.c_str());
    }
    check(api_.create(&prog, source.c_str(), file_name.c_str(), static_cast<int>(headers.size()),
                      header_texts.data(), header_names.data()),
          "CreateProgram");
    RtcOutput out;
    try {
      for (const auto& n : name_expressions) check(api_.add_name(prog, n.c_str()), "AddNameExpression");
      std::vector<const char*> opts;
      for (const auto& o : options) opts.push_back(o.c_str());
      const RtcApi::Result rc = api_.compile(prog, static_cast<int>(opts.size()), opts.data());
      std::size_t log_size = 0;
      if (api_.log_size(prog, &log_size) == 0 && log_size > 1) {
        out.log.resize(log_size);
        api_.log(prog, out.log.data());
        out.log.resize(log_size - 1);
      }
      if (rc != 0)
        throw ApiError(library_.name + "CompileProgram(" + file_name + ")", __FILE__, __LINE__,
                       api_.error_string(rc), out.log);
      std::size_t code_size = 0;
      check(api_.code_size(prog, &code_size), library_.code_size);
      out.image.resize(code_size);
      check(api_.code(prog, out.image.data()), library_.code);
      for (const auto& n : name_expressions) {
        const char* lowered = nullptr;
        check(api_.lowered_name(prog, n.c_str(), &lowered), "GetLoweredName");
        out.lowered[n] = lowered;
      }
    } catch (...) {
      api_.destroy(&prog);
      throw;
    }
    api_.destroy(&prog);
    return out;
  }

 private:
  void check(RtcApi::Result rc, const std::string& what) const {
    if (rc != 0) throw ApiError(library_.name + what, __FILE__, __LINE__, api_.error_string(rc));
  }
  RtcApi api_;
  RtcLibrary library_;
  std::string path_;
  std::vector<void*> handles_;  // the compiler's library, then its companions (never closed)
  std::string version_ = "unknown";
  mutable std::once_flag identity_once_;
  mutable std::string identity_;
};

// The table's entry points from a loaded library, each named by the API's prefix and its name; false +
// *why at the first that is missing.
bool resolve(void* lib, const RtcLibrary& library, const std::string& path, RtcApi& api, std::string* why) {
  auto get = [&](auto& fn, const std::string& name) {
    const std::string symbol = library.name + name;
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, symbol.c_str()));
    if (!fn && why) *why = "missing symbol " + symbol + " in " + path;
    return fn != nullptr;
  };
  return get(api.version, "Version") && get(api.create, "CreateProgram") &&
         get(api.destroy, "DestroyProgram") && get(api.add_name, "AddNameExpression") &&
         get(api.compile, "CompileProgram") && get(api.log_size, "GetProgramLogSize") &&
         get(api.log, "GetProgramLog") && get(api.code_size, library.code_size) &&
         get(api.code, library.code) && get(api.lowered_name, "GetLoweredName") &&
         get(api.error_string, "GetErrorString");
}

}  // namespace

std::unique_ptr<RuntimeCompiler> load_rtc(const RtcLibrary& library, std::string* why) {
  std::string path;
  void* lib = open_first(library.files, library.folders, &path, why);
  if (!lib) return nullptr;
  RtcApi api{};
  if (!resolve(lib, library, path, api, why)) {
    dlclose(lib);
    return nullptr;
  }
  std::vector<void*> handles = {lib};
  std::string companion_path;
  for (const auto& c : library.companions)
    if (void* h = open_first({c}, library.folders, &companion_path, nullptr)) {
      handles.push_back(h);
      break;
    }
  return std::make_unique<RtcCompiler>(api, library, path, std::move(handles));
}

}  // namespace mori::symm::detail
