// SPDX-License-Identifier: MIT
#include "mori/symm/base/report.hpp"
#include "mori/symm/base/env.hpp"

#include <sys/stat.h>

#include <cstdlib>
#include <ctime>
#include <map>
#include <utility>
#include <vector>

#include "mori/symm/base/files.hpp"

namespace mori::symm {

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

bool mps_active() {
  const char* dir = env_read("CUDA_MPS_PIPE_DIRECTORY");
  std::string control = std::string(dir && *dir ? dir : "/tmp/nvidia-mps") + "/control";
  struct stat st {};
  return stat(control.c_str(), &st) == 0 && (S_ISSOCK(st.st_mode) || S_ISFIFO(st.st_mode));
}

void write_json(const std::string& path, const Json& doc) {
  // Bytes that are not UTF-8 (a file name, a node id, an environment value) are replaced, not fatal.
  write_output(path, doc.dump(2, ' ', false, Json::error_handler_t::replace) + "\n");
}

namespace {

// A row's fields, flattened: (path, value) in the order they were written.
void flatten(const Json& v, const std::string& prefix,
             std::vector<std::pair<std::string, const Json*>>& out) {
  if (v.is_object() && !v.empty()) {
    for (auto it = v.begin(); it != v.end(); ++it)
      flatten(it.value(), prefix.empty() ? it.key() : prefix + "." + it.key(), out);
    return;
  }
  out.emplace_back(prefix, &v);
}

std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string q = "\"";
  for (char c : text) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::string csv_value(const Json* v) {
  if (!v || v->is_null()) return "";
  const std::string text = v->dump(-1, ' ', false, Json::error_handler_t::replace);
  // A string: its text, not its JSON (quotes and escapes gone), bytes that are not UTF-8 already replaced.
  return csv_field(v->is_string() ? Json::parse(text).get<std::string>() : text);
}

}  // namespace

std::string csv_of_rows(const Json& rows) {
  std::vector<std::string> columns;
  std::map<std::string, std::size_t> index;
  std::vector<std::map<std::string, const Json*>> flat;
  for (const auto& row : rows) {
    std::vector<std::pair<std::string, const Json*>> fields;
    flatten(row, "", fields);
    auto& m = flat.emplace_back();
    for (const auto& [name, v] : fields) {
      if (index.emplace(name, columns.size()).second) columns.push_back(name);
      m[name] = v;
    }
  }
  std::string out;
  for (std::size_t i = 0; i < columns.size(); ++i) out += (i ? "," : "") + csv_field(columns[i]);
  out += "\r\n";
  for (const auto& m : flat) {
    for (std::size_t i = 0; i < columns.size(); ++i) {
      const auto it = m.find(columns[i]);
      out += (i ? "," : "") + csv_value(it == m.end() ? nullptr : it->second);
    }
    out += "\r\n";
  }
  return out;
}

}  // namespace mori::symm
