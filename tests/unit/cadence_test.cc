// The context collectors' cadence (sampler/cadence.h): on an idle node they
// run every context_every cycles and their last reading is held in between;
// any activity runs them in the same cycle, and every cycle while it lasts.
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

#include "exporter/sampler/cadence.h"
#include "exporter/sampler/sampler.h"
#include "exporter/sources/source.h"

namespace sockpressure {
namespace {

constexpr uint64_t kCgroupId = 2;

// What the fake kernel shows; the test moves it between cycles.
struct World {
  uint64_t pgscan = 100;     // memory.stat of the child cgroup
  uint64_t clamps = 0;       // the clamp tier's counter
  bool pressure = false;     // socket pressure asserted now
  uint64_t clamped = 0;      // sockets the census finds clamped
  uint64_t tcp_ext = 0;      // a TcpExt counter, moves on its own
  int quiet = 0;             // signal collectors that say nothing can move unseen (0-2)
  int context_runs = 0, census_runs = 0, signal_runs = 0;
};

std::vector<std::unique_ptr<Source>> Sources(World* w) {
  std::vector<std::unique_ptr<Source>> s;
  // Registration order as in registry.cc: context collectors between the signal ones.
  s.push_back(MakeFunctionSource("cgroupfs", [w](Sample& s) {
    ++w->signal_runs;
    for (uint64_t id : {1, 2}) {
      CgroupReading c;
      c.path = id == 1 ? "/" : "/a";
      c.id = id;
      c.parent = id == 1 ? -1 : 0;
      c.pgscan = w->pgscan;
      c.pgsteal = w->pgscan;
      s.id_index[id] = static_cast<int>(s.cgroups.size());
      s.cgroups.push_back(c);
    }
    s.cgroups_complete = true;
    s.MarkLive(Signal::kReclaim, Tier::kMemoryStat);
    if (w->quiet >= 1) ++s.signal_collectors_quiet;
    return absl::OkStatus();
  }));
  s.push_back(MakeFunctionSource("netstat", [w](Sample& s) {
    ++w->context_runs;
    s.node.tcp_ext["TCPMemoryPressures"] = w->tcp_ext;
    return absl::OkStatus();
  }));
  s.push_back(MakeFunctionSource("bpf", [w](Sample& s) {
    s.clamps[Tier::kTpBtf][kCgroupId].clamps = w->clamps;
    s.pressure[Tier::kIter][kCgroupId].active = w->pressure;
    s.MarkLive(Signal::kWindowClamps, Tier::kTpBtf);
    s.MarkLive(Signal::kSocketPressure, Tier::kIter);
    if (w->quiet >= 2) ++s.signal_collectors_quiet;
    return absl::OkStatus();
  }));
  s.push_back(MakeFunctionSource("bpf_census", [w](Sample& s) {
    ++w->census_runs;
    s.probes.push_back({"tcp_census", "iter", true, true});
    s.census[Tier::kIter][kCgroupId] = SocketCensus{10, w->clamped};
    s.MarkLive(Signal::kClampedSockets, Tier::kIter);
    s.events_lost += 3;
    return absl::OkStatus();
  }));
  return s;
}

const CgroupView& Child(const Snapshot& s) {
  for (const CgroupView& c : s.cgroups) {
    if (c.id == kCgroupId) return c;
  }
  ADD_FAILURE() << "no child cgroup";
  return s.cgroups.front();
}

TEST(CadenceTest, TheTableNamesTheContextCollectors) {
  for (const char* c : {"kernel", "swaps", "netstat", "sockstat", "vmstat", "bpf_census", "sock_diag"}) {
    EXPECT_EQ(CadenceOf(c), CollectorCadence::kContext) << c;
  }
  for (const char* c : {"cgroupfs", "bpf", "anything"}) EXPECT_EQ(CadenceOf(c), CollectorCadence::kEveryCycle) << c;
}

TEST(CadenceTest, IdleNodeRunsContextCollectorsEveryContextInterval) {
  World w;
  Sampler sampler(Sources(&w), std::make_unique<StateTracker>(), 1.0, 10);
  std::shared_ptr<const Snapshot> first = sampler.SampleOnce();  // the first cycle reads everything
  EXPECT_EQ(w.context_runs, 1);
  w.tcp_ext = 5;  // a node counter moves, but no verdict signal does
  std::shared_ptr<const Snapshot> s;
  for (int i = 2; i <= 10; ++i) {
    s = sampler.SampleOnce();
    EXPECT_EQ(w.context_runs, 1) << "cycle " << i;
    // The held reading, whole: node counters, census, live tier, probe, lost events.
    EXPECT_EQ(s->node.tcp_ext.at("TCPMemoryPressures"), 0u);
    EXPECT_EQ(Child(*s).best.census->sockets, 10u);
    EXPECT_EQ(s->signal_tier[static_cast<int>(Signal::kClampedSockets)], Tier::kIter);
    ASSERT_EQ(s->probes.size(), 1u);
    EXPECT_EQ(s->events_lost, 3u);
  }
  EXPECT_EQ(w.signal_runs, 10);
  // Results stay in registration order; the held ones carry their run's time.
  ASSERT_EQ(s->collectors.size(), 4u);
  EXPECT_EQ(s->collectors[1].name, "netstat");
  EXPECT_EQ(s->collectors[3].name, "bpf_census");
  EXPECT_EQ(s->collectors[1].ran_unix_millis, first->unix_millis);
  EXPECT_EQ(s->collectors[0].ran_unix_millis, s->unix_millis);
  s = sampler.SampleOnce();  // cycle 11: ten cycles after the last run
  EXPECT_EQ(w.context_runs, 2);
  EXPECT_EQ(s->node.tcp_ext.at("TCPMemoryPressures"), 5u);
  EXPECT_EQ(s->collectors[1].ran_unix_millis, s->unix_millis);
}

// A context collector that says it collects on the privileged worker, as
// source_flags.cc's wrapper does; it records whether it ran inside a job.
class OnWorkerSource : public Source {
 public:
  OnWorkerSource(const char* name, const bool* in_job, std::vector<std::string>* ran)
      : name_(name), in_job_(in_job), ran_(ran) {}
  absl::string_view name() const override { return name_; }
  bool collects_on_worker() const override { return true; }
  absl::Status Collect(Sample&) override {
    ran_->push_back(absl::StrCat(name_, *in_job_ ? " in a job" : " alone"));
    return absl::OkStatus();
  }

 private:
  const char* name_;
  const bool* in_job_;
  std::vector<std::string>* ran_;
};

// Consecutive collectors on the worker run in one hand-off; a job that
// cannot run leaves each to its own (which reports why).
TEST(CadenceTest, CollectorsOnTheWorkerShareOneHandOff) {
  for (bool runs : {true, false}) {
    World w;
    bool in_job = false;
    int jobs = 0;
    std::vector<std::string> ran;
    std::vector<std::unique_ptr<Source>> s = Sources(&w);
    s.insert(s.begin() + 1, std::make_unique<OnWorkerSource>("kernel", &in_job, &ran));
    s.push_back(std::make_unique<OnWorkerSource>("swaps", &in_job, &ran));
    s.push_back(std::make_unique<OnWorkerSource>("sock_diag", &in_job, &ran));
    Sampler sampler(std::move(s), std::make_unique<StateTracker>(), 1.0, 10);
    sampler.SetWorkerRunner([&](const std::function<void()>& job) {
      ++jobs;
      if (!runs) return false;
      in_job = true;
      job();
      in_job = false;
      return true;
    });
    std::shared_ptr<const Snapshot> snap = sampler.SampleOnce();
    // "kernel" stands alone before netstat (its own hand-off, in its
    // wrapper); swaps and sock_diag are adjacent: one job.
    EXPECT_EQ(jobs, 1) << "runs=" << runs;
    EXPECT_EQ(w.census_runs, 1);
    const std::vector<std::string> want =
        runs ? std::vector<std::string>{"kernel alone", "swaps in a job", "sock_diag in a job"}
             : std::vector<std::string>{"kernel alone", "swaps alone", "sock_diag alone"};
    EXPECT_EQ(ran, want);
    ASSERT_EQ(snap->collectors.size(), 7u);
    EXPECT_EQ(snap->collectors[1].name, "kernel");
    EXPECT_EQ(snap->collectors[5].name, "swaps");
    EXPECT_EQ(snap->collectors[6].name, "sock_diag");
    sampler.SampleOnce();  // idle: the context collectors are held, no hand-off
    EXPECT_EQ(jobs, 1);
  }
}

TEST(CadenceTest, FirstCycleOfActivityReadsTheCensus) {
  World w;
  Sampler sampler(Sources(&w), std::make_unique<StateTracker>(), 1.0, 10);
  sampler.SampleOnce();
  sampler.SampleOnce();
  ASSERT_EQ(w.census_runs, 1);
  // Reclaim starts and sockets get clamped in the same interval: this very
  // cycle counts them.
  w.pgscan += 64;
  w.clamped = 2;
  std::shared_ptr<const Snapshot> s = sampler.SampleOnce();
  EXPECT_EQ(w.census_runs, 2);
  EXPECT_EQ(Child(*s).best.census->clamped, 2u);
  // The reclaim stops, the sockets stay clamped: the census runs every
  // cycle until it finds none, so the gauge falls back to 0 at once.
  s = sampler.SampleOnce();
  EXPECT_EQ(w.census_runs, 3);
  w.clamped = 0;
  s = sampler.SampleOnce();
  EXPECT_EQ(w.census_runs, 4);
  EXPECT_EQ(Child(*s).best.census->clamped, 0u);
  sampler.SampleOnce();  // idle again: held
  EXPECT_EQ(w.census_runs, 4);
}

TEST(CadenceTest, EveryKindOfActivityRunsTheContextCollectors) {
  World w;
  Sampler sampler(Sources(&w), std::make_unique<StateTracker>(), 1.0, 10);
  sampler.SampleOnce();
  sampler.SampleOnce();
  ASSERT_EQ(w.context_runs, 1);
  w.clamps = 1;  // a window clamp counted in a BPF map
  sampler.SampleOnce();
  EXPECT_EQ(w.context_runs, 2);
  sampler.SampleOnce();
  EXPECT_EQ(w.context_runs, 2);
  w.pressure = true;  // under socket pressure: every cycle while it lasts
  sampler.SampleOnce();
  sampler.SampleOnce();
  EXPECT_EQ(w.context_runs, 4);
  w.pressure = false;
  sampler.SampleOnce();
  EXPECT_EQ(w.context_runs, 4);
}

TEST(CadenceTest, HeldCountersStayMonotone) {
  World w;
  Sampler sampler(Sources(&w), std::make_unique<StateTracker>(), 1.0, 3);
  uint64_t last = 0;
  for (int i = 0; i < 20; ++i) {
    w.tcp_ext += 7;
    if (i % 5 == 0) w.pgscan += 1;  // now and then active
    std::shared_ptr<const Snapshot> s = sampler.SampleOnce();
    uint64_t v = s->node.tcp_ext.at("TCPMemoryPressures");
    EXPECT_GE(v, last) << "cycle " << i;
    EXPECT_LE(v, w.tcp_ext);
    last = v;
  }
  // Idle at three cycles a run, plus the active cycles.
  EXPECT_LT(w.context_runs, 20);
  EXPECT_GE(w.context_runs, 20 / 3);
}

TEST(CadenceTest, ContextEveryOneRunsEveryCollectorEveryCycle) {
  World w;
  Sampler sampler(Sources(&w), std::make_unique<StateTracker>(), 1.0);
  for (int i = 0; i < 5; ++i) sampler.SampleOnce();
  EXPECT_EQ(w.context_runs, 5);
  EXPECT_EQ(w.census_runs, 5);
}

TEST(CadenceTest, GateAloneIdleSlowActiveEveryCycle) {
  ContextGate gate(4);
  Sample idle;
  EXPECT_TRUE(gate.Due(idle));  // first
  EXPECT_FALSE(gate.Due(idle));
  EXPECT_FALSE(gate.Due(idle));
  EXPECT_FALSE(gate.Due(idle));
  EXPECT_TRUE(gate.Due(idle));  // four cycles after the last run
  EXPECT_FALSE(gate.active());
  Sample moved;
  moved.reclaim[Tier::kFentry][kCgroupId].scanned = 32;
  EXPECT_TRUE(gate.Due(moved));
  EXPECT_TRUE(gate.active());
  EXPECT_FALSE(gate.Due(moved));  // the same counters again: idle
  Sample global;
  global.node.tcp_mem_pages = 200;
  global.node.tcp_mem_limits = std::vector<uint64_t>{10, 100, 1000};
  gate.Saw(global);  // above tcp_mem[1]: sockstat every cycle
  EXPECT_TRUE(gate.Due(moved));
  gate.Saw(Sample{});
  EXPECT_FALSE(gate.Due(moved));
}


// Idle waits (docs/sampling.md, "Where nothing can move"): the sampler waits
// a context interval for the next cycle only when every signal collector
// says nothing it reads can move unseen and the node is idle; the cycle
// that ends a wait runs the context collectors.
TEST(CadenceTest, WaitsOnlyWhenEverySignalCollectorIsQuietAndTheNodeIdle) {
  World w;
  Sampler sampler(Sources(&w), std::make_unique<StateTracker>(), 1.0, 10);
  sampler.SampleOnce();
  EXPECT_FALSE(sampler.WaitsNext()) << "the first cycle counts as activity";
  for (int quiet : {0, 1}) {
    w.quiet = quiet;
    sampler.SampleOnce();
    EXPECT_FALSE(sampler.WaitsNext()) << quiet << " of 2 signal collectors quiet";
  }
  w.quiet = 2;
  sampler.SampleOnce();
  EXPECT_TRUE(sampler.WaitsNext()) << "both quiet, nothing moved";
  w.clamps = 4;  // a socket got clamped: activity
  sampler.SampleOnce();
  EXPECT_FALSE(sampler.WaitsNext()) << "activity: the next cycle one interval away";
  sampler.SampleOnce();
  EXPECT_TRUE(sampler.WaitsNext());
  w.clamped = 1;  // the context reading itself asks for the next cycle
  const int runs = w.context_runs;
  sampler.SampleOnce(/*after_wait=*/true);
  EXPECT_EQ(w.context_runs, runs + 1) << "the cycle after a wait reads the context";
  EXPECT_FALSE(sampler.WaitsNext()) << "a clamped socket in the census";
  w.clamped = 0;
  sampler.SampleOnce();
  EXPECT_EQ(w.context_runs, runs + 2) << "and every cycle while it lasts";
  EXPECT_FALSE(sampler.WaitsNext()) << "the cycle that saw the last clamped socket go was active";
  sampler.SampleOnce();
  EXPECT_TRUE(sampler.WaitsNext());

  // Without a context cadence (every collector every cycle) there is no wait.
  World every;
  every.quiet = 2;
  Sampler each(Sources(&every), std::make_unique<StateTracker>(), 1.0, 1);
  for (int i = 0; i < 3; ++i) {
    each.SampleOnce();
    EXPECT_FALSE(each.WaitsNext());
  }
}

// The thread follows it: where every signal collector is quiet, one cycle per
// context interval (here 10 x 50 ms), else one per interval; healthy throughout.
TEST(CadenceTest, TheThreadWaitsAContextIntervalWhereNothingCanMove) {
  auto cycles_in = [](int quiet, double seconds, bool* healthy) {
    World w;
    w.quiet = quiet;
    Sampler sampler(Sources(&w), std::make_unique<StateTracker>(), 0.05, 10);
    sampler.Start();
    std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
    *healthy = sampler.Healthy();
    sampler.Stop();
    return w.signal_runs;
  };
  bool healthy_quiet = false, healthy_busy = false;
  const int quiet = cycles_in(2, 1.3, &healthy_quiet);
  const int busy = cycles_in(1, 1.3, &healthy_busy);
  // Quiet: the first cycle, one more (the first counts as activity), then
  // one per 0.5 s: 4 in 1.3 s. Busy: about 26.
  EXPECT_GE(quiet, 3);
  EXPECT_LE(quiet, 6);
  EXPECT_GE(busy, 15);
  EXPECT_TRUE(healthy_quiet);
  EXPECT_TRUE(healthy_busy);
}

}  // namespace
}  // namespace sockpressure
