// What the HTTP server (http_server.h) and the endpoints that answer through
// it share: a request's head (http_request.h) and query (query.h), the
// response a route gives back, the one handler shape, the answers every
// route words alike, and what the telemetry path's endpoint provides.
// Endpoints include this, never the front's epoll, sockets or TLS.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "exporter/outputs/http/body_stream.h"
#include "exporter/outputs/http/http_request.h"
#include "exporter/outputs/http/query.h"

namespace sockpressure {

struct HttpResponse {
  HttpResponse() = default;
  HttpResponse(int s, std::vector<std::pair<std::string, std::string>> h, std::string b)
      : status(s), headers(std::move(h)), body(std::move(b)) {}
  int status = 200;
  // Content-Length (or Transfer-Encoding) and Connection are added.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  // When set, the body instead of `body` (worker handlers only): produced a
  // piece at a time while it is written, with the chunked transfer coding
  // (HTTP/1.0: no length, the connection closes after it). Once a piece is
  // sent, a worker produces the next, so a response holds one piece of its
  // body, never the whole (the /metrics exposition is MBs).
  std::unique_ptr<BodyStream> stream;
};

// Answers one request: the one shape of every route (HttpServer::Get), of
// the telemetry endpoint and of the front's workers. A route reads its query
// with QueryParams(head.query). Runs on a worker thread: must be thread-safe.
using HttpHandler = std::function<void(const RequestHead&, HttpResponse*)>;

// A text/plain answer of `status` whose body is `text` and a newline.
inline HttpResponse PlainText(int status, absl::string_view text) {
  return {status, {{"Content-Type", "text/plain"}}, absl::StrCat(text, "\n")};
}

// The one "not ready" answer, 503 with the reason: a probe whose check
// fails (/healthz, /readyz), and every endpoint asked before the first sample
// (sampler.h's kNoSampleYet). One wording, so that a client or a person
// reads every route's "not yet" alike.
inline HttpResponse Unavailable(absl::string_view why) { return PlainText(503, why); }

// The endpoint at --web.telemetry-path (outputs/metrics_endpoint.h): it
// answers with a streamed body, which the server gzips when the client
// accepts it, and it counts every request the server answers.
class TelemetryEndpoint {
 public:
  virtual ~TelemetryEndpoint() = default;
  virtual void Serve(const RequestHead& request, HttpResponse* response) = 0;
  // `handler` is a bounded label value: "metrics", a route's path or "other".
  virtual void CountRequest(const std::string& handler, int code) = 0;
  // An answer reset before its client took it all; `reason` is "budget" or
  // "deadline" (FrontOptions::on_reset).
  virtual void CountReset(const std::string& reason) = 0;
};

}  // namespace sockpressure
