// Test helpers: loopback TCP traffic and throw-away network namespaces.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
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

// Sends `bytes` client -> server while the server reads everything.
inline bool PumpBytes(TcpPair& p, size_t bytes) {
  std::thread reader([&] {
    std::vector<char> buf(1 << 16);
    size_t got = 0;
    while (got < bytes) {
      ssize_t n = ::read(p.server, buf.data(), buf.size());
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
  });
  std::vector<char> buf(1 << 16, 'x');
  size_t sent = 0;
  while (sent < bytes) {
    ssize_t n = ::write(p.client, buf.data(), std::min(buf.size(), bytes - sent));
    if (n <= 0) break;
    sent += static_cast<size_t>(n);
  }
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

}  // namespace sockpressure::testing
