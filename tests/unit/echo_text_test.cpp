// SPDX-License-Identifier: MIT
// Text fit to echo (base/detail/text.hpp, docs/reliability.md "Echoed text"): control bytes and bytes that
// are not UTF-8 escaped, valid UTF-8 kept, long values cut with a marker that names the cut and keeps them
// distinct.
#include <gtest/gtest.h>

#include <string>

#include "mori/symm/base/detail/text.hpp"

using mori::symm::detail::printable;

TEST(EchoText, PlainTextAndUtf8Kept) {
  EXPECT_EQ(printable("rank-0.journal: step unmap_slot"), "rank-0.journal: step unmap_slot");
  EXPECT_EQ(printable("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
            "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80");
}

TEST(EchoText, ControlAndInvalidBytesEscaped) {
  EXPECT_EQ(printable(std::string("a\nb\tc\x1b[2J\x07\x7f", 11)), "a\\x0ab\\x09c\\x1b[2J\\x07\\x7f");
  EXPECT_EQ(printable(std::string("\0x", 2)), "\\x00x");
  // C1 controls (U+0080..U+009F: CSI is U+009B) are obeyed by terminals: escaped although valid UTF-8.
  EXPECT_EQ(printable("\xc2\x9b"
                      "1m"),
            "\\xc2\\x9b1m");
  // A lone byte, a truncated sequence, an overlong form, a surrogate: not UTF-8.
  EXPECT_EQ(printable("\xff"), "\\xff");
  EXPECT_EQ(printable("\xe2\x82"), "\\xe2\\x82");
  EXPECT_EQ(printable("\xc0\xaf"), "\\xc0\\xaf");
  EXPECT_EQ(printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");
}

TEST(EchoText, LongValuesCutWithAMarker) {
  const std::string a(1000, 'a');
  const std::string cut = printable(a, 256);
  EXPECT_EQ(cut.substr(0, 256), std::string(256, 'a'));
  EXPECT_NE(cut.find("...[744 of 1000 bytes cut; fnv1a "), std::string::npos) << cut;
  EXPECT_LT(cut.size(), 256u + 80u);
  // Two values alike in their first 256 bytes stay distinct; one that fits is not marked.
  EXPECT_NE(printable(a + "b", 256), printable(a + "c", 256));
  EXPECT_EQ(printable(std::string(256, 'a'), 256), std::string(256, 'a'));
  // A character is never split by the cut.
  const std::string euros = std::string(255, 'x') + "\xe2\x82\xac";
  EXPECT_EQ(printable(euros, 256).substr(0, 270), std::string(255, 'x') + "...[3 of 258 by");
}
