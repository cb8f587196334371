// Pruning and memory drops from the sample to the exposition: the drop half
// and the function half come from different programs and tiers, each is
// taken from its own signal's best tier, deltas survive a source restart,
// and a cgroup without a live tier gets no series (not a zero).
#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "exporter/outputs/snapshot_metrics.h"
#include "exporter/outputs/text_writer.h"
#include "exporter/state/state_tracker.h"

namespace sockpressure {
namespace {

Sample TwoCgroups(double t) {
  Sample s;
  s.monotonic_seconds = t;
  s.cgroup_mode = CgroupMode::kUnified;
  const char* paths[] = {"/", "/a"};
  for (int i = 0; i < 2; ++i) {
    CgroupReading c;
    c.path = paths[i];
    c.id = 200 + static_cast<uint64_t>(i);
    c.parent = i - 1;
    s.cgroups.push_back(c);
    s.id_index[c.id] = i;
  }
  s.cgroups_complete = true;
  return s;
}

const CgroupView& View(const Snapshot& s, const std::string& path) {
  for (const CgroupView& c : s.cgroups) {
    if (c.path == path) return c;
  }
  throw std::runtime_error("no cgroup " + path);
}

TEST(PrunesState, EachHalfFromItsOwnTierAndDeltasSurviveRestart) {
  StateTracker tracker(nullptr, /*keep_all_tiers=*/true);
  Sample s0 = TwoCgroups(1);
  s0.MarkLive(Signal::kRcvMemDrops, Tier::kTpBtf);
  s0.MarkLive(Signal::kTcpPrunes, Tier::kFentry);
  s0.prunes[Tier::kTpBtf][201] = PruneCounters{3, 7, 0, 0};
  s0.prunes[Tier::kFentry][201] = PruneCounters{0, 0, 5, 2};
  auto snap = tracker.Update(std::move(s0), {}, 0);
  EXPECT_EQ(snap->signal_tier[static_cast<int>(Signal::kRcvMemDrops)], Tier::kTpBtf);
  EXPECT_EQ(snap->signal_tier[static_cast<int>(Signal::kTcpPrunes)], Tier::kFentry);
  const CgroupView& a = View(*snap, "/a");
  EXPECT_EQ(a.best.prunes_total.rcv_mem_drops, 3u);
  EXPECT_EQ(a.best.prunes_total.ofo_pruned_segs, 7u);
  EXPECT_EQ(a.best.prunes_total.collapses, 5u);
  EXPECT_EQ(a.best.prunes_total.ofo_prunes, 2u);

  // The drop map was recreated (agent-side counters keep rising).
  Sample s1 = TwoCgroups(2);
  s1.MarkLive(Signal::kRcvMemDrops, Tier::kTpBtf);
  s1.MarkLive(Signal::kTcpPrunes, Tier::kFentry);
  s1.prunes[Tier::kTpBtf][201] = PruneCounters{1, 0, 0, 0};
  s1.prunes[Tier::kFentry][201] = PruneCounters{0, 0, 6, 2};
  auto snap1 = tracker.Update(std::move(s1), {}, 0);
  const CgroupView& a1 = View(*snap1, "/a");
  EXPECT_EQ(a1.best.prunes_total.rcv_mem_drops, 4u);
  EXPECT_EQ(a1.best.prunes_total.ofo_pruned_segs, 7u);
  EXPECT_EQ(a1.best.prunes_total.collapses, 6u);
  EXPECT_EQ(View(*snap1, "/").best.prunes_total.rcv_mem_drops, 0u);

  auto w = NewTextWriter();
  WriteSnapshotMetrics(*snap1, {"0", "x", "cc"}, {/*all_tiers=*/true}, *w);
  std::string text = w->Finish();
  EXPECT_TRUE(absl::StrContains(text, "# TYPE sockpressure_tcp_rcv_mem_drops_total counter\n"));
  EXPECT_TRUE(absl::StrContains(text, "sockpressure_tcp_rcv_mem_drops_total{cgroup=\"/a\"} 4\n"));
  EXPECT_TRUE(absl::StrContains(text, "sockpressure_tcp_ofo_pruned_segments_total{cgroup=\"/a\"} 7\n"));
  EXPECT_TRUE(absl::StrContains(text, "sockpressure_tcp_prune_collapses_total{cgroup=\"/a\"} 6\n"));
  EXPECT_TRUE(absl::StrContains(text, "sockpressure_tcp_ofo_prunes_total{cgroup=\"/a\"} 2\n"));
  EXPECT_FALSE(absl::StrContains(text, "sockpressure_tcp_rcv_mem_drops_total{cgroup=\"/\"}"))
      << "no sockets and no count: no series (docs/metrics.md)";
  EXPECT_TRUE(absl::StrContains(text, "sockpressure_tier_prune_collapses_total{cgroup=\"/a\",source=\"fentry\"} 6\n"));
  EXPECT_FALSE(absl::StrContains(text, "sockpressure_tier_prune_collapses_total{cgroup=\"/a\",source=\"tp_btf\"}"))
      << "the drop tier has no collapses to report";
  EXPECT_TRUE(absl::StrContains(text, "sockpressure_signal_source{signal=\"rcv_mem_drops\",source=\"tp_btf\"} 1\n"));
  EXPECT_TRUE(absl::StrContains(text, "sockpressure_signal_source{signal=\"tcp_prunes\",source=\"fentry\"} 1\n"));
}

// The core profile keeps four zero series off every socket-less cgroup: a
// cgroup shows its drop/prune counters while it has sockets (at 0 before its
// first drop, so rate() counts that drop) or once it has a count.
TEST(PrunesState, CountersWhileTheCgroupHasSockets) {
  StateTracker tracker(nullptr, false);
  Sample s0 = TwoCgroups(1);
  s0.MarkLive(Signal::kRcvMemDrops, Tier::kTpBtf);
  s0.MarkLive(Signal::kClampedSockets, Tier::kIter);
  s0.prunes[Tier::kTpBtf];  // the drop map was read: nothing dropped anywhere
  s0.census[Tier::kIter][200] = SocketCensus{3, 0};
  auto snap = tracker.Update(std::move(s0), {}, 0);
  auto w = NewTextWriter();
  WriteSnapshotMetrics(*snap, {"0", "x", "cc"}, {}, *w);
  std::string text = w->Finish();
  EXPECT_TRUE(absl::StrContains(text, "sockpressure_tcp_rcv_mem_drops_total{cgroup=\"/\"} 0\n")) << text;
  EXPECT_FALSE(absl::StrContains(text, "sockpressure_tcp_rcv_mem_drops_total{cgroup=\"/a\"}")) << text;
}

TEST(PrunesState, NoLiveTierNoSeries) {
  StateTracker tracker(nullptr, false);
  auto snap = tracker.Update(TwoCgroups(1), {}, 0);
  auto w = NewTextWriter();
  WriteSnapshotMetrics(*snap, {"0", "x", "cc"}, {}, *w);
  std::string text = w->Finish();
  EXPECT_FALSE(absl::StrContains(text, "sockpressure_tcp_rcv_mem_drops_total{"));
  EXPECT_FALSE(absl::StrContains(text, "sockpressure_tcp_prune_collapses_total{"));
  EXPECT_TRUE(absl::StrContains(text, "sockpressure_signal_source{signal=\"tcp_prunes\",source=\"none\"} 1\n"));
}

}  // namespace
}  // namespace sockpressure
