// SPDX-License-Identifier: MIT
// The declared environment variables (lib/include/mori/symm/base/env.hpp). The table is
// scripts/mori_results/environment.json, built in as text (lib/src/base/env_table.h.in).
#include "mori/symm/base/env.hpp"

#include <cstdlib>
#include <stdexcept>

#include "mori/symm/base/json.hpp"
#include "mori_env_table.h"

namespace mori::symm {

const std::vector<EnvVar>& env_vars() {
  static const std::vector<EnvVar> vars = [] {
    std::vector<EnvVar> out;
    const Json table = Json::parse(detail::kEnvironmentTable);  // named: a range-for over a member of a
    for (const auto& v : table.at("variables"))                 // temporary would outlive the temporary
      out.push_back({v.at("name").get<std::string>(), v.at("type").get<std::string>(),
                     v.at("default").get<std::string>(), v.at("doc").get<std::string>(),
                     v.at("foreign").get<bool>()});
    return out;
  }();
  return vars;
}

const char* env_read(const char* name) {
  for (const auto& v : env_vars())
    if (v.name == name) return std::getenv(name);
  throw std::logic_error(std::string("env_read: ") + name +
                         " is not declared in scripts/mori_results/environment.json");
}

const char* env_value(const char* name) {
  const char* v = env_read(name);
  return v && *v ? v : nullptr;
}

}  // namespace mori::symm
