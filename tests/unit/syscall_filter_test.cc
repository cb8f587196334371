// The seccomp allow-lists, installed for real on a thread of this process:
// what a confined thread can still do, what it gets EPERM for, and that the
// filter binds that thread only.
#include "exporter/common/syscall_filter.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace sockpressure {
namespace {

// Runs `body` on a new thread that set no_new_privs and confined itself.
void OnConfinedThread(SyscallProfile profile, const std::function<void()>& body) {
  std::thread t([&] {
    ASSERT_EQ(::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), 0);
    ASSERT_TRUE(ConfineThisThread(profile));
    body();
  });
  t.join();
}

std::string ThreadStatus(const std::string& key) {
  std::ifstream in("/proc/thread-self/status");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key + ":", 0) == 0) return line.substr(key.size() + 1);
  }
  return "";
}

// errno of a call that must fail, or 0 when it succeeded.
int ErrnoOf(long rc) { return rc < 0 ? errno : 0; }

void ExpectDenied(const char* what, long rc) {
  EXPECT_LT(rc, 0) << what << " succeeded on a confined thread";
  EXPECT_EQ(errno, EPERM) << what;
}

class SyscallFilterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!SyscallFilterSupported()) GTEST_SKIP() << "no system-call list for this architecture";
  }
};

TEST_F(SyscallFilterTest, ServingThreadReadsWritesAllocatesAndReadsFiles) {
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  OnConfinedThread(SyscallProfile::kServe, [&] {
    EXPECT_NE(ThreadStatus("Seccomp").find('2'), std::string::npos) << ThreadStatus("Seccomp");
    EXPECT_EQ(::write(p[1], "x", 1), 1);
    char c = 0;
    EXPECT_EQ(::read(p[0], &c, 1), 1);
    EXPECT_EQ(c, 'x');
    // Large and small allocations (mmap, brk, a new arena) and returning them.
    std::vector<std::vector<char>> blocks;
    for (int i = 0; i < 64; ++i) blocks.emplace_back(static_cast<size_t>(1) << (10 + i % 12), 'a');
    blocks.clear();
    // Reading a file, as the TLS certificate reload does.
    int fd = ::open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
    EXPECT_GE(fd, 0) << std::strerror(errno);
    if (fd >= 0) ::close(fd);
  });
}

TEST_F(SyscallFilterTest, ServingThreadCannotExecOpenForWritingOrMakeSockets) {
  OnConfinedThread(SyscallProfile::kServe, [] {
    char* argv[] = {const_cast<char*>("/bin/true"), nullptr};
    ExpectDenied("execve", ::execve("/bin/true", argv, environ));
    ExpectDenied("open for writing", ::open("/dev/null", O_WRONLY | O_CLOEXEC));
    ExpectDenied("open with O_CREAT", ::open("/tmp/sp-seccomp-test", O_RDONLY | O_CREAT | O_CLOEXEC, 0600));
    ExpectDenied("socket", ::socket(AF_INET, SOCK_STREAM, 0));
    ExpectDenied("bpf", ::syscall(SYS_bpf, 0, nullptr, 0));
    ExpectDenied("setns", ::syscall(SYS_setns, 0, 0));
    ExpectDenied("unshare", ::unshare(CLONE_NEWNET));
    ExpectDenied("ptrace", ::syscall(SYS_ptrace, 0, 0, 0, 0));
    ExpectDenied("mount", ::syscall(SYS_mount, "none", "/mnt", "tmpfs", 0, nullptr));
    ExpectDenied("prctl", ::prctl(PR_SET_DUMPABLE, 1, 0, 0, 0));
    // No new threads either: a confined thread cannot spread.
    EXPECT_THROW(std::thread([] {}).join(), std::system_error);
  });
}

TEST_F(SyscallFilterTest, ClientThreadConnectsAndResolvesButCannotExec) {
  int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener, 4), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  OnConfinedThread(SyscallProfile::kClient, [&] {
    int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(s, 0) << std::strerror(errno);
    EXPECT_EQ(ErrnoOf(::connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr)), 0);
    ::close(s);
    addrinfo hints{}, *res = nullptr;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_ADDRCONFIG;
    EXPECT_EQ(::getaddrinfo("localhost", "80", &hints, &res), 0);
    if (res != nullptr) ::freeaddrinfo(res);
    char* argv[] = {const_cast<char*>("/bin/true"), nullptr};
    ExpectDenied("execve", ::execve("/bin/true", argv, environ));
    ExpectDenied("open for writing", ::open("/dev/null", O_WRONLY | O_CLOEXEC));
    ExpectDenied("setns", ::syscall(SYS_setns, 0, 0));
  });
  ::close(listener);
}

TEST_F(SyscallFilterTest, BindsTheConfinedThreadOnly) {
  OnConfinedThread(SyscallProfile::kServe, [] {});
  // This thread, and the process, are not filtered.
  EXPECT_NE(ThreadStatus("Seccomp").find('0'), std::string::npos) << ThreadStatus("Seccomp");
  int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  EXPECT_GE(s, 0);
  if (s >= 0) ::close(s);
}

}  // namespace
}  // namespace sockpressure
