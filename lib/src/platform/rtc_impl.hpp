// SPDX-License-Identifier: MIT
// One API table for both run-time compilers. NVRTC and hiprtc have the same entry points under another prefix
// (nvrtc, hiprtc; only the code getters differ in name: GetCUBIN, GetCode), an opaque program handle and an
// int-sized result code, 0 on success. So one table of function pointers serves both: load_rtc fills it by
// name from the library, and each platform file (rtc_nvrtc.cpp, rtc_hiprtc.cpp) checks at compile time that
// its API's header declares every entry point with the shape the table calls it with.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "mori/symm/platform/detail/rtc.hpp"

namespace mori::symm::detail {

struct RtcApi {
  using Program = void*;  // nvrtcProgram, hiprtcProgram: pointers to opaque structs
  using Result = int;     // nvrtcResult, hiprtcResult: enumerations
  Result (*version)(int* major, int* minor);
  Result (*create)(Program* prog, const char* source, const char* file_name, int headers,
                   const char** header_sources, const char** header_names);
  Result (*destroy)(Program* prog);
  Result (*add_name)(Program prog, const char* name_expression);
  Result (*compile)(Program prog, int options, const char** option_list);
  Result (*log_size)(Program prog, std::size_t* size);
  Result (*log)(Program prog, char* log);
  Result (*code_size)(Program prog, std::size_t* size);
  Result (*code)(Program prog, char* code);
  Result (*lowered_name)(Program prog, const char* name_expression, const char** lowered);
  const char* (*error_string)(Result rc);
};

// What sets one compiler apart from the other.
struct RtcLibrary {
  std::string name;         // "nvrtc": the compiler's name and the prefix of every entry point
  std::string arch_option;  // the arch option up to the arch ("--gpu-architecture=")
  std::string code_size;    // the code getters' names after the prefix ("GetCUBINSize", "GetCUBIN")
  std::string code;
  std::vector<std::string> files;    // the library's file names, newest first
  std::vector<std::string> folders;  // toolkit folders tried after the loader path ("" is skipped)
  // Libraries the compiler does its work in (hiprtc: comgr, where LLVM is), loaded by the first name that
  // loads; each is part of the identity (RuntimeCompiler::identity). None loading is no error.
  std::vector<std::string> companions;
  // Folders whose files' contents are part of the identity (hiprtc: the device libraries' bitcode); missing
  // ones are skipped.
  std::vector<std::string> data_folders;
};

// "PATH build-id HEX" (or "PATH fnv HEX" over the file where it has no build id) of a dlopen handle.
std::string object_identity(void* handle);
// "FOLDER: N files fnv HEX" over the names and contents of the regular files directly in a folder, sorted by
// name; "" where it is no folder.
std::string folder_identity(const std::string& folder);

// Loads the library (open_first) and resolves every entry point of the table. Null + *why, naming the
// library and the missing symbol, if one is missing.
std::unique_ptr<RuntimeCompiler> load_rtc(const RtcLibrary& library, std::string* why);

// --- the compile-time check of an API's header against the table -------------------------------------------

// Two parameter (or result) types are passed alike: both pointers (to scalars of one size, or to anything
// else), or scalars of one size.
template <class A, class B>
constexpr bool passed_alike() {
  if constexpr (std::is_pointer_v<A> && std::is_pointer_v<B>) {
    using PA = std::remove_cv_t<std::remove_pointer_t<A>>;
    using PB = std::remove_cv_t<std::remove_pointer_t<B>>;
    if constexpr (std::is_scalar_v<PA> && std::is_scalar_v<PB>)
      return sizeof(PA) == sizeof(PB) && std::is_pointer_v<PA> == std::is_pointer_v<PB>;
    else
      return !std::is_scalar_v<PA> && !std::is_scalar_v<PB>;
  } else {
    return !std::is_pointer_v<A> && !std::is_pointer_v<B> && std::is_scalar_v<A> && std::is_scalar_v<B> &&
           sizeof(A) == sizeof(B);
  }
}

template <class F, class G>
struct SameShape : std::false_type {};
template <class R1, class... A1, class R2, class... A2>
struct SameShape<R1 (*)(A1...), R2 (*)(A2...)> {
  static constexpr bool value = [] {
    if constexpr (sizeof...(A1) != sizeof...(A2))
      return false;
    else
      return passed_alike<R1, R2>() && (passed_alike<A1, A2>() && ...);
  }();
};

#define MORI_RTC_CHECK(member, fn)                                                                           \
  static_assert(                                                                                             \
      ::mori::symm::detail::SameShape<decltype(&fn), decltype(::mori::symm::detail::RtcApi::member)>::value, \
      #fn " is not declared with the shape of RtcApi::" #member);

// Every entry point of the header of the API with prefix P, the code getters named P##CODE_SIZE and P##CODE.
#define MORI_RTC_CHECK_HEADER(P, CODE_SIZE, CODE) \
  MORI_RTC_CHECK(version, P##Version)             \
  MORI_RTC_CHECK(create, P##CreateProgram)        \
  MORI_RTC_CHECK(destroy, P##DestroyProgram)      \
  MORI_RTC_CHECK(add_name, P##AddNameExpression)  \
  MORI_RTC_CHECK(compile, P##CompileProgram)      \
  MORI_RTC_CHECK(log_size, P##GetProgramLogSize)  \
  MORI_RTC_CHECK(log, P##GetProgramLog)           \
  MORI_RTC_CHECK(code_size, P##CODE_SIZE)         \
  MORI_RTC_CHECK(code, P##CODE)                   \
  MORI_RTC_CHECK(lowered_name, P##GetLoweredName) \
  MORI_RTC_CHECK(error_string, P##GetErrorString)

}  // namespace mori::symm::detail
