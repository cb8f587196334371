// The exposition of one snapshot in which every family the agent writes has
// series (per cgroup in both profiles and per tier, node, agent, the HTTP
// counters), byte for byte against tests/fixtures/exposition/. The e2e golden
// files cover the fixture trees but drop the run-dependent agent values; this
// pins those too, so that a change to how families are written cannot change
// what is written. UPDATE_GOLDEN=1 rewrites the files.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "exporter/outputs/metrics_endpoint.h"
#include "exporter/sources/sample.h"

namespace sockpressure {
namespace {

const std::string kGoldenDir = std::string(SOCKPRESSURE_FIXTURES) + "/exposition/";

void SetAllSignals(SignalTiers& tiers) {
  tiers[static_cast<int>(Signal::kReclaim)] = Tier::kFentry;
  tiers[static_cast<int>(Signal::kSocketPressure)] = Tier::kIter;
  tiers[static_cast<int>(Signal::kWindowClamps)] = Tier::kFentry;
  tiers[static_cast<int>(Signal::kClampedSockets)] = Tier::kIter;
  tiers[static_cast<int>(Signal::kSockThrottled)] = Tier::kMemoryEvents;
  tiers[static_cast<int>(Signal::kRcvMemDrops)] = Tier::kTpBtf;
  tiers[static_cast<int>(Signal::kTcpPrunes)] = Tier::kFentry;
}

void Node(Snapshot& s) {
  s.cgroup_mode = CgroupMode::kUnified;
  s.node.kernel_release = "6.19.0";
  s.node.nosocket = false;
  s.node.mglru_caps = 7;
  s.node.swaps = Swaps{1, 4294967296, 123456789, false};
  s.swap_enabled = true;
  s.socket_accounting_enabled = true;
  s.tcp_memory_pressure = true;
  s.node.tcp_mem_pages = 190000;
  s.node.tcp_mem_limits = std::vector<uint64_t>{92000, 123000, 184000};
  uint64_t v = 10;
  for (absl::string_view name : ExportedTcpExtCounters()) s.node.tcp_ext[std::string(name)] = v += 7;
  s.node.tcp_ext["TCPMemoryPressuresChrono"] = 2500;
  s.node.vm_pgscan = 9000000;
  s.node.vm_pgsteal = 8000000;
  s.node.psi_some = PsiLine{0, 0, 0, 1500000};
  s.node.psi_full = PsiLine{0, 0, 0, 250000};
}

void Agent(Snapshot& s) {
  s.sequence = 42;
  s.unix_millis = 1767225600123;
  s.collectors = {{"bpf", true, 0.0125, "", 1767225600100}, {"cgroupfs", false, 0.5, "broken", 1767225590000}};
  // The clamp probe loaded but detached (no memcg under socket pressure), as on a healthy node.
  s.probes = {{"vmpressure", "fentry", true, true}, {"clamps", "kprobe", false, true}};
  s.program_stats = {{"vmpressure_exit", 100, 2500000, 3, true, true, 3600, 1, 0},
                     {"tcp_select_window", 7, 1000, 0, true, false, 12.5, 3, 1}};
  s.events_lost = 5;
  s.cgroups_untracked = 3;
  s.cgroups_overflow_total = 2;
  s.cgroups_skipped_total = {{"symlink", 4}};
  s.samples_total = 42;
  s.sample_cpu_seconds = 0.003;
  s.sample_duration_seconds = 0.25;
  s.sample_overruns_total = 1;
  s.tier_disagreements = {{Signal::kReclaim, Tier::kKprobe, 2, true}};
}

CgroupView Throttled() {
  CgroupView a;
  a.path = "/kubepods/pod1/ctr \"a\"";
  a.id = 11;
  a.parent = 0;
  a.identity = {{"namespace", "default"}, {"pod", "proxy-1"}, {"container", "envoy"}};
  SetAllSignals(a.tier);
  a.best.scanned_total = 586833;
  a.best.reclaimed_total = 86;
  a.best.windows_total[0] = 1;
  a.best.windows_total[1] = 2;
  a.best.windows_total[2] = 1143;
  a.best.ratio = 0.9998;
  a.best.pressure_events_total = 1145;
  a.best.pressure_seconds_total = 61.5;
  a.best.pressure_asserted = true;
  a.best.clamps_total = 812;
  a.best.census = SocketCensus{40, 12};
  a.best.prunes_total = PruneCounters{9, 8, 7, 6};
  a.best.sock_throttled_total = 5000;
  a.pressure_active = true;
  a.subtree_sockets = 40;
  a.anon_bytes = 700 << 20;
  a.file_bytes = 20 << 20;
  a.sock_bytes = 30 << 20;
  a.swap_bytes = 1 << 20;
  CgroupLimits l;
  l.memory_current = 750 << 20;
  l.memory_max = 768 << 20;
  l.memory_high = UINT64_MAX;
  l.memory_low = 0;
  l.memory_min = 0;
  l.swap_max = UINT64_MAX;
  l.events_oom_kill = 1;
  l.psi_some = PsiLine{0, 0, 0, 3000000};
  l.psi_full = PsiLine{0, 0, 0, 1000000};
  a.limits = std::make_shared<const CgroupLimits>(l);
  a.tiers[Tier::kFentry] = a.best;
  TierValues kprobe = a.best;
  kprobe.scanned_total = 400000;
  kprobe.ratio = std::nullopt;
  kprobe.census = std::nullopt;
  a.tiers[Tier::kKprobe] = kprobe;
  a.tiers[Tier::kTpBtf] = a.best;
  return a;
}

CgroupView LegacyV1() {
  CgroupView b;
  b.path = "/system.slice/db.service";
  b.id = 12;
  b.parent = 0;
  b.v1 = true;
  b.tier[static_cast<int>(Signal::kReclaim)] = Tier::kMemoryStat;
  b.best.scanned_total = 100;
  b.best.reclaimed_total = 100;
  CgroupLimits l;
  l.memory_current = 1 << 30;
  l.kmem_tcp_usage = 4096;
  l.kmem_tcp_limit = 1 << 20;
  l.kmem_tcp_failcnt = 3;
  b.limits = std::make_shared<const CgroupLimits>(l);
  return b;
}

Snapshot Everything() {
  Snapshot s;
  Node(s);
  Agent(s);
  CgroupView root;
  root.path = "/";
  root.id = 1;
  root.tier[static_cast<int>(Signal::kReclaim)] = Tier::kFentry;
  root.best.scanned_total = 586933;
  root.best.reclaimed_total = 186;
  s.cgroups = {root, Throttled(), LegacyV1()};
  SetAllSignals(s.signal_tier);
  return s;
}

std::string Render(const EmitOptions& options) {
  MetricsEndpoint metrics(nullptr, BuildInfo{"0.1.0", "abc1234", "GNU 12.2.0"}, options);
  // One series a family: prometheus-cpp keeps a family's series in a hash
  // map, whose order is no contract of ours.
  metrics.CountRequest("/metrics", 200);
  metrics.CountReset("deadline");
  return metrics.RenderSnapshot(Everything(), /*protobuf=*/false);
}

void ExpectGolden(const std::string& name, const std::string& rendered) {
  const std::string path = kGoldenDir + name;
  const char* update = std::getenv("UPDATE_GOLDEN");
  if (update != nullptr && std::string(update) == "1") {
    std::ofstream(path, std::ios::binary) << rendered;
    GTEST_SKIP() << "updated " << path;
  }
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in) << "no golden file " << path << " (UPDATE_GOLDEN=1 writes it)";
  std::stringstream golden;
  golden << in.rdbuf();
  EXPECT_EQ(golden.str(), rendered) << "the exposition differs from " << path;
}

TEST(ExpositionGoldenTest, CoreProfile) { ExpectGolden("core.txt", Render(EmitOptions())); }

TEST(ExpositionGoldenTest, ContextProfileWithEveryTier) {
  EmitOptions o;
  o.context = true;
  o.all_tiers = true;
  ExpectGolden("context_all_tiers.txt", Render(o));
}

}  // namespace
}  // namespace sockpressure
