// The HTTP server's flags (--web.*, and --metrics.profile, which picks the
// exposition profile) and the HttpOptions built from them, so that main only
// wires. Not thread-safe: used once at start-up.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "exporter/cli/flag_set.h"
#include "exporter/outputs/http/http_server.h"

namespace sockpressure {

struct HttpFlags {
  std::string listen_address = ":19100";
  std::string telemetry_path = "/metrics";
  std::string web_config_file;
  int64_t max_requests = 40;
  // --metrics.profile: "core", the signal, or "context", also the context
  // series per cgroup (sizes, limits, PSI, windows by level, OOM kills,
  // sockets).
  std::string metrics_profile = "core";
  // --[no-]collector.context, the profile's deprecated spelling (it is no
  // collector: sources/source.h); applied by MetricsProfileFromFlags().
  bool collector_context = false;
  // The context profile is on: set by MetricsProfileFromFlags().
  bool context = false;
};

void RegisterHttpFlags(FlagSet* flags, HttpFlags* f);

// After parsing: sets f->context from --metrics.profile, or from the
// deprecated --[no-]collector.context when given (which it logs, once: the
// flags are parsed once). InvalidArgument for a profile it does not know.
absl::Status MetricsProfileFromFlags(const FlagSet& flags, HttpFlags* f);

// Loads --web.config.file; InvalidArgument/NotFound say what is wrong.
absl::StatusOr<HttpOptions> HttpOptionsFromFlags(const HttpFlags& f);

// <hostname>:<listen port>, how Alertmanager and links name this agent.
std::string AgentHostPort(const HttpFlags& f);

}  // namespace sockpressure
