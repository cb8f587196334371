#include "exporter/identity/kube_identity.h"

#include <algorithm>
#include <unordered_set>
#include <utility>

#include "exporter/common/logging.h"
#include "exporter/common/stop_thread.h"
#include "exporter/common/syscall_filter.h"
#include "exporter/common/thread_privilege.h"

namespace sockpressure {
namespace {

std::chrono::steady_clock::duration ToChrono(absl::Duration d) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(absl::ToChronoNanoseconds(d));
}

}  // namespace

KubeIdentityResolver::KubeIdentityResolver(PodListFetcher fetch, std::string source, KubeIdentityOptions options)
    : fetch_(std::move(fetch)), source_(std::move(source)), options_(options) {}

KubeIdentityResolver::~KubeIdentityResolver() {
  // A fetch in progress finishes first; the client's timeouts bound that.
  StopAndJoin(mu_, cv_, stop_, thread_);
}

bool KubeIdentityResolver::StopWithin(absl::Duration grace) {
  std::unique_lock<std::mutex> lk(mu_);
  stop_ = true;
  cv_.notify_all();
  if (!cv_.wait_for(lk, ToChrono(grace), [this] { return !fetching_; })) return false;
  lk.unlock();
  if (thread_.joinable()) thread_.join();
  return true;
}

void KubeIdentityResolver::Start() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    wanted_ = true;
  }
  thread_ = std::thread([this] { Run(); });
}

bool KubeIdentityResolver::WaitForFirstAttempt(absl::Duration timeout) {
  std::unique_lock<std::mutex> lk(mu_);
  return cv_.wait_for(lk, absl::ToChronoNanoseconds(timeout), [this] { return successes_ + failures_ > 0; });
}

KubeIdentityResolver::Stats KubeIdentityResolver::stats() {
  Stats s;
  std::lock_guard<std::mutex> lk(mu_);
  s.attempts = attempts_;
  s.successes = successes_;
  s.failures = failures_;
  s.cached_paths = paths_.size();
  s.cached_pods = pods_.size();
  return s;
}

void KubeIdentityResolver::RequestRefresh() {
  std::lock_guard<std::mutex> lk(mu_);
  // Only the first request wakes the fetcher: every sample re-asks for
  // each unresolved cgroup, and waking it each time would be a futex storm.
  if (wanted_) return;
  wanted_ = true;
  cv_.notify_all();
}

void KubeIdentityResolver::Run() {
  // Parses the kubelet's answers: holds no capability (thread_privilege.h).
  EnterUnprivilegedThread("sp-kubelet");
  ConfineThisThread(SyscallProfile::kClient);
  std::unique_lock<std::mutex> lk(mu_);
  Clock::time_point next_allowed = Clock::now();
  int consecutive_failures = 0;
  bool ever_succeeded = false;
  while (true) {
    cv_.wait(lk, [this] { return stop_ || wanted_; });
    if (stop_) return;
    // Requests that arrive during the wait are served by this one fetch.
    if (cv_.wait_until(lk, next_allowed, [this] { return stop_; })) return;
    wanted_ = false;
    ++attempts_;
    const Clock::time_point started = Clock::now();
    fetching_ = true;
    lk.unlock();
    absl::StatusOr<std::string> body = fetch_();
    absl::StatusOr<PodIndex> index = body.ok() ? ParsePodList(*body) : absl::StatusOr<PodIndex>(body.status());
    lk.lock();
    fetching_ = false;
    if (index.ok()) {
      if (!ever_succeeded || consecutive_failures > 0) {
        SP_LOG_INFO("kubernetes identity: listed ", index->size(), " pods from ", source_,
                    consecutive_failures > 0 ? " (recovered)" : "",
                    "; pod cgroups get namespace, pod and container labels");
      }
      ever_succeeded = true;
      consecutive_failures = 0;
      ++successes_;
      published_.generation++;
      published_.fetch_started = started;
      published_.pods = std::make_shared<const PodIndex>(std::move(*index));
      next_allowed = started + ToChrono(options_.min_refresh_interval);
    } else {
      ++failures_;
      ++consecutive_failures;
      absl::Duration delay = options_.max_backoff;
      if (consecutive_failures <= options_.max_retries) {
        delay = std::min(options_.max_backoff, options_.initial_backoff * (int64_t{1} << (consecutive_failures - 1)));
      }
      next_allowed = Clock::now() + ToChrono(delay);
      // Once per outage, not per attempt: the reason does not change from
      // one retry to the next, and a down kubelet must not flood the log.
      if (consecutive_failures == 1) {
        SP_LOG_WARN("kubernetes identity: cannot list pods from ", source_, ": ", index.status().message(),
                    "; pod cgroups keep only the cgroup label until it answers (retrying with backoff)");
      } else {
        SP_LOG_DEBUG("kubernetes identity: attempt ", consecutive_failures, " failed: ", index.status().message());
      }
    }
    cv_.notify_all();  // WaitForFirstAttempt
  }
}

void KubeIdentityResolver::Adopt(const Published& list, Clock::time_point now) {
  adopted_generation_ = list.generation;
  list_fetch_started_ = list.fetch_started;
  have_list_ = true;
  for (auto& [uid, pod] : pods_) pod.listed = false;
  for (const auto& [uid, info] : *list.pods) {
    KnownPod& pod = pods_[uid];
    pod.info = info;
    pod.listed = true;
  }
  ++pods_version_;
  pending_ = false;  // every path is computed again against this list
  Sweep(now);
}

uint64_t KubeIdentityResolver::Version() {
  if (pending_) RequestRefresh();
  std::lock_guard<std::mutex> lk(mu_);
  return published_.generation;
}

void KubeIdentityResolver::Sweep(Clock::time_point now) {
  next_sweep_ = now + ToChrono(options_.forget_after / 4);
  const Clock::time_point cutoff = now - ToChrono(options_.forget_after);
  std::unordered_set<std::string> referenced;
  for (auto it = paths_.begin(); it != paths_.end();) {
    if (it->second.last_used < cutoff) {
      it = paths_.erase(it);
      continue;
    }
    if (it->second.ref) referenced.insert(it->second.ref->pod_uid);
    ++it;
  }
  // A pod that left the list keeps its names while its cgroups are still
  // sampled (termination can outlast the pod object); after that it goes,
  // so short-lived pods leave nothing behind.
  for (auto it = pods_.begin(); it != pods_.end();) {
    if (!it->second.listed && !referenced.count(it->first)) {
      it = pods_.erase(it);
    } else {
      ++it;
    }
  }
}

void KubeIdentityResolver::Compute(PathEntry* e, Clock::time_point now) {
  (void)now;
  e->version = pods_version_;
  e->wants_refresh = false;
  e->labels.clear();
  // A list that began well after the cgroup was first seen had every chance
  // to include it; anything it lacks will not show up by asking again.
  const bool settled = have_list_ && list_fetch_started_ >= e->first_seen + ToChrono(options_.settle);
  auto pod = pods_.find(e->ref->pod_uid);
  if (pod == pods_.end()) {
    e->wants_refresh = !settled;
    return;
  }
  const PodInfo& info = pod->second.info;
  e->labels = {{"namespace", info.namespace_name}, {"pod", info.name}};
  // conmon (kMonitor) is CRI-O's per-container supervisor, not the
  // workload: like the sandbox, it is charged to the pod.
  if (e->ref->role != ContainerRole::kContainer) return;
  auto c = info.containers.find(e->ref->container_id);
  if (c != info.containers.end()) {
    e->labels.emplace_back("container", c->second);
  } else if (pod->second.listed && !settled) {
    // A container started after the list, or the sandbox (pause) container,
    // which the kubelet API never lists; only time tells them apart.
    e->wants_refresh = true;
  }
}

LabelPairs KubeIdentityResolver::Resolve(const std::string& path) {
  const Clock::time_point now = Clock::now();
  Published fresh;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (published_.generation != adopted_generation_) fresh = published_;
  }
  if (fresh.pods) Adopt(fresh, now);
  if (now >= next_sweep_) Sweep(now);

  auto it = paths_.find(path);
  if (it == paths_.end()) {
    PathEntry e;
    e.ref = ParseCgroupPath(path);
    e.first_seen = now;
    e.last_used = now;
    if (paths_.size() >= options_.max_cached_paths) {
      // Over the cap: answer without caching (and without asking for lists,
      // which a churn of this size would turn into a request storm).
      if (e.ref) Compute(&e, now);
      return e.labels;
    }
    it = paths_.emplace(path, std::move(e)).first;
  }
  PathEntry& e = it->second;
  e.last_used = now;
  if (!e.ref) return {};
  if (e.version != pods_version_) Compute(&e, now);
  if (e.wants_refresh) {
    pending_ = true;
    RequestRefresh();
  }
  return e.labels;
}

}  // namespace sockpressure
