// SPDX-License-Identifier: MIT
// The all-to-all's chunk sizes (docs/mori-a2a.md "Chunk sizes"): one limit, one check, and the parser of
// --chunk-kib and -b/-e/-f. Every entry point (mori-a2a's options, validate_a2a for a configuration built in
// code, the driver before it allocates) checks a chunk through check_a2a_chunk, so that a size the options
// accept is never refused later against another limit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mori::symm {

// The largest chunk per (source, destination) pair: 16 GiB, far beyond any device today. (With at most 512
// ranks, world x pitch stays far below 2^64.) A device's memory may refuse a smaller one: validate_a2a.
inline constexpr std::uint64_t kA2aMaxChunkBytes = std::uint64_t{1} << 34;

// The one check of a chunk size: 1 byte .. kA2aMaxChunkBytes, else UsageError "<item>: chunk size: ..."
// naming the limit. `item` says where the size came from ("--chunk-kib item 2 '99999999999'", "-e '64G'",
// "chunk 1 of 3"); a size beyond 2^64 bytes is passed as UINT64_MAX.
void check_a2a_chunk(const std::string& item, std::uint64_t bytes);

// The chunk sizes of mori-a2a's options: `list` (--chunk-kib: comma separated, each item KiB as a number or a
// size with its unit B, K, M, G; no item empty or repeated), then the geometric sweep from `begin` to `end`
// by `factor` (-b/-e/-f; both or neither, at most 64 sizes); neither: 256 KiB. Every size is checked by
// check_a2a_chunk; errors are UsageError naming the option and the item.
std::vector<std::size_t> parse_a2a_chunks(const std::string& list, const std::string& begin,
                                          const std::string& end, double factor);

}  // namespace mori::symm
