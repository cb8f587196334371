#include "exporter/alerting/alerting_flags.h"

#include <algorithm>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace sockpressure {

void RegisterAlertingFlags(FlagSet* flags, AlertingFlags* f) {
  // In --help order; the defaults are AlertingFlags' initializers.
  flags->Duration("episodes.quiet-period", &f->episode_quiet,
                  "A throttling episode ends after this long without socket pressure or clamps on its cgroup.");
  flags->Int("episodes.history", &f->episode_history,
             "Recent throttling episodes kept for /api/v1/episodes and /episodes.");
  flags->String("web.external-url", &f->external_url,
                "URL under which the agent is reachable (alert generatorURL links to <url>/episodes); default "
                "http://<hostname>:<listen port>.");
  flags->StringList("alertmanager.url", &f->am_urls,
                    "Alertmanager to push SockPressureTCPThrottled alerts to (v2 API), e.g. "
                    "http://alertmanager:9093.");
  flags->Duration("alertmanager.min-pressure-duration", &f->am_min_pressure,
                  "Push an alert once an episode has been under socket pressure for this long.");
  flags->Duration("alertmanager.critical-pressure-duration", &f->am_critical_pressure,
                  "Also push SockPressureTCPThrottledCritical once an episode has been under socket pressure for "
                  "this long (0 = never).");
  flags->Duration("alertmanager.resend-interval", &f->am_resend,
                  "Re-send firing alerts this often (their endsAt is 4 intervals ahead, so a dead agent's alerts "
                  "expire).");
  flags->Duration("alertmanager.timeout", &f->am_timeout, "Deadline of one whole push to Alertmanager (connect, send and answer).");
  flags->Duration("alertmanager.max-backoff", &f->am_max_backoff,
                  "Upper bound of the retry backoff (from 500ms, doubling) while an Alertmanager fails.");
  flags->Int("alertmanager.max-alerts", &f->am_max_alerts,
             "Alerts held for delivery at most; beyond it the oldest resolved ones are dropped, then new ones are refused (the first to fire are kept).");
  flags->String("alertmanager.instance-label", &f->am_instance,
                "`instance` label of pushed alerts; set it to the instance Prometheus gives this agent's target so "
                "pushed and rule-based alerts deduplicate (default $NODE_NAME when set, as the DaemonSet does and "
                "the ServiceMonitor's instance is; else <hostname>:<listen port>; \"none\" = no instance label).");
  flags->StringList("alertmanager.extra-label", &f->am_extra_labels,
                    "NAME=VALUE label added to pushed alerts, e.g. job=sockpressure-exporter (what Prometheus adds "
                    "to the rule-based alert, plus any external_labels).");
  flags->String("alertmanager.ca-file", &f->am_ca_file,
                "CA bundle that signed the certificates of https:// Alertmanagers (default: the system's roots).");
  flags->Bool("alertmanager.insecure-skip-verify", &f->am_insecure,
              "Do not verify the certificates of https:// Alertmanagers (testing only).");
  flags->String("alertmanager.basic-auth.username", &f->am_basic_user,
                "HTTP basic auth user for Alertmanager (its --web.config.file basic_auth_users).");
  flags->String("alertmanager.basic-auth.password-file", &f->am_basic_password_file,
                "File holding the basic auth password (read at start; trailing newline ignored).");
}

absl::StatusOr<LabelPairs> ParseExtraLabels(const std::vector<std::string>& entries) {
  LabelPairs out;
  for (const std::string& e : entries) {
    size_t eq = e.find('=');
    if (eq == std::string::npos || eq == 0) {
      return absl::InvalidArgumentError(absl::StrCat("--alertmanager.extra-label wants NAME=VALUE, got '", e, "'"));
    }
    std::string name = e.substr(0, eq);
    bool valid = !absl::ascii_isdigit(static_cast<unsigned char>(name[0]));
    for (char c : name) valid = valid && (absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_');
    if (!valid) return absl::InvalidArgumentError(absl::StrCat("invalid label name '", name, "'"));
    out.emplace_back(name, e.substr(eq + 1));
  }
  return out;
}

EpisodeOptions EpisodeOptionsFromFlags(const AlertingFlags& f) {
  EpisodeOptions o;
  o.quiet_seconds = absl::ToDoubleSeconds(f.episode_quiet);
  o.history = static_cast<size_t>(std::max<int64_t>(1, f.episode_history));
  return o;
}

absl::StatusOr<AlertmanagerOptions> AlertmanagerOptionsFromFlags(const AlertingFlags& f, const std::string& host_port,
                                                                 bool tls) {
  AlertmanagerOptions am;
  am.urls = f.am_urls;
  am.min_pressure_seconds = absl::ToDoubleSeconds(f.am_min_pressure);
  am.resend_seconds = std::max(0.1, absl::ToDoubleSeconds(f.am_resend));
  am.timeout_seconds = absl::ToDoubleSeconds(f.am_timeout);
  am.max_backoff_seconds = std::max(0.5, absl::ToDoubleSeconds(f.am_max_backoff));
  am.max_alerts = static_cast<size_t>(std::max<int64_t>(1, f.am_max_alerts));
  am.critical_min_pressure_seconds = absl::ToDoubleSeconds(f.am_critical_pressure);
  const char* node_name = std::getenv("NODE_NAME");
  am.instance = f.am_instance.empty()        ? DefaultAlertInstance(node_name ? node_name : "", host_port)
                : f.am_instance == "none" ? ""
                                          : f.am_instance;
  am.external_url = f.external_url.empty() ? absl::StrCat(tls ? "https://" : "http://", host_port) : f.external_url;
  while (!am.external_url.empty() && am.external_url.back() == '/') am.external_url.pop_back();
  absl::StatusOr<LabelPairs> extra = ParseExtraLabels(f.am_extra_labels);
  if (!extra.ok()) return extra.status();
  am.extra_labels = *extra;
  am.ca_file = f.am_ca_file;
  am.insecure_skip_verify = f.am_insecure;
  am.basic_auth_username = f.am_basic_user;
  am.basic_auth_password_file = f.am_basic_password_file;
  return am;
}

}  // namespace sockpressure
