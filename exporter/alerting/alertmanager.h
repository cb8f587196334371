// Direct alert push: the agent posts SockPressureTCPThrottled to every
// --alertmanager.url (Alertmanager v2 API, POST /api/v2/alerts) as soon as an
// episode has been throttled for --alertmanager.min-pressure-seconds, and
// resolves it (endsAt) when the episode ends. Prometheus' rule-based alert
// still works; with the same labels Alertmanager sees one alert.
//
// Delivery is state-based, not event-based: the pusher holds the current set
// of alerts and, per Alertmanager, which version of each one it has acked.
// Anything not acked is resent with exponential backoff until it is, and
// firing alerts are refreshed every --alertmanager.resend-interval (their
// endsAt lies a few intervals ahead, so a dead agent's alerts expire). An
// Alertmanager that restarts (and forgets its alerts) gets the current state
// again on the next resend; nothing depends on a request having been seen.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "exporter/alerting/episodes.h"
#include "exporter/common/metric_writer.h"

namespace sockpressure {

struct AlertmanagerOptions {
  std::vector<std::string> urls;     // --alertmanager.url (repeatable)
  double min_pressure_seconds = 10;  // episode throttled seconds before it alerts
  double resend_seconds = 30;        // refresh of firing alerts
  double timeout_seconds = 10;       // the whole request (alertmanager_client.h)
  double max_backoff_seconds = 30;   // retry backoff cap (starts at 0.5 s)
  size_t max_alerts = 1000;          // bounded state: oldest resolved dropped first, then new ones refused
  std::string instance;              // `instance` label ("" = none)
  LabelPairs extra_labels;           // --alertmanager.extra-label=NAME=VALUE
  std::string external_url;          // base of generatorURL (the agent's own URL)
  std::string alertname = "SockPressureTCPThrottled";
  std::string severity = "warning";
  // An episode throttled this long also fires SockPressureTCPThrottledCritical
  // (severity critical), as the rule does for sustained throttling; 0 = never.
  double critical_min_pressure_seconds = 300;
  // https:// URLs: the CA bundle that signed Alertmanager's certificate
  // (--alertmanager.ca-file; empty = the system's roots), or no
  // verification at all (--alertmanager.insecure-skip-verify).
  std::string ca_file;
  bool insecure_skip_verify = false;
  // HTTP basic auth (Alertmanager's --web.config.file basic_auth_users); the
  // password is read from a file so it never shows in `ps`.
  std::string basic_auth_username, basic_auth_password_file;
  std::string runbook_url =
      "https://github.com/sockpressure/sockpressure/blob/main/alerts/runbooks/tcp-throttled.md#sockpressuretcpthrottled";
};

// The default `instance` label of pushed alerts: the node name when known
// (NODE_NAME from the DaemonSet's downward API, what the ServiceMonitor's
// relabeling makes the scraped instance), else <hostname>:<port>, so the
// pushed and rule-based alerts deduplicate in Alertmanager.
std::string DefaultAlertInstance(absl::string_view node_name, absl::string_view host_port);

// Parses "NAME=VALUE" list entries (--alertmanager.extra-label; alerting_flags.cc).
absl::StatusOr<LabelPairs> ParseExtraLabels(const std::vector<std::string>& entries);

// Thread-safe. Update() is called on the sampler thread and only touches
// memory; all HTTP happens on the pusher's threads, one per Alertmanager.
class AlertmanagerPusher {
 public:
  static absl::StatusOr<std::unique_ptr<AlertmanagerPusher>> Create(AlertmanagerOptions options);
  ~AlertmanagerPusher();

  void Start();
  void Stop();  // joins; idempotent

  // Open episodes and those that just closed (EpisodeTracker::OpenAndJustClosed).
  void Update(const std::vector<Episode>& episodes, int64_t now_ms);

  void WriteMetrics(MetricWriter& out) const;
  std::string Status() const;  // one line for the HTML page

  // Alerts not yet acked by the given Alertmanager (tests).
  size_t Pending(size_t target) const;

 private:
  struct Alert {
    std::map<std::string, std::string> labels;
    std::map<std::string, std::string> annotations;
    std::string generator_url;
    bool firing = true;
    int64_t starts_ms = 0, ends_ms = 0;
    uint64_t version = 0;
    int64_t changed_ms = 0;  // wall time of the last version bump (latency)
    uint64_t episode_id = 0;
  };
  struct Acked {
    uint64_t version = 0;
    int64_t sent_ms = 0;
  };
  struct Target;
  struct Sent {  // an alert version in a push
    std::string key;
    uint64_t version;
    int64_t changed_ms;
  };

  explicit AlertmanagerPusher(AlertmanagerOptions options);
  // A new firing alert for `e` (episode_alert.cc).
  Alert NewAlert(const Episode& e, bool critical) const;
  void Run(Target& t);  // one thread per Alertmanager
  bool Due(const Target& t, const std::string& key, const Alert& a, int64_t now_ms) const;
  // One push of what is due to `t`, as named steps: the batch and its JSON
  // body, the request (without mu_), and what its answer changes.
  void Attempt(Target& t, int64_t now_ms, std::unique_lock<std::mutex>& lock);
  std::string Batch(const Target& t, int64_t now_ms, std::vector<Sent>* batch) const;
  void Delivered(Target& t, const std::vector<Sent>& batch, int64_t sent_ms, int64_t answered_ms);
  void Failed(Target& t, const std::string& error);
  void Bump(Alert& a, int64_t now_ms);
  // Whether a new alert may be held: over max_alerts, a resolved alert makes
  // room, else the new one is refused (and counted once per episode).
  bool Admit(const std::string& key, uint64_t episode_id);
  void Evict();
  void Forget();
  // Both need mu_ held.
  size_t PendingLocked(const Target& t) const;
  size_t FiringLocked() const;

  AlertmanagerOptions options_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  bool started_ = false;
  std::vector<std::thread> threads_;  // one per target
  // key: cgroup path (warning), "critical\n" + cgroup path (critical)
  std::unordered_map<std::string, Alert> alerts_;
  std::vector<std::unique_ptr<Target>> targets_;
  uint64_t next_version_ = 1;
  uint64_t dropped_total_ = 0;
  // Alerts refused for want of room: key -> episode id (counted once).
  std::unordered_map<std::string, uint64_t> refused_;
};

}  // namespace sockpressure
