// The sampler: one thread that, once per interval, runs every enabled source
// into a fresh Sample, hands it to the StateTracker and publishes the
// resulting immutable Snapshot.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "exporter/common/logging.h"
#include "exporter/common/warn_limiter.h"
#include "exporter/sampler/cadence.h"
#include "exporter/sources/source.h"
#include "exporter/state/snapshot.h"
#include "exporter/state/state_tracker.h"

namespace sockpressure {

// Thread-safe: Latest() and AddListener() may be called from any thread.
// Listeners run on the sampler thread after each publish and must be quick
// (hand work to their own thread if it can block).
// What /metrics, the JSON API and /readyz answer (with 503) until the first
// sample is published; the agent serves while it runs.
inline constexpr char kNoSampleYet[] = "no sample yet: the first sample is still running";

class Sampler {
 public:
  using Listener = std::function<void(const std::shared_ptr<const Snapshot>&)>;

  // context_every: the context collectors (cadence.h) run every cycle
  // while the node is active, else at least every this many cycles; 1 runs
  // every collector every cycle.
  Sampler(std::vector<std::unique_ptr<Source>> sources, std::unique_ptr<StateTracker> tracker,
          double interval_seconds, uint64_t context_every = 1);
  ~Sampler();

  // Appends sources after construction (call before Start()): the agent
  // builds its sampler, and serves, before the eBPF programs are loaded.
  void AddSources(std::vector<std::unique_ptr<Source>> sources);

  // Runs one cycle on the calling thread (tests, `doctor`). `after_wait`:
  // as the thread runs the cycle that ends an idle wait (every collector
  // makes its full pass).
  std::shared_ptr<const Snapshot> SampleOnce(bool after_wait = false);
  // Whether the last cycle found that nothing can move before the next
  // context interval (Sample::signal_collectors_quiet, and the node idle):
  // the thread then waits that long for the next cycle, not one interval.
  bool WaitsNext() const { return waits_next_.load(std::memory_order_relaxed); }

  // Starts the background thread. Its first cycle runs at once when no
  // snapshot exists yet: the agent serves (/healthz) while it runs.
  void Start();
  void Stop();   // stops and joins; idempotent

  std::shared_ptr<const Snapshot> Latest() const;
  // The health rule (/healthz): a snapshot was published less than three
  // intervals (three context intervals in an idle wait) plus 5 s ago, i.e.
  // the sampler thread is not stuck. Before the
  // first one, the first cycle is given kFirstSampleSeconds from
  // construction: it reads every cgroup cold and may wait for the kubelet
  // (29-44 s at 10,000 cgroups in the lab guest), and a liveness probe must
  // not restart the agent for that.
  bool Healthy() const;
  // The readiness rule (/readyz): the first complete sample is published and
  // the sampler is healthy.
  bool Ready() const;
  static constexpr double kFirstSampleSeconds = 300;
  void AddListener(Listener listener);
  // Hooks run on the sampler thread at the start of every cycle, before any
  // source is read: the cycle's peak (the new sample and snapshot beside the
  // latest) comes next, and what a hook lets go of is not held through it.
  void AddBeforeCycle(std::function<void()> hook);
  // Runs a job on the privileged worker and waits; false when the job could
  // not run there. With it, consecutive collectors that collect on the
  // worker (Source::collects_on_worker) run in one hand-off: each hand-off
  // wakes two threads, and a wake-up after a second asleep is most of what
  // an idle node's sample costs. Call before Start().
  using WorkerRunner = std::function<bool(const std::function<void()>&)>;
  void SetWorkerRunner(WorkerRunner runner);

 private:
  void Run();
  CollectorResult RunCollector(Source& source, Sample& sample);
  bool WaitCanFollow(const Sample& sample) const;
  // The context collectors of a sample into `results`, at their indices.
  void RunContext(Sample& sample, std::vector<CollectorResult>& results);
  // Wraps a new snapshot so that freeing it returns free memory to the
  // kernel when it, or the peak since the last return, held kTrimAfterDrop
  // more cgroups than the latest snapshot.
  std::shared_ptr<const Snapshot> ReleasingMemory(std::shared_ptr<const Snapshot> snap);
  static constexpr size_t kTrimAfterDrop = 1000;
  // Shared with the snapshots' deleters, which may run on any thread and
  // after the sampler is gone.
  struct Churn {
    std::mutex mu;
    size_t current = 0;  // cgroups in the latest snapshot
    size_t peak = 0;     // most cgroups in a snapshot since memory was last returned
  };
  std::shared_ptr<Churn> churn_ = std::make_shared<Churn>();

  std::vector<std::unique_ptr<Source>> sources_;
  std::unique_ptr<StateTracker> tracker_;
  double interval_seconds_;

  mutable std::mutex mu_;  // guards latest_, published_, listeners_, before_cycle_
  std::shared_ptr<const Snapshot> latest_;
  std::chrono::steady_clock::time_point published_ = std::chrono::steady_clock::now();  // construction, then each publish
  std::vector<Listener> listeners_;
  std::vector<std::function<void()>> before_cycle_;

  std::mutex cycle_mu_;  // one cycle at a time (SampleOnce vs the thread)
  // Which sources_ run every cycle and which on the context cadence, in
  // registration order; guarded by cycle_mu_ as are gate_ and held_.
  std::vector<size_t> every_cycle_, context_;
  WorkerRunner worker_runner_;
  ContextGate gate_;
  HeldContext held_;
  double previous_cycle_seconds_ = 0;  // guarded by cycle_mu_
  // Set by each cycle (under cycle_mu_), read by Run() and Healthy().
  std::atomic<bool> waits_next_{false};
  // One idle wait: the context collectors' cadence, context_every cycles.
  double wait_seconds_;
  std::atomic<uint64_t> overruns_{0};  // Run() counts, SampleOnce() reads
  // Collector failures: the first logged, then one summary a minute, and
  // the recovery (guarded by cycle_mu_).
  WarnLimiter warnings_{60, [](const std::string& line) { SP_LOG_WARN(line); }};
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace sockpressure
