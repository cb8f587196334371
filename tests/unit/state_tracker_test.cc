#include "exporter/state/state_tracker.h"

#include <gtest/gtest.h>

namespace sockpressure {
namespace {

// Builds samples of a small v2 tree:  / -> /w -> {/w/a, /w/b}
struct Tree {
  uint64_t scan[4] = {0, 0, 0, 0}, steal[4] = {0, 0, 0, 0};  // local counts per cgroup
  bool nosocket = false;
  double t = 100;

  Sample Next(double dt = 1.0) {
    t += dt;
    Sample s;
    s.monotonic_seconds = t;
    s.cgroup_mode = CgroupMode::kUnified;
    s.node.nosocket = nosocket;
    const char* paths[] = {"/", "/w", "/w/a", "/w/b"};
    const int parents[] = {-1, 0, 1, 1};
    for (int i = 0; i < 4; ++i) {
      CgroupReading c;
      c.path = paths[i];
      c.id = 100 + static_cast<uint64_t>(i);
      c.parent = parents[i];
      s.cgroups.push_back(c);
      s.id_index[c.id] = i;
    }
    // memory.stat is hierarchical: parents include their children.
    uint64_t h_scan[4], h_steal[4];
    h_scan[2] = scan[2]; h_steal[2] = steal[2];
    h_scan[3] = scan[3]; h_steal[3] = steal[3];
    h_scan[1] = scan[1] + h_scan[2] + h_scan[3]; h_steal[1] = steal[1] + h_steal[2] + h_steal[3];
    h_scan[0] = scan[0] + h_scan[1]; h_steal[0] = steal[0] + h_steal[1];
    for (int i = 0; i < 4; ++i) {
      s.cgroups[i].pgscan = h_scan[i];
      s.cgroups[i].pgsteal = h_steal[i];
    }
    s.MarkLive(Signal::kReclaim, Tier::kMemoryStat);
    s.MarkLive(Signal::kSocketPressure, Tier::kMemoryStat);
    s.cgroups_complete = true;
    return s;
  }
};

const CgroupView& View(const Snapshot& s, const std::string& path) {
  for (const CgroupView& c : s.cgroups) {
    if (c.path == path) return c;
  }
  throw std::runtime_error("no cgroup " + path);
}

TEST(StateTrackerTest, LocalDeltasAndVerdicts) {
  StateTracker tracker;
  Tree tree;
  tracker.Update(tree.Next(), {}, 0);  // first sample: baseline only
  tree.scan[2] += 20000;  // a: scanned hard, reclaimed nothing
  tree.steal[2] += 10;
  tree.scan[3] += 30000;  // b: reclaimed what it scanned
  tree.steal[3] += 29990;
  auto snap = tracker.Update(tree.Next(), {}, 0);
  const CgroupView& a = View(*snap, "/w/a");
  EXPECT_EQ(a.tier[static_cast<int>(Signal::kReclaim)], Tier::kMemoryStat);
  EXPECT_EQ(a.best.scanned_total, 20000u);
  EXPECT_EQ(a.best.reclaimed_total, 10u);
  ASSERT_TRUE(a.best.ratio);
  EXPECT_NEAR(*a.best.ratio, 1 - 10.0 / 20000, 1e-12);
  EXPECT_EQ(a.best.windows_total[2], 20000u / 512);
  EXPECT_EQ(a.best.pressure_events_total, 20000u / 512);
  EXPECT_DOUBLE_EQ(a.best.pressure_seconds_total, 1.0) << "capped at the interval";
  EXPECT_TRUE(a.pressure_active);

  const CgroupView& b = View(*snap, "/w/b");
  EXPECT_EQ(b.best.windows_total[0], 30000u / 512);
  EXPECT_EQ(b.best.pressure_events_total, 0u);
  EXPECT_FALSE(b.pressure_active);

  // /w itself scanned nothing of its own: its hierarchical delta is all children's.
  const CgroupView& w = View(*snap, "/w");
  EXPECT_EQ(w.best.scanned_total, 0u);
  EXPECT_FALSE(w.best.ratio.has_value()) << "no window completed yet";
  EXPECT_FALSE(w.pressure_active);
}

TEST(StateTrackerTest, WindowAccumulatesAcrossSamplesUntil512) {
  StateTracker tracker;
  Tree tree;
  tracker.Update(tree.Next(), {}, 0);
  tree.scan[2] += 300;
  auto s1 = tracker.Update(tree.Next(), {}, 0);
  EXPECT_FALSE(View(*s1, "/w/a").best.ratio.has_value());
  tree.scan[2] += 212;  // 512 in total
  auto s2 = tracker.Update(tree.Next(), {}, 0);
  const CgroupView& a = View(*s2, "/w/a");
  ASSERT_TRUE(a.best.ratio);
  EXPECT_EQ(a.best.windows_total[2], 1u);
  EXPECT_EQ(a.best.pressure_events_total, 1u);
}

TEST(StateTrackerTest, AncestorPressureIsInherited) {
  StateTracker tracker;
  Tree tree;
  tracker.Update(tree.Next(), {}, 0);
  tree.scan[1] += 5000;  // /w's own LRUs (not its children's) are scanned
  auto snap = tracker.Update(tree.Next(), {}, 0);
  EXPECT_TRUE(View(*snap, "/w").pressure_active);
  EXPECT_TRUE(View(*snap, "/w/a").pressure_active) << "mem_cgroup_under_socket_pressure walks up";
  EXPECT_TRUE(View(*snap, "/w/b").pressure_active);
  EXPECT_EQ(View(*snap, "/w/a").best.pressure_events_total, 0u) << "events count only the cgroup's own";
  EXPECT_FALSE(View(*snap, "/").pressure_active);
}

TEST(StateTrackerTest, RootNeverGetsSocketPressure) {
  StateTracker tracker;
  Tree tree;
  tracker.Update(tree.Next(), {}, 0);
  tree.scan[0] += 5000;
  auto snap = tracker.Update(tree.Next(), {}, 0);
  const CgroupView& root = View(*snap, "/");
  EXPECT_EQ(root.best.windows_total[2], 5000u / 512) << "the verdict is still computed";
  EXPECT_EQ(root.best.pressure_events_total, 0u);
  EXPECT_FALSE(root.pressure_active);
}

TEST(StateTrackerTest, NosocketComputesRatioButNoPressure) {
  StateTracker tracker;
  Tree tree;
  tree.nosocket = true;
  tracker.Update(tree.Next(), {}, 0);
  tree.scan[2] += 20000;
  auto snap = tracker.Update(tree.Next(), {}, 0);
  EXPECT_FALSE(snap->socket_accounting_enabled);
  const CgroupView& a = View(*snap, "/w/a");
  EXPECT_GT(*a.best.ratio, 0.95);
  EXPECT_EQ(a.best.pressure_events_total, 0u);
  EXPECT_FALSE(a.pressure_active);
}

TEST(StateTrackerTest, VanishedCgroupLosesItsStateAndCounterResetIsNotNegative) {
  StateTracker tracker;
  Tree tree;
  tracker.Update(tree.Next(), {}, 0);
  tree.scan[2] += 1000;
  tracker.Update(tree.Next(), {}, 0);
  Sample s = tree.Next();
  s.cgroups.pop_back();  // /w/b removed
  s.id_index.erase(103);
  auto snap = tracker.Update(std::move(s), {}, 0);
  EXPECT_EQ(snap->cgroups.size(), 3u);
  EXPECT_EQ(tracker.tracked(), 3u);

  // A cgroup recreated under the same path with a new id starts over.
  tree.scan[2] = 0;
  Sample r = tree.Next();
  r.cgroups[2].id = 999;
  auto snap2 = tracker.Update(std::move(r), {}, 0);
  EXPECT_EQ(View(*snap2, "/w/a").best.scanned_total, 0u);
}

TEST(StateTrackerTest, BetterTierWinsAndCountsDeltas) {
  StateTracker tracker(nullptr, /*keep_all_tiers=*/true);
  Tree tree;
  Sample s0 = tree.Next();
  s0.MarkLive(Signal::kSocketPressure, Tier::kIter);
  s0.pressure[Tier::kIter][102] = PressureState{false, 5, 2.0};
  tracker.Update(std::move(s0), {}, 0);
  Sample s1 = tree.Next();
  s1.MarkLive(Signal::kSocketPressure, Tier::kIter);
  s1.MarkLive(Signal::kWindowClamps, Tier::kTpBtf);
  s1.pressure[Tier::kIter][102] = PressureState{true, 8, 2.75};
  s1.clamps[Tier::kTpBtf][102] = ClampCounters{4};
  auto snap = tracker.Update(std::move(s1), {}, 0);
  EXPECT_EQ(snap->signal_tier[static_cast<int>(Signal::kSocketPressure)], Tier::kIter);
  EXPECT_EQ(snap->signal_tier[static_cast<int>(Signal::kWindowClamps)], Tier::kTpBtf);
  EXPECT_EQ(snap->signal_tier[static_cast<int>(Signal::kClampedSockets)], Tier::kNone);
  const CgroupView& a = View(*snap, "/w/a");
  // Counts kept by a source since it started are all new to the agent.
  EXPECT_EQ(a.best.pressure_events_total, 8u);
  EXPECT_DOUBLE_EQ(a.best.pressure_seconds_total, 2.75);
  EXPECT_TRUE(a.pressure_active);
  EXPECT_TRUE(View(*snap, "/w/b").tiers.count(Tier::kIter)) << "a live tier gives every cgroup a value";
  EXPECT_EQ(a.best.clamps_total, 4u);
  EXPECT_EQ(a.tiers.size(), 3u);  // memory_stat, iter, tp_btf side by side

  // The source restarted (map recreated): the counter keeps rising.
  Sample s2 = tree.Next();
  s2.MarkLive(Signal::kSocketPressure, Tier::kIter);
  s2.pressure[Tier::kIter][102] = PressureState{false, 1, 0.5};
  auto snap2 = tracker.Update(std::move(s2), {}, 0);
  EXPECT_EQ(View(*snap2, "/w/a").best.pressure_events_total, 9u);
  EXPECT_FALSE(View(*snap2, "/w/a").pressure_active);
}

TEST(StateTrackerTest, GlobalTcpMemoryPressure) {
  StateTracker tracker;
  Tree tree;
  Sample s = tree.Next();
  s.node.tcp_mem_pages = 40000;
  s.node.tcp_mem_limits = std::vector<uint64_t>{22932, 30578, 45864};
  auto snap = tracker.Update(std::move(s), {}, 0);
  ASSERT_TRUE(snap->tcp_memory_pressure);
  EXPECT_TRUE(*snap->tcp_memory_pressure);
}

}  // namespace
}  // namespace sockpressure

namespace sockpressure {
namespace {

// The parent is read before its child; a scan that lands in between shows
// up in the child now and in the parent only in the next sample. The
// parent's local count must not keep that difference.
TEST(StateTrackerTest, ParentReadBeforeChildDoesNotInventLocalScans) {
  StateTracker tracker;
  Tree tree;
  tracker.Update(tree.Next(), {}, 0);
  Sample s1 = tree.Next();
  s1.cgroups[2].pgscan = *s1.cgroups[2].pgscan + 4000;  // child already saw it, parents not yet
  tracker.Update(std::move(s1), {}, 0);
  tree.scan[2] += 4000;  // now everybody has it
  auto snap = tracker.Update(tree.Next(), {}, 0);
  EXPECT_EQ(View(*snap, "/w").best.scanned_total, 0u);
  EXPECT_EQ(View(*snap, "/").best.scanned_total, 0u);
  EXPECT_EQ(View(*snap, "/w/a").best.scanned_total, 4000u);
}

}  // namespace
}  // namespace sockpressure

namespace sockpressure {
namespace {

// Found by the QEMU lab: with cgroup.memory=nosocket the kernel still sets
// memcg->socket_pressure (the eBPF tiers see it), but nothing is throttled.
TEST(StateTrackerTest, NosocketIgnoresKernelPressureMarks) {
  StateTracker tracker;
  Tree tree;
  tree.nosocket = true;
  for (int i = 0; i < 2; ++i) {
    Sample s = tree.Next();
    s.MarkLive(Signal::kSocketPressure, Tier::kIter);
    s.pressure[Tier::kIter][102] = PressureState{true, 5u * (i + 1), 2.0 * (i + 1)};
    auto snap = tracker.Update(std::move(s), {}, 0);
    const CgroupView& a = View(*snap, "/w/a");
    EXPECT_EQ(a.tier[static_cast<int>(Signal::kSocketPressure)], Tier::kIter);
    EXPECT_EQ(a.best.pressure_events_total, 0u);
    EXPECT_DOUBLE_EQ(a.best.pressure_seconds_total, 0.0);
    EXPECT_FALSE(a.pressure_active);
  }
}

}  // namespace
}  // namespace sockpressure

namespace sockpressure {
namespace {

// /w/b removed, and the walk saw every cgroup.
Sample GoneB(Sample s) {
  s.cgroups.pop_back();
  s.id_index.erase(103);
  return s;
}

// /w/b recreated under the same path: a new cgroup id.
Sample RecreatedB(Sample s) {
  s.cgroups[3].id = 999;
  s.id_index.erase(103);
  s.id_index[999] = 3;
  return s;
}

// Leaves /w/b (the last cgroup) out of a sample, as a --cgroup.max cut or an
// unreadable memory.stat does.
Sample WithoutB(Sample s, bool cut_by_cap) {
  s = GoneB(std::move(s));
  s.cgroups_complete = false;
  if (cut_by_cap) s.cgroups_skipped = 1;
  return s;
}

bool AnyPressure(const Snapshot& snap) {
  for (const CgroupView& c : snap.cgroups) {
    if (c.pressure_active || c.best.pressure_events_total > 0) return true;
  }
  return false;
}

// Issue 13: a cgroup that missed one sample came back with its whole
// lifetime pgscan counted as new, and paged falsely.
TEST(StateTrackerGapTest, UnseenCgroupKeepsItsBaseline) {
  for (bool cut_by_cap : {true, false}) {
    StateTracker tracker;
    Tree tree;
    tree.scan[3] = 586833;  // lifetime counts of /w/b before the agent started
    tree.steal[3] = 1000;
    tracker.Update(tree.Next(), {}, 0);
    tracker.Update(tree.Next(), {}, 0);
    tracker.Update(WithoutB(tree.Next(), cut_by_cap), {}, 0);
    auto snap = tracker.Update(tree.Next(), {}, 0);
    auto snap2 = tracker.Update(tree.Next(), {}, 0);
    for (const auto& s : {snap, snap2}) {
      EXPECT_FALSE(AnyPressure(*s)) << "cut_by_cap=" << cut_by_cap;
      for (const CgroupView& c : s->cgroups) {
        EXPECT_EQ(c.best.scanned_total, 0u) << c.path << " cut_by_cap=" << cut_by_cap;
        EXPECT_EQ(c.best.windows_total[2], 0u) << c.path;
      }
    }
  }
}

TEST(StateTrackerGapTest, NewcomerAfterAnIncompleteWalkStartsFromItsBaseline) {
  // With the cap cutting the walk, a cgroup never seen before may have
  // existed all along: its counts so far are not known to be new.
  StateTracker tracker;
  Tree tree;
  tree.scan[3] = 586833;
  tracker.Update(WithoutB(tree.Next(), true), {}, 0);
  tracker.Update(WithoutB(tree.Next(), true), {}, 0);
  auto snap = tracker.Update(tree.Next(), {}, 0);
  EXPECT_EQ(View(*snap, "/w/b").best.scanned_total, 0u);
  EXPECT_FALSE(AnyPressure(*snap));
  // From then on it counts.
  tree.scan[3] += 20000;
  auto snap2 = tracker.Update(tree.Next(), {}, 0);
  EXPECT_EQ(View(*snap2, "/w/b").best.scanned_total, 20000u);
  EXPECT_TRUE(View(*snap2, "/w/b").pressure_active);
}

TEST(StateTrackerGapTest, CgroupCreatedSinceACompleteWalkCountsFromZero) {
  // After a complete walk a new path (or a new id at an old path) really is
  // new: everything it counted happened since the last sample.
  StateTracker tracker;
  Tree tree;
  tracker.Update(tree.Next(), {}, 0);
  tracker.Update(GoneB(tree.Next()), {}, 0);  // complete walk: /w/b is gone
  tree.scan[3] = 20000;
  auto snap = tracker.Update(RecreatedB(tree.Next()), {}, 0);
  EXPECT_EQ(View(*snap, "/w/b").best.scanned_total, 20000u);
  EXPECT_TRUE(View(*snap, "/w/b").pressure_active);
}

TEST(StateTrackerGapTest, RecreatedWhileUnseenIsNotTheOldCgroup) {
  StateTracker tracker;
  Tree tree;
  tree.scan[3] = 5000;
  tracker.Update(tree.Next(), {}, 0);
  tree.scan[3] += 1000;
  tracker.Update(tree.Next(), {}, 0);
  tracker.Update(WithoutB(tree.Next(), true), {}, 0);
  // Same path, new id, and the walk before was incomplete: baseline only,
  // and none of the old cgroup's totals carry over.
  auto snap = tracker.Update(RecreatedB(tree.Next()), {}, 0);
  EXPECT_EQ(View(*snap, "/w/b").best.scanned_total, 0u);
}

TEST(StateTrackerGapTest, UnseenCacheIsDroppedByACompleteWalk) {
  StateTracker tracker;
  Tree tree;
  tracker.Update(tree.Next(), {}, 0);
  tracker.Update(WithoutB(tree.Next(), true), {}, 0);
  EXPECT_EQ(tracker.unseen(), 1u);
  tracker.Update(GoneB(tree.Next()), {}, 0);  // complete: /w/b really is gone
  EXPECT_EQ(tracker.unseen(), 0u);
}

TEST(StateTrackerGapTest, UnseenCacheExpires) {
  StateTracker tracker;
  Tree tree;
  tracker.Update(tree.Next(), {}, 0);
  tracker.Update(WithoutB(tree.Next(), true), {}, 0);
  EXPECT_EQ(tracker.unseen(), 1u);
  tracker.Update(WithoutB(tree.Next(StateTracker::kUnseenExpirySeconds + 1), true), {}, 0);
  EXPECT_EQ(tracker.unseen(), 0u);
}

// Issue 13: UBSan found a signed overflow in the local-delta arithmetic.
TEST(StateTrackerGapTest, HugeCountersDoNotOverflow) {
  StateTracker tracker;
  Tree tree;
  tree.scan[2] = UINT64_MAX - 10;
  tracker.Update(tree.Next(), {}, 0);
  tree.scan[1] += uint64_t{1} << 63;
  auto snap = tracker.Update(tree.Next(), {}, 0);
  EXPECT_EQ(View(*snap, "/w/a").best.scanned_total, 0u);
  tree.scan[2] = UINT64_MAX;
  tree.scan[1] += uint64_t{1} << 63;
  auto snap2 = tracker.Update(tree.Next(), {}, 0);
  EXPECT_LE(View(*snap2, "/w").best.scanned_total, UINT64_MAX);
}

}  // namespace
}  // namespace sockpressure

namespace sockpressure {
namespace {

// Whatever a view shows, field by field.
void ExpectSameView(const CgroupView& a, const CgroupView& b, int sample) {
  SCOPED_TRACE(testing::Message() << "sample " << sample << " cgroup " << a.path.str());
  EXPECT_EQ(a.path, b.path);
  EXPECT_EQ(a.tier, b.tier);
  EXPECT_EQ(a.pressure_active, b.pressure_active);
  EXPECT_EQ(a.best.scanned_total, b.best.scanned_total);
  EXPECT_EQ(a.best.reclaimed_total, b.best.reclaimed_total);
  for (int l = 0; l < 3; ++l) EXPECT_EQ(a.best.windows_total[l], b.best.windows_total[l]);
  EXPECT_EQ(a.best.ratio, b.best.ratio);
  EXPECT_EQ(a.best.pressure_events_total, b.best.pressure_events_total);
  EXPECT_DOUBLE_EQ(a.best.pressure_seconds_total, b.best.pressure_seconds_total);
  EXPECT_EQ(a.best.pressure_asserted, b.best.pressure_asserted);
  EXPECT_EQ(a.best.clamps_total, b.best.clamps_total);
  EXPECT_EQ(a.subtree_sockets, b.subtree_sockets);
  EXPECT_EQ(a.best.census.has_value(), b.best.census.has_value());
  if (a.best.census && b.best.census) {
    EXPECT_EQ(a.best.census->sockets, b.best.census->sockets);
    EXPECT_EQ(a.best.census->clamped, b.best.census->clamped);
  }
}

// A sample that vouches for the same cgroups as the last is applied by
// entry, and its snapshot shares every view that did not change; what it
// shows must be exactly what applying the whole sample shows. Random
// reclaim, eBPF pressure switching on and off, a census that comes and
// goes, clamps: the two trackers agree on every view of every sample.
void CompareWholeAndIncremental(bool bpf) {
  SCOPED_TRACE(bpf ? "eBPF tiers" : "memory.stat only");
  StateTracker whole, incremental;
  Tree tree;
  uint64_t seed = 12345;
  auto rnd = [&seed](uint64_t n) {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    return (seed >> 33) % n;
  };
  ReclaimCounters bpf_a, bpf_b;
  PressureState press_a;
  uint64_t clamps_b = 0, sockets_b = 0;
  size_t shared = 0, changed_total = 0;
  for (int i = 0; i < 200; ++i) {
    if (rnd(3) == 0) {
      uint64_t k = 2 + rnd(2);
      tree.scan[k] += rnd(4000);
      tree.steal[k] += rnd(100);
    }
    Sample s = tree.Next();
    if (rnd(4) == 0) {
      bpf_a.scanned += 600;
      bpf_a.assertions += 1;
      press_a.assertions += 1;
      press_a.seconds += 0.5;
    }
    press_a.active = rnd(3) == 0;
    if (rnd(5) == 0) bpf_b.reclaimed += 7;
    if (rnd(6) == 0) ++clamps_b;
    if (bpf) {
      s.reclaim[Tier::kFentry][102] = bpf_a;
      if (bpf_b.reclaimed > 0) s.reclaim[Tier::kFentry][103] = bpf_b;
      s.pressure[Tier::kFentry][102] = press_a;
      s.clamps[Tier::kFentry][103].clamps = clamps_b;
      s.census[Tier::kIter];
      // Sockets come and go now and then (each change moves the counts of
      // every ancestor), their clamped state more often.
      if (rnd(4) == 0) sockets_b = sockets_b > 0 ? 0 : 3;
      if (sockets_b > 0) s.census[Tier::kIter][103] = SocketCensus{sockets_b, rnd(2)};
      if (rnd(12) == 0) s.census[Tier::kIter][101] = SocketCensus{1 + rnd(2), 0};
      s.MarkLive(Signal::kReclaim, Tier::kFentry);
      s.MarkLive(Signal::kSocketPressure, Tier::kFentry);
      s.MarkLive(Signal::kWindowClamps, Tier::kFentry);
      s.MarkLive(Signal::kClampedSockets, Tier::kIter);
    }
    Sample copy = s;
    copy.cgroups_same_as_last = i > 0;
    std::shared_ptr<const Snapshot> a = whole.Update(std::move(s), {}, 0);
    std::shared_ptr<const Snapshot> b = incremental.Update(std::move(copy), {}, 0);
    ASSERT_EQ(a->cgroups.size(), b->cgroups.size());
    for (size_t c = 0; c < a->cgroups.size(); ++c) ExpectSameView(a->cgroups[c], b->cgroups[c], i);
    EXPECT_FALSE(a->same_cgroups_as_previous);
    if (b->same_cgroups_as_previous) {
      shared += b->cgroups.size() - b->changed.size();
      changed_total += b->changed.size();
    }
  }
  EXPECT_GT(shared, 200u) << "still views are shared";
  EXPECT_GT(changed_total, 50u) << "moving ones are rebuilt";
}

TEST(StateTrackerIncrementalTest, SameViewsAsTheWholeSampleAndSharesTheStillOnes) {
  CompareWholeAndIncremental(/*bpf=*/false);
  CompareWholeAndIncremental(/*bpf=*/true);
}

// Only what moved gets a new view: one cgroup reclaiming rebuilds it and
// its ancestors (their hierarchical counters moved), its sibling is the
// very object of the last snapshot.
TEST(StateTrackerIncrementalTest, OnlyTheMovingPathGetsNewViews) {
  StateTracker tracker;
  Tree tree;
  tracker.Update(tree.Next(), {}, 0);
  Sample s = tree.Next();
  s.cgroups_same_as_last = true;
  std::shared_ptr<const Snapshot> before = tracker.Update(std::move(s), {}, 0);
  tree.scan[3] += 5000;
  s = tree.Next();
  s.cgroups_same_as_last = true;
  std::shared_ptr<const Snapshot> after = tracker.Update(std::move(s), {}, 0);
  ASSERT_TRUE(after->same_cgroups_as_previous);
  EXPECT_EQ(after->changed, (std::vector<uint32_t>{0, 1, 3}));
  EXPECT_EQ(after->cgroups.shared(2), before->cgroups.shared(2)) << "/w/a did not move";
  EXPECT_EQ(after->cgroups[3].best.scanned_total, 5000u);
  EXPECT_TRUE(after->cgroups[3].best.pressure_asserted) << "5,000 scanned, none reclaimed";
  s = tree.Next();
  s.cgroups_same_as_last = true;
  std::shared_ptr<const Snapshot> cleared = tracker.Update(std::move(s), {}, 0);
  EXPECT_FALSE(cleared->cgroups[3].best.pressure_asserted) << "the next still sample clears the assertion";
  EXPECT_EQ(cleared->changed, (std::vector<uint32_t>{3}));
  s = tree.Next();
  s.cgroups_same_as_last = true;
  std::shared_ptr<const Snapshot> still = tracker.Update(std::move(s), {}, 0);
  EXPECT_TRUE(still->changed.empty()) << "nothing moved";
  for (size_t i = 0; i < still->cgroups.size(); ++i) EXPECT_EQ(still->cgroups.shared(i), cleared->cgroups.shared(i));
}

// The sockets a cgroup's pressure throttles are its own and those of every
// cgroup below it: the fio cgroup with none has nothing to throttle, its
// parent counts its sibling's. Without a census the count is unknown.
TEST(StateTrackerSocketsTest, SubtreeSocketsCountEveryCgroupBelow) {
  StateTracker tracker;
  Tree tree;
  auto next = [&](std::optional<SocketCensus> w_b, bool same) {
    Sample s = tree.Next();
    s.cgroups_same_as_last = same;
    s.census[Tier::kIter];
    if (w_b) s.census[Tier::kIter][103] = *w_b;
    s.MarkLive(Signal::kClampedSockets, Tier::kIter);
    return tracker.Update(std::move(s), {}, 0);
  };
  auto snap = next(SocketCensus{4, 1}, false);
  EXPECT_EQ(View(*snap, "/w/a").subtree_sockets, std::optional<uint64_t>(0)) << "a census that found none";
  EXPECT_EQ(View(*snap, "/w/b").subtree_sockets, std::optional<uint64_t>(4));
  EXPECT_EQ(View(*snap, "/w").subtree_sockets, std::optional<uint64_t>(4));
  EXPECT_EQ(View(*snap, "/").subtree_sockets, std::optional<uint64_t>(4));
  // Applied incrementally: the change reaches every ancestor, and only them.
  snap = next(SocketCensus{4, 1}, true);
  std::shared_ptr<const Snapshot> closed = next(std::nullopt, true);
  ASSERT_TRUE(closed->same_cgroups_as_previous);
  EXPECT_EQ(closed->changed, (std::vector<uint32_t>{0, 1, 3}));
  EXPECT_EQ(closed->cgroups.shared(2), snap->cgroups.shared(2)) << "/w/a did not move";
  EXPECT_EQ(View(*closed, "/w").subtree_sockets, std::optional<uint64_t>(0));
  EXPECT_EQ(View(*closed, "/").subtree_sockets, std::optional<uint64_t>(0));

  StateTracker no_census;
  std::shared_ptr<const Snapshot> unknown = no_census.Update(tree.Next(), {}, 0);
  EXPECT_FALSE(View(*unknown, "/w").subtree_sockets.has_value()) << "no census tier: unknown, not 0";
}

}  // namespace
}  // namespace sockpressure
