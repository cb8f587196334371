// Test helpers: loopback TCP traffic and throw-away network namespaces.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace sockpressure::testing {

// A connected loopback TCP pair in the calling thread's network namespace.
struct TcpPair {
  int listener = -1, client = -1, server = -1;
  uint16_t port = 0;
  ~TcpPair() {
    for (int fd : {listener, client, server}) {
      if (fd >= 0) ::close(fd);
    }
  }
};

// rcvbuf > 0 sets SO_RCVBUF on the listener before listen() (inherited by the
// accepted socket), the "application asked for a tiny buffer" case.
inline bool MakeTcpPair(TcpPair& p, int rcvbuf = 0) {
  p.listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (p.listener < 0) return false;
  if (rcvbuf > 0) ::setsockopt(p.listener, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(p.listener, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(p.listener, 16) != 0 ||
      ::getsockname(p.listener, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    return false;
  }
  p.port = ntohs(a.sin_port);
  p.client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (::connect(p.client, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return false;
  p.server = ::accept4(p.listener, nullptr, nullptr, SOCK_CLOEXEC);
  return p.server >= 0;
}

// Reads `bytes` from fd (or until EOF/error); returns what was read.
inline size_t ReadAll(int fd, size_t bytes) {
  std::vector<char> buf(1 << 16);
  size_t got = 0;
  while (got < bytes) {
    ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  return got;
}

// Writes `bytes` of filler to fd in 64 KiB calls; returns what was written.
inline size_t WriteAll(int fd, size_t bytes) {
  std::vector<char> buf(1 << 16, 'x');
  size_t sent = 0;
  while (sent < bytes) {
    ssize_t n = ::write(fd, buf.data(), std::min(buf.size(), bytes - sent));
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
  return sent;
}

// Sends `bytes` client -> server while the server reads everything.
inline bool PumpBytes(TcpPair& p, size_t bytes) {
  std::thread reader([&] { ReadAll(p.server, bytes); });
  size_t sent = WriteAll(p.client, bytes);
  reader.join();
  return sent == bytes;
}

// Sends up to `bytes` without the server reading (non-blocking client).
inline void FillWithoutReading(TcpPair& p, size_t bytes) {
  ::fcntl(p.client, F_SETFL, ::fcntl(p.client, F_GETFL) | O_NONBLOCK);
  std::vector<char> buf(4096, 'y');
  size_t sent = 0;
  for (int i = 0; i < 200 && sent < bytes; ++i) {
    ssize_t n = ::write(p.client, buf.data(), buf.size());
    if (n > 0) sent += static_cast<size_t>(n);
    else std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// `ip netns add` a namespace with loopback up; removed on destruction.
class TempNetns {
 public:
  explicit TempNetns(const std::string& name) : name_(name) {
    ok_ = std::system(("ip netns add " + name_ + " && ip -n " + name_ + " link set lo up").c_str()) == 0;
  }
  ~TempNetns() {
    if (ok_) (void)std::system(("ip netns del " + name_).c_str());
  }
  bool ok() const { return ok_; }
  const std::string& name() const { return name_; }
  std::string path() const { return "/run/netns/" + name_; }

  // Runs fn() on a thread that entered this namespace (sockets created there
  // stay in it).
  template <typename Fn>
  bool RunInside(Fn&& fn) {
    bool ok = false;
    std::thread t([&] {
      int fd = ::open(path().c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) return;
      if (::setns(fd, CLONE_NEWNET) == 0) {
        fn();
        ok = true;
      }
      ::close(fd);
    });
    t.join();
    return ok;
  }

 private:
  std::string name_;
  bool ok_ = false;
};

// The census tests' node: two throw-away namespaces; `a` holds one connected
// pair that moved 4 MiB, `b` one such pair plus a receiver that asked for a
// tiny SO_RCVBUF and never reads (not a memcg clamp). Six sockets, none
// clamped. Members are destroyed sockets first, then the namespaces.
struct TwoNamespaceSockets {
  explicit TwoNamespaceSockets(const std::string& tag) : a(tag + "-a"), b(tag + "-b") {}
  // False when `ip netns` or a socket failed.
  bool SetUp() {
    if (!a.ok() || !b.ok()) return false;
    bool ok_a = false, ok_b = false;
    a.RunInside([&] { ok_a = MakeTcpPair(pa) && PumpBytes(pa, 4 << 20); });
    b.RunInside([&] {
      ok_b = MakeTcpPair(pb) && PumpBytes(pb, 4 << 20) && MakeTcpPair(tiny, 2304);
      if (ok_b) FillWithoutReading(tiny, 256 << 10);
    });
    return ok_a && ok_b;
  }
  TempNetns a, b;
  TcpPair pa, pb, tiny;
};

// Inode (= cgroup id) of this process's cgroup directory: in the v1
// "memory" hierarchy when `memory` is true and the host has one, else in the
// unified hierarchy (mounted at /sys/fs/cgroup/unified on hybrid hosts).
inline uint64_t OwnCgroupId(bool memory) {
  std::ifstream f("/proc/self/cgroup");
  std::string line, v1_path, v2_path;
  while (std::getline(f, line)) {
    if (line.rfind("0::", 0) == 0) v2_path = line.substr(3);
    size_t p = line.find(":memory:");
    if (p != std::string::npos) v1_path = line.substr(p + 8);
  }
  struct stat st;
  if (memory && !v1_path.empty()) {
    std::string dir = "/sys/fs/cgroup/memory" + (v1_path == "/" ? std::string() : v1_path);
    return ::stat(dir.c_str(), &st) == 0 ? st.st_ino : 0;
  }
  for (std::string mount : {"/sys/fs/cgroup/unified", "/sys/fs/cgroup"}) {
    if (::stat((mount + "/cgroup.controllers").c_str(), &st) != 0) continue;
    std::string dir = mount + (v2_path == "/" ? std::string() : v2_path);
    if (::stat(dir.c_str(), &st) == 0) return st.st_ino;
  }
  return 0;
}

}  // namespace sockpressure::testing
