#include "exporter/sampler/sampler.h"

#include <chrono>
#include <ctime>

#include "exporter/common/logging.h"

namespace sockpressure {
namespace {

double Now(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

}  // namespace

Sampler::Sampler(std::vector<std::unique_ptr<Source>> sources, std::unique_ptr<StateTracker> tracker,
                 double interval_seconds)
    : sources_(std::move(sources)), tracker_(std::move(tracker)), interval_seconds_(interval_seconds) {}

Sampler::~Sampler() { Stop(); }

std::shared_ptr<const Snapshot> Sampler::SampleOnce() {
  std::lock_guard<std::mutex> cycle(cycle_mu_);
  double cpu_start = Now(CLOCK_THREAD_CPUTIME_ID);
  Sample sample;
  sample.monotonic_seconds = Now(CLOCK_MONOTONIC);
  sample.unix_millis = static_cast<int64_t>(Now(CLOCK_REALTIME) * 1000);
  std::vector<CollectorResult> results;
  results.reserve(sources_.size());
  for (auto& source : sources_) {
    double t0 = Now(CLOCK_MONOTONIC);
    absl::Status status = source->Collect(sample);
    CollectorResult r;
    r.name = std::string(source->name());
    r.duration_seconds = Now(CLOCK_MONOTONIC) - t0;
    r.success = status.ok();
    if (!status.ok()) {
      r.error = std::string(status.message());
      SP_LOG_WARN("collector ", r.name, " failed: ", r.error);
    }
    results.push_back(std::move(r));
  }
  double cpu = Now(CLOCK_THREAD_CPUTIME_ID) - cpu_start;
  std::shared_ptr<const Snapshot> snap = tracker_->Update(std::move(sample), std::move(results), cpu);
  std::vector<Listener> listeners;
  {
    std::lock_guard<std::mutex> lock(mu_);
    latest_ = snap;
    listeners = listeners_;
  }
  for (const Listener& l : listeners) l(snap);
  return snap;
}

void Sampler::Start() {
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    stopping_ = false;
  }
  thread_ = std::thread([this] { Run(); });
}

void Sampler::Stop() {
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Sampler::Run() {
  auto next = std::chrono::steady_clock::now();
  const auto period = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(interval_seconds_));
  for (;;) {
    next += period;
    {
      std::unique_lock<std::mutex> lock(stop_mu_);
      if (stop_cv_.wait_until(lock, next, [this] { return stopping_; })) return;
    }
    SampleOnce();
    // A cycle longer than the interval must not make the sampler try to
    // catch up with a burst of back-to-back cycles.
    auto now = std::chrono::steady_clock::now();
    if (now > next + period) next = now;
  }
}

std::shared_ptr<const Snapshot> Sampler::Latest() const {
  std::lock_guard<std::mutex> lock(mu_);
  return latest_;
}

void Sampler::AddListener(Listener listener) {
  std::lock_guard<std::mutex> lock(mu_);
  listeners_.push_back(std::move(listener));
}

}  // namespace sockpressure
