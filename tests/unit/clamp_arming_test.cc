// When the window-clamp program is attached (sources/bpf/clamp_arming.h):
// only while some memcg's socket pressure is live or about to be, and for
// the quiet period after.
#include "exporter/sources/bpf/clamp_arming.h"

#include <gtest/gtest.h>

namespace sockpressure {
namespace {

// A sample in which `tier` produced the socket-pressure signal.
Sample Live(Tier tier) {
  Sample s;
  s.MarkLive(Signal::kSocketPressure, tier);
  s.MarkLive(Signal::kReclaim, tier);
  s.pressure[tier];
  return s;
}

TEST(ClampArming, NoTierKeepsTheProgramAttached) {
  ClampArming a(Tier::kNone);
  EXPECT_TRUE(a.Update(Sample{}, 0));
  EXPECT_TRUE(a.Update(Sample{}, 1000));
}

TEST(ClampArming, AHealthyNodeDetachesAtTheFirstSample) {
  ClampArming a(Tier::kIter);
  Sample s = Live(Tier::kIter);
  s.pressure[Tier::kIter][7] = PressureState{};  // a memcg, never under pressure
  EXPECT_FALSE(a.Update(s, 5));
  EXPECT_FALSE(a.Update(s, 10));
}

TEST(ClampArming, ATierThatProducedNothingKeepsItAttached) {
  ClampArming a(Tier::kIter);
  EXPECT_FALSE(a.Update(Live(Tier::kIter), 1));
  EXPECT_TRUE(a.Update(Sample{}, 2)) << "the iterator's read failed: no signal to gate on";
}

TEST(ClampArming, ActivePressureAttachesAndTheQuietPeriodHolds) {
  ClampArming a(Tier::kIter, 60);
  Sample quiet = Live(Tier::kIter);
  EXPECT_FALSE(a.Update(quiet, 0));
  Sample hot = Live(Tier::kIter);
  hot.pressure[Tier::kIter][7].active = true;
  hot.pressure[Tier::kIter][7].assertions = 1;
  EXPECT_TRUE(a.Update(hot, 10));
  EXPECT_NE(a.why().find("memcg 7"), std::string::npos) << a.why();
  Sample after = Live(Tier::kIter);
  after.pressure[Tier::kIter][7].assertions = 1;  // no new assertion, deadline passed
  EXPECT_TRUE(a.Update(after, 11));
  EXPECT_TRUE(a.Update(after, 69.9));
  EXPECT_FALSE(a.Update(after, 70.1));
}

TEST(ClampArming, AnAssertionBetweenSamplesAttaches) {
  // The deadline (one second) was over by the time the sample read it, but
  // the assertion count moved: the pressure was there.
  ClampArming a(Tier::kFentry);
  Sample s = Live(Tier::kFentry);
  s.pressure[Tier::kFentry][7].assertions = 3;
  EXPECT_TRUE(a.Update(s, 1));
  EXPECT_TRUE(a.Update(s, 30));  // quiet period
  EXPECT_FALSE(a.Update(s, 62));  // the count did not move again
  s.pressure[Tier::kFentry][7].assertions = 4;
  EXPECT_TRUE(a.Update(s, 63)) << "re-attaches at once";
}

TEST(ClampArming, ReclaimScanningWithoutReclaimingArmsBeforeTheAssertion) {
  ClampArming a(Tier::kFentry);
  Sample s = Live(Tier::kFentry);
  s.reclaim[Tier::kFentry][7] = ReclaimCounters{1000, 990, {}, 0};
  EXPECT_FALSE(a.Update(s, 1)) << "99 % reclaimed: healthy page-cache reclaim";
  s.reclaim[Tier::kFentry][7] = ReclaimCounters{2000, 1500, {}, 0};  // +1000 scanned, +510 reclaimed: 49 % not
  EXPECT_TRUE(a.Update(s, 2)) << a.why();
  EXPECT_NE(a.why().find("scanned 1000"), std::string::npos) << a.why();
}

TEST(ClampArming, ReclaimOfLittleShareDoesNotArm) {
  ClampArming a(Tier::kFentry, 0);
  Sample s = Live(Tier::kFentry);
  s.reclaim[Tier::kFentry][7] = ReclaimCounters{1000, 700, {}, 0};  // 30 % not reclaimed
  EXPECT_FALSE(a.Update(s, 1));
  s.reclaim[Tier::kFentry][7] = ReclaimCounters{1000, 700, {}, 0};  // nothing moved
  EXPECT_FALSE(a.Update(s, 2));
}

TEST(ClampArming, ACounterThatRestartedIsNotPressure) {
  ClampArming a(Tier::kFentry, 0);
  Sample s = Live(Tier::kFentry);
  s.reclaim[Tier::kFentry][7] = ReclaimCounters{1000, 1000, {}, 0};
  EXPECT_FALSE(a.Update(s, 1));
  s.reclaim[Tier::kFentry][7] = ReclaimCounters{10, 0, {}, 0};  // went down: restarted, not a delta
  EXPECT_FALSE(a.Update(s, 2));
}

TEST(ClampArming, OtherTiersAreNotRead) {
  ClampArming a(Tier::kIter);
  Sample s = Live(Tier::kIter);
  s.pressure[Tier::kFentry][7].active = true;  // a tier we do not gate on
  EXPECT_FALSE(a.Update(s, 1));
}

}  // namespace
}  // namespace sockpressure
