#include "exporter/outputs/http_flags.h"

#include <unistd.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "exporter/common/logging.h"
#include "exporter/outputs/http/listen_socket.h"

namespace sockpressure {

void RegisterHttpFlags(FlagSet* flags, HttpFlags* f) {
  // In --help order; the defaults are HttpFlags' initializers.
  flags->String("web.listen-address", &f->listen_address, "Address to listen on for metrics and the API.");
  flags->String("web.telemetry-path", &f->telemetry_path, "Path under which to expose metrics.");
  flags->String("web.config.file", &f->web_config_file,
                "Path to a web configuration file (exporter-toolkit format) enabling TLS and/or basic auth.");
  flags->Int("web.max-requests", &f->max_requests,
             "Maximum number of requests queued or running at once (/healthz excluded); more get 503 at once.");
  flags->String("metrics.profile", &f->metrics_profile,
                "Per-cgroup series to expose: core, only the signal, at most 8 series per cgroup (9 with the "
                "kernel's sock_throttled counter, 6.19+); or context, also memory sizes, limits, PSI, vmpressure "
                "windows by level, OOM kills, TCP socket counts, cgroup v1 kmem.tcp (about 17 more series per "
                "cgroup).");
  flags->Bool("collector.context", &f->collector_context,
              "Deprecated: --metrics.profile=context (--no-collector.context: core).");
}

absl::Status MetricsProfileFromFlags(const FlagSet& flags, HttpFlags* f) {
  if (flags.Given("collector.context")) {
    f->metrics_profile = f->collector_context ? "context" : "core";
    SP_LOG_WARN("--", f->collector_context ? "" : "no-", "collector.context is deprecated: use --metrics.profile=",
                f->metrics_profile);
  }
  if (f->metrics_profile != "core" && f->metrics_profile != "context") {
    return absl::InvalidArgumentError(
        absl::StrCat("--metrics.profile must be core or context, got '", f->metrics_profile, "'"));
  }
  f->context = f->metrics_profile == "context";
  return absl::OkStatus();
}

absl::StatusOr<HttpOptions> HttpOptionsFromFlags(const HttpFlags& f) {
  if (f.max_requests < 1) return absl::InvalidArgumentError("--web.max-requests must be >= 1");
  if (f.telemetry_path.empty() || f.telemetry_path[0] != '/') {  // routes are absolute paths
    return absl::InvalidArgumentError(
        absl::StrCat("--web.telemetry-path must start with '/', got '", f.telemetry_path, "'"));
  }
  HttpOptions http;
  http.listen_address = f.listen_address;
  http.telemetry_path = f.telemetry_path;
  http.max_requests = static_cast<int>(f.max_requests);
  if (!f.web_config_file.empty()) {
    absl::StatusOr<WebConfig> web = LoadWebConfig(f.web_config_file);
    if (!web.ok()) return web.status();
    http.web = *web;
  }
  return http;
}

std::string AgentHostPort(const HttpFlags& f) {
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) != 0) std::snprintf(host, sizeof host, "localhost");
  absl::StatusOr<ListenAddress> listen = ParseListenAddress(f.listen_address);
  return absl::StrCat(host, ":", listen.ok() ? listen->port : 19100);
}

}  // namespace sockpressure
