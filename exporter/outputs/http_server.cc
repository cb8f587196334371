#include "absl/strings/string_view.h"
#include "exporter/outputs/http_server.h"

#include <httplib.h>
#include <zlib.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "exporter/common/logging.h"

namespace sockpressure {

absl::StatusOr<ListenAddress> ParseListenAddress(absl::string_view text) {
  ListenAddress out;
  size_t colon = text.rfind(':');
  if (colon == absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat("listen address '", text, "' must be HOST:PORT or :PORT"));
  }
  absl::string_view host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  out.host = host.empty() ? "0.0.0.0" : std::string(host);
  if (!absl::SimpleAtoi(text.substr(colon + 1), &out.port) || out.port < 0 || out.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("listen address '", text, "': bad port"));
  }
  return out;
}

std::string Gzip(absl::string_view data) {
  z_stream zs{};
  // windowBits 15 + 16 selects the gzip wrapper.
  if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return {};
  std::string out;
  out.resize(deflateBound(&zs, data.size()) + 32);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  zs.avail_in = static_cast<uInt>(data.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  int rc = deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return rc == Z_STREAM_END ? out : std::string();
}

HttpServer::HttpServer(HttpOptions options, MetricsEndpoint* metrics, std::function<bool()> healthy)
    : options_(std::move(options)),
      metrics_(metrics),
      healthy_(std::move(healthy)),
      auth_(options_.web.basic_auth_users) {
  if (options_.web.tls()) {
    const char* ca = options_.web.client_ca_file.empty() ? nullptr : options_.web.client_ca_file.c_str();
    server_ = std::make_unique<httplib::SSLServer>(options_.web.cert_file.c_str(), options_.web.key_file.c_str(), ca);
  } else {
    server_ = std::make_unique<httplib::Server>();
  }
  links_.push_back({options_.telemetry_path, "Metrics"});
  links_.push_back({"/healthz", "Health"});
}

HttpServer::~HttpServer() { Stop(); }

bool HttpServer::Admit(const httplib::Request& req, httplib::Response& res) {
  if (auth_.enabled() && !auth_.Check(req.get_header_value("Authorization"))) {
    res.status = 401;
    res.set_header("WWW-Authenticate", "Basic realm=\"sockpressure\"");
    res.set_content("Unauthorized\n", "text/plain");
    return false;
  }
  return true;
}

void HttpServer::ServeMetrics(const httplib::Request& req, httplib::Response& res) {
  RenderedMetrics m = metrics_->Render(req.get_header_value("Accept"));
  if (m.body.empty()) {
    res.status = 503;
    res.set_content("no sample yet\n", "text/plain");
    return;
  }
  // httplib gzips text/* itself when the client accepts it; the protobuf
  // content type is not on its list, so compress that one here.
  bool proto = absl::StartsWith(m.content_type, "application/vnd.google.protobuf");
  if (proto && absl::StrContains(req.get_header_value("Accept-Encoding"), "gzip")) {
    std::string z = Gzip(m.body);
    if (!z.empty()) {
      res.set_header("Content-Encoding", "gzip");
      res.set_content(std::move(z), m.content_type.c_str());
      return;
    }
  }
  res.set_content(std::move(m.body), m.content_type.c_str());
}

void HttpServer::Get(const std::string& path, Handler handler, std::string link_text) {
  if (!link_text.empty()) links_.push_back({path, std::move(link_text)});
  server_->Get(path, [this, handler = std::move(handler)](const httplib::Request& req, httplib::Response& res) {
    if (Admit(req, res)) handler(req, res);
  });
}

absl::Status HttpServer::Start() {
  absl::StatusOr<ListenAddress> addr = ParseListenAddress(options_.listen_address);
  if (!addr.ok()) return addr.status();
  if (!server_->is_valid()) {
    return absl::InvalidArgumentError(
        absl::StrCat("TLS server could not load cert_file/key_file ", options_.web.cert_file, " / ",
                     options_.web.key_file));
  }
  int timeout_sec = static_cast<int>(options_.timeout_seconds);
  server_->set_read_timeout(timeout_sec, 0);
  server_->set_write_timeout(timeout_sec, 0);
  server_->set_keep_alive_timeout(5);
  server_->set_payload_max_length(64 * 1024);  // we accept no uploads
  // Bound the work in flight: beyond max_requests concurrent requests the
  // agent answers 503 at once instead of queueing unboundedly.
  server_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    // httplib runs the post-routing handler for every response written,
    // including this 503, so the counter is decremented there only.
    if (in_flight_.fetch_add(1) >= options_.max_requests) {
      res.status = 503;
      res.set_content("too many concurrent requests\n", "text/plain");
      return httplib::Server::HandlerResponse::Handled;
    }
    (void)req;
    return httplib::Server::HandlerResponse::Unhandled;
  });
  server_->set_post_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
    in_flight_.fetch_sub(1);
    std::string handler = req.path == options_.telemetry_path ? "metrics" : (res.status == 404 ? "other" : req.path);
    metrics_->CountRequest(handler, res.status);
  });
  server_->Get(options_.telemetry_path, [this](const httplib::Request& req, httplib::Response& res) {
    if (Admit(req, res)) ServeMetrics(req, res);
  });
  server_->Get("/healthz", [this](const httplib::Request& req, httplib::Response& res) {
    if (!Admit(req, res)) return;
    bool ok = healthy_();
    res.status = ok ? 200 : 503;
    res.set_content(ok ? "ok\n" : "sampler stalled\n", "text/plain");
  });
  server_->Get("/", [this](const httplib::Request& req, httplib::Response& res) {
    if (!Admit(req, res)) return;
    std::string html =
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>sockpressure exporter</title></head><body>"
        "<h1>sockpressure exporter</h1><p>Detects TCP receive windows throttled by memory-cgroup socket "
        "pressure.</p><ul>";
    for (const LandingLink& l : links_) absl::StrAppend(&html, "<li><a href=\"", l.path, "\">", l.text, "</a></li>");
    html += "</ul></body></html>\n";
    res.set_content(html, "text/html; charset=utf-8");
  });
  port_ = addr->port == 0 ? server_->bind_to_any_port(addr->host) : (server_->bind_to_port(addr->host, addr->port)
                                                                         ? addr->port
                                                                         : -1);
  if (port_ < 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options_.listen_address,
                                               " (address in use or not permitted)"));
  }
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  SP_LOG_INFO("listening on ", addr->host, ":", port_, options_.web.tls() ? " (TLS)" : "",
              auth_.enabled() ? " with basic auth" : "");
  return absl::OkStatus();
}

void HttpServer::Stop() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace sockpressure
