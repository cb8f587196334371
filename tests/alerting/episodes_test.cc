// Episode tracking, the JSON API rendering and the doctor report on
// synthetic snapshots (no files, no threads).
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "exporter/outputs/alerts_api.h"
#include "exporter/outputs/cgroup_list_stream.h"
#include "exporter/outputs/episodes_page.h"
#include "exporter/commands/doctor.h"
#include "exporter/alerting/episodes.h"
#include "exporter/outputs/episode_timeline.h"
#include "exporter/outputs/text_writer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sockpressure {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// A tiny node: / -> /a, /b; /a/c below /a. Values are cumulative like the
// state tracker's.
struct Node {
  int64_t ms = 1'700'000'000'000;
  uint64_t seq = 0;
  struct Cg {
    std::string path;
    uint64_t id;
    int parent;
    TierValues best;
    bool active = false;
    std::optional<uint64_t> subtree_sockets = std::nullopt;  // CgroupView::subtree_sockets
  };
  std::vector<Cg> cgs = {{"/", 1, -1, {}}, {"/a", 2, 0, {}}, {"/b", 3, 0, {}}, {"/a/c", 4, 1, {}}};
  bool swap = true;

  Cg& Get(const std::string& p) {
    for (Cg& c : cgs) {
      if (c.path == p) return c;
    }
    abort();
  }
  // Advances one second; `pressured` cgroups get a pressure window.
  Snapshot Step(std::vector<std::string> pressured, double interval = 1.0) {
    ms += static_cast<int64_t>(interval * 1000);
    Snapshot s;
    s.sequence = ++seq;
    s.unix_millis = ms;
    s.interval_seconds = interval;
    s.cgroup_mode = CgroupMode::kUnified;
    s.swap_enabled = swap;
    s.node.kernel_release = "6.1.0-test";
    s.signal_tier[static_cast<int>(Signal::kReclaim)] = Tier::kMemoryStat;
    s.signal_tier[static_cast<int>(Signal::kSocketPressure)] = Tier::kMemoryStat;
    for (Cg& c : cgs) {
      c.best.pressure_asserted = false;
      for (const std::string& p : pressured) {
        if (p == c.path) {
          c.best.pressure_asserted = true;
          c.best.pressure_events_total += 2;
          c.best.pressure_seconds_total += interval;
          c.best.scanned_total += 20000;
          c.best.reclaimed_total += 10;
          c.best.ratio = 0.9995;
        }
      }
      CgroupView v;
      v.path = c.path;
      v.id = c.id;
      v.parent = c.parent;
      v.best = c.best;
      v.subtree_sockets = c.subtree_sockets;
      v.tier[static_cast<int>(Signal::kReclaim)] = Tier::kMemoryStat;
      v.tier[static_cast<int>(Signal::kSocketPressure)] = Tier::kMemoryStat;
      v.pressure_active = c.best.pressure_asserted ||
                          (c.parent >= 0 && s.cgroups[static_cast<size_t>(c.parent)].pressure_active);
      s.cgroups.push_back(v);
    }
    return s;
  }
};

std::string Metrics(const EpisodeTracker& t, const Snapshot& s) {
  std::unique_ptr<MetricWriter> w = NewTextWriter();
  t.WriteMetrics(s, *w);
  return w->Finish();
}

TEST(Episodes, OpensOnOwnPressureAndClosesAfterQuietPeriod) {
  EpisodeTracker t({/*quiet_seconds=*/3, /*history=*/16, /*top_reclaimers=*/5});
  Node n;
  t.Observe(n.Step({}));
  EXPECT_EQ(t.active_count(), 0u);
  t.Observe(n.Step({"/a"}));
  t.Observe(n.Step({"/a"}));
  ASSERT_EQ(t.active_count(), 1u);  // /a only, not /a/c which merely inherits
  std::vector<Episode> open = t.OpenAndJustClosed();
  ASSERT_EQ(open.size(), 1u);
  EXPECT_EQ(open[0].cgroup, "/a");
  EXPECT_EQ(open[0].trigger, "socket_pressure");
  EXPECT_DOUBLE_EQ(open[0].throttled_seconds, 2.0);
  EXPECT_DOUBLE_EQ(open[0].DurationSeconds(), 2.0);
  EXPECT_EQ(open[0].pressure_events, 4u);
  EXPECT_TRUE(open[0].preconditions.swap_enabled);
  ASSERT_TRUE(open[0].peak_ratio.has_value());
  EXPECT_NEAR(*open[0].peak_ratio, 0.9995, 1e-9);

  // Quiet for less than 3 s: still one episode.
  t.Observe(n.Step({}));
  t.Observe(n.Step({}));
  t.Observe(n.Step({"/a"}));
  EXPECT_EQ(t.started_total(), 1u);
  // Quiet for 3 s: closed, ending at the last throttled sample.
  t.Observe(n.Step({}));
  t.Observe(n.Step({}));
  EXPECT_EQ(t.active_count(), 1u);
  Snapshot last = n.Step({});
  t.Observe(last);
  EXPECT_EQ(t.active_count(), 0u);
  std::vector<Episode> closed = t.OpenAndJustClosed();
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_FALSE(closed[0].active);
  EXPECT_DOUBLE_EQ(closed[0].DurationSeconds(), 5.0);
  EXPECT_DOUBLE_EQ(closed[0].throttled_seconds, 3.0);
  EXPECT_EQ(closed[0].end_ms, closed[0].last_throttled_ms);
  // Reported once, then gone from the "just closed" list.
  t.Observe(n.Step({}));
  EXPECT_TRUE(t.OpenAndJustClosed().empty());

  std::string m = Metrics(t, last);
  EXPECT_THAT(m, HasSubstr("sockpressure_episodes_total{cgroup=\"/a\"} 1\n"));
  EXPECT_THAT(m, HasSubstr("sockpressure_episode_active{cgroup=\"/a\"} 0\n"));
  EXPECT_THAT(m, HasSubstr("sockpressure_episode_duration_seconds_total{cgroup=\"/a\"} 5\n"));
  EXPECT_THAT(m, Not(HasSubstr("cgroup=\"/b\"")));
}

TEST(Episodes, DurationCounterNeverShrinks) {
  EpisodeTracker t({2, 16, 5});
  Node n;
  t.Observe(n.Step({}));
  double last = 0;
  for (int i = 0; i < 12; ++i) {
    t.Observe(n.Step(i < 4 || i == 8 ? std::vector<std::string>{"/b"} : std::vector<std::string>{}));
    double now = t.Counters("/b") ? t.Counters("/b")->duration_seconds_total : 0;
    EXPECT_GE(now, last) << "step " << i;
    last = now;
  }
  EXPECT_EQ(t.Counters("/b")->episodes_total, 2u);
}

TEST(Episodes, RecordsOtherCgroupsReclaimingDuringTheEpisode) {
  EpisodeTracker t({30, 16, 2});
  Node n;
  t.Observe(n.Step({}));
  for (int i = 0; i < 3; ++i) {
    n.Get("/b").best.reclaimed_total += 5000;
    n.Get("/b").best.scanned_total += 5000;
    n.Get("/a/c").best.reclaimed_total += 100;
    n.Get("/a/c").best.scanned_total += 100;
    t.Observe(n.Step({"/a"}));
  }
  std::vector<Episode> e = t.Recent();
  ASSERT_EQ(e.size(), 1u);
  ASSERT_EQ(e[0].top_reclaimers.size(), 2u);
  EXPECT_EQ(e[0].top_reclaimers[0].cgroup, "/b");
  EXPECT_EQ(e[0].top_reclaimers[0].reclaimed, 15000u);
  EXPECT_EQ(e[0].top_reclaimers[1].cgroup, "/a/c");
  EXPECT_EQ(e[0].own_scanned, 60000u);  // its own reclaim is reported apart
  EXPECT_EQ(e[0].own_reclaimed, 30u);
}

// A pod's container restarted in place: its cgroup is removed and created
// again under the same path with a new id while another cgroup's episode is
// open. The episode names that path once, with both lives' reclaim.
TEST(Episodes, ACgroupRecreatedUnderItsPathIsOneReclaimer) {
  EpisodeTracker t({30, 16, 2});
  Node n;
  t.Observe(n.Step({}));
  auto reclaim_and_observe = [&] {
    n.Get("/b").best.reclaimed_total += 5000;
    n.Get("/b").best.scanned_total += 5000;
    n.Get("/a/c").best.reclaimed_total += 100;
    n.Get("/a/c").best.scanned_total += 100;
    t.Observe(n.Step({"/a"}));
  };
  reclaim_and_observe();
  reclaim_and_observe();
  n.Get("/b").id = 5;  // recreated: a new id, counters from zero
  n.Get("/b").best = {};
  t.Observe(n.Step({"/a"}));
  reclaim_and_observe();
  reclaim_and_observe();
  std::vector<Episode> e = t.Recent();
  ASSERT_EQ(e.size(), 1u);
  ASSERT_EQ(e[0].top_reclaimers.size(), 2u);
  EXPECT_EQ(e[0].top_reclaimers[0].cgroup, "/b");
  EXPECT_EQ(e[0].top_reclaimers[0].reclaimed, 20000u);
  EXPECT_EQ(e[0].top_reclaimers[0].scanned, 20000u);
  EXPECT_EQ(e[0].top_reclaimers[1].cgroup, "/a/c");
  EXPECT_EQ(e[0].top_reclaimers[1].reclaimed, 400u);
}

TEST(Episodes, HistoryIsBoundedNewestFirst) {
  EpisodeTracker t({1, 3, 5});
  Node n;
  t.Observe(n.Step({}));
  for (int i = 0; i < 5; ++i) {
    t.Observe(n.Step({"/b"}));
    t.Observe(n.Step({}));
    t.Observe(n.Step({}));
  }
  std::vector<Episode> e = t.Recent();
  ASSERT_EQ(e.size(), 3u);
  EXPECT_EQ(e[0].id, 5u);
  EXPECT_EQ(e[2].id, 3u);
  EXPECT_EQ(t.started_total(), 5u);
  EXPECT_EQ(t.Recent(1).size(), 1u);
  EXPECT_EQ(t.Recent(0, "/a").size(), 0u);
}

TEST(Episodes, ClampsAloneOpenAnEpisodeAndVanishedCgroupsCloseTheirs) {
  EpisodeTracker t({30, 16, 5});
  Node n;
  t.Observe(n.Step({}));
  n.Get("/a/c").best.clamps_total += 7;
  n.Get("/a/c").best.census = SocketCensus{10, 3};
  t.Observe(n.Step({}));
  std::vector<Episode> open = t.OpenAndJustClosed();
  ASSERT_EQ(open.size(), 1u);
  EXPECT_EQ(open[0].trigger, "window_clamps");
  EXPECT_EQ(open[0].clamps, 7u);
  EXPECT_EQ(open[0].peak_clamped_sockets, 3u);
  EXPECT_EQ(EpisodeSignalLabel(open[0]), "window_clamps");
  n.cgs.pop_back();  // /a/c removed
  t.Observe(n.Step({}));
  std::vector<Episode> closed = t.OpenAndJustClosed();
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_FALSE(closed[0].active);
}

TEST(Api, JsonUsesProtoMappingAndRoundTrips) {
  EpisodeTracker t({30, 16, 5});
  Node n;
  t.Observe(n.Step({}));
  Snapshot s = n.Step({"/a"});
  t.Observe(s);
  std::string json = ToJson(BuildEpisodeList(t, 0, "", s.unix_millis), false);
  EXPECT_THAT(json, HasSubstr("\"peakScanWithoutReclaimRatio\":0.9995"));
  EXPECT_THAT(json, HasSubstr("\"cgroup\":\"/a\""));
  EXPECT_THAT(json, HasSubstr("\"active\":true"));
  EXPECT_THAT(json, HasSubstr("\"socketAccountingEnabled\":true"));
  api::v1::EpisodeList back;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(json, &back).ok());
  ASSERT_EQ(back.episodes_size(), 1);
  EXPECT_EQ(back.episodes(0).cgroup(), "/a");
  EXPECT_EQ(back.episodes(0).preconditions().signal_sources().at("socket_pressure"), "memory_stat");

  std::string cg = ToJson(BuildCgroupList(s, t, true), false);
  api::v1::CgroupList cgl;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(cg, &cgl).ok());
  // /a (own pressure, open episode) and /a/c (inherits); not / or /b.
  ASSERT_EQ(cgl.cgroups_size(), 2);
  EXPECT_EQ(cgl.cgroups(0).cgroup(), "/a");
  EXPECT_TRUE(cgl.cgroups(0).pressure_asserted());
  EXPECT_EQ(cgl.cgroups(0).active_episode_id(), 1u);
  EXPECT_EQ(cgl.cgroups(1).cgroup(), "/a/c");
  EXPECT_FALSE(cgl.cgroups(1).pressure_asserted());
  EXPECT_TRUE(cgl.cgroups(1).pressure_active());
  EXPECT_EQ(BuildCgroupList(s, t, false).cgroups_size(), 4);
}

// `json`'s lines, sorted, without a trailing comma: what two pretty
// printings of one message share whatever order their maps came out in.
std::vector<std::string> SortedLines(const std::string& json) {
  std::vector<std::string> lines = absl::StrSplit(json, '\n');
  for (std::string& l : lines) {
    if (absl::EndsWith(l, ",")) l.pop_back();
  }
  std::sort(lines.begin(), lines.end());
  return lines;
}

// / -> /a (pressure, an episode), /b; /a/c; and 3,000 pods' cgroups, with
// an identity each.
std::shared_ptr<const Snapshot> ThousandsOfCgroups(EpisodeTracker& t) {
  Node n;
  t.Observe(n.Step({}));
  Snapshot s = n.Step({"/a"});
  t.Observe(s);
  for (int i = 0; i < 3000; ++i) {
    CgroupView v;
    v.path = absl::StrCat("/kubepods/pod", i);
    v.id = 100 + static_cast<uint64_t>(i);
    v.parent = 0;
    v.identity = {{"namespace", "default"}, {"pod", absl::StrCat("web-", i)}, {"container", "app"}};
    s.cgroups.push_back(v);
  }
  return std::make_shared<const Snapshot>(std::move(s));
}

// The whole of `stream`; counts its pieces and the largest.
std::string Drain(BodyStream& stream, size_t* pieces, size_t* largest) {
  std::string all;
  *pieces = *largest = 0;
  for (bool more = true; more; ++*pieces) {
    std::string piece;
    more = stream.Next(&piece);
    *largest = std::max(*largest, piece.size());
    all += piece;
  }
  return all;
}

TEST(Api, CgroupListStreamsTheWholeListsJsonInBoundedPieces) {
  EpisodeTracker t({30, 16, 5});
  std::shared_ptr<const Snapshot> big = ThousandsOfCgroups(t);
  auto quiet = std::make_shared<const Snapshot>(Node().Step({}));  // ?pressure=1 lists nothing
  struct Case {
    std::shared_ptr<const Snapshot> snapshot;
    bool only_pressure;
    size_t min_pieces;
  };
  CgroupListPieces shared;
  for (const Case& c : {Case{big, false, 20}, Case{big, true, 1}, Case{quiet, true, 1}}) {
    for (bool pretty : {false, true}) {
      for (CgroupListPieces* cache : {static_cast<CgroupListPieces*>(nullptr), &shared}) {
        SCOPED_TRACE(absl::StrCat(c.snapshot->cgroups.size(), " cgroups, pressure only ", c.only_pressure,
                                  ", pretty ", pretty, ", shared pieces ", cache != nullptr));
        const std::string whole = ToJson(BuildCgroupList(*c.snapshot, t, c.only_pressure), pretty);
        size_t pieces = 0, largest = 0;
        const std::string streamed =
            Drain(*NewCgroupListStream(c.snapshot, t, c.only_pressure, pretty, cache), &pieces, &largest);
        EXPECT_GE(pieces, c.min_pieces);
        EXPECT_LT(largest, 128u << 10) << "of " << whole.size() << " bytes in all";
        api::v1::CgroupList a, b;
        ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(whole, &a).ok());
        ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(streamed, &b).ok()) << streamed.substr(0, 500);
        EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(a, b));
        // Byte for byte but for the order of map entries, which protobuf
        // prints in no fixed order.
        EXPECT_EQ(streamed.size(), whole.size());
        if (pretty) {
          EXPECT_EQ(SortedLines(streamed), SortedLines(whole));
        }
      }
    }
  }
}

TEST(Api, ReadersOfOneSampleShareItsListPiecesUntilTheNextCycle) {
  EpisodeTracker t({30, 16, 5});
  std::shared_ptr<const Snapshot> s = ThousandsOfCgroups(t);
  CgroupListPieces shared;
  size_t pieces = 0, largest = 0;
  const std::string first = Drain(*NewCgroupListStream(s, t, false, true, &shared), &pieces, &largest);
  const uint64_t once = shared.rendered();
  EXPECT_GE(once, pieces - 1);  // the last Next() may add only the end
  for (int i = 0; i < 5; ++i) {
    // The same lines (the head's maps come out in any order).
    EXPECT_TRUE(SortedLines(Drain(*NewCgroupListStream(s, t, false, true, &shared), &pieces, &largest)) ==
                SortedLines(first));
  }
  EXPECT_EQ(shared.rendered(), once) << "five more readers rendered nothing";
  Drain(*NewCgroupListStream(s, t, false, false, &shared), &pieces, &largest);
  EXPECT_EQ(shared.rendered(), 2 * once) << "plain JSON is another list";
  shared.Clear();  // a sampling cycle begins
  Drain(*NewCgroupListStream(s, t, false, true, &shared), &pieces, &largest);
  EXPECT_EQ(shared.rendered(), 3 * once);
}

TEST(Api, PageShowsRowsAndEscapes) {
  EpisodeTracker t({30, 16, 5});
  Node n;
  n.cgs.push_back({"/x<script>", 9, 0, {}});
  t.Observe(n.Step({}));
  Snapshot s = n.Step({"/x<script>"});
  t.Observe(s);
  std::string html = RenderEpisodesPage(BuildCgroupList(s, t, true), BuildEpisodeList(t, 10, "", s.unix_millis),
                                        {"1.2.3", [] { return std::string("Alert push: ok"); }});
  EXPECT_THAT(html, HasSubstr("data-cgroup=\"/x&lt;script&gt;\""));
  EXPECT_THAT(html, Not(HasSubstr("<script>")));
  EXPECT_THAT(html, HasSubstr("id=\"episode-1\""));
  EXPECT_THAT(html, HasSubstr("throttled (own pressure)"));
  EXPECT_THAT(html, HasSubstr("Alert push: ok"));
}

TEST(Episodes, KeepABoundedTimelineOfPressureAndClamps) {
  EpisodeTracker t({/*quiet_seconds=*/1000, /*history=*/16, /*top_reclaimers=*/5});
  Node n;
  t.Observe(n.Step({}));
  t.Observe(n.Step({"/a"}));
  t.Observe(n.Step({}));  // quiet but still open: a zero point
  t.Observe(n.Step({"/a"}));
  std::vector<Episode> open = t.OpenAndJustClosed();
  ASSERT_EQ(open.size(), 1u);
  ASSERT_EQ(open[0].timeline.size(), 3u);
  EXPECT_DOUBLE_EQ(open[0].timeline[0].pressure_seconds, 1.0);
  EXPECT_DOUBLE_EQ(open[0].timeline[1].pressure_seconds, 0.0);
  EXPECT_DOUBLE_EQ(open[0].timeline[2].interval_seconds, 1.0);
  EXPECT_EQ(open[0].timeline[2].end_ms, open[0].last_throttled_ms);
  // A long episode keeps at most kEpisodeTimelinePoints points, each covering
  // more time, and the whole span and total pressure are preserved.
  for (int i = 0; i < 1000; ++i) t.Observe(n.Step({"/a"}));
  open = t.OpenAndJustClosed();
  const auto& tl = open[0].timeline;
  EXPECT_LE(tl.size(), kEpisodeTimelinePoints);
  EXPECT_GE(tl.size(), kEpisodeTimelinePoints / 2);
  double pressure = 0, span = 0;
  for (const EpisodePoint& p : tl) {
    pressure += p.pressure_seconds;
    span += p.interval_seconds;
  }
  EXPECT_DOUBLE_EQ(pressure, open[0].throttled_seconds);
  EXPECT_DOUBLE_EQ(span, open[0].DurationSeconds());
}

TEST(Api, PageDrawsEachEpisodeAsAnSvgTimeline) {
  EpisodeTracker t({30, 16, 5});
  Node n;
  t.Observe(n.Step({}));
  t.Observe(n.Step({"/a"}));
  t.Observe(n.Step({}));
  Snapshot s = n.Step({"/a"});
  t.Observe(s);
  api::v1::EpisodeList list = BuildEpisodeList(t, 10, "", s.unix_millis);
  ASSERT_EQ(list.episodes(0).timeline_size(), 3);
  std::string svg = EpisodeTimelineSvg(list.episodes(0));
  EXPECT_THAT(svg, HasSubstr("<svg"));
  EXPECT_THAT(svg, HasSubstr("class=\"timeline\""));
  EXPECT_THAT(svg, HasSubstr("data-points=\"3\""));
  EXPECT_THAT(svg, HasSubstr("<title>"));
  // Two pressured samples -> two pressure bars, none for the quiet one.
  size_t bars = 0;
  for (size_t at = svg.find("class=\"pressure\""); at != std::string::npos; at = svg.find("class=\"pressure\"", at + 1)) ++bars;
  EXPECT_EQ(bars, 2u);
  std::string html = RenderEpisodesPage(BuildCgroupList(s, t, true), list, {"1.2.3", [] { return std::string(); }});
  EXPECT_THAT(html, HasSubstr("<svg"));
}

TEST(Doctor, VerdictsAndExitCodes) {
  Node n;
  Snapshot a = n.Step({});
  Snapshot b = n.Step({"/a"});
  DoctorOptions o;
  o.version = "test";
  std::string out;
  EXPECT_EQ(RenderDoctorReport(a, b, o, &out), kDoctorThrottling);
  EXPECT_THAT(out, HasSubstr("THROTTLING FOUND"));
  EXPECT_THAT(out, HasSubstr("  - /a: own socket pressure asserted"));
  EXPECT_THAT(out, HasSubstr("1 cgroup(s) below it inherit"));
  EXPECT_THAT(out, HasSubstr("memory.swap.max=0"));
  EXPECT_THAT(out, HasSubstr("alerts/runbooks/tcp-throttled.md"));

  out.clear();
  Snapshot c = n.Step({});
  EXPECT_EQ(RenderDoctorReport(b, c, o, &out), kDoctorNoThrottling);
  EXPECT_THAT(out, HasSubstr("no throttling found"));

  out.clear();
  Snapshot empty;
  EXPECT_EQ(RenderDoctorReport(empty, empty, o, &out), kDoctorError);
  EXPECT_THAT(out, HasSubstr("cannot tell"));
}

// Pruning and drops go into the open episode and into doctor's report, with
// or without socket pressure, but only pressure (or clamps) opens an episode
// or makes the verdict "throttled".
TEST(Episodes, PruningAndDropsAreRecordedButOpenNothing) {
  EpisodeTracker t({30, 16, 5});
  Node n;
  t.Observe(n.Step({}));
  n.Get("/b").best.prunes_total = PruneCounters{4, 0, 2, 0};
  Snapshot b1 = n.Step({});
  t.Observe(b1);
  EXPECT_TRUE(t.OpenAndJustClosed().empty()) << "an SO_RCVBUF overrun is not memcg throttling";

  n.Get("/a").best.prunes_total = PruneCounters{3, 5, 1, 1};
  Snapshot a1 = n.Step({"/a"});
  t.Observe(a1);
  n.Get("/a").best.prunes_total = PruneCounters{7, 5, 2, 1};
  Snapshot a2 = n.Step({"/a"});
  t.Observe(a2);
  std::vector<Episode> open = t.OpenAndJustClosed();
  ASSERT_EQ(open.size(), 1u);
  EXPECT_EQ(open[0].cgroup, "/a");
  EXPECT_EQ(open[0].prunes.rcv_mem_drops, 7u);
  EXPECT_EQ(open[0].prunes.ofo_pruned_segs, 5u);
  EXPECT_EQ(open[0].prunes.collapses, 2u);
  EXPECT_EQ(open[0].prunes.ofo_prunes, 1u);

  DoctorOptions o;
  o.version = "test";
  std::string out;
  EXPECT_EQ(RenderDoctorReport(a1, a2, o, &out), kDoctorThrottling);
  EXPECT_THAT(out, HasSubstr("Pruning and receive drops"));
  EXPECT_THAT(out, HasSubstr("  - /a: receive queue collapsed +1; segments DROPPED for lack of receive memory +4; "
                             "under memcg socket pressure"));
  EXPECT_THAT(out, HasSubstr("alerts/runbooks/tcp-pruning.md"));
  out.clear();
  Snapshot before = n.Step({});
  n.Get("/b").best.prunes_total = PruneCounters{9, 0, 3, 0};
  EXPECT_EQ(RenderDoctorReport(before, n.Step({}), o, &out), kDoctorNoThrottling);
  EXPECT_THAT(out, HasSubstr("  - /b: receive queue collapsed +1; segments DROPPED for lack of receive memory +5; "
                             "no socket pressure: its own buffer overran"));
}

}  // namespace
}  // namespace sockpressure

namespace sockpressure {
namespace {

bool SameShown(const CgroupView& a, const CgroupView& b) {
  const TierValues &x = a.best, &y = b.best;
  return a.pressure_active == b.pressure_active && x.pressure_asserted == y.pressure_asserted &&
         x.pressure_events_total == y.pressure_events_total && x.pressure_seconds_total == y.pressure_seconds_total &&
         x.clamps_total == y.clamps_total && x.scanned_total == y.scanned_total &&
         x.reclaimed_total == y.reclaimed_total && x.ratio == y.ratio && a.identity == b.identity;
}

// What the state layer makes of `s` when it has the same cgroups as `prev`:
// unchanged views shared, the others listed as changed.
Snapshot Shared(const Snapshot& prev, const Snapshot& s) {
  Snapshot out = s;
  out.cgroups = CgroupTable();
  out.same_cgroups_as_previous = true;
  for (size_t i = 0; i < s.cgroups.size(); ++i) {
    if (SameShown(prev.cgroups[i], s.cgroups[i])) {
      out.cgroups.push_back(prev.cgroups.shared(i));
    } else {
      out.cgroups.push_back(s.cgroups.shared(i));
      out.changed.push_back(static_cast<uint32_t>(i));
    }
  }
  return out;
}

// A snapshot that shares its still views is observed by visiting only the
// changed cgroups and the watched ones (open episodes, asserted pressure):
// the episodes, their counters and their metrics are exactly those of
// visiting every cgroup, through openings, quiet periods and closings.
TEST(EpisodesIncremental, VisitingTheChangedOnesGivesTheSameEpisodes) {
  EpisodeTracker every({/*quiet_seconds=*/3, /*history=*/64, /*top_reclaimers=*/5});
  EpisodeTracker changed({/*quiet_seconds=*/3, /*history=*/64, /*top_reclaimers=*/5});
  Node n;
  uint64_t seed = 7;
  auto rnd = [&seed](uint64_t k) {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    return (seed >> 33) % k;
  };
  Snapshot prev = n.Step({});
  every.Observe(prev);
  changed.Observe(prev);
  size_t skipped = 0;
  for (int i = 0; i < 150; ++i) {
    std::vector<std::string> pressured;
    for (const char* p : {"/a", "/b", "/a/c"}) {
      if (rnd(5) == 0) pressured.push_back(p);
    }
    if (rnd(4) == 0) n.Get("/b").best.clamps_total += 1;
    Snapshot s = n.Step(pressured);
    Snapshot shared = Shared(prev, s);
    skipped += s.cgroups.size() - shared.changed.size();
    every.Observe(s);
    changed.Observe(shared);
    SCOPED_TRACE(testing::Message() << "sample " << i);
    std::vector<Episode> a = every.Recent(), b = changed.Recent();
    ASSERT_EQ(a.size(), b.size());
    for (size_t k = 0; k < a.size(); ++k) {
      EXPECT_EQ(a[k].cgroup, b[k].cgroup);
      EXPECT_EQ(a[k].active, b[k].active);
      EXPECT_EQ(a[k].samples, b[k].samples);
      EXPECT_EQ(a[k].start_ms, b[k].start_ms);
      EXPECT_EQ(a[k].end_ms, b[k].end_ms);
      EXPECT_DOUBLE_EQ(a[k].throttled_seconds, b[k].throttled_seconds);
      EXPECT_EQ(a[k].clamps, b[k].clamps);
      EXPECT_EQ(a[k].timeline.size(), b[k].timeline.size());
    }
    EXPECT_EQ(Metrics(every, s), Metrics(changed, shared));
    prev = s;
  }
  EXPECT_GT(skipped, 150u) << "still cgroups were not visited";
  EXPECT_GT(every.started_total(), 5u);
}

// A cgroup the kernel puts under socket pressure with no TCP socket in it
// or below it (a reader of mmap'd files) is recorded as such: its episode
// says "nothing to throttle", doctor lists it apart and finds no
// throttling, the page says so. Once a socket is there, it is throttling.
TEST(Episodes, PressureWithNoSocketToThrottleIsRecordedNotThrottling) {
  EpisodeTracker t({30, 16, 5});
  Node n;
  n.Get("/b").subtree_sockets = 0;
  Snapshot before = n.Step({});
  t.Observe(before);
  Snapshot s = n.Step({"/b"});
  t.Observe(s);
  std::vector<Episode> open = t.OpenAndJustClosed();
  ASSERT_EQ(open.size(), 1u);
  EXPECT_EQ(open[0].peak_subtree_sockets, std::optional<uint64_t>(0));
  EXPECT_TRUE(NothingToThrottle(open[0]));

  DoctorOptions o;
  o.version = "test";
  std::string out;
  EXPECT_EQ(RenderDoctorReport(before, s, o, &out), kDoctorNoThrottling) << out;
  EXPECT_THAT(out, HasSubstr("Pressure, nothing to throttle, in 1 cgroup(s)"));
  EXPECT_THAT(out, HasSubstr("  - /b: own socket pressure asserted"));
  EXPECT_THAT(out, Not(HasSubstr("FOUND in")));

  api::v1::EpisodeList list = BuildEpisodeList(t, 0, "", s.unix_millis);
  ASSERT_EQ(list.episodes_size(), 1);
  EXPECT_TRUE(list.episodes(0).nothing_to_throttle());
  std::string html = RenderEpisodesPage(BuildCgroupList(s, t, true), list, {"1.2.3", [] { return std::string(); }});
  EXPECT_THAT(html, HasSubstr("pressure, nothing to throttle"));

  // A socket arrives while the pressure lasts: now it throttles.
  n.Get("/b").subtree_sockets = 2;
  Snapshot later = n.Step({"/b"});
  t.Observe(later);
  open = t.OpenAndJustClosed();
  ASSERT_EQ(open.size(), 1u);
  EXPECT_FALSE(NothingToThrottle(open[0]));
  out.clear();
  EXPECT_EQ(RenderDoctorReport(s, later, o, &out), kDoctorThrottling);
  EXPECT_THAT(out, HasSubstr("FOUND in 1 cgroup(s)"));

  // Without a census nothing is known: pressure is throttling, as before.
  Episode unknown = open[0];
  unknown.peak_subtree_sockets.reset();
  EXPECT_FALSE(NothingToThrottle(unknown));
}

}  // namespace
}  // namespace sockpressure
