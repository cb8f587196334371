// Verdicts checked against the kernel's integer arithmetic by hand
// (mm/vmpressure.c vmpressure_calc_level()).
#include "exporter/state/vmpressure_window.h"

#include <gtest/gtest.h>

namespace sockpressure {
namespace {

TEST(VmpressureTest, NothingReclaimedIsCritical) {
  EXPECT_EQ(VmpressurePercent(512, 0), 100u);
  EXPECT_EQ(VmpressureLevel(512, 0), PressureLevel::kCritical);
}

TEST(VmpressureTest, MediumBoundaryIsExactlySixtyPercent) {
  // scale = 1400; 400*1400/1000 = 560; (1400-560)*100/1400 = 60 -> medium.
  EXPECT_EQ(VmpressurePercent(1000, 400), 60u);
  EXPECT_EQ(VmpressureLevel(1000, 400), PressureLevel::kMedium);
  // scale = 1401; 401*1401/1000 = 561; 840*100/1401 = 59 -> low.
  EXPECT_EQ(VmpressurePercent(1000, 401), 59u);
  EXPECT_EQ(VmpressureLevel(1000, 401), PressureLevel::kLow);
}

TEST(VmpressureTest, CriticalBoundaryIsNinetyFivePercent) {
  // scale = 1050; 50*1050/1000 = 52; 998*100/1050 = 95 -> critical.
  EXPECT_EQ(VmpressurePercent(1000, 50), 95u);
  EXPECT_EQ(VmpressureLevel(1000, 50), PressureLevel::kCritical);
  // scale = 1051; 51*1051/1000 = 53; 998*100/1051 = 94 -> medium.
  EXPECT_EQ(VmpressurePercent(1000, 51), 94u);
  EXPECT_EQ(VmpressureLevel(1000, 51), PressureLevel::kMedium);
}

TEST(VmpressureTest, ReclaimedAboveScannedIsNoPressure) {
  // Slab reclaim can make reclaimed > scanned; the kernel reports 0.
  EXPECT_EQ(VmpressurePercent(600, 900), 0u);
  EXPECT_EQ(VmpressureLevel(600, 900), PressureLevel::kLow);
}

TEST(VmpressureTest, HugeDeltasDoNotOverflow) {
  EXPECT_EQ(VmpressureLevel(uint64_t{1} << 62, 0), PressureLevel::kCritical);
  EXPECT_EQ(VmpressurePercent(uint64_t{1} << 62, uint64_t{1} << 61), 50u);
}

TEST(VmpressureWindowTest, WaitsFor512ScannedPages) {
  VmpressureWindow w;
  EXPECT_FALSE(w.Add(300, 0));
  EXPECT_FALSE(w.Add(211, 0));  // 511: one page short of vmpressure_win
  EXPECT_EQ(w.pending_scanned(), 511u);
  auto v = w.Add(1, 0);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->level, PressureLevel::kCritical);
  EXPECT_EQ(v->windows, 1u);
  EXPECT_DOUBLE_EQ(v->ratio, 1.0);
  EXPECT_EQ(w.pending_scanned(), 0u);  // the kernel resets after a verdict
}

TEST(VmpressureWindowTest, ManyWindowsInOneInterval) {
  VmpressureWindow w;
  auto v = w.Add(586833, 86);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->windows, 586833u / 512);
  EXPECT_EQ(v->level, PressureLevel::kCritical);
  EXPECT_NEAR(v->ratio, 1.0 - 86.0 / 586833.0, 1e-12);
  EXPECT_EQ(w.pending_scanned(), 586833u - 1146u * 512) << "the rest starts the next window";
}

TEST(VmpressureWindowTest, RemaindersCarryIntoTheNextWindow) {
  VmpressureWindow w;
  uint64_t windows = 0;
  for (int i = 0; i < 5; ++i) {
    if (auto v = w.Add(4000, 2)) windows += v->windows;
  }
  EXPECT_EQ(windows, 20000u / 512);  // 39, as the kernel would count
}

TEST(VmpressureWindowTest, HealthyReclaimIsLow) {
  VmpressureWindow w;
  auto v = w.Add(474756, 474742);
  ASSERT_TRUE(v);
  EXPECT_EQ(v->level, PressureLevel::kLow);
  EXPECT_LT(v->ratio, 0.001);
}

TEST(VmpressureWindowTest, ReclaimedAboveScannedRatioIsZero) {
  VmpressureWindow w;
  auto v = w.Add(512, 2048);
  ASSERT_TRUE(v);
  EXPECT_DOUBLE_EQ(v->ratio, 0.0);
  EXPECT_EQ(v->level, PressureLevel::kLow);
}

}  // namespace
}  // namespace sockpressure
