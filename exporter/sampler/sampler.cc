#include "exporter/sampler/sampler.h"

#include <algorithm>
#include <chrono>
#include <ctime>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "exporter/common/logging.h"
#include "exporter/common/stop_thread.h"
#include "exporter/common/thread_privilege.h"
#include "exporter/common/memory.h"

namespace sockpressure {
namespace {

double Now(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace

Sampler::Sampler(std::vector<std::unique_ptr<Source>> sources, std::unique_ptr<StateTracker> tracker,
                 double interval_seconds, uint64_t context_every)
    : sources_(std::move(sources)), tracker_(std::move(tracker)), interval_seconds_(interval_seconds),
      gate_(context_every), wait_seconds_(interval_seconds * static_cast<double>(std::max<uint64_t>(1, context_every))) {
  std::vector<std::unique_ptr<Source>> given = std::move(sources_);
  sources_.clear();
  AddSources(std::move(given));
}

void Sampler::AddSources(std::vector<std::unique_ptr<Source>> sources) {
  std::lock_guard<std::mutex> cycle(cycle_mu_);
  for (std::unique_ptr<Source>& s : sources) {
    (CadenceOf(s->name()) == CollectorCadence::kContext ? context_ : every_cycle_).push_back(sources_.size());
    sources_.push_back(std::move(s));
  }
}

Sampler::~Sampler() { Stop(); }

std::shared_ptr<const Snapshot> Sampler::ReleasingMemory(std::shared_ptr<const Snapshot> snap) {
  // After thousands of cgroups are gone, their states and snapshots are
  // freed, but glibc keeps the free pages (measured: 20,000 cgroups created
  // and deleted left 260 MB). The last large snapshot is freed by whoever
  // holds it last: the next publish, a scrape still rendering it, the
  // /metrics cache. Trimming when that happens, and not at a fixed sample
  // after the drop, returns the memory whatever the timing of the scrapes.
  // The peak catches a decline spread over many samples.
  {
    std::lock_guard<std::mutex> lock(churn_->mu);
    churn_->current = snap->cgroups.size();
    churn_->peak = std::max(churn_->peak, churn_->current);
  }
  struct Deleter {
    std::shared_ptr<const Snapshot> snap;
    std::shared_ptr<Churn> churn;
    void operator()(const Snapshot*) {
      size_t n = snap->cgroups.size();
      snap.reset();
      bool trim;
      {
        std::lock_guard<std::mutex> lock(churn->mu);
        trim = std::max(n, churn->peak) >= churn->current + kTrimAfterDrop;
        if (trim) churn->peak = churn->current;
      }
      if (trim) ReturnFreeMemory();
    }
  };
  const Snapshot* raw = snap.get();
  return std::shared_ptr<const Snapshot>(raw, Deleter{std::move(snap), churn_});
}

std::shared_ptr<const Snapshot> Sampler::SampleOnce(bool after_wait) {
  std::lock_guard<std::mutex> cycle(cycle_mu_);
  const double wall_start = Now(CLOCK_MONOTONIC);
  std::vector<std::function<void()>> before;
  {
    std::lock_guard<std::mutex> lock(mu_);
    before = before_cycle_;
  }
  for (const std::function<void()>& hook : before) hook();
  double cpu_start = Now(CLOCK_THREAD_CPUTIME_ID);
  Sample sample;
  sample.monotonic_seconds = Now(CLOCK_MONOTONIC);
  sample.unix_millis = static_cast<int64_t>(Now(CLOCK_REALTIME) * 1000);
  sample.previous_cycle_seconds = previous_cycle_seconds_;
  sample.overruns_total = overruns_.load(std::memory_order_relaxed);
  sample.after_wait = after_wait;
  // One result per source, at its registration index.
  std::vector<CollectorResult> results(sources_.size());
  // Signal collectors first (registration order: bpf, whose vmpressure tier
  // tells the cgroupfs walk where reclaim went, then cgroupfs, whose cgroups
  // the others resolve ids against), then the context
  // collectors, which see the signal collectors' output through the gate.
  for (size_t i : every_cycle_) results[i] = RunCollector(*sources_[i], sample);
  if (!context_.empty()) {
    if (gate_.Due(sample) || held_.empty()) {
      held_.Begin(sample);
      RunContext(sample, results);
      std::vector<CollectorResult> context;
      context.reserve(context_.size());
      for (size_t i : context_) context.push_back(results[i]);
      held_.Capture(sample, std::move(context));
    } else {
      std::vector<CollectorResult> context = held_.Replay(sample);
      for (size_t k = 0; k < context_.size() && k < context.size(); ++k) results[context_[k]] = std::move(context[k]);
    }
    gate_.Saw(sample);
  }
  const bool waits = WaitCanFollow(sample);
  waits_next_.store(waits, std::memory_order_relaxed);
  sample.next_sample_seconds = waits ? wait_seconds_ : interval_seconds_;
  double cpu = Now(CLOCK_THREAD_CPUTIME_ID) - cpu_start + sample.worker_cpu_seconds;
  std::shared_ptr<const Snapshot> snap =
      ReleasingMemory(tracker_->Update(std::move(sample), std::move(results), cpu));
  std::vector<Listener> listeners;
  // Released outside the lock: freeing a large snapshot may trim the heap.
  std::shared_ptr<const Snapshot> previous;
  {
    std::lock_guard<std::mutex> lock(mu_);
    previous = std::move(latest_);
    latest_ = snap;
    published_ = std::chrono::steady_clock::now();
    listeners = listeners_;
  }
  for (const Listener& l : listeners) l(snap);
  previous_cycle_seconds_ = Now(CLOCK_MONOTONIC) - wall_start;
  return snap;
}

bool Sampler::WaitCanFollow(const Sample& sample) const {
  // Every signal collector must say that its signals cannot move unseen
  // until the next context interval; the context collectors must have a
  // gate (they run at least once per wait) and the node must be idle.
  return !every_cycle_.empty() && sample.signal_collectors_quiet >= every_cycle_.size() &&
         !context_.empty() && gate_.context_every() > 1 && gate_.idle();
}

void Sampler::RunContext(Sample& sample, std::vector<CollectorResult>& results) {
  for (size_t k = 0; k < context_.size();) {
    size_t end = k + 1;
    if (worker_runner_ && sources_[context_[k]]->collects_on_worker()) {
      while (end < context_.size() && sources_[context_[end]]->collects_on_worker()) ++end;
    }
    auto run = [&] {
      for (size_t j = k; j < end; ++j) results[context_[j]] = RunCollector(*sources_[context_[j]], sample);
    };
    // Several on the worker: one job runs them all (each then runs inline
    // there); a job that could not run leaves them to their own hand-offs,
    // which report why.
    if (end - k == 1 || !worker_runner_(run)) run();
    k = end;
  }
}

void Sampler::SetWorkerRunner(WorkerRunner runner) {
  std::lock_guard<std::mutex> cycle(cycle_mu_);
  worker_runner_ = std::move(runner);
}

CollectorResult Sampler::RunCollector(Source& source, Sample& sample) {
  double t0 = Now(CLOCK_MONOTONIC);
  absl::Status status = source.Collect(sample);
  CollectorResult r;
  r.name = std::string(source.name());
  r.duration_seconds = Now(CLOCK_MONOTONIC) - t0;
  r.success = status.ok();
  r.ran_unix_millis = sample.unix_millis;
  if (!status.ok()) {
    r.error = std::string(status.message());
    warnings_.Warn(absl::StrCat("collector ", r.name, " failed"), r.error, t0);
  } else {
    warnings_.Clear(absl::StrCat("collector ", r.name, " failed"), t0);
  }
  return r;
}

void Sampler::Start() {
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    stopping_ = false;
  }
  thread_ = std::thread([this] { Run(); });
}

void Sampler::Stop() { StopAndJoin(stop_mu_, stop_cv_, stopping_, thread_); }

void Sampler::Run() {
  // The sampler reads what the kernel and other processes wrote; the
  // collectors that need a capability collect on the privileged worker.
  EnterUnprivilegedThread("sp-sample");
  // The first cycle at once: until it is published the agent answers only
  // /healthz (alive) and /readyz (not ready).
  if (!Latest()) SampleOnce();
  auto next = std::chrono::steady_clock::now();
  auto as_duration = [](double seconds) {
    return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
  };
  const auto interval = as_duration(interval_seconds_), wait = as_duration(wait_seconds_);
  bool waited = false;
  for (;;) {
    // Where nothing can move unseen (WaitCanFollow), the next cycle is one
    // context interval away: the wake-up itself is most of an idle cycle.
    const bool waits = WaitsNext();
    if (waits != waited) {
      waited = waits;
      if (waits) {
        SP_LOG_INFO("sampling every ", wait_seconds_, " s: no signal here can move unseen between samples "
                    "(docs/sampling.md, \"Where nothing can move\")");
      } else {
        SP_LOG_INFO("sampling every ", interval_seconds_, " s again");
      }
    }
    const auto period = waits ? wait : interval;
    next += period;
    {
      std::unique_lock<std::mutex> lock(stop_mu_);
      if (stop_cv_.wait_until(lock, next, [this] { return stopping_; })) return;
    }
    SampleOnce(waits);
    // A cycle that ran past the next tick: the next cycle starts as soon as
    // this one ends (waiting for the tick after would lose a sample to every
    // overrun, however small), and the ticks missed are not caught up with
    // a burst of back-to-back cycles.
    auto now = std::chrono::steady_clock::now();
    if (now > next + period) {
      next = now - period;
      overruns_.fetch_add(1, std::memory_order_relaxed);
    }
  }
}

std::shared_ptr<const Snapshot> Sampler::Latest() const {
  std::lock_guard<std::mutex> lock(mu_);
  return latest_;
}

void Sampler::AddBeforeCycle(std::function<void()> hook) {
  std::lock_guard<std::mutex> lock(mu_);
  before_cycle_.push_back(std::move(hook));
}

void Sampler::AddListener(Listener listener) {
  std::lock_guard<std::mutex> lock(mu_);
  listeners_.push_back(std::move(listener));
}

bool Sampler::Healthy() const {
  std::lock_guard<std::mutex> lock(mu_);
  const double age = std::chrono::duration<double>(std::chrono::steady_clock::now() - published_).count();
  // From the publish, not the sample's start: a first sample that took 30 s
  // is fresh when it is published.
  const double period = WaitsNext() ? wait_seconds_ : interval_seconds_;
  return age < (latest_ ? 3 * period + 5 : kFirstSampleSeconds);
}

bool Sampler::Ready() const {
  std::shared_ptr<const Snapshot> s = Latest();
  return s != nullptr && Healthy();
}

}  // namespace sockpressure
