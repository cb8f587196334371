// Directory watches (exporter/sources/dir_watcher.h): a cgroup created or
// removed under a still parent is seen in the next sample, not at the next
// full pass; the full pass lists no watched directory; a lost event (the
// inotify queue overflowed) makes the collector list everything once; and
// without watches the collector finds new cgroups the old way.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "exporter/sources/cgroupfs_source.h"
#include "exporter/sources/dir_watcher.h"
#include "cgroupfs_test_util.h"
#include "test_util.h"

namespace sockpressure {
namespace {

using testing::FindCgroup;
using testing::ScanOf;
using testing::Take;
using testing::WriteFile;

std::string Stat(uint64_t scan, uint64_t steal) {
  return "anon 4096\nfile 0\nsock 0\npgscan " + std::to_string(scan) + "\npgsteal " + std::to_string(steal) + "\n";
}

// / -> /a -> /a/x ; / -> /b, memory.stat rewritten in place.
struct Tree {
  testing::TempDir dir;
  std::filesystem::path root = dir.path();
  Tree() {
    WriteFile(root / "cgroup.controllers", "memory\n");
    for (const char* p : {"", "a", "a/x", "b"}) WriteFile(root / p / "memory.stat", Stat(0, 0));
  }
  std::unique_ptr<Source> Agent(bool watch, uint64_t full_every = 1000) {
    Paths paths;
    paths.cgroupfs = root.string();
    CgroupfsOptions o(5000, full_every);
    o.keep_files = CgroupfsOptions::KeepFiles::kAlways;
    o.watch_dirs = watch;
    return NewCgroupfsSource(paths, std::move(o));
  }
};

// The kernel's queue limit for one inotify instance, and what overflows it.
size_t QueuedEventsLimit() {
  std::ifstream f("/proc/sys/fs/inotify/max_queued_events");
  size_t n = 0;
  f >> n;
  return n;
}

// Fills the inotify queue of a watcher of `dir` past `limit` with events of
// plain files (which no cgroup walk cares about), so that the next event is lost.
bool OverflowQueue(const std::filesystem::path& dir, size_t limit) {
  for (size_t i = 0; i <= limit; ++i) {
    std::filesystem::path file = dir / "f";
    file += std::to_string(i);
    int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return false;
    ::close(fd);
  }
  return true;
}

TEST(DirWatcherTest, ReportsEntriesComingAndGoingAndItsOwnRemoval) {
  testing::TempDir dir;
  std::filesystem::create_directories(dir.path() / "w");
  int fd = ::open((dir.path() / "w").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  DirWatcher watcher;
  ASSERT_TRUE(watcher.live()) << "inotify unavailable on this machine";
  int owner = 0;
  int wd = watcher.Watch(fd, &owner);
  ::close(fd);  // the watch stays on the directory
  ASSERT_GE(wd, 0);
  std::vector<void*> changed, gone;
  auto drain = [&] {
    changed.clear();
    gone.clear();
    return watcher.Drain([&](void* o) { changed.push_back(o); }, [&](void* o) { gone.push_back(o); });
  };
  EXPECT_TRUE(drain());
  EXPECT_TRUE(changed.empty()) << "nothing happened yet";
  std::filesystem::create_directory(dir.path() / "w" / "child");
  EXPECT_TRUE(drain());
  EXPECT_EQ(changed, std::vector<void*>{&owner});
  // Rewriting a file in place is not a change of the tree.
  WriteFile(dir.path() / "w" / "child" / "memory.stat", "x");
  drain();
  std::filesystem::remove_all(dir.path() / "w" / "child");
  EXPECT_TRUE(drain());
  EXPECT_FALSE(changed.empty());
  std::filesystem::remove_all(dir.path() / "w");
  EXPECT_TRUE(drain());
  EXPECT_EQ(gone, std::vector<void*>{&owner}) << "the kernel removed the watch with the directory";
  EXPECT_EQ(watcher.watches(), 0u);
  watcher.Unwatch(wd);  // already gone: harmless
}

TEST(DirWatchTest, NewAndRemovedCgroupsUnderAStillParentAreSeenInTheNextSample) {
  Tree t;
  std::unique_ptr<Source> src = t.Agent(/*watch=*/true);
  ASSERT_EQ(Take(*src).cgroups.size(), 4u);
  // No counter moves: only the watch can tell.
  WriteFile(t.root / "b" / "new" / "memory.stat", Stat(5, 1));
  Sample s = Take(*src);
  ASSERT_NE(FindCgroup(s, "/b/new"), nullptr) << "a new cgroup under a still parent, at once";
  EXPECT_EQ(ScanOf(s, "/b/new"), 5u);
  EXPECT_TRUE(s.cgroups_complete);
  std::filesystem::remove_all(t.root / "a" / "x");
  s = Take(*src);
  EXPECT_EQ(FindCgroup(s, "/a/x"), nullptr) << "a removed still cgroup, at once";
  EXPECT_EQ(s.cgroups.size(), 4u);
  EXPECT_TRUE(s.cgroups_left_out.empty());
  // A new cgroup under a new cgroup (a pod and its container, made together).
  WriteFile(t.root / "pod" / "ctr" / "memory.stat", Stat(0, 0));
  WriteFile(t.root / "pod" / "memory.stat", Stat(0, 0));
  s = Take(*src);
  EXPECT_NE(FindCgroup(s, "/pod/ctr"), nullptr);
}

// A directory seen before its memory.stat: on v2, memory enabled later in
// the parent's cgroup.subtree_control (kernfs adds the files without an
// inotify event); on a fixture tree, the file written after the mkdir. The
// parent is then listed on every full pass, as without a watch.
TEST(DirWatchTest, ACgroupWhoseMemoryFilesComeLaterIsFoundOnTheFullPass) {
  Tree t;
  std::unique_ptr<Source> src = t.Agent(/*watch=*/true, /*full_every=*/3);
  Take(*src);  // full
  std::filesystem::create_directories(t.root / "b" / "late");
  EXPECT_EQ(FindCgroup(Take(*src), "/b/late"), nullptr) << "no memory.stat yet: not a memory cgroup";
  WriteFile(t.root / "b" / "late" / "memory.stat", Stat(3, 1));
  Take(*src);
  Sample s = Take(*src);  // full
  ASSERT_NE(FindCgroup(s, "/b/late"), nullptr);
  EXPECT_EQ(ScanOf(s, "/b/late"), 3u);
}

TEST(DirWatchTest, WithoutWatchesNewCgroupsWaitForTheFullPass) {
  Tree t;
  std::unique_ptr<Source> src = t.Agent(/*watch=*/false, /*full_every=*/3);
  Take(*src);  // full
  WriteFile(t.root / "b" / "new" / "memory.stat", Stat(5, 1));
  EXPECT_EQ(FindCgroup(Take(*src), "/b/new"), nullptr) << "a still parent is not listed between full passes";
  EXPECT_EQ(FindCgroup(Take(*src), "/b/new"), nullptr);
  EXPECT_NE(FindCgroup(Take(*src), "/b/new"), nullptr) << "the full pass lists every directory";
}

TEST(DirWatchTest, ALostEventMakesTheCollectorListEverythingOnce) {
  size_t limit = QueuedEventsLimit();
  if (limit == 0 || limit > 100000) GTEST_SKIP() << "fs.inotify.max_queued_events is " << limit << ": too large to overflow here";
  Tree t;
  std::unique_ptr<Source> src = t.Agent(/*watch=*/true);
  Take(*src);
  // Fill the queue, then make a cgroup whose event is dropped: only listing
  // everything again can find it.
  ASSERT_TRUE(OverflowQueue(t.root / "b", limit));
  WriteFile(t.root / "a" / "late" / "memory.stat", Stat(7, 1));
  Sample s = Take(*src);
  EXPECT_NE(FindCgroup(s, "/a/late"), nullptr);
  EXPECT_EQ(ScanOf(s, "/a/late"), 7u);
}

// After lost events every directory is listed once, including one read
// early in the walk as a hot child of its parent (whose event was the one
// lost): its new cgroup is in this sample, not the next.
TEST(DirWatchTest, ALostEventListsAHotChildInTheSameWalk) {
  size_t limit = QueuedEventsLimit();
  if (limit == 0 || limit > 100000) GTEST_SKIP() << "fs.inotify.max_queued_events is " << limit << ": too large to overflow here";
  Tree t;
  std::unique_ptr<Source> src = t.Agent(/*watch=*/true);
  // Hierarchical counters: / = /a + /b, /a = its own, /a/x and /b still.
  auto reclaim = [&](uint64_t a) {
    WriteFile(t.root / "memory.stat", Stat(a, a / 2));
    WriteFile(t.root / "a" / "memory.stat", Stat(a, a / 2));
  };
  reclaim(1000);
  Take(*src);
  for (uint64_t a : {2000, 3000, 4000}) {  // /a moves every sample: a hot child of /
    reclaim(a);
    Take(*src);
  }
  ASSERT_TRUE(OverflowQueue(t.root / "b", limit));
  WriteFile(t.root / "a" / "late" / "memory.stat", Stat(7, 1));
  reclaim(5007);
  Sample s = Take(*src);
  EXPECT_NE(FindCgroup(s, "/a/late"), nullptr) << "listed in the walk that found the events lost";
  EXPECT_EQ(ScanOf(s, "/a/late"), 7u);
}

}  // namespace
}  // namespace sockpressure
