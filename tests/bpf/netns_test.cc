// Network namespace discovery and entry as the census uses them every
// sample: the namespace list is kept between samples (a new process's
// namespace appears at once, a moved process's within the full rescan), and
// entering namespaces reuses one worker thread that goes home afterwards
// instead of starting a thread per census. The worker part needs root
// (ip netns, setns); the rest runs everywhere on a fake procfs.
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "exporter/sources/shared/netns.h"
#include "gtest/gtest.h"
#include "tests/bpf/net_util.h"

namespace sockpressure {
namespace {

namespace fs = std::filesystem;
bool g_root = false;

// A procfs stand-in: PID/ns/net is a symlink reading "net:[INODE]", as the
// kernel's magic link does.
class FakeProc {
 public:
  FakeProc() : dir_(fs::temp_directory_path() / absl::StrCat("sp-netns-test-", ::getpid())) {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  ~FakeProc() { fs::remove_all(dir_); }
  void Set(int pid, uint64_t ino) {
    fs::path ns = dir_ / std::to_string(pid) / "ns";
    fs::create_directories(ns);
    fs::remove(ns / "net");
    fs::create_symlink(absl::StrCat("net:[", ino, "]"), ns / "net");
  }
  void Exit(int pid) { fs::remove_all(dir_ / std::to_string(pid)); }
  std::string path() const { return dir_.string(); }

 private:
  fs::path dir_;
};

std::set<uint64_t> Inodes(const std::vector<NetnsRef>& ns) {
  std::set<uint64_t> out;
  for (const NetnsRef& n : ns) {
    if (!n.own) out.insert(n.inode);
  }
  return out;
}

TEST(NetnsScanner, NewProcessesAtOnceMovedProcessesAtTheFullRescan) {
  FakeProc proc;
  proc.Set(100, 501);
  proc.Set(101, 501);
  proc.Set(102, 502);
  NetnsScanner scanner(proc.path(), {}, std::chrono::hours(1));
  EXPECT_EQ(Inodes(scanner.List()), (std::set<uint64_t>{501, 502}));

  proc.Set(103, 503);  // a new pod's first process
  EXPECT_EQ(Inodes(scanner.List()), (std::set<uint64_t>{501, 502, 503})) << "a new pid is resolved at once";

  proc.Exit(102);  // the namespace's only process left
  EXPECT_EQ(Inodes(scanner.List()), (std::set<uint64_t>{501, 503}));

  proc.Exit(100);  // 501 is still held by 101, and listed by a live pid's path
  std::vector<NetnsRef> ns = scanner.List();
  EXPECT_EQ(Inodes(ns), (std::set<uint64_t>{501, 503}));
  for (const NetnsRef& n : ns) {
    if (n.inode == 501) {
      EXPECT_EQ(n.path, proc.path() + "/101/ns/net");
    }
  }

  proc.Set(101, 504);  // an existing process moved (unshare): cached until the full rescan
  EXPECT_EQ(Inodes(scanner.List()), (std::set<uint64_t>{501, 503}));
  NetnsScanner every_call(proc.path(), {}, std::chrono::seconds(0));
  EXPECT_EQ(Inodes(every_call.List()), (std::set<uint64_t>{503, 504}));
  EXPECT_EQ(Inodes(ListNetworkNamespaces(proc.path(), {})), (std::set<uint64_t>{503, 504}));
}

// A node that starts thousands of processes at once (or a full rescan of
// them) costs one readlink each: a call spends at most its budget, new pids
// first, so one sample is never held for all of them.
TEST(NetnsScanner, ResolvesAtMostItsBudgetPerCallNewPidsFirst) {
  FakeProc proc;
  for (int pid = 100; pid < 105; ++pid) proc.Set(pid, 600 + pid);  // five namespaces
  NetnsScanner scanner(proc.path(), {}, std::chrono::hours(1), /*resolve_per_list=*/2);
  EXPECT_EQ(Inodes(scanner.List()).size(), 2u);
  EXPECT_EQ(Inodes(scanner.List()).size(), 4u);
  EXPECT_EQ(Inodes(scanner.List()).size(), 5u) << "every namespace within three calls";

  // At a full rescan the stale entries keep their namespace until their
  // turn, and a pid that started meanwhile goes first.
  NetnsScanner rescans(proc.path(), {}, std::chrono::seconds(0), /*resolve_per_list=*/1);
  for (int i = 0; i < 5; ++i) rescans.List();
  proc.Set(100, 900);  // moved (unshare)
  proc.Set(105, 905);  // new
  std::set<uint64_t> first = Inodes(rescans.List());
  EXPECT_TRUE(first.count(905)) << "the new pid is resolved first";
  EXPECT_TRUE(first.count(700)) << "a stale entry is still listed with its cached namespace";
  std::set<uint64_t> later;
  for (int i = 0; i < 6; ++i) later = Inodes(rescans.List());
  EXPECT_TRUE(later.count(900)) << "the moved process is found within the rescan's calls";
  EXPECT_FALSE(later.count(700));
}

pid_t Tid() { return static_cast<pid_t>(::syscall(SYS_gettid)); }

std::string NetnsOf(pid_t tid) {
  std::error_code ec;
  return fs::read_symlink(absl::StrCat("/proc/self/task/", tid, "/ns/net"), ec).string();
}

TEST(OpenInNamespaces, OwnNamespaceInlineOthersOnOneLongLivedWorker) {
  std::vector<NetnsRef> own_only = ListNetworkNamespaces("/proc", {});
  own_only.resize(1);
  ASSERT_TRUE(own_only[0].own);
  std::string err;
  pid_t opened_on = 0;
  auto open = [&](std::string*) {
    opened_on = Tid();
    return ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  };
  std::vector<int> fds = OpenInNamespaces(own_only, open, &err);
  ASSERT_EQ(fds.size(), 1u);
  ASSERT_GE(fds[0], 0) << err;
  ::close(fds[0]);
  EXPECT_EQ(opened_on, Tid()) << "the caller's own namespace needs no other thread";

  if (!g_root) GTEST_SKIP() << "needs root (ip netns, setns) for the worker part";
  testing::TempNetns a(absl::StrCat("sp-nsw-", ::getpid()));
  ASSERT_TRUE(a.ok()) << "ip netns add failed";
  struct stat st;
  ASSERT_EQ(::stat(a.path().c_str(), &st), 0);
  std::vector<NetnsRef> both = own_only;
  both.push_back({static_cast<uint64_t>(st.st_ino), a.path(), false});
  const std::string home = NetnsOf(Tid());
  std::set<pid_t> workers;
  for (int round = 0; round < 3; ++round) {
    std::vector<pid_t> tids;
    auto record = [&](std::string*) {
      tids.push_back(Tid());
      return ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    };
    fds = OpenInNamespaces(both, record, &err);
    ASSERT_EQ(fds.size(), 2u);
    ASSERT_GE(fds[0], 0) << err;
    ASSERT_GE(fds[1], 0) << err;
    for (int fd : fds) ::close(fd);
    ASSERT_EQ(tids.size(), 2u);
    EXPECT_EQ(tids[0], Tid());
    EXPECT_NE(tids[1], Tid());
    workers.insert(tids[1]);
    EXPECT_EQ(NetnsOf(tids[1]), home) << "the worker went back home and pins no pod's namespace";
  }
  EXPECT_EQ(workers.size(), 1u) << "one long-lived worker, not a thread per census";

  // A path that now names another namespace is skipped, not walked twice.
  std::vector<NetnsRef> stale = {both[0], {st.st_ino + 1000000, a.path(), false}};
  err.clear();
  fds = OpenInNamespaces(stale, open, &err);
  ASSERT_EQ(fds.size(), 2u);
  if (fds[0] >= 0) ::close(fds[0]);
  EXPECT_LT(fds[1], 0);
  EXPECT_NE(err.find("no longer namespace"), std::string::npos) << err;
}

}  // namespace
}  // namespace sockpressure

int main(int argc, char** argv) {
  sockpressure::g_root = ::geteuid() == 0;
  if (!sockpressure::g_root) std::printf("note: not root; the namespace worker test is skipped\n");
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
