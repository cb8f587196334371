// The sock_diag census: real sockets in two throw-away network namespaces are
// found and attributed to the test process's cgroup, and a receiver with a
// tiny SO_RCVBUF is not mistaken for a memcg clamp. Root only (ip netns,
// setns); the pure classification tests run everywhere.
#include <linux/netlink.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "exporter/sources/shared/netns.h"
#include "exporter/sources/sock_diag/sock_diag_source.h"
#include "gtest/gtest.h"
#include "tests/bpf/net_util.h"

namespace sockpressure {
namespace {

using testing::OwnCgroupId;
using testing::TcpPair;
using testing::TempNetns;
using testing::TwoNamespaceSockets;

bool g_root = false;

TEST(MemcgClampSignature, FourTimesAdvmssWithRoomyBufferIsAClamp) {
  TcpSocketInfo s;
  s.advmss = 1448;
  s.rcv_ssthresh = 4 * 1448;  // Ivan's 5792
  s.bytes_received = 1 << 20;
  s.rcvbuf = 2577228;
  s.has_skmem = true;
  EXPECT_TRUE(IsMemcgClamp(s));
}

TEST(MemcgClampSignature, TinyRcvbufAndClampWindowAreNot) {
  TcpSocketInfo s;
  s.advmss = 1448;
  s.bytes_received = 1 << 20;
  s.has_skmem = true;
  s.rcvbuf = 4608;  // SO_RCVBUF 2304, doubled by the kernel
  s.rcv_ssthresh = 4 * 1448;
  EXPECT_FALSE(IsMemcgClamp(s)) << "window limited by the buffer itself";
  s.rcvbuf = 2577228;
  s.rcv_ssthresh = 2 * 1448;  // tcp_clamp_window(): app not reading
  EXPECT_FALSE(IsMemcgClamp(s));
  s.rcv_ssthresh = 4 * 1448;
  s.bytes_received = 0;  // nothing flowed yet
  EXPECT_FALSE(IsMemcgClamp(s));
}

TEST(SockDiagCensus, FindsSocketsInOtherNamespacesAndAttributesThem) {
  if (!g_root) GTEST_SKIP() << "needs root (ip netns, setns)";
  TwoNamespaceSockets node(absl::StrCat("sp-test-", ::getpid()));
  ASSERT_TRUE(node.SetUp()) << "ip netns add or a loopback socket failed";
  const TempNetns &a = node.a, &b = node.b;
  TcpPair &pa = node.pa, &pb = node.pb;

  // Every namespace is listed (via /run/netns) and queried.
  std::vector<NetnsRef> ns = ListNetworkNamespaces("/proc");
  std::set<std::string> paths;
  for (const NetnsRef& n : ns) paths.insert(n.path);
  EXPECT_TRUE(paths.count(a.path())) << a.path();
  EXPECT_TRUE(paths.count(b.path())) << b.path();

  // Per-socket view in namespace b: the tiny-SO_RCVBUF receiver.
  std::string err;
  std::vector<NetnsRef> only_b;
  for (const NetnsRef& n : ns) {
    if (n.path == b.path()) only_b.push_back(n);
  }
  ASSERT_EQ(only_b.size(), 1u);
  std::vector<int> fds = OpenSocketsInNamespaces(only_b, AF_NETLINK, SOCK_DGRAM, NETLINK_SOCK_DIAG, &err);
  ASSERT_EQ(fds.size(), 1u);
  ASSERT_GE(fds[0], 0) << err;
  int in_b = 0, tiny_seen = 0;
  const uint64_t own_id = OwnCgroupId(false);
  ASSERT_NE(own_id, 0u);
  ASSERT_TRUE(DumpTcpSockets(fds[0], [&](const TcpSocketInfo& s) {
                ++in_b;
                EXPECT_EQ(s.cgroup2_id, own_id) << "socket attributed to the wrong cgroup";
                if (s.has_skmem && s.rcvbuf <= 8192 && s.bytes_received > 0) {
                  ++tiny_seen;
                  std::printf("tiny receiver: rcv_ssthresh=%u advmss=%u rcvbuf=%u rmem=%u\n", s.rcv_ssthresh,
                              s.advmss, s.rcvbuf, s.rmem_alloc);
                  EXPECT_FALSE(IsMemcgClamp(s));
                }
              }).ok());
  ::close(fds[0]);
  EXPECT_EQ(in_b, 4) << "two connected pairs (4 sockets) in namespace b";
  EXPECT_EQ(tiny_seen, 1);

  // The census over all namespaces: our 6 sockets at least, none clamped.
  Paths paths_root;
  TcpCensusResult c = CensusAllNamespaces(paths_root, true);
  std::printf("census: %zu namespaces (%zu failed), %zu sockets, own cgroup2 id %llu\n", c.namespaces,
              c.namespaces_failed, c.sockets, static_cast<unsigned long long>(own_id));
  ASSERT_TRUE(c.by_cgroup2.count(own_id));
  EXPECT_GE(c.by_cgroup2[own_id].sockets, 6u);
  EXPECT_EQ(c.by_cgroup2[own_id].clamped, 0u);
  // From the root namespace alone the namespaced sockets are invisible
  // (checked by socket inode, unique node-wide).
  TcpCensusResult own_only = CensusAllNamespaces(paths_root, false);
  EXPECT_EQ(own_only.namespaces, 1u);
  std::set<uint64_t> root_inodes;
  ASSERT_TRUE(DumpTcpSockets(-1, [&](const TcpSocketInfo& s) { root_inodes.insert(s.inode); }).ok());
  for (int fd : {pa.client, pa.server, pb.client, pb.server}) {
    struct stat st;
    ASSERT_EQ(::fstat(fd, &st), 0);
    EXPECT_FALSE(root_inodes.count(st.st_ino)) << "namespaced socket visible from the root namespace";
  }
}

}  // namespace
}  // namespace sockpressure

int main(int argc, char** argv) {
  sockpressure::g_root = ::geteuid() == 0;
  if (!sockpressure::g_root) std::printf("note: not root; the namespace census test is skipped\n");
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
