// IdentityResolver for Kubernetes nodes: namespace/pod/container labels for
// pod cgroups, from the cgroup path (pod UID, container ID) and the kubelet's
// pod list (names).
//
// Threads: Resolve() runs on the sampler thread and never waits for the
// network; it reads the last published pod list and, when a cgroup names a
// pod or container the list does not know yet, asks a background thread for
// a new list. That thread is the only one that fetches, so at most one
// request is ever in flight, and it spaces attempts (a minimum interval
// between lists, exponential backoff after failures).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "exporter/identity/cgroup_path.h"
#include "exporter/identity/pod_index.h"
#include "exporter/state/identity.h"

namespace sockpressure {

// Returns one PodList JSON document. Called only on the background thread.
using PodListFetcher = std::function<absl::StatusOr<std::string>()>;

struct KubeIdentityOptions {
  // Shortest gap between two successful lists, however many new cgroups ask.
  absl::Duration min_refresh_interval = absl::Seconds(2);
  // The kubelet learns a new container's ID from its PLEG relist (1 s) after
  // the runtime created the cgroup; a list fetched less than this after a
  // cgroup appeared may legitimately lack it, so it is asked for again.
  // After that the container is taken for a sandbox (pause) and folded into
  // its pod, and an unknown pod UID for a pod of no concern to this kubelet.
  absl::Duration settle = absl::Seconds(5);
  // Failed fetches are retried while cgroups still need names: after the
  // n-th consecutive failure wait initial_backoff * 2^(n-1) for the first
  // max_retries failures, then max_backoff between attempts.
  absl::Duration initial_backoff = absl::Seconds(1);
  int max_retries = 5;
  absl::Duration max_backoff = absl::Seconds(60);
  // Cache entries of cgroups not asked about for this long are dropped, and
  // with them pods that are no longer in the list.
  absl::Duration forget_after = absl::Minutes(2);
  // Hard cap on cached cgroup paths (the tracker's --cgroup.max bounds the
  // working set; this only guards against path churn within forget_after).
  size_t max_cached_paths = 50000;
};

class KubeIdentityResolver : public IdentityResolver {
 public:
  // `source` describes where lists come from, for log lines.
  KubeIdentityResolver(PodListFetcher fetch, std::string source, KubeIdentityOptions options = {});
  ~KubeIdentityResolver() override;  // stops and joins the background thread

  // Stops the background thread and joins it, unless a fetch is still in
  // progress after `grace` (a kubelet that trickles its answer keeps each
  // recv() short, so the client's timeouts do not end it): then returns
  // false and leaves the thread running, for a caller that is about to end
  // the process anyway.
  bool StopWithin(absl::Duration grace);

  // Starts the background thread and asks for a first list right away, so
  // that pods present at start have names in the first samples.
  void Start();
  // Waits until the first fetch attempt has finished (success or failure).
  // Returns false on timeout. For start-up and tests; never on the sampler.
  bool WaitForFirstAttempt(absl::Duration timeout);

  LabelPairs Resolve(const std::string& path) override;
  // The published list's generation; while a resolved path waits for its
  // pod, asks for a new list (rate-limited by the fetcher) as Resolve would.
  uint64_t Version() override;

  // Counters for tests and debugging (thread-safe).
  struct Stats {
    uint64_t attempts = 0, successes = 0, failures = 0;
    size_t cached_paths = 0, cached_pods = 0;  // sampler-side; read only from the sampler thread
  };
  Stats stats();

 private:
  using Clock = std::chrono::steady_clock;

  struct PathEntry {
    std::optional<CgroupPodRef> ref;
    Clock::time_point first_seen, last_used;
    uint64_t version = 0;  // pods_version_ the labels were computed for
    bool wants_refresh = false;
    LabelPairs labels;
  };
  struct KnownPod {
    PodInfo info;
    bool listed = false;  // in the latest list
  };
  struct Published {
    uint64_t generation = 0;
    Clock::time_point fetch_started;
    std::shared_ptr<const PodIndex> pods;
  };

  void Run();
  void RequestRefresh();
  void Adopt(const Published& list, Clock::time_point now);
  void Sweep(Clock::time_point now);
  void Compute(PathEntry* e, Clock::time_point now);

  PodListFetcher fetch_;
  std::string source_;
  KubeIdentityOptions options_;

  // Shared between the sampler and the background thread.
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool fetching_ = false;  // a fetch is in progress (mu_ released around it)
  bool wanted_ = false;
  Published published_;
  uint64_t attempts_ = 0, successes_ = 0, failures_ = 0;
  std::thread thread_;

  // Sampler thread only.
  uint64_t adopted_generation_ = 0;
  Clock::time_point list_fetch_started_{};  // of the adopted list
  bool have_list_ = false;
  bool pending_ = false;  // a path resolved since the last list wants a newer one
  uint64_t pods_version_ = 1;
  std::unordered_map<std::string, KnownPod> pods_;
  std::unordered_map<std::string, PathEntry> paths_;
  Clock::time_point next_sweep_{};
};

}  // namespace sockpressure
