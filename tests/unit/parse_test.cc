#include "exporter/common/parse.h"

#include <gtest/gtest.h>

namespace sockpressure {
namespace {

TEST(ParseTest, FlatKeyedKeepsGoodLinesAndReportsBadOnes) {
  FlatKeyed kv = ParseFlatKeyed("anon 4096\nfile 8192\ngarbage\npgscan x\n");
  EXPECT_EQ(kv.Get("anon"), 4096u);
  EXPECT_EQ(kv.Get("file"), 8192u);
  EXPECT_EQ(kv.bad_lines.size(), 2u);
}

}  // namespace
}  // namespace sockpressure
