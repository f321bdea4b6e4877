#include <dlfcn.h>

#include <cstdlib>

#include "mori/symm/detail/rtc.hpp"

namespace mori::symm::detail {

void* open_first(const std::vector<std::string>& names, const std::vector<std::string>& prefixes,
                 std::string* path, std::string* why) {
  std::string errors;
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

}  // namespace mori::symm::detail
