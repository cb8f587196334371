#include "exporter/sources/cgroupfs_source.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <thread>

#include "absl/strings/match.h"
#include "exporter/common/parse.h"
#include "exporter/sources/procfs_sources.h"
#include "exporter/state/state_tracker.h"
#include "test_util.h"

namespace sockpressure {
namespace {

using testing::FindCgroup;
using testing::Fixture;

Sample Collect(const std::string& tree, absl::Status* status = nullptr, size_t max_cgroups = 5000) {
  Paths paths;
  paths.cgroupfs = Fixture(tree) + "/cgroup";
  paths.procfs = Fixture(tree) + "/proc";
  std::unique_ptr<Source> src = NewCgroupfsSource(paths, {max_cgroups});
  Sample s;
  absl::Status st = src->Collect(s);
  if (status) *status = st;
  return s;
}

TEST(CgroupfsSourceTest, UnifiedHierarchyBreadthFirstWithMemoryOnly) {
  absl::Status status;
  Sample s = Collect("v2", &status);
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(s.cgroup_mode, CgroupMode::kUnified);
  ASSERT_EQ(s.cgroups.size(), 5u);  // init.scope has no memory controller
  EXPECT_EQ(s.cgroups[0].path, "/");
  EXPECT_EQ(s.cgroups[0].parent, -1);
  for (size_t i = 1; i < s.cgroups.size(); ++i) {
    ASSERT_GE(s.cgroups[i].parent, 0);
    EXPECT_LT(static_cast<size_t>(s.cgroups[i].parent), i) << "parents come before children";
  }
  EXPECT_EQ(FindCgroup(s, "/init.scope"), nullptr);
  const CgroupReading* a = FindCgroup(s, "/workload.slice/proxy.service");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->pgscan, 586833u);
  EXPECT_EQ(a->pgsteal, 86u);
  EXPECT_EQ(a->anon_bytes, 419430400u);
  EXPECT_EQ(a->sock_bytes, 5242880u);
  EXPECT_EQ(a->swap_bytes, 241172480u);
  EXPECT_EQ(LimitsOf(a->limits).memory_max, UINT64_MAX);  // "max"
  EXPECT_EQ(LimitsOf(a->limits).memory_low, 0u);
  EXPECT_FALSE(a->sock_throttled_local.has_value()) << "6.1 has no sock_throttled";
  ASSERT_TRUE(LimitsOf(a->limits).psi_some);
  EXPECT_EQ(LimitsOf(a->limits).psi_some->total_us, 2400u);
  EXPECT_NE(a->id, 0u);
  EXPECT_EQ(s.IndexOfId(a->id), static_cast<int>(a - s.cgroups.data()));
  EXPECT_TRUE(s.IsLive(Signal::kReclaim, Tier::kMemoryStat));
  EXPECT_TRUE(s.IsLive(Signal::kSocketPressure, Tier::kMemoryStat));
  EXPECT_FALSE(s.IsLive(Signal::kSockThrottled, Tier::kMemoryEvents));
}

TEST(CgroupfsSourceTest, Kernel619HasSockThrottled) {
  Sample s = Collect("v2_619");
  const CgroupReading* a = FindCgroup(s, "/workload.slice/proxy.service");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->sock_throttled_local, 1840u);
  EXPECT_TRUE(s.IsLive(Signal::kSockThrottled, Tier::kMemoryEvents));
}

TEST(CgroupfsSourceTest, HybridUsesV1MemoryController) {
  absl::Status status;
  Sample s = Collect("hybrid", &status);
  EXPECT_TRUE(status.ok()) << status;
  EXPECT_EQ(s.cgroup_mode, CgroupMode::kHybrid);
  ASSERT_EQ(s.cgroups.size(), 3u);
  const CgroupReading* k = FindCgroup(s, "/kubepods");
  ASSERT_NE(k, nullptr);
  EXPECT_TRUE(k->v1);
  EXPECT_EQ(k->anon_bytes, 96333824u);  // total_rss
  EXPECT_EQ(k->file_bytes, 461088256u);  // total_cache
  EXPECT_EQ(LimitsOf(k->limits).kmem_tcp_limit, 104857600u);
  EXPECT_EQ(LimitsOf(k->limits).kmem_tcp_failcnt, 7u);
  EXPECT_EQ(LimitsOf(FindCgroup(s, "/")->limits).memory_max, UINT64_MAX) << "v1 'unlimited' shown as +Inf";
  EXPECT_FALSE(k->pgscan.has_value()) << "v1 memory.stat has no pgscan";
  EXPECT_FALSE(s.IsLive(Signal::kReclaim, Tier::kMemoryStat));
}

TEST(CgroupfsSourceTest, LegacyV1) {
  Sample s = Collect("v1");
  EXPECT_EQ(s.cgroup_mode, CgroupMode::kLegacy);
  EXPECT_EQ(s.cgroups.size(), 3u);
}

TEST(CgroupfsSourceTest, MalformedFilesAreReportedButGoodDataKept) {
  absl::Status status;
  Sample s = Collect("broken", &status);
  EXPECT_TRUE(absl::IsDataLoss(status)) << status;
  EXPECT_NE(status.message().find("malformed"), absl::string_view::npos);
  const CgroupReading* a = FindCgroup(s, "/workload.slice/proxy.service");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->pgscan, 586833u) << "good lines of a file with bad lines are kept";
  const CgroupReading* b = FindCgroup(s, "/workload.slice/cache.service");
  ASSERT_NE(b, nullptr);
  EXPECT_FALSE(LimitsOf(b->limits).swap_current.has_value()) << "missing file is just absent";
  EXPECT_FALSE(LimitsOf(b->limits).psi_some.has_value());
  const CgroupReading* sys = FindCgroup(s, "/system.slice");
  ASSERT_NE(sys, nullptr);
  EXPECT_FALSE(LimitsOf(sys->limits).memory_max.has_value());
  EXPECT_EQ(FindCgroup(s, "/workload.slice/dying.service"), nullptr) << "a cgroup without memory.stat is skipped";
}

TEST(CgroupfsSourceTest, MissingHierarchyIsNotAnError) {
  testing::TempDir dir;
  Paths paths;
  paths.cgroupfs = dir.path().string();
  Sample s;
  EXPECT_TRUE(NewCgroupfsSource(paths, {})->Collect(s).ok());
  EXPECT_TRUE(s.cgroups.empty());
  EXPECT_EQ(s.cgroup_mode, CgroupMode::kUnknown);
}

// --cgroup.max: cgroupfs_sampling_test.cc (CapKeepsCgroupsWithSocketsAndReclaim).

// A cgroup v2 root with the memory controller and an idle memory.stat.
void MemoryRoot(const std::filesystem::path& root) {
  testing::WriteFile(root / "cgroup.controllers", "memory\n");
  testing::WriteFile(root / "memory.stat", "pgscan 0\npgsteal 0\n");
}

// Issue 13: a FIFO in place of memory.stat blocked the sampler forever,
// /dev/zero aborted the agent with bad_alloc, a 64 MB file was read whole.
// Each is refused (and reported) without blocking; the rest is still read.
TEST(CgroupfsSourceTest, HostileFilesAreRefusedWithoutBlocking) {
  testing::TempDir dir;
  const auto root = dir.path();
  MemoryRoot(root);
  testing::WriteFile(root / "ok" / "memory.stat", "pgscan 7\npgsteal 7\n");
  std::filesystem::create_directories(root / "fifo");
  ASSERT_EQ(::mkfifo((root / "fifo" / "memory.stat").c_str(), 0600), 0);
  std::filesystem::create_directories(root / "zero");
  std::filesystem::create_symlink("/dev/zero", root / "zero" / "memory.stat");
  std::filesystem::create_directories(root / "huge");
  {
    std::ofstream big(root / "huge" / "memory.stat");
    std::string line = "pgscan 1\n";
    for (size_t n = 0; n < (size_t{64} << 20); n += line.size()) big << line;
  }
  // A character device itself (not a symlink to one), where mknod is allowed.
  std::filesystem::create_directories(root / "chardev");
  bool have_chardev = ::mknod((root / "chardev" / "memory.stat").c_str(), S_IFCHR | 0600, makedev(1, 5)) == 0;

  Paths paths;
  paths.cgroupfs = root.string();
  std::unique_ptr<Source> src = NewCgroupfsSource(paths, {});
  auto done = std::make_shared<std::promise<std::pair<absl::Status, Sample>>>();
  std::future<std::pair<absl::Status, Sample>> result = done->get_future();
  std::thread([&src, done] {
    Sample s;
    absl::Status st = src->Collect(s);
    // A status of its own for the main thread: the collector's shares its
    // payload by a reference count that the (uninstrumented) library keeps,
    // which ThreadSanitizer cannot see synchronize.
    absl::Status copy = st.ok() ? absl::OkStatus() : absl::Status(st.code(), std::string(st.message()));
    st = absl::OkStatus();
    done->set_value({std::move(copy), std::move(s)});
  }).detach();
  if (result.wait_for(std::chrono::seconds(10)) != std::future_status::ready) {
    ADD_FAILURE() << "Collect blocked on a hostile file";
    ::_exit(1);  // the blocked thread cannot be joined
  }
  auto [status, s] = result.get();
  EXPECT_TRUE(absl::IsDataLoss(status)) << status;
  EXPECT_NE(FindCgroup(s, "/ok"), nullptr);
  EXPECT_EQ(FindCgroup(s, "/fifo"), nullptr);
  EXPECT_EQ(FindCgroup(s, "/zero"), nullptr);
  EXPECT_EQ(FindCgroup(s, "/huge"), nullptr);
  EXPECT_EQ(FindCgroup(s, "/chardev"), nullptr) << "mknod allowed: " << have_chardev;
  EXPECT_FALSE(s.cgroups_complete) << "refused cgroups make the walk incomplete";
  std::string text(status.message());
  EXPECT_NE(text.find("memory.stat"), std::string::npos) << text;
}

absl::Status CollectTree(const std::filesystem::path& root, Sample& s) {
  Paths paths;
  paths.cgroupfs = root.string();
  return NewCgroupfsSource(paths, {})->Collect(s);
}

// Issue 13: nothing is left out silently.
TEST(CgroupfsSourceTest, CgroupDeeperThanPathMaxIsCounted) {
  testing::TempDir dir;
  const auto root = dir.path();
  MemoryRoot(root);
  // 25 levels of 200-character names: beyond PATH_MAX below the root, so
  // created level by level through directory descriptors.
  int fd = ::open(root.c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(fd, 0);
  for (int level = 0; level < 25; ++level) {
    std::string name = std::string(199, 'a' + level % 26) + "x";
    ASSERT_EQ(::mkdirat(fd, name.c_str(), 0755), 0) << level;
    int next = ::openat(fd, name.c_str(), O_RDONLY | O_DIRECTORY);
    ::close(fd);
    ASSERT_GE(next, 0);
    fd = next;
    int f = ::openat(fd, "memory.stat", O_WRONLY | O_CREAT, 0644);
    ASSERT_GE(f, 0);
    ASSERT_EQ(::write(f, "pgscan 0\npgsteal 0\n", 20), 20);
    ::close(f);
  }
  ::close(fd);
  Sample s;
  absl::Status st = CollectTree(root, s);
  EXPECT_TRUE(absl::IsDataLoss(st)) << st;
  EXPECT_EQ(s.cgroups_left_out["path_too_long"], 1u);
  EXPECT_FALSE(s.cgroups_complete);
  EXPECT_GE(s.cgroups.size(), 10u) << "the levels within PATH_MAX are read";
  // remove_all cannot go deeper than PATH_MAX either: clean up bottom-up.
  std::string cmd = "rm -rf '" + root.string() + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
}

TEST(CgroupfsSourceTest, SymlinkedCgroupsAreCounted) {
  testing::TempDir dir;
  const auto root = dir.path();
  MemoryRoot(root);
  testing::WriteFile(root / "ok" / "memory.stat", "pgscan 0\npgsteal 0\n");
  std::filesystem::create_directory_symlink(root / "gone", root / "dangling");
  std::filesystem::create_directory_symlink(root / "ok", root / "alias");
  std::filesystem::create_symlink(root / "ok" / "memory.stat", root / "ok" / "notes.txt");  // a file: not a cgroup
  Sample s;
  absl::Status st = CollectTree(root, s);
  EXPECT_TRUE(absl::IsDataLoss(st)) << st;
  EXPECT_EQ(s.cgroups_left_out["symlink"], 2u);
  EXPECT_EQ(s.cgroups.size(), 2u);
  EXPECT_NE(std::string(st.message()).find("dangling"), std::string::npos) << st;
}

TEST(CgroupfsSourceTest, BrokenRootIsAFailureNotAnEmptyTree) {
  {
    testing::TempDir dir;
    testing::WriteFile(dir.path() / "cgroup.controllers", "\x01\x7f garbage!!\n");
    Sample s;
    absl::Status st = CollectTree(dir.path(), s);
    EXPECT_FALSE(st.ok()) << "garbage root cgroup.controllers";
    EXPECT_NE(std::string(st.message()).find("cgroup.controllers"), std::string::npos) << st;
  }
  {
    testing::TempDir dir;
    testing::WriteFile(dir.path() / "cgroup.controllers", "memory\n");
    testing::WriteFile(dir.path() / "a" / "memory.stat", "pgscan 0\npgsteal 0\n");
    Sample s;
    absl::Status st = CollectTree(dir.path(), s);
    EXPECT_FALSE(st.ok()) << "root memory.stat missing";
    EXPECT_NE(std::string(st.message()).find("root cgroup"), std::string::npos) << st;
    EXPECT_TRUE(s.cgroups.empty());
  }
}

// Cgroups are created and removed while the sampler walks: every sample
// must succeed, never crash, and only contain cgroups that had memory.stat.
TEST(CgroupfsSourceTest, CgroupsVanishingMidWalk) {
  testing::TempDir dir;
  const auto root = dir.path();
  MemoryRoot(root);
  std::atomic<bool> stop{false};
  std::thread churn([&] {
    for (int i = 0; !stop.load(); ++i) {
      auto d = root / ("pod" + std::to_string(i % 50));
      std::error_code ec;
      if (std::filesystem::exists(d, ec)) {
        std::filesystem::remove_all(d, ec);
      } else {
        testing::WriteFile(d / "memory.stat", "pgscan 1\npgsteal 1\n");
        testing::WriteFile(d / "child" / "memory.stat", "pgscan 1\npgsteal 1\n");
      }
    }
  });
  Paths paths;
  paths.cgroupfs = root.string();
  std::unique_ptr<Source> src = NewCgroupfsSource(paths, {});
  for (int i = 0; i < 300; ++i) {
    Sample s;
    absl::Status st = src->Collect(s);
    ASSERT_TRUE(st.ok() || absl::IsDataLoss(st)) << st;  // a half-written file may parse as malformed
    ASSERT_FALSE(s.cgroups.empty());
    ASSERT_EQ(s.cgroups[0].path, "/");
  }
  stop = true;
  churn.join();
}

// Every sample and the snapshot built from it hold a reference to the
// walk's own copy of each path (shared_path.h): at 10,000 cgroups a copy per
// cycle was 10,000 allocations and about 1.5 MiB held beside the walk's.
TEST(CgroupfsSourceTest, SamplesAndSnapshotShareTheWalksPaths) {
  Paths paths;
  paths.cgroupfs = Fixture("v2") + "/cgroup";
  paths.procfs = Fixture("v2") + "/proc";
  std::unique_ptr<Source> src = NewCgroupfsSource(paths, {5000});
  Sample first, second;
  ASSERT_TRUE(src->Collect(first).ok());
  ASSERT_TRUE(src->Collect(second).ok());
  ASSERT_EQ(first.cgroups.size(), second.cgroups.size());
  std::vector<const std::string*> walk_strings;
  for (size_t i = 0; i < first.cgroups.size(); ++i) {
    EXPECT_EQ(first.cgroups[i].path, second.cgroups[i].path);
    EXPECT_EQ(&first.cgroups[i].path.str(), &second.cgroups[i].path.str()) << first.cgroups[i].path;
    walk_strings.push_back(&first.cgroups[i].path.str());
  }
  StateTracker tracker;
  std::shared_ptr<const Snapshot> snap = tracker.Update(std::move(second), {}, 0);
  ASSERT_EQ(snap->cgroups.size(), walk_strings.size());
  for (size_t i = 0; i < walk_strings.size(); ++i) {
    EXPECT_EQ(&snap->cgroups[i].path.str(), walk_strings[i]) << snap->cgroups[i].path;
  }
}

TEST(ProcfsSourcesTest, NodeReadings) {
  Paths paths;
  paths.procfs = Fixture("v2") + "/proc";
  Sample s;
  for (auto make : {NewKernelSource, NewSwapsSource, NewNetstatSource, NewSockstatSource, NewVmstatSource}) {
    absl::Status st = make(paths)->Collect(s);
    EXPECT_TRUE(st.ok()) << st;
  }
  EXPECT_EQ(s.node.kernel_release, "6.1.0-57-amd64");
  EXPECT_EQ(s.node.nosocket, false);
  ASSERT_TRUE(s.node.swaps);
  EXPECT_EQ(s.node.swaps->devices, 1);
  EXPECT_EQ(s.node.tcp_ext.at("PruneCalled"), 1532u);
  EXPECT_EQ(s.node.tcp_ext.count("SyncookiesSent"), 0u) << "only the documented counters";
  EXPECT_EQ(s.node.tcp_mem_pages, 12u);
  EXPECT_EQ(s.node.tcp_mem_limits, (std::vector<uint64_t>{22932, 30578, 45864}));
  EXPECT_EQ(s.node.vm_pgscan, 1061589u);  // kswapd + direct + khugepaged, not the anon/file split
  EXPECT_EQ(s.node.vm_pgsteal, 474828u);
  ASSERT_TRUE(s.node.psi_full);
  EXPECT_EQ(s.node.psi_full->total_us, 1200u);
}

TEST(ProcfsSourcesTest, NosocketAndBrokenFiles) {
  Paths paths;
  paths.procfs = Fixture("nosocket") + "/proc";
  Sample s;
  ASSERT_TRUE(NewKernelSource(paths)->Collect(s).ok());
  EXPECT_EQ(s.node.nosocket, true);

  paths.procfs = Fixture("broken") + "/proc";
  Sample b;
  absl::Status netstat = NewNetstatSource(paths)->Collect(b);
  EXPECT_TRUE(absl::IsDataLoss(netstat)) << netstat;
  EXPECT_TRUE(NewVmstatSource(paths)->Collect(b).ok()) << "missing /proc/pressure is a missing feature";
  EXPECT_FALSE(b.node.psi_some.has_value());
}

// A garbled file fails its collector and says nothing it could not read:
// no "swap off" from a /proc/swaps that lists nothing readable, no garbled
// counter, and a clear error naming the file.
TEST(ProcfsSourcesTest, GarbledFilesFailAndExportNothingMadeUp) {
  testing::TempDir dir;
  testing::WriteFile(dir.path() / "swaps", "\x01\x02 garbage\nmore garbage\n");
  testing::WriteFile(dir.path() / "net/netstat",
                     "TcpExt: PruneCalled RcvPruned OfoPruned\nTcpExt: 12 x7 3\n");
  Paths paths;
  paths.procfs = dir.path().string();
  Sample s;
  absl::Status swaps = NewSwapsSource(paths)->Collect(s);
  EXPECT_TRUE(absl::IsDataLoss(swaps)) << swaps;
  EXPECT_TRUE(absl::StrContains(swaps.message(), "/swaps")) << swaps;
  EXPECT_FALSE(s.node.swaps.has_value()) << "no readable line: unknown, not \"no swap\"";

  absl::Status netstat = NewNetstatSource(paths)->Collect(s);
  EXPECT_TRUE(absl::IsDataLoss(netstat)) << netstat << " (a garbled value)";
  EXPECT_EQ(s.node.tcp_ext.count("RcvPruned"), 0u) << "the garbled counter is not exported";
  EXPECT_EQ(s.node.tcp_ext.at("PruneCalled"), 12u) << "the readable ones are";

  // A signed field (-1) is not a counter and not garbage.
  ProtoCounters signed_field = ParseNetstat("TcpExt: PruneCalled Odd\nTcpExt: 4 -1\n");
  EXPECT_FALSE(signed_field.malformed);
  EXPECT_EQ(signed_field.tables["TcpExt"].count("Odd"), 0u);
}

TEST(ProcfsSourcesTest, MissingProcIsNotAnError) {
  Paths paths;
  paths.procfs = "/nonexistent-procfs";
  Sample s;
  for (auto make : {NewKernelSource, NewSwapsSource, NewNetstatSource, NewSockstatSource, NewVmstatSource}) {
    EXPECT_TRUE(make(paths)->Collect(s).ok());
  }
  EXPECT_FALSE(s.node.swaps.has_value());
}

}  // namespace
}  // namespace sockpressure
