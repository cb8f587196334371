// The sampler's start (issue 27): the first cycle runs at once on the
// sampler thread, and until it is published the agent is alive (/healthz)
// but not ready (/readyz), however long that cycle takes.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "exporter/sampler/sampler.h"
#include "exporter/sources/source.h"

namespace sockpressure {
namespace {

// A collector that holds its first run until the test lets it go, as a
// first walk of a big tree does.
struct Gate {
  std::mutex mu;
  std::condition_variable cv;
  bool entered = false, open = false;

  void Enter() {
    std::unique_lock<std::mutex> lock(mu);
    entered = true;
    cv.notify_all();
    cv.wait(lock, [this] { return open; });
  }
  bool WaitEntered(std::chrono::seconds timeout) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, timeout, [this] { return entered; });
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu);
    open = true;
    cv.notify_all();
  }
};

// A complete sample of one cgroup, the root.
void OnlyTheRoot(Sample& s) {
  CgroupReading root;
  root.path = "/";
  root.id = 1;
  root.parent = -1;
  s.id_index[1] = 0;
  s.cgroups.push_back(root);
  s.cgroups_complete = true;
}

std::unique_ptr<Sampler> SlowSampler(Gate* gate, double interval_seconds) {
  std::vector<std::unique_ptr<Source>> sources;
  sources.push_back(MakeFunctionSource("cgroupfs", [gate](Sample& s) {
    gate->Enter();
    OnlyTheRoot(s);
    return absl::OkStatus();
  }));
  return std::make_unique<Sampler>(std::move(sources), std::make_unique<StateTracker>(), interval_seconds);
}

bool WaitFor(const std::function<bool()>& done, std::chrono::seconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

TEST(SamplerStartTest, FirstCycleRunsAtOnceAndReadinessWaitsForIt) {
  Gate gate;
  // An interval far longer than the test: a first cycle that waited for
  // it would never be seen.
  std::unique_ptr<Sampler> sampler = SlowSampler(&gate, 600);
  EXPECT_TRUE(sampler->Healthy()) << "alive before the first sample";
  EXPECT_FALSE(sampler->Ready());
  sampler->Start();
  ASSERT_TRUE(gate.WaitEntered(std::chrono::seconds(10))) << "the first cycle starts at once";
  EXPECT_TRUE(sampler->Healthy()) << "alive during a slow first sample";
  EXPECT_FALSE(sampler->Ready()) << "not ready before the first complete sample";
  EXPECT_EQ(sampler->Latest(), nullptr);
  gate.Open();
  EXPECT_TRUE(WaitFor([&] { return sampler->Ready(); }, std::chrono::seconds(10)));
  EXPECT_TRUE(sampler->Healthy());
  ASSERT_NE(sampler->Latest(), nullptr);
  EXPECT_EQ(sampler->Latest()->sequence, 1u);
  sampler->Stop();
}

TEST(SamplerStartTest, StartAfterAFirstSampleWaitsAnInterval) {
  // doctor and tests sample on their own thread first: the thread then
  // keeps the cadence and does not sample twice in a row.
  Gate gate;
  gate.Open();
  std::unique_ptr<Sampler> sampler = SlowSampler(&gate, 600);
  sampler->SampleOnce();
  EXPECT_TRUE(sampler->Ready());
  sampler->Start();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(sampler->Latest()->sequence, 1u);
  sampler->Stop();
}

// A cycle that runs past the next tick (a context run, a busy node) must not
// cost a whole interval more: the next cycle starts as soon as it ends, and
// the sampler counts the late start. Before, it waited a full interval after
// the long cycle, so one cycle of 1.2 s at a 1 s interval lost a sample.
TEST(SamplerStartTest, ACycleLongerThanTheIntervalIsFollowedAtOnce) {
  std::mutex mu;
  std::vector<std::chrono::steady_clock::time_point> starts, ends;
  std::vector<std::unique_ptr<Source>> sources;
  sources.push_back(MakeFunctionSource("cgroupfs", [&](Sample& s) {
    size_t cycle;
    {
      std::lock_guard<std::mutex> lock(mu);
      starts.push_back(std::chrono::steady_clock::now());
      cycle = starts.size();
    }
    // The second cycle takes longer than the interval.
    if (cycle == 2) std::this_thread::sleep_for(std::chrono::milliseconds(1200));
    OnlyTheRoot(s);
    std::lock_guard<std::mutex> lock(mu);
    ends.push_back(std::chrono::steady_clock::now());
    return absl::OkStatus();
  }));
  Sampler sampler(std::move(sources), std::make_unique<StateTracker>(), 1.0);
  sampler.Start();
  ASSERT_TRUE(WaitFor([&] { return sampler.Latest() && sampler.Latest()->sequence >= 3; }, std::chrono::seconds(20)));
  std::shared_ptr<const Snapshot> third = sampler.Latest();
  sampler.Stop();
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_GE(starts.size(), 3u);
  const double gap = std::chrono::duration<double>(starts[2] - ends[1]).count();
  // At once: well under the interval (half of it leaves room for a loaded host).
  EXPECT_LT(gap, 0.5) << "the cycle after the long one waited " << gap << " s";
  EXPECT_EQ(third->sample_overruns_total, 1u) << "the late start is counted";
  EXPECT_GE(third->sample_duration_seconds, 1.1) << "the long cycle's wall time is exported with the next sample";
}

}  // namespace
}  // namespace sockpressure
