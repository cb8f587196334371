// The agent's HTTP endpoint: /metrics (text or protobuf, gzip when asked),
// /healthz, a landing page, and routes added by other outputs (JSON API).
// TLS and basic auth come from --web.config.file.
#pragma once

#include "absl/strings/string_view.h"
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "exporter/outputs/http/http_front.h"
#include "exporter/outputs/http/listen_socket.h"
#include "exporter/outputs/http/route.h"
#include "exporter/outputs/http/web_config.h"

namespace sockpressure {

struct HttpOptions {
  std::string listen_address = ":19100";
  std::string telemetry_path = "/metrics";
  int max_requests = 40;        // concurrent requests; more get 503
  double timeout_seconds = 10;  // whole-request read and whole-response write deadlines
  WebConfig web;
  // Opened by the caller before sampling starts (ListenSocket::Open), so that
  // start-up errors come first; when null, Start() opens it.
  std::shared_ptr<ListenSocket> listen_socket;
};

struct LandingLink {
  std::string path;
  std::string text;
};

// Routes, basic auth and request metrics over HttpFront (http_front.h).
// /healthz (and every Probe, e.g. /readyz) is answered on the front's I/O
// thread without basic auth (it reveals only "ok" or why not), so that
// kubelet httpGet probes work with auth on and no /metrics load can starve
// them.
// Thread-safe after Start(): handlers run on the front's worker threads.
//
// Every route is an HttpHandler (route.h), answered on a worker: it sets the
// response's body, or its stream for a body produced a piece at a time, so
// that a large answer is never whole in memory, whatever its readers do.
class HttpServer {
 public:
  // `telemetry` answers options.telemetry_path; `healthy` says whether the
  // sampler is alive (for /healthz).
  HttpServer(HttpOptions options, TelemetryEndpoint* telemetry, std::function<bool()> healthy);
  ~HttpServer();

  // Adds a GET route behind basic auth (call before Start). Links appear on
  // the landing page.
  void Get(const std::string& path, HttpHandler handler, std::string link_text = "");
  // Adds a probe answered as /healthz is (call before Start): on the I/O
  // thread, without basic auth; 200 "ok" while `check` is OK, else 503 with
  // its message.
  using Check = std::function<absl::Status()>;
  void Probe(const std::string& path, Check check, std::string link_text = "");

  // Binds and starts serving on a background thread.
  absl::Status Start();
  void Stop();
  int port() const { return port_; }
  bool tls() const { return options_.web.tls(); }

 private:
  bool Admit(const RequestHead& head, HttpResponse* out);
  void ServeLanding(HttpResponse* out) const;
  void ServeTelemetry(const RequestHead& head, HttpResponse* out);
  void Serve(const RequestHead& head, HttpResponse* out);
  bool ServeInline(const RequestHead& head, HttpResponse* out);
  void ServeRoutes(const RequestHead& head, HttpResponse* out);
  bool ServeInlineRoutes(const RequestHead& head, HttpResponse* out);
  void AddConfiguredHeaders(HttpResponse* out) const;

  HttpOptions options_;
  TelemetryEndpoint* telemetry_;
  std::map<std::string, HttpHandler> routes_;  // exact paths; fixed before Start()
  std::map<std::string, Check> probes_;    // /healthz and the like; fixed before Start()
  BasicAuthChecker auth_;
  std::vector<LandingLink> links_;
  std::unique_ptr<HttpFront> front_;
  int port_ = 0;
};

}  // namespace sockpressure
