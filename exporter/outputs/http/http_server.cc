#include "absl/strings/string_view.h"
#include "exporter/outputs/http/http_server.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "exporter/outputs/http/http_request.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "exporter/common/logging.h"

namespace sockpressure {

HttpServer::HttpServer(HttpOptions options, TelemetryEndpoint* telemetry, std::function<bool()> healthy)
    : options_(std::move(options)),
      telemetry_(telemetry),
      auth_(options_.web.basic_auth_users) {
  links_.push_back({options_.telemetry_path, "Metrics"});
  Probe(
      "/healthz",
      [healthy = std::move(healthy)] {
        return healthy() ? absl::OkStatus() : absl::UnavailableError("sampler stalled");
      },
      "Health");
  routes_["/"] = [this](const RequestHead&, HttpResponse* out) { ServeLanding(out); };
  // After the landing page: a telemetry path of "/" answers with metrics.
  routes_[options_.telemetry_path] = [this](const RequestHead& head, HttpResponse* out) {
    ServeTelemetry(head, out);
  };
}

HttpServer::~HttpServer() { Stop(); }

// Whether basic auth lets the request through; when not, *out is the refusal.
bool HttpServer::Admit(const RequestHead& head, HttpResponse* out) {
  if (!auth_.enabled()) return true;
  const BasicAuthChecker::Verdict verdict = auth_.Verify(head.Header("authorization"));
  if (verdict == BasicAuthChecker::Verdict::kBusy) {
    // Another password is being verified: try again, rather than hold a
    // request slot (and a core) for each guess of a flood.
    *out = PlainText(429, "Too many password checks at once; retry");
    out->headers.emplace_back("Retry-After", "1");
    return false;
  }
  if (verdict != BasicAuthChecker::Verdict::kOk) {
    *out = PlainText(401, "Unauthorized");
    out->headers.emplace_back("WWW-Authenticate", "Basic realm=\"sockpressure\"");
    return false;
  }
  return true;
}

void HttpServer::ServeLanding(HttpResponse* out) const {
  std::string html =
      "<!doctype html><html><head><meta charset=\"utf-8\"><title>sockpressure exporter</title></head><body>"
      "<h1>sockpressure exporter</h1><p>Detects TCP receive windows throttled by memory-cgroup socket "
      "pressure.</p><ul>";
  for (const LandingLink& l : links_) absl::StrAppend(&html, "<li><a href=\"", l.path, "\">", l.text, "</a></li>");
  html += "</ul></body></html>\n";
  *out = {200, {{"Content-Type", "text/html; charset=utf-8"}}, std::move(html)};
}

void HttpServer::ServeTelemetry(const RequestHead& head, HttpResponse* out) {
  telemetry_->Serve(head, out);
  // Honours q values: "gzip;q=0" means the client refuses gzip. The body
  // depends on Accept-Encoding: caches between must know it.
  if (out->stream) out->headers.emplace_back("Vary", "Accept-Encoding");
  if (out->stream && AcceptsGzip(head.Header("accept-encoding"))) {
    out->headers.emplace_back("Content-Encoding", "gzip");
    out->stream = NewGzipStream(std::move(out->stream));
  }
}

void HttpServer::Get(const std::string& path, HttpHandler handler, std::string link_text) {
  if (!link_text.empty()) links_.push_back({path, std::move(link_text)});
  routes_[path] = std::move(handler);
}

void HttpServer::Probe(const std::string& path, Check check, std::string link_text) {
  if (!link_text.empty()) links_.push_back({path, std::move(link_text)});
  probes_[path] = std::move(check);
}

// http_server_config.headers, on every answer of the routes and probes (as
// exporter-toolkit's handler adds them); not on the front's own 400/408/503.
void HttpServer::AddConfiguredHeaders(HttpResponse* out) const {
  for (const auto& [name, value] : options_.web.headers) out->headers.emplace_back(name, value);
}

bool HttpServer::ServeInline(const RequestHead& head, HttpResponse* out) {
  if (!ServeInlineRoutes(head, out)) return false;
  AddConfiguredHeaders(out);
  return true;
}

bool HttpServer::ServeInlineRoutes(const RequestHead& head, HttpResponse* out) {
  auto probe = probes_.find(head.path);
  if (probe != probes_.end()) {
    // No basic auth here (see the class comment); cheap enough for the I/O thread.
    absl::Status status = probe->second();
    *out = status.ok() ? PlainText(200, "ok") : Unavailable(status.message());
    return true;
  }
  if (routes_.count(head.path) == 0) {
    *out = PlainText(404, "404 page not found");
    return true;
  }
  return false;
}

void HttpServer::Serve(const RequestHead& head, HttpResponse* out) {
  ServeRoutes(head, out);
  AddConfiguredHeaders(out);
}

// A known route (ServeInlineRoutes answered the rest), behind basic auth.
void HttpServer::ServeRoutes(const RequestHead& head, HttpResponse* out) {
  if (!Admit(head, out)) return;
  routes_.at(head.path)(head, out);
}

absl::Status HttpServer::Start() {
  std::shared_ptr<ListenSocket> socket = options_.listen_socket;
  if (!socket) {
    absl::StatusOr<std::unique_ptr<ListenSocket>> opened = ListenSocket::Open(options_.listen_address, options_.web);
    if (!opened.ok()) return opened.status();
    socket = std::move(*opened);
  }
  port_ = socket->port();
  FrontOptions fo;
  fo.request_timeout_seconds = options_.timeout_seconds;
  fo.write_timeout_seconds = options_.timeout_seconds;
  fo.max_requests = options_.max_requests;
  fo.on_reset = [this](const char* reason) { telemetry_->CountReset(reason); };
  front_ = std::make_unique<HttpFront>(
      fo, [this](const RequestHead& h, HttpResponse* r) { return ServeInline(h, r); },
      [this](const RequestHead& h, HttpResponse* r) { Serve(h, r); },
      [this](const std::string& path, int status) {
        // Bounded label values: the telemetry path, registered routes and
        // probes by name; anything else an attacker sends is "other".
        std::string handler = path == options_.telemetry_path ? "metrics"
                              : (probes_.count(path) || (status != 404 && routes_.count(path))) ? path
                                                                                                : "other";
        telemetry_->CountRequest(handler, status);
      });
  front_->Start(std::move(socket));
  std::vector<std::string> probes;
  for (const auto& [path, check] : probes_) probes.push_back(path);
  SP_LOG_INFO("listening on ", options_.listen_address, " port ", port_, options_.web.tls() ? " (TLS)" : "",
              auth_.enabled() ? absl::StrCat(" with basic auth (not on ", absl::StrJoin(probes, ", "), ")") : "");
  return absl::OkStatus();
}

void HttpServer::Stop() {
  if (front_) front_->Stop();
}

}  // namespace sockpressure
