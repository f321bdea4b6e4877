// SPDX-License-Identifier: MIT
#include "mori/symm/base/error.hpp"

#include <cerrno>
#include <cstring>

#include <atomic>
#include <cstdio>
#include <mutex>

namespace mori::symm {
namespace {
std::atomic<int> g_rank{-1};
std::atomic<bool> g_wait_expired{false};
std::mutex g_node_mutex;
std::string g_node;  // guarded by g_node_mutex

std::string format_api(const std::string& call, const char* file, int line, const std::string& api_error,
                       const std::string& detail) {
  const char* base = std::strrchr(file, '/');
  std::string s = call + " failed: " + api_error + " at " + (base ? base + 1 : file) + ":" +
                  std::to_string(line) + " on " + rank_tag();
  if (!detail.empty()) s += " (" + detail + ")";
  return s;
}
}  // namespace

ApiError::ApiError(std::string call, const char* file, int line, std::string api_error, std::string detail)
    : Error(ExitCode::runtime, format_api(call, file, line, api_error, detail)),
      call_(std::move(call)),
      api_error_(std::move(api_error)) {}

TimeoutError::TimeoutError(const std::string& what) : Error(ExitCode::timeout, what) {
  note_wait_bound_expired();
}

void note_wait_bound_expired() noexcept {
  g_wait_expired.store(true);
}
bool wait_bound_expired() noexcept {
  return g_wait_expired.load();
}

std::string format_seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", s);
  return buf;
}

const char* errno_name(int err) noexcept {
  const char* n = strerrorname_np(err);
  return n ? n : "EUNKNOWN";
}

std::string rank_tag() {
  int r = g_rank.load();
  std::string tag = r < 0 ? std::string("rank ?") : "rank " + std::to_string(r);
  std::lock_guard<std::mutex> lock(g_node_mutex);
  return g_node.empty() ? tag : g_node + " " + tag;
}
void set_node_tag(const std::string& node) {
  std::lock_guard<std::mutex> lock(g_node_mutex);
  g_node = node;
}
void set_rank_tag(int rank) noexcept {
  g_rank.store(rank);
}

}  // namespace mori::symm
