// SPDX-License-Identifier: MIT
#include <gtest/gtest.h>

#include <limits>

#include "mori/symm/base/error.hpp"
#include "mori/symm/window/layout.hpp"
#include "mori/symm/window/request.hpp"

using namespace mori::symm;

TEST(Layout, RoundsBufferAndPadToGranularity) {
  auto l = compute_layout(1000, 64, 4096, 0);
  EXPECT_EQ(l.signal_offset, 1024u);
  EXPECT_EQ(l.alloc_bytes, 4096u);
  EXPECT_EQ(l.stride, 4096u);
  l = compute_layout(4096, 0, 4096, 0);
  EXPECT_EQ(l.alloc_bytes, 4096u);
  l = compute_layout(4096, 1, 4096, 0);
  EXPECT_EQ(l.alloc_bytes, 8192u);
}

TEST(Layout, StrideQuantum) {
  const std::size_t g = 2u << 20;
  auto l = compute_layout(3u << 20, 0, g, 4ull << 30);
  EXPECT_EQ(l.alloc_bytes, 4u << 20);
  EXPECT_EQ(l.stride, 4ull << 30);
  EXPECT_THROW(compute_layout(1, 0, g, 3u << 20), UsageError);  // quantum not a multiple of granularity
}

TEST(Layout, RejectsZeroAndOverflow) {
  EXPECT_THROW(compute_layout(0, 0, 4096, 0), UsageError);
  EXPECT_THROW(compute_layout(std::numeric_limits<std::size_t>::max() - 10, 0, 4096, 0), UsageError);
  EXPECT_THROW(compute_layout(4096, std::numeric_limits<std::size_t>::max(), 4096, 0), UsageError);
}

namespace {
std::vector<RendezvousRequest> requests(int n, std::uint64_t bytes = 1 << 20) {
  std::vector<RendezvousRequest> v;
  for (int r = 0; r < n; ++r)
    v.push_back(make_request(r, bytes, bytes, 0, bytes, 0, HandleType::posix_fd, 0));
  return v;
}
}  // namespace

TEST(Request, ConsistentRequestsPass) {
  EXPECT_TRUE(validate_requests(requests(4)).empty());
}

TEST(Request, SizeMismatchNamesTheRanks) {
  auto v = requests(4);
  v[2].buffer_bytes = v[3].buffer_bytes = 2 << 20;
  auto p = validate_requests(v);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("buffer size"), std::string::npos);
  EXPECT_NE(p[0].find("ranks 0,1 have 1048576"), std::string::npos) << p[0];
  EXPECT_NE(p[0].find("ranks 2,3 have 2097152"), std::string::npos) << p[0];
}

TEST(Request, HandleTypeAndStrideMismatch) {
  auto v = requests(3);
  v[1].handle_type = static_cast<int>(HandleType::fabric);
  v[2].stride = 4 << 20;
  auto p = validate_requests(v);
  ASSERT_EQ(p.size(), 2u);
  EXPECT_NE(p[0].find("stride"), std::string::npos);
  EXPECT_NE(p[1].find("handle type"), std::string::npos);
}

TEST(Request, ForeignFormatAndWrongRank) {
  auto v = requests(3);
  v[1].magic[0] = 'X';
  auto p = validate_requests(v);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("ranks 1 sent a request of another format"), std::string::npos);
  v = requests(3);
  v[2].rank = 0;
  p = validate_requests(v);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].find("claiming another rank"), std::string::npos);
}
