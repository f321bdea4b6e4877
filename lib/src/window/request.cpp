// SPDX-License-Identifier: MIT
#include "mori/symm/window/request.hpp"
#include "mori/symm/base/detail/text.hpp"

#include <unistd.h>

#include <cstring>
#include <functional>
#include <map>

namespace mori::symm {
namespace {
constexpr char kMagic[8] = {'M', 'O', 'R', 'I', 'R', 'E', 'Q', '1'};
constexpr std::uint32_t kVersion = 1;

using detail::join_ranks;

std::uint64_t host_hash() {
  return std::hash<std::string>{}(detail::host_name());
}

// Groups ranks by a field's value; when there is more than one group, names each group and its value.
template <class Get>
void check_field(const std::vector<RendezvousRequest>& all, const char* field, Get get,
                 std::vector<std::string>& problems) {
  std::map<std::uint64_t, std::vector<int>> groups;
  for (std::size_t r = 0; r < all.size(); ++r) groups[get(all[r])].push_back(static_cast<int>(r));
  if (groups.size() <= 1) return;
  std::string s = std::string(field) + " differs between ranks:";
  for (auto& [value, ranks] : groups)
    s += " ranks " + join_ranks(ranks) + " have " + std::to_string(value) + ";";
  s.pop_back();
  problems.push_back(s);
}
}  // namespace

RendezvousRequest make_request(int rank, std::uint64_t alloc_bytes, std::uint64_t buffer_bytes,
                               std::uint64_t signal_bytes, std::uint64_t stride, int device, HandleType type,
                               int node) {
  RendezvousRequest r{};
  std::memcpy(r.magic, kMagic, sizeof(kMagic));
  r.version = kVersion;
  r.rank = rank;
  r.alloc_bytes = alloc_bytes;
  r.buffer_bytes = buffer_bytes;
  r.signal_bytes = signal_bytes;
  r.stride = stride;
  r.device = device;
  r.pid = static_cast<std::int32_t>(getpid());
  r.handle_type = static_cast<std::int32_t>(type);
  r.node = node;
  r.host_hash = host_hash();
  return r;
}

std::vector<std::string> validate_requests(const std::vector<RendezvousRequest>& all) {
  std::vector<std::string> problems;
  std::vector<int> bad_magic, bad_rank;
  for (std::size_t r = 0; r < all.size(); ++r) {
    if (std::memcmp(all[r].magic, kMagic, sizeof(kMagic)) != 0 || all[r].version != kVersion)
      bad_magic.push_back(static_cast<int>(r));
    else if (all[r].rank != static_cast<int>(r))
      bad_rank.push_back(static_cast<int>(r));
  }
  if (!bad_magic.empty())
    problems.push_back("ranks " + join_ranks(bad_magic) + " sent a request of another format or version");
  if (!bad_rank.empty())
    problems.push_back("ranks " + join_ranks(bad_rank) + " sent a request claiming another rank");
  if (!problems.empty()) return problems;
  check_field(
      all, "buffer size", [](const RendezvousRequest& q) { return q.buffer_bytes; }, problems);
  check_field(
      all, "signal pad size", [](const RendezvousRequest& q) { return q.signal_bytes; }, problems);
  check_field(
      all, "allocation size", [](const RendezvousRequest& q) { return q.alloc_bytes; }, problems);
  check_field(
      all, "stride", [](const RendezvousRequest& q) { return q.stride; }, problems);
  check_field(
      all, "handle type (1 = posix_fd, 2 = fabric)",
      [](const RendezvousRequest& q) { return static_cast<std::uint64_t>(q.handle_type); }, problems);
  return problems;
}

}  // namespace mori::symm
