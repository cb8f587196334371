#include "exporter/common/warn_limiter.h"

#include <gtest/gtest.h>

#include <vector>

namespace sockpressure {
namespace {

// Issue 13: collector warnings were logged every sample.
TEST(WarnLimiterTest, FirstThenOneSummaryPerPeriodThenRecovery) {
  std::vector<std::string> lines;
  WarnLimiter limiter(60, [&](const std::string& l) { lines.push_back(l); });
  for (int t = 0; t < 150; ++t) limiter.Warn("collector cgroupfs failed", "memory.stat: not a regular file", t);
  ASSERT_EQ(lines.size(), 3u) << "first at 0s, summaries at 60s and 120s";
  EXPECT_EQ(lines[0], "collector cgroupfs failed: memory.stat: not a regular file");
  EXPECT_EQ(lines[1], "collector cgroupfs failed: memory.stat: not a regular file (60 times in the last 60s)");
  limiter.Warn("collector netstat failed", "gone", 150);
  EXPECT_EQ(lines.size(), 4u) << "another key is logged at once";
  limiter.Clear("collector cgroupfs failed", 150);
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[4], "collector cgroupfs failed: recovered (29 more times in the 30s before)");
  limiter.Clear("collector cgroupfs failed", 151);
  EXPECT_EQ(lines.size(), 5u) << "recovery is logged once";
  limiter.Warn("collector cgroupfs failed", "again", 152);
  EXPECT_EQ(lines.back(), "collector cgroupfs failed: again") << "a new spell starts with a line";
}

}  // namespace
}  // namespace sockpressure
