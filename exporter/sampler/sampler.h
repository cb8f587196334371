// The sampler: one thread that, once per interval, runs every enabled source
// into a fresh Sample, hands it to the StateTracker and publishes the
// resulting immutable Snapshot.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "exporter/sources/source.h"
#include "exporter/state/snapshot.h"
#include "exporter/state/state_tracker.h"

namespace sockpressure {

// Thread-safe: Latest() and AddListener() may be called from any thread.
// Listeners run on the sampler thread after each publish and must be quick
// (hand work to their own thread if it can block).
class Sampler {
 public:
  using Listener = std::function<void(const std::shared_ptr<const Snapshot>&)>;

  Sampler(std::vector<std::unique_ptr<Source>> sources, std::unique_ptr<StateTracker> tracker,
          double interval_seconds);
  ~Sampler();

  // Runs one cycle on the calling thread (tests, `doctor`, and the first
  // sample before the HTTP server starts).
  std::shared_ptr<const Snapshot> SampleOnce();

  void Start();  // starts the background thread
  void Stop();   // stops and joins; idempotent

  std::shared_ptr<const Snapshot> Latest() const;
  void AddListener(Listener listener);

 private:
  void Run();

  std::vector<std::unique_ptr<Source>> sources_;
  std::unique_ptr<StateTracker> tracker_;
  double interval_seconds_;

  mutable std::mutex mu_;  // guards latest_, listeners_
  std::shared_ptr<const Snapshot> latest_;
  std::vector<Listener> listeners_;

  std::mutex cycle_mu_;  // one cycle at a time (SampleOnce vs the thread)
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace sockpressure
