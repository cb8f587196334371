#include "exporter/common/label_escape.h"

#include <gtest/gtest.h>

#include <random>

namespace sockpressure {
namespace {

TEST(LabelEscapeTest, ValidNamesAreUnchanged) {
  for (const char* s : {"/", "/system.slice/systemd-cryptsetup\\x2dluks.slice", "/kubepods/pod-äöü/€", "a\\b",
                        "\\x7f", "\\x"}) {
    EXPECT_TRUE(LabelValueIsClean(s)) << s;
    EXPECT_TRUE(IsValidUtf8(s)) << s;
    EXPECT_EQ(EscapeLabelValue(s), s);
    EXPECT_EQ(UnescapeLabelValue(s), s);
  }
}

TEST(LabelEscapeTest, InvalidBytesBecomeHexEscapes) {
  EXPECT_EQ(EscapeLabelValue("/bad\xff\xfe"), "/bad\\xff\\xfe");
  EXPECT_EQ(UnescapeLabelValue("/bad\\xff\\xfe"), "/bad\xff\xfe");
  // Truncated, overlong, surrogate and out-of-range sequences are invalid.
  EXPECT_EQ(EscapeLabelValue("\xc3"), "\\xc3");
  EXPECT_EQ(EscapeLabelValue("\xc0\xaf"), "\\xc0\\xaf");
  EXPECT_EQ(EscapeLabelValue("\xed\xa0\x80"), "\\xed\\xa0\\x80");
  EXPECT_EQ(EscapeLabelValue("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");
  EXPECT_EQ(EscapeLabelValue("\xe2\x82\xac\xff"), "\xe2\x82\xac\\xff");
}

TEST(LabelEscapeTest, LiteralEscapesLookalikesAreEscaped) {
  EXPECT_FALSE(LabelValueIsClean("a\\xff"));
  EXPECT_EQ(EscapeLabelValue("a\\xff"), "a\\x5cxff");
  EXPECT_EQ(EscapeLabelValue("a\\x5c"), "a\\x5cx5c");
  EXPECT_EQ(EscapeLabelValue("a\\XFF"), "a\\x5cXFF");
  EXPECT_EQ(UnescapeLabelValue("a\\x5cxff"), "a\\xff");
}

TEST(LabelEscapeTest, RoundTripsArbitraryBytes) {
  std::mt19937 rng(13);
  const char alphabet[] = {'\\', 'x', 'X', '5', 'c', 'f', 'F', '8', 'a', '/', '\x80', '\xc3', '\xa4', '\xff', '\xed'};
  for (int i = 0; i < 20000; ++i) {
    std::string s;
    size_t n = rng() % 12;
    for (size_t j = 0; j < n; ++j) s += alphabet[rng() % sizeof alphabet];
    std::string e = EscapeLabelValue(s);
    ASSERT_EQ(UnescapeLabelValue(e), s) << e;
    ASSERT_TRUE(IsValidUtf8(e)) << e;
  }
}

}  // namespace
}  // namespace sockpressure
