// SPDX-License-Identifier: MIT
#include "mori/symm/base/detail/text.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace mori::symm::detail {

std::string join_ranks(const std::vector<int>& ranks) {
  std::string s;
  for (std::size_t i = 0; i < ranks.size(); ++i) s += (i ? "," : "") + std::to_string(ranks[i]);
  return s;
}

std::string rank_ranges(const std::vector<int>& ranks) {
  std::string out;
  for (std::size_t i = 0; i < ranks.size();) {
    std::size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    out += (out.empty() ? "" : ",") + std::to_string(ranks[i]) +
           (j > i ? "-" + std::to_string(ranks[j]) : std::string());
    i = j + 1;
  }
  return out;
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0) return "unknown";
  return buf;
}

std::uint64_t fnv1a(std::uint64_t h, const void* data, std::size_t n) noexcept {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

namespace {

// The length of the valid UTF-8 sequence at s[i] (2..4 bytes: no overlong form, no surrogate, at most
// U+10FFFF), and its code point; 0 where none starts there.
std::size_t utf8_sequence(std::string_view s, std::size_t i, std::uint32_t& cp) {
  const auto b = static_cast<unsigned char>(s[i]);
  const std::size_t n = b >= 0xf0 && b <= 0xf4 ? 4 : b >= 0xe0 ? 3 : b >= 0xc2 && b < 0xe0 ? 2 : 0;
  if (n == 0 || b > 0xf4 || i + n > s.size()) return 0;
  cp = b & (0xff >> (n + 1));
  for (std::size_t k = 1; k < n; ++k) {
    const auto c = static_cast<unsigned char>(s[i + k]);
    if ((c & 0xc0) != 0x80) return 0;
    cp = cp << 6 | (c & 0x3f);
  }
  const std::uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < least[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  return n;
}

void append_hex(std::string& out, unsigned char b) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "\\x%02x", b);
  out += buf;
}

}  // namespace

std::string printable(std::string_view s, std::size_t max_bytes) {
  std::string out;
  const std::size_t keep = std::min(s.size(), max_bytes);
  out.reserve(keep + 64);
  std::size_t i = 0;
  while (i < keep) {
    const auto b = static_cast<unsigned char>(s[i]);
    std::uint32_t cp = 0;
    const std::size_t n = b < 0x80 ? 1 : utf8_sequence(s, i, cp);
    if (b < 0x80 && b >= 0x20 && b != 0x7f) {
      out += static_cast<char>(b);
    } else if (n > 1 && i + n <= keep && cp > 0x9f) {
      out.append(s.data() + i, n);
      i += n;
      continue;
    } else if (n > 1 && i + n > keep) {
      break;  // a character the cut would split: cut before it
    } else {
      append_hex(out, b);
    }
    ++i;
  }
  if (i < s.size()) {
    char mark[96];
    std::snprintf(mark, sizeof(mark), "...[%zu of %zu bytes cut; fnv1a %016llx]", s.size() - i, s.size(),
                  static_cast<unsigned long long>(fnv1a(kFnvOffset, s.data(), s.size())));
    out += mark;
  }
  return out;
}

}  // namespace mori::symm::detail
