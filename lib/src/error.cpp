#include "mori/symm/error.hpp"

#include <cerrno>
#include <cstring>

#include <atomic>

namespace mori::symm {
namespace {
std::atomic<int> g_rank{-1};

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

const char* errno_name(int err) noexcept {
  const char* n = strerrorname_np(err);
  return n ? n : "EUNKNOWN";
}

std::string rank_tag() {
  int r = g_rank.load();
  return r < 0 ? std::string("rank ?") : "rank " + std::to_string(r);
}
void set_rank_tag(int rank) noexcept {
  g_rank.store(rank);
}

}  // namespace mori::symm
