#include "exporter/outputs/http_flags.h"

#include <unistd.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "exporter/outputs/http/listen_socket.h"

namespace sockpressure {

void RegisterHttpFlags(FlagSet* flags, HttpFlags* f) {
  // One row a flag, {name, &field, help}, in --help order: the names and
  // texts are data (http_flags.json), the build writes the rows.
  flags->Add({
#include "exporter/outputs/http_flags.inc"
  });
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
