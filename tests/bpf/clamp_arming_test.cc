// The window-clamp program's link follows socket pressure (issue 48), on the
// running kernel with the tp_btf tier, gated on the cgroup iterator: with no
// pressure the program is detached and its run count stops moving with
// traffic; with pressure it is attached again at once and counts; after the
// quiet period it is detached again. The attach and detach are the real
// ones, under the agent's own thread privileges: after the collector is
// built this process drops every capability no collector declared, starts
// the privileged worker with the rest and drops all on this thread, and the
// collector collects on the worker, as main() and the sampler do. Run as
// root; skips (saying why) where the kernel refuses tp_btf or the cgroup
// iterator. One test per process: the capability drop is for good.
//
// Live memcg socket pressure cannot be made on demand on every host, so
// "pressure present" is one memcg the iterator did not see, marked active
// in the sample before Collect() (the decision reads the same map the
// iterator fills); the decision itself is unit-tested
// (tests/unit/clamp_arming_test.cc).
#include <chrono>
#include <functional>
#include <cstdio>
#include <thread>

#include "exporter/common/thread_privilege.h"
#include "exporter/sources/bpf/bpf_source.h"
#include "exporter/sources/shared/capabilities.h"
#include "exporter/sources/shared/privileged_worker.h"
#include "gtest/gtest.h"
#include "tests/bpf/bpf_test_main.h"
#include "tests/bpf/sample_find.h"
#include "tests/bpf/net_util.h"

#include "sockpressure_bpf.h"

namespace sockpressure {
namespace {

using testing::MakeTcpPair;
using testing::PumpBytes;
using testing::TcpPair;

constexpr double kQuiet = 1.0;  // seconds; the agent's is ClampArming::kQuietSeconds
constexpr uint64_t kFakeMemcg = ~uint64_t{0} - 48;  // no cgroup has this id

using testing::LoadedProbe;
using testing::ProgramNamed;

// Runs fn on the privileged worker, as the sampler runs a collector that
// declared capabilities (sources/source_flags.cc, OnPrivilegedWorker).
void OnWorker(const std::function<void()>& fn) { ASSERT_EQ(PrivilegedWorker::Get().Run(fn), ""); }

// Handler runs (the program's own SP_STAT_RUNS, counted without
// kernel.bpf_stats_enabled) caused by 8 MiB over loopback.
uint64_t RunsDuringTraffic(BpfSource& src) {
  uint64_t before = 0, after = 0;
  OnWorker([&] { before = src.Stats("window_clamps")[SP_STAT_RUNS]; });
  TcpPair p;
  EXPECT_TRUE(MakeTcpPair(p));
  EXPECT_TRUE(PumpBytes(p, 8 << 20));
  OnWorker([&] { after = src.Stats("window_clamps")[SP_STAT_RUNS]; });
  return after - before;
}

void Collect(BpfSource& src, Sample& s) {
  OnWorker([&] { ASSERT_TRUE(src.Collect(s).ok()); });
}

TEST(ClampArming, TpBtfDetachedWithoutPressureAttachedWithIt) {
  BpfOptions o;
  o.vmpressure = false;  // gate on the iterator, which this host has
  o.prunes = false;
  o.clamp_attach = {"tp_btf"};
  o.clamp_quiet_seconds = kQuiet;
  std::unique_ptr<BpfSource> src = NewBpfSource(o);
  const ProbeStatus* clamp = LoadedProbe(src->Probes(), "window_clamps");
  if (!clamp) GTEST_SKIP() << "tp_btf/tcp_rcv_space_adjust refused by this kernel";
  if (!LoadedProbe(src->Probes(), "socket_pressure")) GTEST_SKIP() << "no cgroup iterator: nothing to gate on";
  // The agent's privileges from here on (main.cc, AddCollectors).
  std::printf("%s\n", DropUnneededCapabilities().c_str());
  PrivilegedWorker::Get().Start();
  EnterUnprivilegedThread(nullptr);
  ASSERT_EQ(EffectiveCapabilities(), 0u);

  Sample quiet;
  Collect(*src, quiet);
  for (const auto& [id, p] : quiet.pressure[Tier::kIter]) {
    if (p.active) GTEST_SKIP() << "memcg " << id << " is under socket pressure on this host now";
  }
  const ProbeStatus* st = LoadedProbe(quiet.probes, "window_clamps");
  ASSERT_NE(st, nullptr);
  EXPECT_FALSE(st->attached) << "no pressure: the program should be detached";
  const ProgramStats* prog = ProgramNamed(quiet, "clamp_tp_btf");
  ASSERT_NE(prog, nullptr);
  EXPECT_FALSE(prog->attached);
  EXPECT_EQ(prog->attaches, 1u);
  const uint64_t idle_runs = RunsDuringTraffic(*src);
  EXPECT_EQ(idle_runs, 0u) << "a detached program ran";

  Sample hot;
  hot.pressure[Tier::kIter][kFakeMemcg] = PressureState{true, 1, 0.5};
  Collect(*src, hot);
  st = LoadedProbe(hot.probes, "window_clamps");
  EXPECT_TRUE(st->attached) << "pressure: the program should be attached again";
  prog = ProgramNamed(hot, "clamp_tp_btf");
  EXPECT_TRUE(prog->attached);
  EXPECT_EQ(prog->attaches, 2u);
  EXPECT_EQ(prog->attach_failures, 0u);
  const uint64_t armed_runs = RunsDuringTraffic(*src);
  EXPECT_GT(armed_runs, 0u) << "the re-attached program did not run on traffic";

  std::this_thread::sleep_for(std::chrono::duration<double>(kQuiet + 0.2));
  Sample later;
  Collect(*src, later);
  EXPECT_FALSE(LoadedProbe(later.probes, "window_clamps")->attached) << "quiet period over: detached again";
  prog = ProgramNamed(later, "clamp_tp_btf");
  EXPECT_GT(prog->attached_seconds, 0.0);
  EXPECT_LT(prog->attached_seconds, 60.0);
  const uint64_t after_runs = RunsDuringTraffic(*src);
  EXPECT_EQ(after_runs, 0u);
  // Still detached: from the third read on the counters stand (not read
  // again); what a sample carries is what a fresh read would give.
  Sample held;
  for (int i = 0; i < 4; ++i) {
    held = Sample();
    Collect(*src, held);
  }
  const ProgramStats* again = ProgramNamed(held, "clamp_tp_btf");
  ASSERT_NE(again, nullptr);
  EXPECT_FALSE(again->attached);
  EXPECT_EQ(again->attaches, prog->attaches);
  EXPECT_EQ(again->attach_failures, prog->attach_failures);
  EXPECT_DOUBLE_EQ(again->attached_seconds, prog->attached_seconds);
  EXPECT_EQ(again->missed_runs, prog->missed_runs);
  EXPECT_TRUE(held.IsLive(Signal::kWindowClamps, Tier::kTpBtf));
  std::printf("8 MiB over loopback: %llu runs detached (no pressure), %llu attached (pressure), %llu detached "
              "after the quiet period; attached %.2f s, %llu attaches\n",
              static_cast<unsigned long long>(idle_runs), static_cast<unsigned long long>(armed_runs),
              static_cast<unsigned long long>(after_runs), prog->attached_seconds,
              static_cast<unsigned long long>(prog->attaches));
}

}  // namespace
}  // namespace sockpressure

int main(int argc, char** argv) { return sockpressure::RunBpfTests(argc, argv); }
