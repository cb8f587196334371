// The decoding the HTTP server applied through cpp-httplib 0.11.4 (its
// decode_url and parse_query_text), pinned case by case so that the
// project's own code answers every route's parameters as before.
#include "exporter/outputs/http/query.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace sockpressure {
namespace {

using Pairs = std::vector<std::pair<std::string, std::string>>;

TEST(PercentDecodeTest, DecodesHexEscapesInEitherCase) {
  EXPECT_EQ(PercentDecode("%41%62"), "Ab");
  EXPECT_EQ(PercentDecode("%C3%A9"), "\xC3\xA9");
  EXPECT_EQ(PercentDecode("%c3%a9"), "\xC3\xA9");
  EXPECT_EQ(PercentDecode("%ff"), "\xFF");
  EXPECT_EQ(PercentDecode("%00x"), std::string("\0x", 2));
  EXPECT_EQ(PercentDecode("%2B"), "+");
}

TEST(PercentDecodeTest, PlusStaysPlusInAPath) { EXPECT_EQ(PercentDecode("a+b"), "a+b"); }

TEST(PercentDecodeTest, KeepsInvalidEscapesAsSent) {
  EXPECT_EQ(PercentDecode("%"), "%");
  EXPECT_EQ(PercentDecode("100%"), "100%");
  EXPECT_EQ(PercentDecode("%4"), "%4");
  EXPECT_EQ(PercentDecode("%zz"), "%zz");
  EXPECT_EQ(PercentDecode("%4g"), "%4g");
  EXPECT_EQ(PercentDecode("%%41"), "%A");
  EXPECT_EQ(PercentDecode("%u"), "%u");
  EXPECT_EQ(PercentDecode("%u12"), "%u12");
  EXPECT_EQ(PercentDecode("%u00e"), "%u00e");
  EXPECT_EQ(PercentDecode("%U0041"), "%U0041");
}

TEST(PercentDecodeTest, DecodesUnicodeEscapesAsUtf8) {
  EXPECT_EQ(PercentDecode("%u0041"), "A");
  EXPECT_EQ(PercentDecode("%u007F"), "\x7F");
  EXPECT_EQ(PercentDecode("%u0080"), "\xC2\x80");
  EXPECT_EQ(PercentDecode("%u00E9"), "\xC3\xA9");
  EXPECT_EQ(PercentDecode("%u07FF"), "\xDF\xBF");
  EXPECT_EQ(PercentDecode("%u0800"), "\xE0\xA0\x80");
  EXPECT_EQ(PercentDecode("%uE000"), "\xEE\x80\x80");
  EXPECT_EQ(PercentDecode("%uFFFF"), "\xEF\xBF\xBF");
  EXPECT_EQ(PercentDecode("%uD800x"), "x") << "a lone surrogate encodes nothing";
  EXPECT_EQ(PercentDecode("%uDFFF"), "");
}

TEST(ParseQueryTest, SplitsPairsInOrder) {
  EXPECT_EQ(ParseQuery(""), Pairs{});
  EXPECT_EQ(ParseQuery("b=2&a=1"), (Pairs{{"b", "2"}, {"a", "1"}}));
  EXPECT_EQ(ParseQuery("&&a=1&&"), (Pairs{{"a", "1"}}));
  EXPECT_EQ(ParseQuery("a=1& &b=2"), (Pairs{{"a", "1"}, {"b", "2"}}));
}

TEST(ParseQueryTest, PlusIsASpaceAndEscapesAreDecoded) {
  EXPECT_EQ(ParseQuery("a+b=c+d"), (Pairs{{"a b", "c d"}}));
  EXPECT_EQ(ParseQuery("a%3Db=c%26d"), (Pairs{{"a=b", "c&d"}}));
  EXPECT_EQ(ParseQuery("c=%2Fa%2Bb"), (Pairs{{"c", "/a+b"}}));
  EXPECT_EQ(ParseQuery("a=%zz"), (Pairs{{"a", "%zz"}}));
}

TEST(ParseQueryTest, KeepsRepeatedKeysInOrder) {
  EXPECT_EQ(ParseQuery("x=1&a=2&x=3"), (Pairs{{"x", "1"}, {"a", "2"}, {"x", "3"}}));
  EXPECT_EQ(ParseQuery("x&x=1"), (Pairs{{"x", ""}, {"x", "1"}}));
}

TEST(ParseQueryTest, EmptyValues) {
  EXPECT_EQ(ParseQuery("a="), (Pairs{{"a", ""}}));
  EXPECT_EQ(ParseQuery("a"), (Pairs{{"a", ""}}));
  EXPECT_EQ(ParseQuery("a=&a=2"), (Pairs{{"a", ""}, {"a", "2"}}));
  EXPECT_EQ(ParseQuery("="), Pairs{});
}

TEST(ParseQueryTest, EveryEqualsSignSplitsAndPiecesAreTrimmed) {
  EXPECT_EQ(ParseQuery("a=1=2"), (Pairs{{"a", "2"}}));
  EXPECT_EQ(ParseQuery("a==b"), (Pairs{{"a", "b"}}));
  EXPECT_EQ(ParseQuery("=v"), (Pairs{{"v", ""}}));
  EXPECT_EQ(ParseQuery(" a = 1 "), (Pairs{{"a", "1"}}));
  EXPECT_EQ(ParseQuery("\ta\t=\t1\t"), (Pairs{{"a", "1"}}));
}

}  // namespace
}  // namespace sockpressure
