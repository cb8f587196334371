// Raw HTTP exchanges on loopback for the HTTP front's tests: bytes exactly as
// a client sends them, everything the server answers.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

namespace sockpressure::testing {

// A TCP connection to 127.0.0.1:`port` whose reads give up after
// `timeout_seconds`; -1 when the connection fails.
inline int ConnectLoopback(int port, int timeout_seconds) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval tv{timeout_seconds, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Raw bytes in, everything the server sent until it closed (or the timeout) out.
inline std::string RawExchange(int port, const std::string& request, int timeout_seconds = 3) {
  int fd = ConnectLoopback(port, timeout_seconds);
  std::string out;
  if (fd < 0) return out;
  if (::send(fd, request.data(), request.size(), 0) == static_cast<ssize_t>(request.size())) {
    char buf[65536];
    for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

}  // namespace sockpressure::testing
