#include "exporter/alerting/alertmanager.h"

#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/time_util.h>
#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <unordered_set>

#include <openssl/x509.h>

#include "absl/strings/strip.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "exporter/common/label_escape.h"
#include "exporter/alerting/alerting.pb.h"
#include "exporter/common/file_reader.h"
#include "exporter/common/logging.h"
#include "exporter/common/syscall_filter.h"
#include "exporter/common/thread_privilege.h"

namespace sockpressure {

struct AlertmanagerPusher::Target {
  std::string url;   // as given, for labels and logs
  std::string path;  // <prefix>/api/v2/alerts
  std::unique_ptr<httplib::Client> client;
  std::unordered_map<std::string, Acked> acked;
  double backoff_seconds = 0;
  int64_t next_attempt_ms = 0;
  bool up = false;
  bool ever_tried = false;
  uint64_t alerts_sent_total = 0, errors_total = 0;
  double last_latency_seconds = -1;
  std::string last_error;
  // While a push is in flight: when the watchdog cuts it (wall ms), and
  // whether it did. Guarded by mu_.
  int64_t deadline_ms = 0;
  bool cut = false;
};

namespace {

// What Alertmanager answered to one push, read by us: httplib would hold an
// answer of any size in memory, and a peer that answers with gigabytes (a
// broken proxy, a hostile endpoint) would choose the agent's memory.
struct Answer {
  bool answered = false;  // a complete answer was read
  httplib::Error error = httplib::Error::Success;
  int status = 0;
  std::string body;  // at most kMaxAnswerBytes
  bool too_big = false;
};

// Alertmanager answers a push with a few bytes (nothing, or an error line).
constexpr size_t kMaxAnswerBytes = 64 << 10;

Answer Post(httplib::Client& client, const std::string& path, std::string body) {
  Answer answer;
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.headers = {{"Content-Type", "application/json"}};
  req.body = std::move(body);
  req.response_handler = [&answer](const httplib::Response& r) {
    answer.status = r.status;
    return true;
  };
  // Read the answer ourselves: httplib would hold any size in memory.
  req.content_receiver = [&answer](const char* data, size_t n, uint64_t, uint64_t) {
    if (answer.body.size() + n > kMaxAnswerBytes) {
      answer.too_big = true;
      return false;
    }
    answer.body.append(data, n);
    return true;
  };
  httplib::Response res;
  answer.answered = client.send(req, res, answer.error);
  return answer;
}


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
    // "http://host:9093" or "https://host/prefix": httplib wants scheme+host+port
    // and the path separately.
    size_t scheme_end = url.find("://");
    if (scheme_end == std::string::npos || !(absl::StartsWith(url, "http://") || absl::StartsWith(url, "https://"))) {
      return absl::InvalidArgumentError(absl::StrCat("--alertmanager.url must start with http:// or https://: ", url));
    }
    size_t path_start = url.find('/', scheme_end + 3);
    std::string base = path_start == std::string::npos ? url : url.substr(0, path_start);
    std::string prefix = path_start == std::string::npos ? "" : url.substr(path_start);
    while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
    auto t = std::make_unique<Target>();
    t->url = url;
    t->path = prefix + "/api/v2/alerts";
    t->client = std::make_unique<httplib::Client>(base);
    if (!t->client->is_valid()) return absl::InvalidArgumentError(absl::StrCat("invalid --alertmanager.url ", url));
    const int64_t ms = Ms(p->options_.timeout_seconds);
    const time_t sec = static_cast<time_t>(ms / 1000), usec = static_cast<time_t>((ms % 1000) * 1000);
    t->client->set_connection_timeout(sec, usec);
    t->client->set_read_timeout(sec, usec);
    t->client->set_write_timeout(sec, usec);
    // One connection per Alertmanager, reused between pushes.
    t->client->set_keep_alive(true);
    if (absl::StartsWith(url, "https://")) {
      t->client->enable_server_certificate_verification(!o.insecure_skip_verify);
      if (!o.ca_file.empty()) t->client->set_ca_cert_path(o.ca_file.c_str());
    }
    if (!o.basic_auth_username.empty()) {
      if (absl::StartsWith(url, "http://")) {
        SP_LOG_WARN("alertmanager ", url, ": basic auth over plain http sends the password in clear text");
      }
      t->client->set_basic_auth(o.basic_auth_username, password);
    }
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
    ++pushing_;
    threads_.emplace_back([this, target = t.get()] { Run(*target); });
  }
  watchdog_ = std::thread([this] { Watch(); });
}

void AlertmanagerPusher::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  watch_cv_.notify_all();
  // The watchdog cuts a push in flight once stopping_ is set (SIGTERM does
  // not wait for a slow Alertmanager), then ends after the pusher.
  for (std::thread& t : threads_) t.join();
  threads_.clear();
  watch_cv_.notify_all();
  if (watchdog_.joinable()) watchdog_.join();
}

void AlertmanagerPusher::Watch() {
  EnterUnprivilegedThread("sp-alertmgr-dl");
  ConfineThisThread(SyscallProfile::kServe);  // only cuts sockets short
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    int64_t next = 0, now = NowMs();
    bool in_flight = false;
    for (auto& t : targets_) {
      if (t->deadline_ms == 0) continue;
      in_flight = true;
      if (stopping_ || now >= t->deadline_ms) {
        // Thread-safe in httplib: shuts the socket down under the pusher's
        // read or write, which then fails at once.
        if (!t->cut) t->client->stop();
        t->cut = true;
      } else if (next == 0 || t->deadline_ms < next) {
        next = t->deadline_ms;
      }
    }
    if (stopping_ && !in_flight && pushing_ == 0) return;
    // While stopping, look again soon: a push may be between taking its
    // deadline and opening its socket, where stop() has nothing to cut yet.
    const int64_t wait_ms = stopping_ ? 50 : next == 0 ? 60000 : std::max<int64_t>(next - now, 1);
    watch_cv_.wait_for(lock, std::chrono::milliseconds(wait_ms));
  }
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

void AlertmanagerPusher::Attempt(Target& t, int64_t now_ms, std::unique_lock<std::mutex>& lock) {
  struct Item {
    std::string key;
    uint64_t version;
    int64_t changed_ms;
  };
  std::vector<Item> batch;
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
    absl::StrAppend(&body, batch.empty() ? "" : ",", one);
    batch.push_back({key, a.version, a.changed_ms});
  }
  if (batch.empty()) return;
  body += "]";

  // The whole request gets --alertmanager.timeout: httplib's timeouts are
  // per recv(), and a peer that trickles its answer would hold this thread
  // (and every other Alertmanager behind it) for good. The watchdog cuts it.
  t.deadline_ms = NowMs() + Ms(options_.timeout_seconds);
  t.cut = false;
  watch_cv_.notify_all();
  lock.unlock();  // never hold the state lock across the network
  Answer answer = Post(*t.client, t.path, std::move(body));
  const int64_t t1 = NowMs();
  lock.lock();
  t.deadline_ms = 0;
  if (t.cut) {
    answer.answered = false;
    answer.too_big = false;
    answer.error = httplib::Error::Read;
  }

  t.ever_tried = true;
  if (answer.answered && answer.status >= 200 && answer.status < 300) {
    if (!t.up) SP_LOG_INFO("alertmanager ", t.url, ": delivered ", batch.size(), " alert(s)");
    t.up = true;
    t.backoff_seconds = 0;
    t.next_attempt_ms = 0;
    t.alerts_sent_total += batch.size();
    t.last_error.clear();
    int64_t latency_ms = -1;
    for (const Item& it : batch) {
      Acked& ack = t.acked[it.key];
      // An alert may have changed while the request was in flight; then the
      // newer version is still due.
      if (ack.version != it.version) latency_ms = std::max(latency_ms, t1 - it.changed_ms);
      ack.version = it.version;
      ack.sent_ms = now_ms;
    }
    if (latency_ms >= 0) t.last_latency_seconds = static_cast<double>(latency_ms) / 1000.0;
    return;
  }
  std::string error = answer.too_big ? absl::StrCat("HTTP ", answer.status, " with an answer larger than ",
                                                    kMaxAnswerBytes, " bytes, not read further")
                     : answer.answered ? absl::StrCat("HTTP ", answer.status, ": ", answer.body.substr(0, 200))
                     : t.cut ? absl::StrCat("no answer within the timeout (", options_.timeout_seconds, " s)")
                                       : absl::StrCat("request failed: ", httplib::to_string(answer.error));
  if (!answer.answered && answer.error == httplib::Error::SSLServerVerification) {
    absl::StrAppend(&error, " (", X509_verify_cert_error_string(t.client->get_openssl_verify_result()),
                    "; point --alertmanager.ca-file at the CA that signed Alertmanager's certificate)");
  } else if (answer.answered && answer.status == 401) {
    absl::StrAppend(&error, " (check --alertmanager.basic-auth.username/password-file)");
  }
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
  --pushing_;
  watch_cv_.notify_all();
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
