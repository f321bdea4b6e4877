// SPDX-License-Identifier: MIT
// The all-to-all's chunk sizes (mori/symm/a2a/chunk.hpp): the one limit and the option parser.
#include "mori/symm/a2a/chunk.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <limits>

#include "mori/symm/base/error.hpp"
#include "mori/symm/base/units.hpp"

namespace mori::symm {

namespace {

// One item of --chunk-kib: a number of KiB, or a size with its unit (B, K, M, G: 4096B, 64M).
std::size_t chunk_item_bytes(const std::string& s, std::size_t index) {
  const std::string accepted = "accepted: KiB as a number, or with a unit B, K, M, G: 256, 4096B, 64M";
  const std::string item = "item " + std::to_string(index + 1);
  if (s.empty()) throw UsageError("--chunk-kib: " + item + " is empty (" + accepted + ")");
  const bool kib = std::isdigit(static_cast<unsigned char>(s.back())) != 0;
  const std::string where = "--chunk-kib " + item + " '" + s + "'";
  const std::string too_large = where +
                                ": chunk size: more than 2^64 bytes exceeds 16 GiB, the limit (1 byte .. " +
                                "16 GiB (" + std::to_string(kA2aMaxChunkBytes) + " bytes) per chunk)";
  std::uint64_t v = 0;
  try {
    v = parse_size("--chunk-kib", s);
  } catch (const SizeTooLarge&) {
    throw UsageError(too_large);
  } catch (const UsageError&) {
    throw UsageError("--chunk-kib: '" + s + "' is not a size (" + item + "; " + accepted + ")");
  }
  if (kib && v > (std::numeric_limits<std::uint64_t>::max() >> 10)) throw UsageError(too_large);
  const std::uint64_t bytes = kib ? v << 10 : v;
  check_a2a_chunk(where, bytes);
  return static_cast<std::size_t>(bytes);
}

}  // namespace

void check_a2a_chunk(const std::string& item, std::uint64_t bytes) {
  const std::string limit = "1 byte .. 16 GiB (" + std::to_string(kA2aMaxChunkBytes) + " bytes) per chunk";
  if (bytes == 0) throw UsageError(item + ": chunk size: must be > 0 bytes (" + limit + ")");
  if (bytes > kA2aMaxChunkBytes)
    throw UsageError(item + ": chunk size: " + std::to_string(bytes) + " bytes exceeds 16 GiB, the limit (" +
                     limit + ")");
}

std::vector<std::size_t> parse_a2a_chunks(const std::string& list, const std::string& begin,
                                          const std::string& end, double factor) {
  std::vector<std::string> items;
  for (std::size_t pos = 0; !list.empty() && pos <= list.size();) {
    const std::size_t comma = std::min(list.find(',', pos), list.size());
    items.push_back(list.substr(pos, comma - pos));
    pos = comma + 1;
  }
  // One cap for a list and a sweep alike, and for both together (docs/mori-a2a.md "Chunk sizes").
  constexpr std::size_t kMaxSizes = 64;
  if (items.size() > kMaxSizes)
    throw UsageError("--chunk-kib: " + std::to_string(items.size()) + " items, more than 64 sizes");
  std::vector<std::size_t> v;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const std::size_t bytes = chunk_item_bytes(items[i], i);
    for (std::size_t j = 0; j < v.size(); ++j)
      if (v[j] == bytes)
        throw UsageError("--chunk-kib: item " + std::to_string(i + 1) + " '" + items[i] + "' repeats item " +
                         std::to_string(j + 1) + " '" + items[j] + "' (" + std::to_string(bytes) + " bytes)");
    v.push_back(bytes);
  }
  if (!begin.empty() || !end.empty()) {
    if (begin.empty() || end.empty()) throw UsageError("-b/-e: give both the first and the last size");
    if (!(factor > 1.0 && factor <= 1024)) throw UsageError("-f: the factor must be in (1, 1024]");
    const std::size_t b = parse_size("-b", begin), e = parse_size("-e", end);
    // -b checked as a chunk first (after -b 0's own message): the sweep's arithmetic, in double, never starts
    // past the limit; a size past it on the way to -e is refused naming the sweep's size.
    if (b > 0) check_a2a_chunk("-b '" + begin + "'", b);
    if (b == 0 || e < b) throw UsageError("-b/-e: need 0 < begin <= end");
    char f[32];
    std::snprintf(f, sizeof f, "%g", factor);
    std::size_t k = 0;
    for (double x = static_cast<double>(b); x <= static_cast<double>(e) * 1.0000001; x *= factor) {
      // Rounding may take the last size a little past -e: never past it.
      const std::size_t c = std::min(static_cast<std::size_t>(x + 0.5), e);
      check_a2a_chunk(
          "-b/-e/-f size " + std::to_string(++k) + " (-b " + begin + " -e " + end + " -f " + f + ")", c);
      if (v.empty() || v.back() != c) v.push_back(c);
      if (v.size() > kMaxSizes)
        throw UsageError("-b/-e/-f: more than 64 sizes" +
                         (items.empty() ? std::string()
                                        : " with the " + std::to_string(items.size()) + " of --chunk-kib"));
    }
  }
  if (v.empty()) v.push_back(std::size_t{256} << 10);
  return v;
}

}  // namespace mori::symm
