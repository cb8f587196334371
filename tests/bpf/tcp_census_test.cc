// The in-kernel census (iter/tcp, bpf/tcp_census.bpf.c) on this machine's
// kernel, as root: the program passes the verifier, walks exactly the sockets
// of the namespace it was created in, attributes them to this process's
// cgroup, counts the same sockets as the sock_diag tier, and does not take a
// tiny SO_RCVBUF receiver for a memcg clamp.
#include <linux/netlink.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "exporter/sources/bpf/tcp_census_source.h"
#include "exporter/sources/shared/netns.h"
#include "exporter/sources/sock_diag/sock_diag_source.h"
#include "gtest/gtest.h"
#include "tests/bpf/net_util.h"

namespace sockpressure {
namespace {

using testing::OwnCgroupId;
using testing::TempNetns;
using testing::TwoNamespaceSockets;

bool g_root = false;

NetnsRef RefFor(const TempNetns& ns) {
  struct stat st{};
  ::stat(ns.path().c_str(), &st);
  return {static_cast<uint64_t>(st.st_ino), ns.path(), false};
}

// sock_diag's view of one namespace: (sockets, clamped).
std::pair<size_t, size_t> SockDiagCount(const NetnsRef& ns) {
  std::string err;
  std::vector<int> fds = OpenSocketsInNamespaces({ns}, AF_NETLINK, SOCK_DGRAM, NETLINK_SOCK_DIAG, &err);
  size_t n = 0, clamped = 0;
  if (fds.size() == 1 && fds[0] >= 0) {
    (void)DumpTcpSockets(fds[0], [&](const TcpSocketInfo& s) {
      ++n;
      clamped += IsMemcgClamp(s);
    });
    ::close(fds[0]);
  }
  return {n, clamped};
}

TEST(TcpCensusIter, CountsEachNamespaceLikeSockDiagAndAttributesToOwnCgroup) {
  if (!g_root) GTEST_SKIP() << "needs root (BPF iterator, ip netns, setns)";
  std::string why;
  std::unique_ptr<TcpCensusIter> census = TcpCensusIter::Open(&why);
  if (!census) GTEST_SKIP() << "TCP iterator not available here: " << why;

  TwoNamespaceSockets node(absl::StrCat("sp-census-", ::getpid()));
  ASSERT_TRUE(node.SetUp()) << "ip netns add or a loopback socket failed";
  const NetnsRef ra = RefFor(node.a), rb = RefFor(node.b);
  TcpCensusResult only_a = census->Run({ra});
  TcpCensusResult only_b = census->Run({rb});
  TcpCensusResult both = census->Run({ra, rb});
  for (const TcpCensusResult* r : {&only_a, &only_b, &both}) {
    EXPECT_EQ(r->namespaces_failed, 0u) << r->first_error;
  }
  // Exactly the sockets of the namespace the iterator was created in (the
  // listeners are not counted), and the map is emptied between censuses.
  EXPECT_EQ(only_a.sockets, 2u);
  EXPECT_EQ(only_b.sockets, 4u);
  EXPECT_EQ(both.sockets, 6u);

  // The same count as the sock_diag tier, per namespace; nobody is clamped
  // (the tiny receiver's window is explained by its own buffer).
  std::pair<size_t, size_t> diag_a = SockDiagCount(ra), diag_b = SockDiagCount(rb);
  EXPECT_EQ(diag_a.first, only_a.sockets);
  EXPECT_EQ(diag_b.first, only_b.sockets);
  size_t clamped = 0;
  for (const auto& m : {both.by_memcg, both.by_cgroup2}) {
    for (const auto& [id, c] : m) clamped += c.clamped;
  }
  EXPECT_EQ(clamped, 0u);
  EXPECT_EQ(diag_b.second, 0u);

  // Attribution: charged sockets by their memcg (this process's memory
  // cgroup), the others by their unified cgroup (this process's). Which
  // one depends on the host: v1 memcgs charge sockets only with
  // memory.kmem.tcp accounting on.
  const uint64_t memcg = OwnCgroupId(true), cg2 = OwnCgroupId(false);
  std::printf("census: %zu memcg keys (charged sockets), %zu cgroup2 keys (uncharged); own memcg id %llu, own cgroup2 id %llu\n",
              both.by_memcg.size(), both.by_cgroup2.size(), static_cast<unsigned long long>(memcg),
              static_cast<unsigned long long>(cg2));
  size_t attributed = 0;
  for (const auto& [id, c] : both.by_memcg) {
    EXPECT_EQ(id, memcg) << "charged to a memcg that is not ours";
    attributed += c.sockets;
  }
  for (const auto& [id, c] : both.by_cgroup2) {
    EXPECT_EQ(id, cg2) << "unified cgroup id is not ours";
    attributed += c.sockets;
  }
  EXPECT_EQ(attributed, 6u);
  EXPECT_EQ(census->Lost(), 0u);
}

TEST(TcpCensusIter, CollectorReportsTheIterTier) {
  if (!g_root) GTEST_SKIP() << "needs root (BPF iterator)";
  SourceContext ctx;
  std::unique_ptr<Source> src = NewBpfCensusSource(ctx);
  ASSERT_NE(src, nullptr);
  Sample s;
  ASSERT_TRUE(src->Collect(s).ok());
  ASSERT_EQ(s.probes.size(), 1u);
  EXPECT_EQ(s.probes[0].probe, "tcp_census");
  if (!s.probes[0].attached) GTEST_SKIP() << "TCP iterator not available on this kernel";
  EXPECT_TRUE(s.IsLive(Signal::kClampedSockets, Tier::kIter));

  ctx.collectors.erase("bpf");  // --no-collector.bpf
  EXPECT_EQ(NewBpfCensusSource(ctx), nullptr);
}

}  // namespace
}  // namespace sockpressure

int main(int argc, char** argv) {
  sockpressure::g_root = ::geteuid() == 0;
  if (!sockpressure::g_root) std::printf("note: not root; the census iterator tests are skipped\n");
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
