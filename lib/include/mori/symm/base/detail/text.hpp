// SPDX-License-Identifier: MIT
// Small helpers shared by the library: rank lists, the host name, FNV-1a, text fit to echo.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mori::symm::detail {

// "0,2,3".
std::string join_ranks(const std::vector<int>& ranks);
// "0-3,5,7-8": ranks in ascending order, runs of consecutive ones as ranges.
std::string rank_ranges(const std::vector<int>& ranks);

// This machine's host name; "unknown" where gethostname fails.
std::string host_name();

// 64-bit FNV-1a: the offset basis, and `h` advanced over n bytes.
constexpr std::uint64_t kFnvOffset = 1469598103934665603ull;
std::uint64_t fnv1a(std::uint64_t h, const void* data, std::size_t n) noexcept;

// `s` fit to be echoed in one line of text or a JSON string (docs/reliability.md, "Echoed text"): control
// bytes (C0, DEL and the C1 controls U+0080..U+009F, which terminals obey) and bytes that are not UTF-8 are
// written as \xNN, so that no value can end a line, move a terminal's cursor or break a report; valid UTF-8
// is kept. Past max_bytes of `s` the rest is cut, with a marker naming how many bytes were cut and the FNV-1a
// of the whole (two long values alike at the start stay distinct).
inline constexpr std::size_t kEchoBytes = 256;  // what a journal's field may show (--summarize)
std::string printable(std::string_view s, std::size_t max_bytes = std::string_view::npos);

}  // namespace mori::symm::detail
