// Small helpers shared by the library: rank lists, the host name, FNV-1a.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mori::symm::detail {

// "0,2,3".
std::string join_ranks(const std::vector<int>& ranks);

// This machine's host name; "unknown" where gethostname fails.
std::string host_name();

// 64-bit FNV-1a: the offset basis, and `h` advanced over n bytes.
constexpr std::uint64_t kFnvOffset = 1469598103934665603ull;
std::uint64_t fnv1a(std::uint64_t h, const void* data, std::size_t n) noexcept;

}  // namespace mori::symm::detail
