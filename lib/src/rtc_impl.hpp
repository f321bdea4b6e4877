// The body shared by the NVRTC and hiprtc compilers: both APIs have the same shape, so one template serves
// both, instantiated with a table of the API's entry points (rtc_nvrtc.cpp, rtc_hiprtc.cpp).
#pragma once

#include <dlfcn.h>

#include <cstdlib>

#include "mori/symm/detail/rtc.hpp"
#include "mori/symm/error.hpp"

namespace mori::symm::detail {

template <class Api>
class RtcCompiler final : public RuntimeCompiler {
 public:
  RtcCompiler(Api api, std::string path) : api_(api), path_(std::move(path)) {
    int major = 0, minor = 0;
    if (api_.version(&major, &minor) == 0) version_ = std::to_string(major) + "." + std::to_string(minor);
  }
  std::string name() const override { return Api::kName; }
  std::string version() const override { return version_; }
  std::string library() const override { return path_; }
  std::string arch_option(const std::string& arch) const override { return Api::kArchOption + arch; }

  RtcOutput compile(const std::string& source, const std::string& file_name,
                    const std::vector<std::string>& name_expressions,
                    const std::vector<std::string>& options) const override {
    typename Api::Program prog{};
    check(api_.create(&prog, source.c_str(), file_name.c_str(), 0, nullptr, nullptr), "CreateProgram");
    RtcOutput out;
    try {
      for (const auto& n : name_expressions) check(api_.add_name(prog, n.c_str()), "AddNameExpression");
      std::vector<const char*> opts;
      for (const auto& o : options) opts.push_back(o.c_str());
      auto rc = api_.compile(prog, static_cast<int>(opts.size()), opts.data());
      std::size_t log_size = 0;
      if (api_.log_size(prog, &log_size) == 0 && log_size > 1) {
        out.log.resize(log_size);
        api_.log(prog, out.log.data());
        out.log.resize(log_size - 1);
      }
      if (rc != 0)
        throw ApiError(std::string(Api::kPrefix) + "CompileProgram(" + file_name + ")", __FILE__, __LINE__,
                       api_.error_string(rc), out.log);
      std::size_t code_size = 0;
      check(api_.code_size(prog, &code_size), "GetCodeSize");
      out.image.resize(code_size);
      check(api_.code(prog, out.image.data()), "GetCode");
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
  template <class R>
  void check(R rc, const char* what) const {
    if (rc != 0) throw ApiError(std::string(Api::kPrefix) + what, __FILE__, __LINE__, api_.error_string(rc));
  }
  Api api_;
  std::string path_;
  std::string version_ = "unknown";
};

// One entry point from a loaded library; false + *why if it is missing.
template <class F>
bool resolve(void* lib, const char* sym, F& fn, std::string* why) {
  fn = reinterpret_cast<F>(dlsym(lib, sym));
  if (!fn && why) *why = std::string("missing symbol ") + sym;
  return fn != nullptr;
}

// The entry points both compilers have, as X(member, function), the function named by pasting the API's
// prefix (nvrtc, hiprtc). The code getters differ in name (GetCUBIN / GetCode): each API lists those itself.
#define MORI_RTC_COMMON_ENTRY_POINTS(X, P)                                                     \
  X(version, P##Version)                                                                       \
  X(create, P##CreateProgram) X(destroy, P##DestroyProgram) X(add_name, P##AddNameExpression)  \
      X(compile, P##CompileProgram) X(log_size, P##GetProgramLogSize) X(log, P##GetProgramLog) \
          X(lowered_name, P##GetLoweredName) X(error_string, P##GetErrorString)
#define MORI_RTC_DECLARE(member, fn) decltype(&fn) member;
#define MORI_RTC_RESOLVE(member, fn) ok = ok && resolve(lib, #fn, api.member, why);

}  // namespace mori::symm::detail
