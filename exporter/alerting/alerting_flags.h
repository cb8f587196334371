// The alerting agent's flags (--episodes.*, --alertmanager.*,
// --web.external-url) and the options built from them, so that main only
// wires. Not thread-safe: used once at start-up.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "exporter/alerting/alertmanager.h"
#include "exporter/alerting/episodes.h"
#include "exporter/cli/flag_set.h"

namespace sockpressure {

struct AlertingFlags {
  absl::Duration episode_quiet = absl::Seconds(30);
  int64_t episode_history = 256;
  std::string external_url;
  std::vector<std::string> am_urls;
  absl::Duration am_min_pressure = absl::Seconds(10);
  absl::Duration am_critical_pressure = absl::Minutes(5);
  absl::Duration am_resend = absl::Seconds(30);
  absl::Duration am_timeout = absl::Seconds(10);
  absl::Duration am_max_backoff = absl::Seconds(30);
  int64_t am_max_alerts = 1000;
  std::string am_instance;
  std::vector<std::string> am_extra_labels;
  std::string am_ca_file, am_basic_user, am_basic_password_file;
  bool am_insecure = false;
};

void RegisterAlertingFlags(FlagSet* flags, AlertingFlags* f);

EpisodeOptions EpisodeOptionsFromFlags(const AlertingFlags& f);

// `host_port` is this agent's <hostname>:<listen port> (default instance
// label, unless $NODE_NAME is set, and external URL); `tls` whether it
// serves https.
absl::StatusOr<AlertmanagerOptions> AlertmanagerOptionsFromFlags(const AlertingFlags& f, const std::string& host_port,
                                                                 bool tls);

}  // namespace sockpressure
