// The remainder check of the cgroupfs walk (docs/sampling.md): when a parent
// moves, its hot children are read first, and the other children only when
// parent != own share + sum(children's latest readings). On fixture trees a
// child's memory.stat can be changed without its parent ("planted"), which
// the kernel's hierarchical counters never do: whether the planted value
// shows in the sample tells whether that child was read.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <map>
#include <string>

#include "exporter/sources/cgroupfs_source.h"
#include "exporter/state/state_tracker.h"
#include "cgroupfs_test_util.h"
#include "test_util.h"

namespace sockpressure {
namespace {

using testing::FindCgroup;
using testing::ScanOf;
using testing::Take;
using testing::TrackedCollector;
using testing::WriteFile;

// / -> /p -> /p/c0 .. /p/c9, and / -> /q (a still sibling of /p).
struct Tree {
  testing::TempDir dir;
  std::filesystem::path root = dir.path();
  std::map<std::string, std::pair<uint64_t, uint64_t>> counters;  // path -> scan, steal

  Tree() {
    WriteFile(root / "cgroup.controllers", "memory\n");
    Write("");
    Write("p");
    Write("q");
    for (int i = 0; i < 10; ++i) Write(Child(i));
  }
  static std::string Child(int i) { return "p/c" + std::to_string(i); }
  void Write(const std::string& p) {
    auto [scan, steal] = counters[p];
    WriteFile(root / p / "memory.stat", "anon 4096\nfile 0\nsock 0\npgscan " + std::to_string(scan) +
                                            "\npgsteal " + std::to_string(steal) + "\n");
  }
  // A real reclaim: the cgroup and every ancestor move by the same amount.
  void Reclaim(const std::string& p, uint64_t scan, uint64_t steal) {
    for (std::string q = p;; q = q.substr(0, q.rfind('/') == std::string::npos ? 0 : q.rfind('/'))) {
      counters[q].first += scan;
      counters[q].second += steal;
      Write(q);
      if (q.empty()) break;
    }
  }
  // Only this cgroup's file: visible only if the walk reads it.
  void Plant(const std::string& p, uint64_t scan) {
    counters[p].first += scan;
    Write(p);
  }
  std::unique_ptr<Source> Agent(CgroupfsOptions::KeepFiles keep = CgroupfsOptions::KeepFiles::kAlways) {
    Paths paths;
    paths.cgroupfs = root.string();
    CgroupfsOptions o(5000, /*full pass every*/ 1000);
    o.keep_files = keep;
    return NewCgroupfsSource(paths, std::move(o));
  }
  // The core profile (no context series), with a full pass every `full_every` samples.
  std::unique_ptr<Source> CoreAgent(uint64_t full_every,
                                    CgroupfsOptions::KeepFiles keep = CgroupfsOptions::KeepFiles::kAlways) {
    Paths paths;
    paths.cgroupfs = root.string();
    CgroupfsOptions o(5000, full_every);
    o.keep_files = keep;
    o.read_context = false;
    return NewCgroupfsSource(paths, std::move(o));
  }
};



// Warm-up: a full pass, then c1 reclaims twice (the first move reads every
// child and learns the split; c1 is hot from then on).
std::unique_ptr<Source> Warm(Tree& t, CgroupfsOptions::KeepFiles keep = CgroupfsOptions::KeepFiles::kAlways) {
  std::unique_ptr<Source> src = t.Agent(keep);
  Take(*src);
  for (int i = 0; i < 2; ++i) {
    t.Reclaim("p/c1", 100, 20);
    Take(*src);
  }
  return src;
}

TEST(CgroupfsRemainderTest, HotChildrenExplainTheParentSilentOnesAreNotRead) {
  for (auto keep : {CgroupfsOptions::KeepFiles::kAlways, CgroupfsOptions::KeepFiles::kNever}) {
    Tree t;
    std::unique_ptr<Source> src = Warm(t, keep);
    t.Plant("p/c5", 7);
    t.Reclaim("p/c1", 100, 20);
    Sample s = Take(*src);
    EXPECT_EQ(ScanOf(s, "/p/c1"), 300u) << "the hot child is read";
    EXPECT_EQ(ScanOf(s, "/p"), 300u);
    EXPECT_EQ(ScanOf(s, "/p/c5"), 0u) << "a silent sibling is not read when the sums agree";
    EXPECT_EQ(s.cgroups.size(), 13u) << "it stays in the sample with its last reading";
    EXPECT_TRUE(s.cgroups_complete);
  }
}

TEST(CgroupfsRemainderTest, SilentChildThatStartsIsReadInTheSameSample) {
  for (auto keep : {CgroupfsOptions::KeepFiles::kAlways, CgroupfsOptions::KeepFiles::kNever}) {
    Tree t;
    std::unique_ptr<Source> src = Warm(t, keep);
    t.Reclaim("p/c1", 100, 20);
    t.Reclaim("p/c7", 50, 5);
    Sample s = Take(*src);
    EXPECT_EQ(ScanOf(s, "/p/c7"), 50u) << "parent != own + children: every child is read";
    EXPECT_EQ(ScanOf(s, "/p/c1"), 300u);
    // Both are hot now: a planted value in a third child stays unread.
    t.Reclaim("p/c1", 100, 20);
    t.Reclaim("p/c7", 50, 5);
    t.Plant("p/c5", 7);
    s = Take(*src);
    EXPECT_EQ(ScanOf(s, "/p/c7"), 100u);
    EXPECT_EQ(ScanOf(s, "/p/c5"), 0u);
  }
}

// The same through the state layer: the late starter's scans are in the
// snapshot of the sample in which it started, attributed to it.
TEST(CgroupfsRemainderTest, LateStarterBesideAHotSiblingReachesTheSnapshotAtOnce) {
  Tree t;
  std::unique_ptr<Source> src = t.Agent();
  TrackedCollector tracked(*src);
  auto sample = [&] { return tracked.Next(); };
  sample();
  for (int i = 0; i < 60; ++i) {
    t.Reclaim("p/c1", 100, 90);
    sample();
  }
  t.Reclaim("p/c1", 100, 90);
  t.Reclaim("p/c8", 2048, 100);
  std::shared_ptr<const Snapshot> snap = sample();
  uint64_t c8 = 0, p = 0;
  for (const CgroupView& c : snap->cgroups) {
    if (c.path == "/p/c8") c8 = c.best.scanned_total;
    if (c.path == "/p") p = c.best.scanned_total;
  }
  EXPECT_EQ(c8, 2048u);
  EXPECT_EQ(p, 0u) << "the parent's own share is nil";
}

TEST(CgroupfsRemainderTest, HotChildThatStopsLeavesTheHotListAndIsSeenWhenItResumes) {
  Tree t;
  std::unique_ptr<Source> src = Warm(t);
  // c1 stops; c2 reclaims for longer than a child stays hot.
  for (int i = 0; i < 12; ++i) {
    t.Reclaim("p/c2", 10, 1);
    Sample s = Take(*src);
    EXPECT_EQ(ScanOf(s, "/p/c2"), 10u * (i + 1));
    EXPECT_EQ(ScanOf(s, "/p/c1"), 200u);
  }
  // c1 resumes: no longer hot, found through the sums at once.
  t.Reclaim("p/c1", 100, 20);
  t.Reclaim("p/c2", 10, 1);
  Sample s = Take(*src);
  EXPECT_EQ(ScanOf(s, "/p/c1"), 300u);
  EXPECT_EQ(ScanOf(s, "/p/c2"), 130u);
}

TEST(CgroupfsRemainderTest, RemovedChildIsDroppedAndItsCountsStayInTheParentsShare) {
  Tree t;
  std::unique_ptr<Source> src = Warm(t);
  t.Reclaim("p/c3", 40, 4);
  Take(*src);  // c3 hot, with a reading of 40
  // c3 goes; its counts stay in /p (the kernel keeps a removed child's).
  std::filesystem::remove_all(t.root / "p" / "c3");
  t.Reclaim("p/c1", 100, 20);
  Sample s = Take(*src);
  EXPECT_EQ(FindCgroup(s, "/p/c3"), nullptr);
  EXPECT_EQ(ScanOf(s, "/p/c1"), 300u);
  EXPECT_TRUE(s.cgroups_left_out.empty());
  EXPECT_EQ(s.cgroups.size(), 12u);
  // The split learnt after the removal holds: the next move of c1 is
  // explained by c1 alone.
  t.Reclaim("p/c1", 100, 20);
  Take(*src);
  t.Reclaim("p/c1", 100, 20);
  t.Plant("p/c5", 7);
  s = Take(*src);
  EXPECT_EQ(ScanOf(s, "/p/c1"), 500u);
  EXPECT_EQ(ScanOf(s, "/p/c5"), 0u);
}

TEST(CgroupfsRemainderTest, NewChildThatReclaimsIsReadInTheSameSample) {
  Tree t;
  std::unique_ptr<Source> src = Warm(t);
  WriteFile(t.root / "p" / "new" / "memory.stat", "pgscan 0\npgsteal 0\n");
  t.Reclaim("p/new", 900, 30);
  t.Reclaim("p/c1", 100, 20);
  Sample s = Take(*src);
  EXPECT_EQ(ScanOf(s, "/p/new"), 900u);
  EXPECT_EQ(ScanOf(s, "/p/c1"), 300u);
  // A new child that does not reclaim, beside a hot one: the parent's link
  // count changed, so it is listed and read as well.
  WriteFile(t.root / "p" / "quiet" / "memory.stat", "pgscan 0\npgsteal 0\n");
  t.Reclaim("p/c1", 100, 20);
  s = Take(*src);
  EXPECT_EQ(ScanOf(s, "/p/quiet"), 0u);
  EXPECT_EQ(s.cgroups.size(), 15u);
}

TEST(CgroupfsRemainderTest, FlushSkewBetweenParentAndChildrenFallsBackToEveryChild) {
  Tree t;
  std::unique_ptr<Source> src = Warm(t);
  // The kernel flushed c1's new counts after the parent was read: the child
  // is ahead of its parent, the sums disagree, every child is read.
  t.counters["p/c1"].first += 100;
  t.counters["p/c1"].second += 20;
  t.Write("p/c1");
  t.Reclaim("p", 60, 12);  // the parent (and the root) saw part of it
  t.Plant("p/c5", 7);
  Sample s = Take(*src);
  EXPECT_EQ(ScanOf(s, "/p/c1"), 300u);
  EXPECT_EQ(ScanOf(s, "/p/c5"), 7u) << "fallback: every child read";
  // The parent catches up; the share learnt during the skew is off, so the
  // sums disagree once more and everything is read again...
  t.Reclaim("p", 40, 8);
  t.Plant("p/c6", 9);
  s = Take(*src);
  EXPECT_EQ(ScanOf(s, "/p/c6"), 9u);
  // ...after which the hot child explains its parent again (c5 and c6
  // count as hot now: their planted values were moves).
  t.Reclaim("p/c1", 100, 20);
  t.Plant("p/c4", 3);
  s = Take(*src);
  EXPECT_EQ(ScanOf(s, "/p/c1"), 400u);
  EXPECT_EQ(ScanOf(s, "/p/c4"), 0u) << "not read";
}

// The eBPF vmpressure tier as the bpf collector leaves it in the sample
// before the cgroupfs walk: pages it counted per cgroup id (cumulative), its
// lost events and its programs' missed runs.
struct Ebpf {
  explicit Ebpf(Tree& tree) : t(tree) {}
  Tree& t;
  bool live = true;
  std::map<std::string, uint64_t> scanned;  // path -> pages
  uint64_t lost = 0, missed = 0;
  // A reclaim of `p` that the tier saw too.
  void Reclaim(const std::string& p, uint64_t scan, uint64_t steal) {
    t.Reclaim(p, scan, steal);
    scanned[p] += scan;
  }
  // The kernel flushed c's new counts after its parent was read: c is ahead
  // of the parent by `ahead` pages (the FlushSkew test's case, seen by the tier).
  void Skew(const std::string& c, uint64_t scan, uint64_t steal, uint64_t ahead) {
    t.counters[c].first += scan;
    t.counters[c].second += steal;
    t.Write(c);
    t.Reclaim("p", scan - ahead, steal);
    scanned[c] += scan;
  }
  Sample Take(Source& src) {
    Sample s;
    if (live) {
      s.MarkLive(Signal::kReclaim, Tier::kFentry);
      auto& by_id = s.reclaim[Tier::kFentry];
      for (const auto& [p, pages] : scanned) by_id[Ino(t.root / p)].scanned = pages;
      s.events_lost = lost;
      ProgramStats vmp;
      vmp.program = "vmp_fentry";
      vmp.missed_runs = missed;
      s.program_stats.push_back(vmp);
    }
    absl::Status st = src.Collect(s);
    EXPECT_TRUE(st.ok()) << st;
    return s;
  }
  static uint64_t Ino(const std::filesystem::path& p) {
    struct stat st;
    return ::stat(p.c_str(), &st) == 0 ? st.st_ino : 0;
  }
};

// Warm-up with the tier: c1 reclaims twice and is hot.
std::unique_ptr<Source> WarmWith(Ebpf& e) {
  std::unique_ptr<Source> src = e.t.Agent();
  e.Take(*src);
  for (int i = 0; i < 2; ++i) {
    e.Reclaim("p/c1", 100, 20);
    e.Take(*src);
  }
  return src;
}

// On a real kernel under steady reclaim the statistics are flushed between a
// parent's read and its children's nearly every time, so the sums disagree
// and, without the tier, a kubepods slice reads every pod each sample.
TEST(CgroupfsRemainderTest, FlushSkewWithTheEbpfTierReadsOnlyTheChildrenItSawReclaimed) {
  Tree t;
  Ebpf e(t);
  std::unique_ptr<Source> src = WarmWith(e);
  e.Skew("p/c1", 100, 20, 40);
  e.Reclaim("p/c7", 50, 5);  // a silent child that starts: not hot, but seen by the tier
  t.Plant("p/c5", 7);        // moved in the file only: the tier saw nothing there
  Sample s = e.Take(*src);
  EXPECT_EQ(ScanOf(s, "/p/c1"), 300u) << "the hot child is read";
  EXPECT_EQ(ScanOf(s, "/p/c7"), 50u) << "the child the tier saw reclaimed is read in the same sample";
  EXPECT_EQ(ScanOf(s, "/p/c5"), 0u) << "a child the tier did not see is not read, though the sums disagree";
  EXPECT_EQ(s.cgroups.size(), 13u);
  EXPECT_TRUE(s.cgroups_complete);
  // The parent catches up; the split taken on trust holds from the readings.
  t.Reclaim("p", 40, 0);
  e.Reclaim("p/c1", 100, 20);
  t.Plant("p/c6", 9);
  s = e.Take(*src);
  EXPECT_EQ(ScanOf(s, "/p/c1"), 400u);
  EXPECT_EQ(ScanOf(s, "/p/c6"), 0u);
}

TEST(CgroupfsRemainderTest, AnEbpfEventLostOrARunMissedFallsBackToEveryChild) {
  for (int which = 0; which < 2; ++which) {
    Tree t;
    Ebpf e(t);
    std::unique_ptr<Source> src = WarmWith(e);
    (which == 0 ? e.lost : e.missed) += 1;  // a reclaim the tier may not have seen
    e.Skew("p/c1", 100, 20, 40);
    t.Plant("p/c5", 7);
    Sample s = e.Take(*src);
    EXPECT_EQ(ScanOf(s, "/p/c5"), 7u) << (which == 0 ? "lost event" : "missed run") << ": every child read";
    // Steady again from the next walk.
    e.Skew("p/c1", 100, 20, 30);
    t.Plant("p/c4", 3);
    s = e.Take(*src);
    EXPECT_EQ(ScanOf(s, "/p/c4"), 0u) << (which == 0 ? "lost event" : "missed run") << ": trusted again";
  }
}

TEST(CgroupfsRemainderTest, AnEbpfTierNewSinceTheLastWalkIsNotTrustedYet) {
  Tree t;
  Ebpf e(t);
  e.live = false;  // no eBPF at the warm-up (not attached yet, or another tier)
  std::unique_ptr<Source> src = WarmWith(e);
  e.live = true;
  e.Skew("p/c1", 100, 20, 40);
  t.Plant("p/c5", 7);
  Sample s = e.Take(*src);
  EXPECT_EQ(ScanOf(s, "/p/c5"), 7u) << "nothing to compare the tier's counts with: every child read";
}

TEST(CgroupfsRemainderTest, TheFullPassReadsEveryChildOfADisagreeingParentWhateverTheEbpfTier) {
  // vmpressure never sees some reclaim (GFP_NOIO/NOFS allocations,
  // memory.reclaim): the full pass is where memory.stat alone catches up.
  Tree t;
  Ebpf e(t);
  std::unique_ptr<Source> src = t.CoreAgent(/*full pass every*/ 4);
  e.Take(*src);  // walk 0: full pass
  for (int i = 0; i < 2; ++i) {
    e.Reclaim("p/c1", 100, 20);
    e.Take(*src);
  }
  e.Skew("p/c1", 100, 20, 40);
  t.Plant("p/c5", 7);
  Sample s = e.Take(*src);  // walk 3: trusted
  EXPECT_EQ(ScanOf(s, "/p/c5"), 0u);
  e.Skew("p/c1", 100, 20, 30);
  s = e.Take(*src);  // walk 4: the full pass
  EXPECT_EQ(ScanOf(s, "/p/c5"), 7u);
}

TEST(CgroupfsRemainderTest, MissingCountersAreReadWholeOnTheFullPass) {
  // A kernel without pgscan in memory.stat (or a v1 hierarchy): no sums to
  // compare and no reclaim to follow; memory.stat holds only sizes, which
  // are context. The tree is read whole on the full pass; between passes
  // every cgroup, the root too, keeps its last reading, and a new one is
  // read at once.
  testing::TempDir dir;
  std::filesystem::path root = dir.path();
  WriteFile(root / "cgroup.controllers", "memory\n");
  for (const char* p : {"", "a", "a/x", "a/y"}) WriteFile(root / p / "memory.stat", "anon 1\n");
  Paths paths;
  paths.cgroupfs = root.string();
  CgroupfsOptions o(5000, /*full pass every*/ 3);
  o.keep_files = CgroupfsOptions::KeepFiles::kAlways;
  std::unique_ptr<Source> src = NewCgroupfsSource(paths, std::move(o));
  Take(*src);  // walk 1: the full pass
  WriteFile(root / "a" / "y" / "memory.stat", "anon 5\n");
  WriteFile(root / "memory.stat", "anon 9\n");
  for (int walk : {2, 3}) {
    Sample s = Take(*src);
    ASSERT_NE(FindCgroup(s, "/a/y"), nullptr);
    EXPECT_EQ(FindCgroup(s, "/a/y")->anon_bytes, 1u) << "walk " << walk << ": its last reading stands";
    EXPECT_EQ(FindCgroup(s, "/")->anon_bytes, 1u) << "walk " << walk << ": the root's too";
    EXPECT_EQ(s.cgroups_same_as_last, walk == 2);
    if (walk == 2) WriteFile(root / "a" / "z" / "memory.stat", "anon 3\n");
    if (walk == 3) {  // its parent's watch saw it come: read at once
      ASSERT_NE(FindCgroup(s, "/a/z"), nullptr);
      EXPECT_EQ(FindCgroup(s, "/a/z")->anon_bytes, 3u);
    }
  }
  Sample s = Take(*src);  // walk 4: the full pass
  ASSERT_NE(FindCgroup(s, "/a/y"), nullptr);
  EXPECT_EQ(FindCgroup(s, "/a/y")->anon_bytes, 5u);
  EXPECT_EQ(FindCgroup(s, "/")->anon_bytes, 9u);
  ASSERT_NE(FindCgroup(s, "/a/z"), nullptr);
  EXPECT_EQ(FindCgroup(s, "/a/z")->anon_bytes, 3u);
}

// Without reclaim counters nothing of the cgroupfs signal moves between full
// passes, so the collector tells the sampler it may wait a context interval
// (Sample::signal_collectors_quiet); the sample that ends such a wait is a
// full pass, whatever the pass counter says. With reclaim counters (v2) the
// collector never says so: the root's memory.stat is its per-sample check.
TEST(CgroupfsRemainderTest, QuietWithoutCountersAndAFullPassAfterAWait) {
  testing::TempDir dir;
  std::filesystem::path root = dir.path();
  WriteFile(root / "cgroup.controllers", "memory\n");
  for (const char* p : {"", "a", "a/x"}) WriteFile(root / p / "memory.stat", "anon 1\n");
  Paths paths;
  paths.cgroupfs = root.string();
  CgroupfsOptions o(5000, /*full pass every*/ 10);
  o.keep_files = CgroupfsOptions::KeepFiles::kAlways;
  std::unique_ptr<Source> src = NewCgroupfsSource(paths, std::move(o));
  EXPECT_EQ(Take(*src).signal_collectors_quiet, 1u);  // walk 1: the full pass
  WriteFile(root / "a" / "x" / "memory.stat", "anon 7\n");
  Sample between = Take(*src);
  EXPECT_EQ(between.signal_collectors_quiet, 1u);
  EXPECT_EQ(FindCgroup(between, "/a/x")->anon_bytes, 1u) << "not a full pass: the last reading stands";
  Sample after;
  after.after_wait = true;
  ASSERT_TRUE(src->Collect(after).ok());
  ASSERT_NE(FindCgroup(after, "/a/x"), nullptr);
  EXPECT_EQ(FindCgroup(after, "/a/x")->anon_bytes, 7u) << "the sample after a wait makes the full pass";
  EXPECT_EQ(after.signal_collectors_quiet, 1u);

  // The same tree with reclaim counters: never quiet.
  testing::TempDir dir2;
  std::filesystem::path root2 = dir2.path();
  WriteFile(root2 / "cgroup.controllers", "memory\n");
  for (const char* p : {"", "a"}) WriteFile(root2 / p / "memory.stat", "anon 1\npgscan 10\npgsteal 10\n");
  paths.cgroupfs = root2.string();
  std::unique_ptr<Source> v2 = NewCgroupfsSource(paths, CgroupfsOptions(5000, 10));
  for (int walk = 1; walk <= 3; ++walk) EXPECT_EQ(Take(*v2).signal_collectors_quiet, 0u) << "walk " << walk;
}

// The full pass of the core profile lists every directory but reads no still
// cgroup: new and removed cgroups are found, and a still cgroup's counters
// cannot have moved (its parent's did not). With the context series the full
// pass reads every cgroup (CgroupfsSamplingTest.FullPassReadsEverything).
TEST(CgroupfsRemainderTest, CoreFullPassListsWithoutReadingStillCgroups) {
  for (auto keep : {CgroupfsOptions::KeepFiles::kAlways, CgroupfsOptions::KeepFiles::kNever}) {
    Tree t;
    std::unique_ptr<Source> src = t.CoreAgent(/*full pass every*/ 3, keep);
    Take(*src);
    Take(*src);
    Take(*src);
    t.Plant("q", 5);
    WriteFile(t.root / "q" / "new" / "memory.stat", "pgscan 0\npgsteal 0\n");
    std::filesystem::remove_all(t.root / "p" / "c9");
    Sample s = Take(*src);  // the full pass
    EXPECT_NE(FindCgroup(s, "/q/new"), nullptr) << "listed";
    EXPECT_EQ(FindCgroup(s, "/p/c9"), nullptr) << "listed as gone";
    EXPECT_EQ(ScanOf(s, "/q"), 0u) << "not read: a still cgroup";
    EXPECT_EQ(s.cgroups.size(), 13u);
    EXPECT_TRUE(s.cgroups_complete);
    EXPECT_TRUE(s.cgroups_left_out.empty());
  }
}

// Without the context series, the context files (limits, sizes, PSI) are
// read only for a cgroup whose reclaim moved, once per full pass: the pages
// and the alerts API show a throttled cgroup's limit, and a still node, or
// the first sample, reads none of them.
TEST(CgroupfsRemainderTest, CoreProfileReadsLimitsOnlyWhereReclaimMoved) {
  Tree t;
  WriteFile(t.root / "p" / "c1" / "memory.max", "8388608\n");
  WriteFile(t.root / "q" / "memory.max", "4194304\n");
  std::unique_ptr<Source> src = t.CoreAgent(/*full pass every*/ 2);
  Sample s = Take(*src);  // the first sample, a full pass
  EXPECT_EQ(FindCgroup(s, "/p/c1")->limits, nullptr) << "not on the first reading";
  t.Reclaim("p/c1", 100, 20);
  s = Take(*src);
  EXPECT_EQ(LimitsOf(FindCgroup(s, "/p/c1")->limits).memory_max, 8388608u) << "moved: read";
  const CgroupLimits* first = FindCgroup(s, "/p/c1")->limits.get();
  t.Reclaim("p/c1", 100, 20);
  s = Take(*src);  // the full pass: read again
  EXPECT_NE(FindCgroup(s, "/p/c1")->limits.get(), first) << "once per full pass";
  const CgroupLimits* second = FindCgroup(s, "/p/c1")->limits.get();
  t.Reclaim("p/c1", 100, 20);
  s = Take(*src);
  EXPECT_EQ(FindCgroup(s, "/p/c1")->limits.get(), second) << "not between full passes";
  s = Take(*src);  // a full pass of a still /q
  EXPECT_EQ(FindCgroup(s, "/q")->limits, nullptr) << "a still cgroup: never read";
}

// The collector vouches for an unchanged list of cgroups (the state layer
// then reuses its matching) only when nothing came, went or failed.
TEST(CgroupfsRemainderTest, SameCgroupsAsLastOnlyWhenTheTreeKeptItsShape) {
  Tree t;
  std::unique_ptr<Source> src = t.Agent();
  EXPECT_FALSE(Take(*src).cgroups_same_as_last) << "the first sample";
  EXPECT_TRUE(Take(*src).cgroups_same_as_last);
  t.Reclaim("p/c1", 100, 20);
  EXPECT_TRUE(Take(*src).cgroups_same_as_last) << "moving counters do not change the list";
  WriteFile(t.root / "p" / "new" / "memory.stat", "pgscan 0\npgsteal 0\n");
  t.Reclaim("p/new", 10, 1);
  Sample s = Take(*src);
  EXPECT_NE(FindCgroup(s, "/p/new"), nullptr);
  EXPECT_FALSE(s.cgroups_same_as_last) << "a new cgroup";
  EXPECT_TRUE(Take(*src).cgroups_same_as_last);
  std::filesystem::remove_all(t.root / "p" / "new");
  t.Reclaim("p/c1", 100, 20);
  s = Take(*src);
  EXPECT_EQ(FindCgroup(s, "/p/new"), nullptr);
  EXPECT_FALSE(s.cgroups_same_as_last) << "a removed cgroup";
}

// The id index of a sample with the same cgroups as the last is the last
// one's, shared; it still finds every cgroup, and a new cgroup gets a new one.
TEST(CgroupfsRemainderTest, IdIndexSharedWhileTheTreeKeepsItsShape) {
  Tree t;
  std::unique_ptr<Source> src = t.Agent();
  Sample first = Take(*src);
  Sample second = Take(*src);
  ASSERT_TRUE(second.cgroups_same_as_last);
  for (size_t i = 0; i < second.cgroups.size(); ++i) {
    EXPECT_EQ(second.IndexOfId(second.cgroups[i].id), static_cast<int>(i)) << second.cgroups[i].path.str();
  }
  EXPECT_EQ(first.IndexOfId(first.cgroups.back().id), static_cast<int>(first.cgroups.size() - 1));
  WriteFile(t.root / "p" / "new" / "memory.stat", "pgscan 0\npgsteal 0\n");
  t.Reclaim("p/new", 10, 1);
  Sample third = Take(*src);
  const CgroupReading* added = FindCgroup(third, "/p/new");
  ASSERT_NE(added, nullptr);
  EXPECT_EQ(third.IndexOfId(added->id), static_cast<int>(added - third.cgroups.data()));
  EXPECT_EQ(second.IndexOfId(added->id), -1) << "the earlier sample's index is not changed";
  EXPECT_EQ(third.id_index.size(), third.cgroups.size());
}

}  // namespace
}  // namespace sockpressure
