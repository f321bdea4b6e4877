// SPDX-License-Identifier: MIT
// One chunk limit, checked in one place (mori/symm/a2a/chunk.hpp; docs/mori-a2a.md "Chunk sizes"). Before,
// mori-a2a's option parser refused items above 2^40 KiB ("too large"), validate_a2a above 16 GiB ("exceeds
// 16 GiB", naming no item), and the driver against the device's memory: a size the options accepted was
// refused later against another limit.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "mori/symm/a2a/types.hpp"
#include "mori/symm/a2a/chunk.hpp"
#include "mori/symm/base/error.hpp"
#include "usage_error.hpp"

using namespace mori::symm;
using mori::symm::test_util::usage_error;

namespace {

A2aConfig config_of(std::vector<std::size_t> chunks) {
  A2aConfig c;
  c.chunks = std::move(chunks);
  return c;
}

}  // namespace

// The largest size the options accept is one validate_a2a accepts too, and one byte more is refused by the
// options already, naming the item and the limit.
TEST(A2aChunk, TheOptionsAndTheConfigurationShareOneLimit) {
  const std::size_t max = kA2aMaxChunkBytes;
  EXPECT_EQ(parse_a2a_chunks("16777216", "", "", 2), std::vector<std::size_t>{max});
  EXPECT_EQ(parse_a2a_chunks("16G", "", "", 2), std::vector<std::size_t>{max});
  EXPECT_NO_THROW(validate_a2a(config_of({max}), 8, 0, false));
  for (const char* item : {"16777217", "17179869185B", "1099511627777", "99999999999"}) {
    const std::string why = usage_error([&] { parse_a2a_chunks(std::string("64,") + item, "", "", 2); });
    EXPECT_NE(why.find(std::string("--chunk-kib item 2 '") + item + "'"), std::string::npos) << why;
    EXPECT_NE(why.find("exceeds 16 GiB, the limit (1 byte .. 16 GiB (17179869184 bytes) per chunk)"),
              std::string::npos)
        << why;
  }
  // The same words for a configuration built in code (mori-probe's, a script's), naming the chunk.
  const std::string why = usage_error([&] { validate_a2a(config_of({4096, max + 1}), 2, 0, false); });
  EXPECT_NE(why.find("chunk 2 of 2: chunk size: 17179869185 bytes exceeds 16 GiB, the limit"),
            std::string::npos)
      << why;
  // A KiB count whose bytes pass 2^64 is refused as such, not wrapped.
  EXPECT_NE(
      usage_error([] { parse_a2a_chunks("18014398509481985", "", "", 2); }).find("more than 2^64 bytes"),
      std::string::npos);
}

TEST(A2aChunk, ZeroIsRefusedWhereItIsGiven) {
  EXPECT_NE(usage_error([] {
              parse_a2a_chunks("4,0", "", "", 2);
            }).find("--chunk-kib item 2 '0': chunk size: must be > 0 bytes"),
            std::string::npos);
  EXPECT_NE(usage_error([] {
              validate_a2a(config_of({0}), 2, 0, false);
            }).find("chunk 1 of 1: chunk size: must be > 0 bytes"),
            std::string::npos);
}

// A sweep's sizes are checked one by one (the one past the limit is named), and rounding never takes a size
// past -e (before, a sweep to exactly 16 GiB could round its last size past the limit).
TEST(A2aChunk, SweepSizesAreCheckedOneByOne) {
  EXPECT_EQ(parse_a2a_chunks("", "256K", "1M", 2), (std::vector<std::size_t>{256 << 10, 512 << 10, 1 << 20}));
  EXPECT_EQ(parse_a2a_chunks("", "1K", "17G", 2).back(), kA2aMaxChunkBytes);  // the sizes stop at 16 GiB
  const std::string why = usage_error([] { parse_a2a_chunks("", "4G", "64G", 2); });
  EXPECT_NE(why.find("-b/-e/-f size 4 (-b 4G -e 64G -f 2): chunk size: 34359738368 bytes exceeds 16 GiB"),
            std::string::npos)
      << why;
  const std::vector<std::size_t> odd = parse_a2a_chunks("", "1000", "16G", 1.7);
  for (std::size_t c : odd) EXPECT_LE(c, kA2aMaxChunkBytes);
  EXPECT_NE(usage_error([] { parse_a2a_chunks("", "0", "4K", 2); }).find("-b/-e: need 0 < begin <= end"),
            std::string::npos);
}

// What the option parser did before, kept: empty and repeated items, units, the default.
TEST(A2aChunk, ListItemsKeepTheirRules) {
  EXPECT_EQ(parse_a2a_chunks("", "", "", 2), std::vector<std::size_t>{256 << 10});
  EXPECT_EQ(parse_a2a_chunks("4096B,8", "", "", 2), (std::vector<std::size_t>{4096, 8192}));
  EXPECT_NE(usage_error([] { parse_a2a_chunks("4,,8", "", "", 2); }).find("--chunk-kib: item 2 is empty"),
            std::string::npos);
  EXPECT_NE(usage_error([] {
              parse_a2a_chunks("1,1024B", "", "", 2);
            }).find("--chunk-kib: item 2 '1024B' repeats item 1 '1'"),
            std::string::npos);
  EXPECT_NE(usage_error([] { parse_a2a_chunks("abc", "", "", 2); }).find("--chunk-kib: 'abc' is not a size"),
            std::string::npos);
}

// The device's memory is the one other bound, checked where the device is known; its message names the chunk.
TEST(A2aChunk, TheDeviceMemoryBoundNamesTheChunk) {
  const std::string why = usage_error([] {
    validate_a2a(config_of({4096, std::size_t{1} << 30}), 8, std::uint64_t{16} << 30, false);
  });
  EXPECT_NE(why.find("chunk 2 of 2: chunk size: 1073741824 bytes needs"), std::string::npos) << why;
  EXPECT_NE(why.find("more than 90% of the device"), std::string::npos) << why;
}
