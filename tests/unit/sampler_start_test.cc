// The sampler's start (issue 27): the first cycle runs at once on the
// sampler thread, and until it is published the agent is alive (/healthz)
// but not ready (/readyz), however long that cycle takes.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>

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

std::unique_ptr<Sampler> SlowSampler(Gate* gate, double interval_seconds) {
  std::vector<std::unique_ptr<Source>> sources;
  sources.push_back(MakeFunctionSource("cgroupfs", [gate](Sample& s) {
    gate->Enter();
    CgroupReading root;
    root.path = "/";
    root.id = 1;
    root.parent = -1;
    s.id_index[1] = 0;
    s.cgroups.push_back(root);
    s.cgroups_complete = true;
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

}  // namespace
}  // namespace sockpressure
