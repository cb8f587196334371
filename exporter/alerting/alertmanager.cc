#include "exporter/alerting/alertmanager.h"

#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/time_util.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <unordered_set>

#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "exporter/alerting/alerting.pb.h"
#include "exporter/alerting/alertmanager_client.h"
#include "exporter/common/label_escape.h"
#include "exporter/common/file_reader.h"
#include "exporter/common/logging.h"
#include "exporter/common/syscall_filter.h"
#include "exporter/common/thread_privilege.h"

namespace sockpressure {

struct AlertmanagerPusher::Target {
  std::string url;   // as given, for labels and logs
  std::unique_ptr<AlertmanagerClient> client;
  std::unordered_map<std::string, Acked> acked;
  double backoff_seconds = 0;
  int64_t next_attempt_ms = 0;
  bool up = false;
  bool ever_tried = false;
  uint64_t alerts_sent_total = 0, errors_total = 0;
  double last_latency_seconds = -1;
  std::string last_error;
};

namespace {

int64_t NowMs() { return absl::ToUnixMillis(absl::Now()); }

int64_t Ms(double seconds) { return static_cast<int64_t>(std::llround(seconds * 1000)); }

}  // namespace

absl::StatusOr<std::unique_ptr<AlertmanagerPusher>> AlertmanagerPusher::Create(AlertmanagerOptions options) {
  std::unique_ptr<AlertmanagerPusher> p(new AlertmanagerPusher(std::move(options)));
  const AlertmanagerOptions& o = p->options_;
  std::string password;
  if (o.basic_auth_username.empty() != o.basic_auth_password_file.empty()) {
    return absl::InvalidArgumentError(
        "--alertmanager.basic-auth.username and --alertmanager.basic-auth.password-file go together");
  }
  if (!o.basic_auth_password_file.empty()) {
    absl::StatusOr<std::string> pw = ReadFileToString(o.basic_auth_password_file);
    if (!pw.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("reading --alertmanager.basic-auth.password-file: ", pw.status().message()));
    }
    password = std::string(absl::StripTrailingAsciiWhitespace(*pw));  // files end in a newline
  }
  if (!o.ca_file.empty()) {
    // httplib would silently trust nothing if the file cannot be read.
    absl::StatusOr<std::string> ca = ReadFileToString(o.ca_file);
    if (!ca.ok()) return absl::InvalidArgumentError(absl::StrCat("reading --alertmanager.ca-file: ", ca.status().message()));
  }
  for (const std::string& url : o.urls) {
    absl::StatusOr<std::unique_ptr<AlertmanagerClient>> client = AlertmanagerClient::Create(url, o, password);
    if (!client.ok()) return client.status();
    auto t = std::make_unique<Target>();
    t->url = url;
    t->client = std::move(*client);
    p->targets_.push_back(std::move(t));
  }
  return p;
}

AlertmanagerPusher::AlertmanagerPusher(AlertmanagerOptions options) : options_(std::move(options)) {}

AlertmanagerPusher::~AlertmanagerPusher() { Stop(); }

void AlertmanagerPusher::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (started_) return;
  started_ = true;
  // One thread per Alertmanager: each on its own schedule, so a slow or
  // failing one never delays another.
  for (auto& t : targets_) {
    threads_.emplace_back([this, target = t.get()] { Run(*target); });
  }
}

void AlertmanagerPusher::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  // SIGTERM does not wait for a slow Alertmanager: a push in flight is cut
  // now, and one about to start is cut at once.
  for (auto& t : targets_) t->client->Shutdown();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

void AlertmanagerPusher::Bump(Alert& a, int64_t now_ms) {
  a.version = next_version_++;
  a.changed_ms = now_ms;
}

void AlertmanagerPusher::Update(const std::vector<Episode>& episodes, int64_t now_ms) {
  const int64_t wall_ms = NowMs();
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::unordered_set<uint64_t> open;
    // Oldest episode first: over --alertmanager.max-alerts, the alerts that
    // fired first are the ones kept (see Admit()).
    std::vector<const Episode*> by_start;
    by_start.reserve(episodes.size());
    for (const Episode& e : episodes) by_start.push_back(&e);
    std::stable_sort(by_start.begin(), by_start.end(),
                     [](const Episode* a, const Episode* b) { return a->start_ms < b->start_ms; });
    for (const Episode* ep : by_start) {
      const Episode& e = *ep;
      if (e.active) open.insert(e.id);
      // Two alerts per episode, as the rules have: the warning, and the
      // critical one once the episode has been throttled long enough.
      for (const bool critical : {false, true}) {
        if (critical && options_.critical_min_pressure_seconds <= 0) continue;
        const std::string key = critical ? absl::StrCat("critical\n", e.cgroup) : e.cgroup;
        const double threshold = critical ? options_.critical_min_pressure_seconds : options_.min_pressure_seconds;
        auto it = alerts_.find(key);
        if (!e.active) {
          if (auto r = refused_.find(key); r != refused_.end() && r->second == e.id) refused_.erase(r);
          // Resolve only the alert of this very episode; a newer one on the same
          // cgroup is a different alert instance.
          if (it != alerts_.end() && it->second.episode_id == e.id && it->second.firing) {
            it->second.firing = false;
            it->second.ends_ms = e.end_ms;
            it->second.annotations["throttled_seconds"] = absl::StrFormat("%.1f", e.throttled_seconds);
            Bump(it->second, wall_ms);
          }
          continue;
        }
        // Pressure on a cgroup with no socket to throttle is no page (it can
        // become one: the first socket that arrives while it lasts counts).
        if (e.throttled_seconds < threshold || NothingToThrottle(e)) continue;
        if (it != alerts_.end() && it->second.episode_id == e.id) {
          // Same alert: refresh what the next resend shows, without forcing a
          // push every sample (annotations do not change the alert's identity).
          it->second.annotations["throttled_seconds"] = absl::StrFormat("%.1f", e.throttled_seconds);
          continue;
        }
        if (it == alerts_.end() && !Admit(key, e.id)) continue;
        Alert a = NewAlert(e, critical);
        Bump(a, wall_ms);
        alerts_[key] = std::move(a);
      }
    }
    for (auto r = refused_.begin(); r != refused_.end();) {
      r = open.count(r->second) ? std::next(r) : refused_.erase(r);
    }
    // A firing alert whose episode is gone from the list without a close
    // (cannot happen with the tracker's contract, but an alert must never
    // fire forever) resolves now.
    for (auto& [key, a] : alerts_) {
      if (a.firing && !open.count(a.episode_id)) {
        a.firing = false;
        a.ends_ms = now_ms;
        Bump(a, wall_ms);
      }
    }
    Evict();
  }
  cv_.notify_all();
}

bool AlertmanagerPusher::Admit(const std::string& key, uint64_t episode_id) {
  if (alerts_.size() < options_.max_alerts) return true;
  // Room from a resolved alert first: its resolution is the least useful.
  auto victim = alerts_.end();
  for (auto it = alerts_.begin(); it != alerts_.end(); ++it) {
    if (!it->second.firing && (victim == alerts_.end() || it->second.changed_ms < victim->second.changed_ms)) {
      victim = it;
    }
  }
  if (victim != alerts_.end()) {
    for (auto& t : targets_) t->acked.erase(victim->first);
    alerts_.erase(victim);
    ++dropped_total_;
    return true;
  }
  // Every held alert fires: the new one is refused, not swapped in for an
  // older one (that made every push send a different set), and counted once
  // for its episode.
  auto [r, added] = refused_.try_emplace(key, episode_id);
  if (added || r->second != episode_id) {
    r->second = episode_id;
    ++dropped_total_;
  }
  return false;
}

void AlertmanagerPusher::Evict() {
  while (alerts_.size() > options_.max_alerts) {
    // Oldest resolved first (its resolution is the least useful), then the
    // oldest firing alert.
    auto victim = alerts_.end();
    for (auto it = alerts_.begin(); it != alerts_.end(); ++it) {
      if (victim == alerts_.end() || (it->second.firing < victim->second.firing) ||
          (it->second.firing == victim->second.firing && it->second.changed_ms < victim->second.changed_ms)) {
        victim = it;
      }
    }
    for (auto& t : targets_) t->acked.erase(victim->first);
    alerts_.erase(victim);
    ++dropped_total_;
  }
}

bool AlertmanagerPusher::Due(const Target& t, const std::string& key, const Alert& a, int64_t now_ms) const {
  auto it = t.acked.find(key);
  if (it == t.acked.end() || it->second.version != a.version) return true;
  return a.firing && now_ms - it->second.sent_ms >= Ms(options_.resend_seconds);
}

std::string AlertmanagerPusher::Batch(const Target& t, int64_t now_ms, std::vector<Sent>* batch) const {
  std::string body = "[";
  // A firing alert's endsAt lies a few resend intervals ahead: refreshed
  // while the agent runs, it expires on its own if the agent dies.
  const int64_t valid_ms = Ms(4 * std::max(options_.resend_seconds, options_.max_backoff_seconds));
  google::protobuf::util::JsonPrintOptions json;
  for (const auto& [key, a] : alerts_) {
    if (!Due(t, key, a, now_ms)) continue;
    api::v1::PostableAlert pa;
    for (const auto& [k, v] : a.labels) (*pa.mutable_labels())[k] = v;
    for (const auto& [k, v] : a.annotations) (*pa.mutable_annotations())[k] = v;
    *pa.mutable_starts_at() = google::protobuf::util::TimeUtil::MillisecondsToTimestamp(a.starts_ms);
    *pa.mutable_ends_at() =
        google::protobuf::util::TimeUtil::MillisecondsToTimestamp(a.firing ? now_ms + valid_ms : a.ends_ms);
    pa.set_generator_url(a.generator_url);
    std::string one;
    if (!google::protobuf::util::MessageToJsonString(pa, &one, json).ok()) continue;
    absl::StrAppend(&body, batch->empty() ? "" : ",", one);
    batch->push_back({key, a.version, a.changed_ms});
  }
  return body + "]";
}

void AlertmanagerPusher::Attempt(Target& t, int64_t now_ms, std::unique_lock<std::mutex>& lock) {
  std::vector<Sent> batch;
  std::string body = Batch(t, now_ms, &batch);
  if (batch.empty()) return;
  lock.unlock();  // never hold the state lock across the network
  const AlertmanagerClient::Answer answer = t.client->Push(std::move(body));
  const int64_t answered_ms = NowMs();
  lock.lock();
  t.ever_tried = true;
  if (answer.delivered) {
    Delivered(t, batch, now_ms, answered_ms);
  } else {
    Failed(t, answer.error);
  }
}

void AlertmanagerPusher::Delivered(Target& t, const std::vector<Sent>& batch, int64_t sent_ms, int64_t answered_ms) {
  if (!t.up) SP_LOG_INFO("alertmanager ", t.url, ": delivered ", batch.size(), " alert(s)");
  t.up = true;
  t.backoff_seconds = 0;
  t.next_attempt_ms = 0;
  t.alerts_sent_total += batch.size();
  t.last_error.clear();
  int64_t latency_ms = -1;
  for (const Sent& it : batch) {
    Acked& ack = t.acked[it.key];
    // An alert may have changed while the request was in flight; then the
    // newer version is still due.
    if (ack.version != it.version) latency_ms = std::max(latency_ms, answered_ms - it.changed_ms);
    ack.version = it.version;
    ack.sent_ms = sent_ms;
  }
  if (latency_ms >= 0) t.last_latency_seconds = static_cast<double>(latency_ms) / 1000.0;
}

void AlertmanagerPusher::Failed(Target& t, const std::string& error) {
  if (t.up || t.last_error != error) SP_LOG_WARN("alertmanager ", t.url, ": ", error, " (will retry)");
  t.up = false;
  t.last_error = error;
  ++t.errors_total;
  t.backoff_seconds = t.backoff_seconds == 0 ? 0.5 : std::min(2 * t.backoff_seconds, options_.max_backoff_seconds);
  t.next_attempt_ms = NowMs() + Ms(t.backoff_seconds);
}

void AlertmanagerPusher::Forget() {
  // Resolved alerts every Alertmanager has acked are done; so are acks of
  // alerts that no longer exist.
  for (auto it = alerts_.begin(); it != alerts_.end();) {
    bool done = !it->second.firing;
    for (const auto& t : targets_) {
      auto a = t->acked.find(it->first);
      done = done && a != t->acked.end() && a->second.version == it->second.version;
    }
    if (done) {
      for (auto& t : targets_) t->acked.erase(it->first);
      it = alerts_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& t : targets_) {
    for (auto a = t->acked.begin(); a != t->acked.end();) {
      a = alerts_.count(a->first) ? std::next(a) : t->acked.erase(a);
    }
  }
}

void AlertmanagerPusher::Run(Target& t) {
  // Talks to Alertmanager and reads its answers: holds no capability
  // (thread_privilege.h).
  EnterUnprivilegedThread("sp-alertmgr");
  ConfineThisThread(SyscallProfile::kClient);
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    int64_t now = NowMs();
    if (now >= t.next_attempt_ms) Attempt(t, now, lock);
    Forget();
    // Woken by Update() for new state; otherwise a short tick drives resends
    // and retries (cheap: it only walks the in-memory alert set).
    cv_.wait_for(lock, std::chrono::milliseconds(200));
  }
}

size_t AlertmanagerPusher::Pending(size_t target) const {
  std::lock_guard<std::mutex> lock(mu_);
  return PendingLocked(*targets_.at(target));
}

size_t AlertmanagerPusher::FiringLocked() const {
  size_t firing = 0;
  for (const auto& [key, a] : alerts_) firing += a.firing ? 1 : 0;
  return firing;
}

size_t AlertmanagerPusher::PendingLocked(const Target& t) const {
  size_t n = 0;
  for (const auto& [key, a] : alerts_) {
    auto it = t.acked.find(key);
    n += (it == t.acked.end() || it->second.version != a.version) ? 1 : 0;
  }
  return n;
}

std::string AlertmanagerPusher::Status() const {
  std::lock_guard<std::mutex> lock(mu_);
  const size_t firing = FiringLocked();
  std::vector<std::string> parts;
  for (const auto& t : targets_) {
    parts.push_back(absl::StrCat(t->url, " ",
                                 !t->ever_tried ? "idle"
                                 : t->up        ? "ok"
                                                : absl::StrCat("failing (", t->last_error, ")")));
  }
  return absl::StrCat("Alert push: ", firing, " firing ", options_.alertname, " alert(s); Alertmanager ",
                      absl::StrJoin(parts, ", "));
}

void AlertmanagerPusher::WriteMetrics(MetricWriter& out) const {
  std::lock_guard<std::mutex> lock(mu_);
  const size_t firing = FiringLocked();
  out.Family("sockpressure_alertmanager_alerts",
             "Alerts the agent holds for Alertmanager: firing, or resolved and not yet acked by every Alertmanager.",
             MetricKind::kGauge);
  out.Value({}, {{"state", "firing"}}, static_cast<double>(firing));
  out.Value({}, {{"state", "resolved"}}, static_cast<double>(alerts_.size() - firing));
  out.Family("sockpressure_alertmanager_dropped_total",
             "Alerts dropped or refused (once per episode) because --alertmanager.max-alerts were held.", MetricKind::kCounter);
  out.Value({}, {}, static_cast<double>(dropped_total_));
  out.Family("sockpressure_alertmanager_pending_alerts",
             "Alert versions this Alertmanager has not acknowledged yet (the retry queue).", MetricKind::kGauge);
  for (const auto& t : targets_) out.Value({}, {{"alertmanager", t->url}}, static_cast<double>(PendingLocked(*t)));
  out.Family("sockpressure_alertmanager_up", "1 when the last push to this Alertmanager succeeded.",
             MetricKind::kGauge);
  for (const auto& t : targets_) out.Value({}, {{"alertmanager", t->url}}, t->up ? 1 : 0);
  out.Family("sockpressure_alertmanager_alerts_sent_total", "Alerts delivered (acknowledged with 2xx) per Alertmanager.",
             MetricKind::kCounter);
  for (const auto& t : targets_) out.Value({}, {{"alertmanager", t->url}}, static_cast<double>(t->alerts_sent_total));
  out.Family("sockpressure_alertmanager_errors_total", "Failed pushes per Alertmanager (each is retried).",
             MetricKind::kCounter);
  for (const auto& t : targets_) out.Value({}, {{"alertmanager", t->url}}, static_cast<double>(t->errors_total));
  out.Family("sockpressure_alertmanager_latency_seconds",
             "Time from an alert change (fired or resolved) to its acknowledgement, for the last change delivered.",
             MetricKind::kGauge);
  for (const auto& t : targets_) {
    if (t->last_latency_seconds >= 0) out.Value({}, {{"alertmanager", t->url}}, t->last_latency_seconds);
  }
}

}  // namespace sockpressure
