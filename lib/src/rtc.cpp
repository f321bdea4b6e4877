// The run-time compiler behind the JIT, loaded with dlopen (lib/README.md, JIT cache): the library search and
// the one compiler over the API table that NVRTC and hiprtc share (rtc_impl.hpp).
#include <dlfcn.h>

#include "mori/symm/detail/rtc.hpp"
#include "mori/symm/error.hpp"
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

class RtcCompiler final : public RuntimeCompiler {
 public:
  RtcCompiler(RtcApi api, RtcLibrary library, std::string path)
      : api_(api), library_(std::move(library)), path_(std::move(path)) {
    int major = 0, minor = 0;
    if (api_.version(&major, &minor) == 0) version_ = std::to_string(major) + "." + std::to_string(minor);
  }
  std::string name() const override { return library_.name; }
  std::string version() const override { return version_; }
  std::string library() const override { return path_; }
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
  std::string version_ = "unknown";
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
  return std::make_unique<RtcCompiler>(api, library, path);
}

}  // namespace mori::symm::detail
