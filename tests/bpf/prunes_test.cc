// bpf/prunes.bpf.c on the running kernel (run as root; skipped otherwise):
// the verifier accepts each variant the kernel offers, and real loopback
// sockets in a throw-away network namespace make the kernel prune, collapse
// and drop, which the programs must count no more often than the namespace's
// own TcpExt counters say happened, and at least as often on sockets they can
// attribute.
//
// No memcg pressure is needed: tcp_try_rmem_schedule() also prunes when the
// receive memory exceeds sk_rcvbuf. A receiver that shrinks SO_RCVBUF after
// its window has grown (the kernel never shrinks an advertised window) and
// then reads slowly makes the sender overrun it: collapse, RcvPruned and
// PROTO_MEM drops. A receiver with a tiny SO_RCVBUF fed one-byte segments
// (TCP_NODELAY) collapses its queue without dropping.
#include <netinet/tcp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "exporter/sources/bpf/bpf_source.h"
#include "gtest/gtest.h"
#include "tests/bpf/bpf_test_main.h"
#include "tests/bpf/net_util.h"

#include "sockpressure_bpf.h"

namespace sockpressure {
namespace {

using testing::MakeTcpPair;
using testing::TcpPair;
using testing::TempNetns;

// TcpExt of the calling thread's network namespace.
std::map<std::string, uint64_t> TcpExt() {
  std::ifstream f("/proc/thread-self/net/netstat");
  std::string keys, values;
  std::map<std::string, uint64_t> out;
  while (std::getline(f, keys) && std::getline(f, values)) {
    if (keys.rfind("TcpExt:", 0) != 0) continue;
    std::istringstream k(keys), v(values);
    std::string name, skip;
    k >> skip;
    v >> skip;
    uint64_t n;
    while (k >> name && v >> n) out[name] = n;
  }
  return out;
}

struct Delta {
  std::map<std::string, uint64_t> before, after;
  uint64_t operator[](const std::string& k) const {
    auto a = after.find(k), b = before.find(k);
    return (a == after.end() ? 0 : a->second) - (b == before.end() ? 0 : b->second);
  }
};

void Print(const Delta& d) {
  std::printf("netns TcpExt delta:");
  for (const char* k : {"PruneCalled", "TCPRcvCollapsed", "OfoPruned", "RcvPruned", "TCPRcvQDrop", "TCPOFODrop"}) {
    std::printf(" %s=%llu", k, static_cast<unsigned long long>(d[k]));
  }
  std::printf("\n");
}

// The overrun receiver (see the file comment); returns the namespace's
// TcpExt around it. Bounded: about 1.5 s of loopback traffic.
bool OverrunReceiver(TempNetns& ns, Delta& d) {
  bool ok = false;
  ns.RunInside([&] {
    TcpPair p;
    if (!MakeTcpPair(p)) return;
    d.before = TcpExt();
    std::atomic<bool> stop{false};
    std::thread sender([&] {
      ::fcntl(p.client, F_SETFL, ::fcntl(p.client, F_GETFL) | O_NONBLOCK);
      std::vector<char> buf(1 << 16, 'x');
      while (!stop) {
        if (::write(p.client, buf.data(), buf.size()) < 0) std::this_thread::sleep_for(std::chrono::microseconds(500));
      }
    });
    std::vector<char> buf(1 << 20);
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
    while (std::chrono::steady_clock::now() < until) (void)::read(p.server, buf.data(), buf.size());
    int tiny = 4096;
    ::setsockopt(p.server, SOL_SOCKET, SO_RCVBUF, &tiny, sizeof tiny);
    until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1200);
    while (std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      (void)::read(p.server, buf.data(), 4096);
    }
    stop = true;
    sender.join();
    d.after = TcpExt();
    ok = true;
  });
  return ok;
}

// Tiny SO_RCVBUF, one-byte segments: collapses without drops. ~1 s.
bool CollapsingReceiver(TempNetns& ns, Delta& d) {
  bool ok = false;
  ns.RunInside([&] {
    TcpPair p;
    if (!MakeTcpPair(p, 4096)) return;
    int one = 1;
    ::setsockopt(p.client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    d.before = TcpExt();
    std::atomic<bool> stop{false};
    std::thread sender([&] {
      ::fcntl(p.client, F_SETFL, ::fcntl(p.client, F_GETFL) | O_NONBLOCK);
      while (!stop) {
        if (::write(p.client, "x", 1) < 0) std::this_thread::sleep_for(std::chrono::microseconds(500));
      }
    });
    char buf[512];
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1000);
    while (std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      (void)::read(p.server, buf, sizeof buf);
    }
    stop = true;
    sender.join();
    d.after = TcpExt();
    ok = true;
  });
  return ok;
}

BpfOptions PrunesOnly(const std::vector<std::string>& drops, const std::vector<std::string>& fns) {
  BpfOptions o;
  o.pressure = o.vmpressure = o.clamps = false;
  o.drops_attach = drops;
  o.prunes_attach = fns;
  return o;
}

const ProbeStatus* Find(const std::vector<ProbeStatus>& ps, const std::string& probe, const std::string& attach) {
  for (const ProbeStatus& p : ps) {
    if (p.probe == probe && p.attach == attach) return &p;
  }
  return nullptr;
}

uint64_t Slot(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b, int slot) {
  return b.at(static_cast<size_t>(slot)) - a.at(static_cast<size_t>(slot));
}

// The drop tier: every memory drop the kernel made in the namespace reaches
// the handler with its socket (rx_sk, 6.11+), and the per-cgroup count never
// exceeds the namespace's TcpExt.
void ExpectDropsCounted(const std::string& attach, Tier tier) {
  std::unique_ptr<BpfSource> src = NewBpfSource(PrunesOnly({attach}, {}));
  const ProbeStatus* st = Find(src->Probes(), "tcp_drops", attach);
  ASSERT_NE(st, nullptr);
  if (!st->attached) GTEST_SKIP() << "tcp_drops/" << attach << " refused by this kernel (see the log)";
  TempNetns ns("sp-prunes-" + attach);
  ASSERT_TRUE(ns.ok()) << "ip netns add failed";
  std::vector<uint64_t> before = src->Stats("tcp_drops");
  Delta d;
  ASSERT_TRUE(OverrunReceiver(ns, d));
  std::vector<uint64_t> after = src->Stats("tcp_drops");
  Print(d);
  const uint64_t kernel_drops = d["TCPRcvQDrop"] + d["TCPOFODrop"];
  ASSERT_GT(kernel_drops, 0u) << "the overrun receiver made the kernel drop nothing";
  EXPECT_GT(d["PruneCalled"], 0u);

  Sample s;
  ASSERT_TRUE(src->Collect(s).ok());
  ASSERT_TRUE(s.IsLive(Signal::kRcvMemDrops, tier));
  const uint64_t memcg = testing::OwnCgroupId(true);
  uint64_t own = 0, all = 0;
  for (const auto& [id, c] : s.prunes[tier]) {
    all += c.rcv_mem_drops;
    if (id == memcg) own = c.rcv_mem_drops;
  }
  const uint64_t runs = Slot(before, after, SP_STAT_RUNS), no_sock = Slot(before, after, SP_STAT_NO_SOCK);
  const uint64_t no_memcg = Slot(before, after, SP_STAT_NO_MEMCG);
  std::printf("%s: %llu memory drops/prunes seen, %llu without socket, %llu without memcg; own memcg %llu drops "
              "(all cgroups %llu)\n",
              attach.c_str(), static_cast<unsigned long long>(runs), static_cast<unsigned long long>(no_sock),
              static_cast<unsigned long long>(no_memcg), static_cast<unsigned long long>(own),
              static_cast<unsigned long long>(all));
  // The handler sees every PROTO_MEM drop on the node (other namespaces too).
  EXPECT_GE(runs, kernel_drops);
  EXPECT_LE(own, kernel_drops) << "more drops on this cgroup than the kernel made in the test's namespace";
  if (Find(src->Probes(), "tcp_drops", attach) && src->ProgramFds().at(0).first.find("_rx") != std::string::npos) {
    // With rx_sk every drop has its socket: each of ours is either in our
    // memcg or counted as "no memcg" (v1 without kmem.tcp accounting).
    EXPECT_GE(runs - no_sock, kernel_drops);
    if (own == 0) {
      EXPECT_GE(no_memcg, kernel_drops) << "drops neither attributed to this cgroup nor to 'no memcg'";
      std::printf("note: this host charges no socket to a memcg (v1 without kmem.tcp accounting, or root); "
                  "per-cgroup attribution is checked in the lab\n");
    } else {
      EXPECT_EQ(own, kernel_drops);
    }
  }
}

TEST(Prunes, TpBtfCountsMemoryDrops) { ExpectDropsCounted("tp_btf", Tier::kTpBtf); }
TEST(Prunes, RawTpCountsMemoryDrops) { ExpectDropsCounted("raw_tp", Tier::kRawTp); }

// Nothing pruned, nothing counted: the handler is not on the receive path.
TEST(Prunes, PlainTrafficCountsNothing) {
  std::unique_ptr<BpfSource> src = NewBpfSource(PrunesOnly({"tp_btf", "raw_tp"}, {"fentry", "kprobe"}));
  TempNetns ns("sp-prunes-plain");
  ASSERT_TRUE(ns.ok());
  std::vector<uint64_t> before = src->Stats("tcp_drops");
  if (before.empty()) GTEST_SKIP() << "no drop tier attached on this kernel";
  Delta d;
  ns.RunInside([&] {
    TcpPair p;
    ASSERT_TRUE(MakeTcpPair(p));
    d.before = TcpExt();
    ASSERT_TRUE(testing::PumpBytes(p, 64 << 20));
    d.after = TcpExt();
  });
  Print(d);
  ASSERT_EQ(d["PruneCalled"] + d["TCPRcvQDrop"] + d["TCPOFODrop"], 0u) << "plain traffic pruned";
  Sample s;
  ASSERT_TRUE(src->Collect(s).ok());
  const uint64_t memcg = testing::OwnCgroupId(true);
  for (const auto& [tier, by_id] : s.prunes) {
    auto it = by_id.find(memcg);
    if (it == by_id.end()) continue;
    EXPECT_EQ(it->second.rcv_mem_drops + it->second.ofo_pruned_segs + it->second.collapses + it->second.ofo_prunes,
              0u)
        << TierName(tier);
  }
}

// The function tier: on kernels that allow fentry or kprobes, collapses are
// counted at most as often as PruneCalled; here (no kprobes, fentry EPERM)
// both variants must be tried and reported as skipped.
TEST(Prunes, FunctionTierCountsCollapsesOrReportsWhyNot) {
  std::unique_ptr<BpfSource> src = NewBpfSource(PrunesOnly({}, {"fentry", "kprobe"}));
  const ProbeStatus* fentry = Find(src->Probes(), "tcp_prunes", "fentry");
  const ProbeStatus* kprobe = Find(src->Probes(), "tcp_prunes", "kprobe");
  ASSERT_NE(fentry, nullptr);
  if (!fentry->attached) {
    ASSERT_NE(kprobe, nullptr) << "kprobe not tried after fentry failed";
  }
  if (!fentry->attached && !kprobe->attached) {
    GTEST_SKIP() << "tcp_prunes: neither fentry nor kprobe attaches on this kernel (checked in the lab)";
  }
  const Tier tier = fentry->attached ? Tier::kFentry : Tier::kKprobe;
  TempNetns ns("sp-prunes-fn");
  ASSERT_TRUE(ns.ok());
  Delta d;
  ASSERT_TRUE(CollapsingReceiver(ns, d));
  Print(d);
  ASSERT_GT(d["PruneCalled"], 0u) << "the collapsing receiver made the kernel prune nothing";
  Sample s;
  ASSERT_TRUE(src->Collect(s).ok());
  const uint64_t memcg = testing::OwnCgroupId(true);
  auto it = s.prunes[tier].find(memcg);
  const uint64_t own = it == s.prunes[tier].end() ? 0 : it->second.collapses;
  EXPECT_LE(own, d["PruneCalled"]);
  std::printf("%s: own memcg %llu receive-queue collapses\n", TierName(tier).data(),
              static_cast<unsigned long long>(own));
}

}  // namespace
}  // namespace sockpressure

int main(int argc, char** argv) { return sockpressure::RunBpfTests(argc, argv); }
