// The eBPF tiers on the running kernel (run as root; skipped otherwise).
//
// Asserts only what the kernel allows: whatever attach type a probe ends up
// on must be the first one in its fallback chain that the kernel accepts, and
// the attached programs must run and produce data.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <set>

#include "exporter/sources/bpf/bpf_source.h"
#include "exporter/sources/cgroupfs_source.h"
#include "exporter/sources/memory_hierarchy.h"
#include "gtest/gtest.h"
#include "tests/bpf/bpf_test_main.h"
#include "tests/bpf/net_util.h"

#include "sockpressure_bpf.h"

namespace sockpressure {
namespace {

using testing::MakeTcpPair;
using testing::PumpBytes;
using testing::TcpPair;

BpfOptions ClampOnly(const std::string& attach) {
  BpfOptions o;
  o.pressure = false;
  o.vmpressure = false;
  o.clamp_attach = {attach};
  return o;
}

const ProbeStatus* Find(const std::vector<ProbeStatus>& ps, const std::string& probe, const std::string& attach) {
  for (const ProbeStatus& p : ps) {
    if (p.probe == probe && p.attach == attach) return &p;
  }
  return nullptr;
}

// tp_btf/tcp_rcv_space_adjust and raw_tp: loopback traffic makes the handler
// run; on a host where every sk_memcg is NULL (v1 without kmem.tcp limits)
// it must count those runs as "no memcg" and report zero clamps.
void ExpectClampHandlerRuns(const std::string& attach, Tier tier) {
  std::unique_ptr<BpfSource> src = NewBpfSource(ClampOnly(attach));
  const ProbeStatus* st = Find(src->Probes(), "window_clamps", attach);
  ASSERT_NE(st, nullptr);
  if (!st->attached) GTEST_SKIP() << attach << " refused by this kernel";
  std::vector<uint64_t> before = src->Stats("window_clamps");
  ASSERT_EQ(before.size(), static_cast<size_t>(SP_STAT_NR));
  TcpPair p;
  ASSERT_TRUE(MakeTcpPair(p));
  ASSERT_TRUE(PumpBytes(p, 8 << 20));
  std::vector<uint64_t> after = src->Stats("window_clamps");
  EXPECT_GT(after[SP_STAT_RUNS], before[SP_STAT_RUNS]) << "handler did not run on loopback traffic";
  Sample s;
  ASSERT_TRUE(src->Collect(s).ok());
  EXPECT_TRUE(s.IsLive(Signal::kWindowClamps, tier));
  uint64_t no_memcg = after[SP_STAT_NO_MEMCG] - before[SP_STAT_NO_MEMCG];
  std::printf("%s: %llu handler runs, %llu with sk_memcg == NULL, %llu clamps\n", attach.c_str(),
              static_cast<unsigned long long>(after[SP_STAT_RUNS] - before[SP_STAT_RUNS]),
              static_cast<unsigned long long>(no_memcg),
              static_cast<unsigned long long>(after[SP_STAT_CLAMPS]));
  if (no_memcg == after[SP_STAT_RUNS] - before[SP_STAT_RUNS]) {
    // No socket has a memcg here, so nothing can have been clamped.
    EXPECT_EQ(after[SP_STAT_CLAMPS], 0u);
    size_t total = 0;
    for (const auto& [id, c] : s.clamps[tier]) total += c.clamps;
    EXPECT_EQ(total, 0u);
  }
}

TEST(BpfProbes, TpBtfClampHandlerRunsOnLoopbackTraffic) { ExpectClampHandlerRuns("tp_btf", Tier::kTpBtf); }
TEST(BpfProbes, RawTpClampHandlerRunsOnLoopbackTraffic) { ExpectClampHandlerRuns("raw_tp", Tier::kRawTp); }

// The whole chain: refused fentry/kprobe variants are reported and the next
// attach type takes over; nothing fails.
TEST(BpfProbes, FallbackChainPicksFirstAcceptedAttachType) {
  BpfOptions o;
  std::unique_ptr<BpfSource> src = NewBpfSource(o);
  std::vector<ProbeStatus> ps = src->Probes();
  for (const ProbeStatus& p : ps) {
    std::printf("probe %-16s %-7s %s\n", p.probe.c_str(), p.attach.c_str(), p.attached ? "attached" : "skipped");
  }
  for (const char* probe : {"window_clamps", "vmpressure", "socket_pressure"}) {
    int attached = 0;
    bool after_attached = false;
    for (const ProbeStatus& p : ps) {
      if (p.probe != probe) continue;
      EXPECT_FALSE(after_attached) << probe << ": tried " << p.attach << " after one attached";
      if (p.attached) {
        ++attached;
        after_attached = true;
      }
    }
    EXPECT_LE(attached, 1) << probe;
  }
  // This project's CI kernel (docs/kernel.md §5): fentry refused (EPERM), no
  // kprobes, tp_btf and iterators fine. Elsewhere only the invariants hold.
  const ProbeStatus* fexit = Find(ps, "window_clamps", "fexit");
  const ProbeStatus* tp_btf = Find(ps, "window_clamps", "tp_btf");
  if (fexit && !fexit->attached && tp_btf) {
    EXPECT_TRUE(tp_btf->attached);
  }
  Sample s;
  ASSERT_TRUE(src->Collect(s).ok());
  EXPECT_EQ(s.probes.size(), ps.size());
}

// The iterator walks the same memory cgroups the cgroupfs source reads
// (ids: cgrp->kn->id == directory inode), including the v1 hierarchy on
// hybrid hosts.
TEST(BpfProbes, CgroupIteratorWalksMemoryHierarchy) {
  BpfOptions o;
  o.clamps = false;
  o.vmpressure = false;
  std::unique_ptr<BpfSource> src = NewBpfSource(o);
  const ProbeStatus* st = Find(src->Probes(), "socket_pressure", "iter");
  ASSERT_NE(st, nullptr);
  if (!st->attached) GTEST_SKIP() << "cgroup iterator refused by this kernel";
  Sample s;
  std::unique_ptr<Source> cg = NewCgroupfsSource(Paths{}, {});
  (void)cg->Collect(s);
  ASSERT_FALSE(s.cgroups.empty());
  ASSERT_TRUE(src->Collect(s).ok());
  EXPECT_TRUE(s.IsLive(Signal::kSocketPressure, Tier::kIter));
  std::vector<uint64_t> ids = src->LastIterCgroupIds();
  std::set<uint64_t> walked(ids.begin(), ids.end());
  size_t missing = 0;
  for (const CgroupReading& c : s.cgroups) {
    if (!walked.count(c.id)) {
      ++missing;
      std::printf("cgroupfs %s (id %llu) not walked by the iterator\n", c.path.c_str(),
                  static_cast<unsigned long long>(c.id));
    }
    EXPECT_TRUE(s.pressure[Tier::kIter].count(c.id) || !walked.count(c.id)) << c.path;
  }
  std::printf("iterator walked %zu cgroups, cgroupfs read %zu\n", walked.size(), s.cgroups.size());
  // Cgroups can come and go between the two reads; allow one.
  EXPECT_LE(missing, 1u);
  EXPECT_GE(walked.size() + 1, s.cgroups.size());
  EXPECT_TRUE(walked.count(s.cgroups[0].id)) << "memory root not walked";

  // Later walks that change nothing leave the map unread (the program's
  // .bss counters say so): what they give is what a full read gives, as a
  // new loader's first read (which reads the map) shows.
  for (int i = 0; i < 3; ++i) {
    Sample again;
    ASSERT_TRUE(src->Collect(again).ok());
    std::vector<uint64_t> later = src->LastIterCgroupIds();
    EXPECT_EQ(std::set<uint64_t>(later.begin(), later.end()), walked) << "walk " << i + 2;
    std::unique_ptr<BpfSource> fresh = NewBpfSource(o);
    Sample full;
    ASSERT_TRUE(fresh->Collect(full).ok());
    for (const auto& [id, p] : full.pressure[Tier::kIter]) {
      if (!again.pressure[Tier::kIter].count(id)) continue;  // came or went between the two walks
      EXPECT_EQ(again.pressure[Tier::kIter][id].active, p.active) << "cgroup id " << id;
    }
    EXPECT_NEAR(static_cast<double>(again.pressure[Tier::kIter].size()),
                static_cast<double>(full.pressure[Tier::kIter].size()), 1.0);
  }
}

// On cgroup v1 a socket is charged to its memcg only once a tcp limit was
// written there (memory.kmem.tcp.limit_in_bytes: tcpmem_active), and memcg
// socket pressure throttles only charged sockets. Where the kernel's own
// files say no memcg ever charged a socket (tcp usage peak 0 everywhere),
// the iterator must count none: its walks then wait a context interval,
// and the collector tells the sampler nothing can move unseen. On cgroup
// v2 (every socket charged) neither happens.
TEST(BpfProbes, CgroupIteratorWaitsWhereNoMemcgChargesSockets) {
  const MemoryHierarchy h = DetectMemoryHierarchy("/sys/fs/cgroup");
  size_t memcgs = 0, charged = 0;
  if (h.v1) {
    for (const auto& e : std::filesystem::recursive_directory_iterator(
             h.root, std::filesystem::directory_options::skip_permission_denied)) {
      if (!e.is_directory()) continue;
      ++memcgs;
      std::FILE* f = std::fopen((e.path() / "memory.kmem.tcp.max_usage_in_bytes").c_str(), "r");
      unsigned long long peak = 0;
      if (f != nullptr) {
        if (std::fscanf(f, "%llu", &peak) != 1) peak = 1;  // unreadable: count it as charged
        std::fclose(f);
      }
      charged += peak > 0;
    }
  }
  auto source = [](double context_seconds) {
    BpfOptions o;
    o.clamps = false;
    o.vmpressure = false;
    o.prunes = false;
    o.context_seconds = context_seconds;
    return NewBpfSource(o);
  };
  std::unique_ptr<BpfSource> hourly = source(3600), every = source(0);
  const ProbeStatus* st = Find(hourly->Probes(), "socket_pressure", "iter");
  ASSERT_NE(st, nullptr);
  if (!st->attached) GTEST_SKIP() << "cgroup iterator refused by this kernel";
  auto walks = [](BpfSource& src) { return src.Stats("socket_pressure")[SP_STAT_RUNS]; };
  auto collect = [](BpfSource& src) {
    Sample s;
    EXPECT_TRUE(src.Collect(s).ok());
    return s;
  };
  Sample first = collect(*hourly);
  collect(*every);
  const uint64_t hourly_runs = walks(*hourly), every_runs = walks(*every);
  Sample second = collect(*hourly);
  collect(*every);
  EXPECT_GT(walks(*every), every_runs) << "a zero interval walks every sample";
  std::printf("hierarchy v1=%d, %zu memcgs, %zu with a tcp usage peak\n", h.v1, memcgs, charged);
  if (h.v1 && charged == 0) {
    EXPECT_EQ(walks(*hourly), hourly_runs) << "no memcg charges sockets: the second sample reuses the first walk";
    EXPECT_EQ(first.signal_collectors_quiet, 1u);
    EXPECT_EQ(second.signal_collectors_quiet, 1u);
    EXPECT_EQ(second.pressure[Tier::kIter].size(), first.pressure[Tier::kIter].size()) << "the walk's records stand";
    EXPECT_TRUE(second.IsLive(Signal::kSocketPressure, Tier::kIter));
  } else {
    EXPECT_GT(walks(*hourly), hourly_runs) << "sockets may be charged: every sample walks";
    EXPECT_EQ(second.signal_collectors_quiet, 0u);
  }
}

}  // namespace
}  // namespace sockpressure

int main(int argc, char** argv) { return sockpressure::RunBpfTests(argc, argv); }
