#include "exporter/alerting/alerting_flags.h"

#include <algorithm>
#include <cstdlib>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace sockpressure {

void RegisterAlertingFlags(FlagSet* flags, AlertingFlags* f) {
  // One row a flag, {name, &field, help}, in --help order: the names and
  // texts are data (alerting_flags.json), the build writes the rows.
  flags->Add({
#include "exporter/alerting/alerting_flags.inc"
  });
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
