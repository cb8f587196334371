// The remainder check of the cgroupfs walk (docs/sampling.md): when a parent
// moves, its hot children are read first, and the other children only when
// parent != own share + sum(children's latest readings). On fixture trees a
// child's memory.stat can be changed without its parent ("planted"), which
// the kernel's hierarchical counters never do: whether the planted value
// shows in the sample tells whether that child was read.
#include <gtest/gtest.h>

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

TEST(CgroupfsRemainderTest, MissingCountersAlwaysReadEveryChild) {
  // A kernel without pgscan in memory.stat (or a v1 hierarchy): no sums to
  // compare, so a parent is read whole every sample.
  testing::TempDir dir;
  std::filesystem::path root = dir.path();
  WriteFile(root / "cgroup.controllers", "memory\n");
  for (const char* p : {"", "a", "a/x", "a/y"}) WriteFile(root / p / "memory.stat", "anon 1\n");
  Paths paths;
  paths.cgroupfs = root.string();
  CgroupfsOptions o(5000, 1000);
  o.keep_files = CgroupfsOptions::KeepFiles::kAlways;
  std::unique_ptr<Source> src = NewCgroupfsSource(paths, std::move(o));
  Take(*src);
  WriteFile(root / "a" / "y" / "memory.stat", "anon 5\n");
  Sample s = Take(*src);
  const CgroupReading* y = FindCgroup(s, "/a/y");
  ASSERT_NE(y, nullptr);
  EXPECT_EQ(y->anon_bytes, 5u);
}

// The full pass of the core profile lists every directory but reads no still
// cgroup: new and removed cgroups are found, and a still cgroup's counters
// cannot have moved (its parent's did not). With the context series the full
// pass reads every cgroup (CgroupfsSamplingTest.FullPassReadsEverything).
TEST(CgroupfsRemainderTest, CoreFullPassListsWithoutReadingStillCgroups) {
  for (auto keep : {CgroupfsOptions::KeepFiles::kAlways, CgroupfsOptions::KeepFiles::kNever}) {
    Tree t;
    Paths paths;
    paths.cgroupfs = t.root.string();
    CgroupfsOptions o(5000, /*full pass every*/ 3);
    o.keep_files = keep;
    o.read_context = false;
    std::unique_ptr<Source> src = NewCgroupfsSource(paths, std::move(o));
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
  Paths paths;
  paths.cgroupfs = t.root.string();
  CgroupfsOptions o(5000, /*full pass every*/ 2);
  o.keep_files = CgroupfsOptions::KeepFiles::kAlways;
  o.read_context = false;
  std::unique_ptr<Source> src = NewCgroupfsSource(paths, std::move(o));
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
