// Activity-driven sampling (docs/sampling.md): still subtrees are skipped,
// moving ones are read within the interval, vanished cgroups leave without
// an error or an episode, --cgroup.max keeps the cgroups with sockets or
// reclaim, and --cgroup.include/exclude/level on fixture trees.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "exporter/identity/cgroup_filter.h"
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
using testing::Fixture;
using testing::WriteFile;

std::string Stat(uint64_t scan, uint64_t steal, uint64_t sock = 0) {
  return "anon 4096\nfile 0\nsock " + std::to_string(sock) + "\npgscan " + std::to_string(scan) +
         "\npgsteal " + std::to_string(steal) + "\n";
}

// A v2 tree:  / -> /a -> /a/x, /a/y ; / -> /b -> /b/z. memory.stat is
// rewritten in place (same inode), as cgroupfs does.
struct V2Tree {
  testing::TempDir dir;
  std::filesystem::path root = dir.path();
  V2Tree() {
    WriteFile(root / "cgroup.controllers", "memory\n");
    for (const char* p : {"", "a", "a/x", "a/y", "b", "b/z"}) WriteFile(root / p / "memory.stat", Stat(0, 0));
  }
  void Set(const char* p, uint64_t scan, uint64_t steal) { WriteFile(root / p / "memory.stat", Stat(scan, steal)); }
  std::unique_ptr<Source> Agent(uint64_t full_every = 1000, CgroupfsOptions::KeepFiles keep =
                                                                 CgroupfsOptions::KeepFiles::kAlways) {
    Paths paths;
    paths.cgroupfs = root.string();
    CgroupfsOptions o(5000, full_every);
    o.keep_files = keep;
    return NewCgroupfsSource(paths, std::move(o));
  }
};



TEST(CgroupfsSamplingTest, StillSubtreesAreSkippedMovingOnesRead) {
  for (auto keep : {CgroupfsOptions::KeepFiles::kAlways, CgroupfsOptions::KeepFiles::kNever}) {
    V2Tree t;
    std::unique_ptr<Source> src = t.Agent(1000, keep);
    Sample first = Take(*src);
    ASSERT_EQ(first.cgroups.size(), 6u);
    // A change below a still parent is not read: the kernel's hierarchical
    // counters never do this, so its not being seen proves the skip.
    t.Set("b/z", 50, 10);
    Sample s = Take(*src);
    EXPECT_EQ(s.cgroups.size(), 6u) << "skipped cgroups stay in the sample with their last reading";
    EXPECT_EQ(ScanOf(s, "/b/z"), 0u);
    EXPECT_TRUE(s.cgroups_complete);
    // A real reclaim moves the cgroup and every ancestor: read in the same cycle.
    t.Set("a/x", 700, 100);
    t.Set("a", 700, 100);
    t.Set("", 700, 100);
    s = Take(*src);
    EXPECT_EQ(ScanOf(s, "/a/x"), 700u);
    EXPECT_EQ(ScanOf(s, "/a"), 700u);
    EXPECT_EQ(ScanOf(s, "/b/z"), 0u) << "/b did not move";
  }
}

TEST(CgroupfsSamplingTest, FullPassReadsEverything) {
  V2Tree t;
  std::unique_ptr<Source> src = t.Agent(/*full_every=*/3);
  Take(*src);  // full
  t.Set("b/z", 50, 10);
  EXPECT_EQ(ScanOf(Take(*src), "/b/z"), 0u);
  EXPECT_EQ(ScanOf(Take(*src), "/b/z"), 0u);
  EXPECT_EQ(ScanOf(Take(*src), "/b/z"), 50u) << "the full pass is the safety net";
}

// After a long silence one leaf reclaims: its scans reach the state in the
// very next sample (one interval), with the right local attribution.
TEST(CgroupfsSamplingTest, LateStarterIsPickedUpWithinOneInterval) {
  V2Tree t;
  std::unique_ptr<Source> src = t.Agent();
  TrackedCollector tracked(*src);
  auto sample = [&] { return tracked.Next(); };
  for (int i = 0; i < 300; ++i) sample();  // five minutes of silence
  t.Set("b/z", 2048, 100);
  t.Set("b", 2048, 100);
  t.Set("", 2048, 100);
  std::shared_ptr<const Snapshot> snap = sample();
  const CgroupView* z = nullptr;
  const CgroupView* b = nullptr;
  for (const CgroupView& c : snap->cgroups) {
    if (c.path == "/b/z") z = &c;
    if (c.path == "/b") b = &c;
  }
  ASSERT_NE(z, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(z->best.scanned_total, 2048u);
  EXPECT_EQ(z->best.reclaimed_total, 100u);
  EXPECT_EQ(b->best.scanned_total, 0u) << "its parent's own share is nil";
  EXPECT_TRUE(z->best.pressure_asserted) << "2048 scanned, 5 % reclaimed: critical";
}

TEST(CgroupfsSamplingTest, NewCgroupUnderAMovingParentIsReadAtOnce) {
  V2Tree t;
  std::unique_ptr<Source> src = t.Agent();
  Take(*src);
  WriteFile(t.root / "a" / "new" / "memory.stat", Stat(900, 30));
  t.Set("a", 900, 30);
  t.Set("", 900, 30);
  Sample s = Take(*src);
  EXPECT_EQ(ScanOf(s, "/a/new"), 900u);
}

TEST(CgroupfsSamplingTest, VanishedCgroupsLeaveWithoutError) {
  V2Tree t;
  std::unique_ptr<Source> src = t.Agent();
  Take(*src);
  std::filesystem::remove_all(t.root / "a" / "y");
  t.Set("a", 10, 1);
  t.Set("", 10, 1);
  Sample s = Take(*src);
  EXPECT_EQ(FindCgroup(s, "/a/y"), nullptr);
  EXPECT_NE(FindCgroup(s, "/a/x"), nullptr);
  EXPECT_TRUE(s.cgroups_left_out.empty());
  // A whole moving subtree gone between two samples.
  std::filesystem::remove_all(t.root / "a");
  t.Set("", 20, 2);
  s = Take(*src);
  EXPECT_EQ(FindCgroup(s, "/a"), nullptr);
  EXPECT_EQ(FindCgroup(s, "/a/x"), nullptr);
  EXPECT_EQ(s.cgroups.size(), 3u);
  EXPECT_TRUE(s.cgroups_left_out.empty());
}

TEST(CgroupfsSamplingTest, CapKeepsCgroupsWithSocketsAndReclaim) {
  // v2 fixture: / and /workload.slice reclaim, proxy.service holds socket
  // memory, system.slice is idle but shallower than both services.
  Paths paths;
  paths.cgroupfs = Fixture("v2") + "/cgroup";
  Sample s;
  ASSERT_TRUE(NewCgroupfsSource(paths, CgroupfsOptions(3))->Collect(s).ok());
  ASSERT_EQ(s.cgroups.size(), 3u);
  EXPECT_EQ(s.cgroups[0].path, "/");
  EXPECT_NE(FindCgroup(s, "/workload.slice"), nullptr);
  EXPECT_NE(FindCgroup(s, "/workload.slice/proxy.service"), nullptr) << "sockets first";
  EXPECT_EQ(FindCgroup(s, "/system.slice"), nullptr);
  EXPECT_EQ(s.cgroups_skipped, 2u);
  for (size_t i = 1; i < s.cgroups.size(); ++i) EXPECT_LT(s.cgroups[i].parent, static_cast<int>(i));
  Sample four;
  ASSERT_TRUE(NewCgroupfsSource(paths, CgroupfsOptions(4))->Collect(four).ok());
  EXPECT_NE(FindCgroup(four, "/workload.slice/cache.service"), nullptr) << "then reclaim";
}

const std::string kPod =
    "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod6f1c2a4e_8b3d_4c5e_9f7a_1b2c3d4e5f60.slice";
const std::string kContainer =
    kPod + "/cri-containerd-cfdfd7021be30bb43ec09f2ab6f85d340305d300c308ae4909310b07cec5260e.scope";

std::vector<std::string> Exported(const std::string& include, const std::string& exclude, const std::string& level) {
  absl::StatusOr<std::function<bool(absl::string_view)>> f = NewCgroupFilter(include, exclude, level);
  EXPECT_TRUE(f.ok()) << f.status();
  Paths paths;
  paths.cgroupfs = Fixture("k8s") + "/cgroup";
  CgroupfsOptions o;
  o.exported = *f;
  Sample s;
  EXPECT_TRUE(NewCgroupfsSource(paths, std::move(o))->Collect(s).ok());
  std::vector<std::string> out;
  for (const CgroupReading& c : s.cgroups) {
    if (c.exported) out.push_back(c.path);
  }
  EXPECT_EQ(s.cgroups.size(), 9u) << "filtered cgroups are still read";
  return out;
}

bool Has(const std::vector<std::string>& v, const std::string& p) { return std::find(v.begin(), v.end(), p) != v.end(); }

TEST(CgroupFilterTest, IncludeExcludeMatchTheWholePath) {
  std::vector<std::string> all = Exported("", "", "all");
  EXPECT_EQ(all.size(), 9u);
  std::vector<std::string> no_system = Exported("", "/system\\.slice.*|/workload\\.slice/.*", "all");
  EXPECT_FALSE(Has(no_system, "/system.slice"));
  EXPECT_FALSE(Has(no_system, "/workload.slice/proxy.service"));
  EXPECT_TRUE(Has(no_system, "/workload.slice"));
  EXPECT_TRUE(Has(no_system, kContainer));
  std::vector<std::string> kube = Exported("/|/kubepods.*", "", "all");
  EXPECT_EQ(kube.size(), 5u);  // /, kubepods, burstable, the pod, the container
  EXPECT_FALSE(Has(Exported("kubepods", "", "all"), "/kubepods.slice")) << "a partial match is no match";
}

TEST(CgroupFilterTest, LevelPicksPodsOrContainers) {
  std::vector<std::string> pods = Exported("", "", "pod");
  EXPECT_TRUE(Has(pods, kPod));
  EXPECT_FALSE(Has(pods, kContainer));
  EXPECT_TRUE(Has(pods, "/kubepods.slice")) << "outside pods: kept";
  std::vector<std::string> containers = Exported("", "", "container");
  EXPECT_FALSE(Has(containers, kPod));
  EXPECT_TRUE(Has(containers, kContainer));
  EXPECT_TRUE(Has(containers, "/system.slice"));
}

TEST(CgroupFilterTest, BadFlagsAreErrors) {
  EXPECT_FALSE(NewCgroupFilter("(", "", "all").ok());
  EXPECT_FALSE(NewCgroupFilter("", "[", "all").ok());
  EXPECT_FALSE(NewCgroupFilter("", "", "node").ok());
  absl::StatusOr<std::function<bool(absl::string_view)>> none = NewCgroupFilter("", "", "all");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(*none) << "no filter: nothing to call per cgroup";
}

}  // namespace
}  // namespace sockpressure

namespace sockpressure {
namespace {

// / -> /p -> /p/c with /p/c not exported: its counts fold into /p, and
// stay there when it goes away (no counter of /p ever decreases).
TEST(FoldTest, UnexportedCgroupsFoldIntoTheirNearestExportedAncestor) {
  StateTracker tracker;
  auto sample = [](double t, uint64_t c_scan, uint64_t c_steal, bool with_c) {
    Sample s;
    s.monotonic_seconds = t;
    s.cgroup_mode = CgroupMode::kUnified;
    const char* paths[] = {"/", "/p", "/p/c"};
    for (int i = 0; i < (with_c ? 3 : 2); ++i) {
      CgroupReading r;
      r.path = paths[i];
      r.id = 10 + static_cast<uint64_t>(i);
      r.parent = i - 1;
      r.pgscan = c_scan;
      r.pgsteal = c_steal;
      r.exported = i != 2;
      s.cgroups.push_back(r);
      s.id_index[r.id] = i;
    }
    s.cgroups_complete = true;
    s.MarkLive(Signal::kReclaim, Tier::kMemoryStat);
    s.MarkLive(Signal::kSocketPressure, Tier::kMemoryStat);
    return s;
  };
  tracker.Update(sample(1, 0, 0, true), {}, 0);
  std::shared_ptr<const Snapshot> snap = tracker.Update(sample(2, 1000, 50, true), {}, 0);
  ASSERT_EQ(snap->cgroups.size(), 2u);
  EXPECT_EQ(snap->cgroups[1].path, "/p");
  EXPECT_EQ(snap->cgroups[1].parent, 0);
  EXPECT_EQ(snap->cgroups[1].best.scanned_total, 1000u) << "/p's own share is 0, /p/c's 1000";
  EXPECT_TRUE(snap->cgroups[1].pressure_active);
  EXPECT_EQ(snap->cgroups[0].best.scanned_total, 0u) << "not counted twice";
  // /p/c removed: its pages reparented, so / and /p keep their counters.
  snap = tracker.Update(sample(3, 1000, 50, false), {}, 0);
  ASSERT_EQ(snap->cgroups.size(), 2u);
  EXPECT_EQ(snap->cgroups[1].best.scanned_total, 1000u);
}

}  // namespace
}  // namespace sockpressure
