// DeadlineCutter (exporter/common/deadline_cutter.h) on real loopback TCP
// connections: a read blocked on a peer that sends nothing ends at the
// deadline, and a request over before it is left alone.
#include "exporter/common/deadline_cutter.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include <gtest/gtest.h>

#include <chrono>

namespace sockpressure {
namespace {

// A connected pair over loopback: {client, server side}.
struct Pair {
  int client = -1, server = -1;
  Pair() {
    int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof sa;
    if (::bind(listener, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0 && ::listen(listener, 1) == 0 &&
        ::getsockname(listener, reinterpret_cast<sockaddr*>(&sa), &len) == 0) {
      client = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (::connect(client, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0) server = ::accept(listener, nullptr, nullptr);
    }
    ::close(listener);
  }
  ~Pair() {
    ::close(client);
    ::close(server);
  }
};

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST(DeadlineCutterTest, AReadFromAPeerThatSendsNothingEndsAtTheDeadline) {
  DeadlineCutter cutter("sp-test-dl");
  Pair p;
  ASSERT_GE(p.server, 0);
  const auto t0 = std::chrono::steady_clock::now();
  cutter.Arm(t0 + std::chrono::milliseconds(300));
  ASSERT_TRUE(cutter.Watch(p.client));
  char c;
  EXPECT_EQ(::recv(p.client, &c, 1, 0), 0) << "the blocked read ends as at the peer's close";
  const double took = Since(t0);
  EXPECT_GE(took, 0.29);
  EXPECT_LT(took, 1.3);
  EXPECT_TRUE(cutter.Disarm());
}

TEST(DeadlineCutterTest, ARequestOverBeforeItsDeadlineIsLeftAlone) {
  DeadlineCutter cutter("sp-test-dl");
  Pair p;
  ASSERT_GE(p.server, 0);
  cutter.Arm(std::chrono::steady_clock::now() + std::chrono::milliseconds(200));
  ASSERT_TRUE(cutter.Watch(p.client));
  ASSERT_EQ(::send(p.server, "x", 1, 0), 1);
  char c;
  ASSERT_EQ(::recv(p.client, &c, 1, 0), 1);
  EXPECT_FALSE(cutter.Disarm());
  ::usleep(400 * 1000);  // past the old deadline: nothing cuts the socket
  ASSERT_EQ(::send(p.server, "y", 1, 0), 1);
  ASSERT_EQ(::send(p.client, "z", 1, 0), 1);
  EXPECT_EQ(::recv(p.client, &c, 1, 0), 1);
  EXPECT_EQ(::recv(p.server, &c, 1, 0), 1);
  // Armed again, for the next request on the same cutter: cut at its own deadline.
  const auto t1 = std::chrono::steady_clock::now();
  cutter.Arm(t1 + std::chrono::milliseconds(200));
  ASSERT_TRUE(cutter.Watch(p.client));
  EXPECT_EQ(::recv(p.client, &c, 1, 0), 0);
  EXPECT_GE(Since(t1), 0.19);
  EXPECT_TRUE(cutter.Disarm());
}

// A stopping owner cuts the request in flight at once, whatever its
// deadline, and every request armed after that as well.
TEST(DeadlineCutterTest, ShutdownCutsTheRequestInFlightAndEveryLaterOne) {
  DeadlineCutter cutter("sp-test-dl");
  Pair p;
  ASSERT_GE(p.server, 0);
  cutter.Arm(std::chrono::steady_clock::now() + std::chrono::seconds(30));
  ASSERT_TRUE(cutter.Watch(p.client));
  const auto t0 = std::chrono::steady_clock::now();
  cutter.Shutdown();
  char c;
  EXPECT_EQ(::recv(p.client, &c, 1, 0), 0);
  EXPECT_LT(Since(t0), 1.0);
  EXPECT_TRUE(cutter.Disarm());
  Pair q;
  ASSERT_GE(q.server, 0);
  const auto t1 = std::chrono::steady_clock::now();
  cutter.Arm(t1 + std::chrono::seconds(30));
  ASSERT_TRUE(cutter.Watch(q.client));
  EXPECT_EQ(::recv(q.client, &c, 1, 0), 0);
  EXPECT_LT(Since(t1), 1.0);
  EXPECT_TRUE(cutter.Disarm());
}

}  // namespace
}  // namespace sockpressure
