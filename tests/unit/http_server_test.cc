#include "exporter/outputs/http/http_server.h"

#include <arpa/inet.h>
#include <crypt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <functional>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "exporter/outputs/metrics_endpoint.h"
#include "exporter/sampler/sampler.h"
#include "exporter/sources/cgroupfs_source.h"
#include "raw_http.h"
#include "test_util.h"

namespace sockpressure {
namespace {

class HttpServerTest : public ::testing::Test {
 protected:
  void StartServer(WebConfig web = {}, double timeout_seconds = 10,
                   std::function<void(HttpServer&)> add_routes = nullptr) {
    Paths paths;
    paths.cgroupfs = testing::Fixture("v2") + "/cgroup";
    std::vector<std::unique_ptr<Source>> sources;
    sources.push_back(NewCgroupfsSource(paths, {}));
    sampler_ = std::make_unique<Sampler>(std::move(sources), std::make_unique<StateTracker>(), 1.0);
    sampler_->SampleOnce();
    endpoint_ = std::make_unique<MetricsEndpoint>(sampler_.get(), BuildInfo{"t", "t", "t"}, EmitOptions{});
    HttpOptions opt;
    opt.listen_address = "127.0.0.1:0";
    opt.web = std::move(web);
    opt.timeout_seconds = timeout_seconds;
    server_ = std::make_unique<HttpServer>(opt, endpoint_.get(), [] { return true; });
    if (add_routes) add_routes(*server_);
    ASSERT_TRUE(server_->Start().ok());
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
    client_->set_decompress(false);
  }
  void TearDown() override {
    if (server_) server_->Stop();
  }

  std::unique_ptr<Sampler> sampler_;
  std::unique_ptr<MetricsEndpoint> endpoint_;
  std::unique_ptr<HttpServer> server_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(HttpServerTest, ServesTextProtobufHealthAndLanding) {
  StartServer();
  auto text = client_->Get("/metrics");
  ASSERT_TRUE(text);
  EXPECT_EQ(text->status, 200);
  EXPECT_TRUE(absl::StartsWith(text->get_header_value("Content-Type"), "text/plain; version=0.0.4"));
  EXPECT_TRUE(absl::StrContains(text->body,
                                "sockpressure_memcg_socket_pressure_events_total{cgroup=\"/workload.slice/proxy.service\"}"));
  EXPECT_FALSE(absl::StrContains(text->body, "sockpressure_memcg_anon_bytes")) << "context series are off by default";

  httplib::Headers proto_accept = {
      {"Accept", "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited"}};
  auto proto = client_->Get("/metrics", proto_accept);
  ASSERT_TRUE(proto);
  EXPECT_TRUE(absl::StartsWith(proto->get_header_value("Content-Type"), "application/vnd.google.protobuf"));
  EXPECT_FALSE(absl::StrContains(proto->body, "# HELP"));

  auto gz = client_->Get("/metrics", httplib::Headers{{"Accept-Encoding", "gzip"}});
  ASSERT_TRUE(gz);
  EXPECT_EQ(gz->get_header_value("Content-Encoding"), "gzip");
  EXPECT_LT(gz->body.size(), text->body.size() / 3);
  // The body depends on Accept-Encoding, gzipped or not.
  EXPECT_EQ(gz->get_header_value("Vary"), "Accept-Encoding");
  EXPECT_EQ(text->get_header_value("Vary"), "Accept-Encoding");

  proto_accept.emplace("Accept-Encoding", "gzip");
  auto gzproto = client_->Get("/metrics", proto_accept);
  ASSERT_TRUE(gzproto);
  EXPECT_EQ(gzproto->get_header_value("Content-Encoding"), "gzip");

  auto health = client_->Get("/healthz");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  auto landing = client_->Get("/");
  ASSERT_TRUE(landing);
  EXPECT_TRUE(absl::StrContains(landing->body, "href=\"/metrics\""));
  auto missing = client_->Get("/nope");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);

  sampler_->SampleOnce();
  auto again = client_->Get("/metrics");
  ASSERT_TRUE(again);
  EXPECT_TRUE(absl::StrContains(again->body, "sockpressure_http_requests_total{code=\"404\",handler=\"other\"}") ||
              absl::StrContains(again->body, "sockpressure_http_requests_total{handler=\"other\",code=\"404\"}"))
      << "request counter appears once a new snapshot is rendered";
}

// A body of `count` pieces of `size` bytes of 'x'.
class Repeat final : public BodyStream {
 public:
  Repeat(int count, size_t size) : left_(count), size_(size) {}
  bool Next(std::string* out) override {
    out->append(size_, 'x');
    return --left_ > 0;
  }

 private:
  int left_;
  size_t size_;
};

// An answer its client never reads is reset at the write deadline (1 s, plus
// 1 s per MB of what was sent), and /metrics says so, by reason. Like the
// request counter, a series appears with its first count: the exposition of
// an agent nobody troubled stays as it was.
TEST_F(HttpServerTest, AResetAnswerIsCountedByReason) {
  StartServer({}, 1, [](HttpServer& server) {
    server.Get("/big", [](const RequestHead&, HttpResponse* out) {
      *out = {200, {{"Content-Type", "text/plain"}}, ""};
      out->stream = std::make_unique<Repeat>(40, 100000);  // 4 MB: more than the kernel's buffers take
    });
  });
  const std::string metric = "sockpressure_http_responses_reset_total{reason=";
  auto before = client_->Get("/metrics");
  ASSERT_TRUE(before);
  EXPECT_FALSE(absl::StrContains(before->body, metric)) << "nothing reset yet";

  int fd = testing::ConnectLoopback(server_->port(), 5);
  ASSERT_GE(fd, 0);
  const std::string req = "GET /big HTTP/1.1\r\nHost: a\r\n\r\n";
  ASSERT_EQ(::send(fd, req.data(), req.size(), 0), static_cast<ssize_t>(req.size()));
  // Nothing read for 4 s: the deadline is about 1.7 s (1 s, and 0.7 s for
  // what the kernel's buffers took).
  absl::SleepFor(absl::Seconds(4));
  char buf[1 << 16];
  ssize_t n = 0;
  while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) {
  }
  EXPECT_EQ(n, -1);
  EXPECT_EQ(errno, ECONNRESET);
  ::close(fd);

  sampler_->SampleOnce();  // the counters are rendered with the next snapshot
  auto after = client_->Get("/metrics");
  ASSERT_TRUE(after);
  EXPECT_TRUE(absl::StrContains(after->body, metric + "\"deadline\"} 1"));
  EXPECT_FALSE(absl::StrContains(after->body, metric + "\"budget\"}"));
  EXPECT_TRUE(absl::StrContains(after->body, "# HELP sockpressure_http_responses_reset_total HTTP answers"));
}

TEST_F(HttpServerTest, AStreamedRouteAnswersInChunksBehindBasicAuth) {
  struct crypt_data data {};
  char salt[64];
  ASSERT_NE(crypt_gensalt_rn("$2b$", 4, nullptr, 0, salt, sizeof salt), nullptr);
  WebConfig web;
  web.basic_auth_users["prometheus"] = crypt_r("pw", salt, &data);
  StartServer(web, 10, [](HttpServer& server) {
    server.Get("/list", [](const RequestHead& head, HttpResponse* out) {
      *out = {200, {{"Content-Type", "text/plain"}}, ""};
      out->stream = std::make_unique<Repeat>(QueryParams(head.query).Has("one") ? 1 : 5, 1000);
    });
  });
  EXPECT_EQ(client_->Get("/list")->status, 401);
  client_->set_basic_auth("prometheus", "pw");
  auto many = client_->Get("/list");
  ASSERT_TRUE(many);
  EXPECT_EQ(many->status, 200);
  EXPECT_EQ(many->get_header_value("Transfer-Encoding"), "chunked");
  EXPECT_EQ(many->body, std::string(5000, 'x'));
  auto one = client_->Get("/list?one=1");
  ASSERT_TRUE(one);
  EXPECT_EQ(one->get_header_value("Content-Length"), "1000");
  EXPECT_EQ(one->body, std::string(1000, 'x'));
}

TEST_F(HttpServerTest, BasicAuthGuardsEverything) {
  struct crypt_data data {};
  char salt[64];
  ASSERT_NE(crypt_gensalt_rn("$2b$", 4, nullptr, 0, salt, sizeof salt), nullptr);
  WebConfig web;
  web.basic_auth_users["prometheus"] = crypt_r("pw", salt, &data);
  StartServer(web);
  auto denied = client_->Get("/metrics");
  ASSERT_TRUE(denied);
  EXPECT_EQ(denied->status, 401);
  // /healthz is open by design (kubelet httpGet probes carry no credentials;
  // it reveals only "ok"/"sampler stalled"): see docs/threat-model.md.
  EXPECT_EQ(client_->Get("/healthz")->status, 200);
  EXPECT_EQ(client_->Get("/")->status, 401);
  client_->set_basic_auth("prometheus", "pw");
  auto ok = client_->Get("/metrics");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
}

// http_server_config.headers: on every answer of the routes and probes, the
// 401 and 404 included, as exporter-toolkit's handler adds them.
TEST_F(HttpServerTest, ConfiguredHeadersOnEveryAnswer) {
  struct crypt_data data {};
  char salt[64];
  ASSERT_NE(crypt_gensalt_rn("$2b$", 4, nullptr, 0, salt, sizeof salt), nullptr);
  WebConfig web;
  web.basic_auth_users["prometheus"] = crypt_r("pw", salt, &data);
  web.headers = {{"X-Content-Type-Options", "nosniff"}, {"X-Frame-Options", "deny"}};
  StartServer(web);
  for (const char* path : {"/metrics", "/healthz", "/", "/nope"}) {
    for (bool auth : {false, true}) {
      SCOPED_TRACE(absl::StrCat(path, auth ? " with auth" : " without auth"));
      httplib::Client client("127.0.0.1", server_->port());
      if (auth) client.set_basic_auth("prometheus", "pw");
      auto r = client.Get(path);
      ASSERT_TRUE(r);
      EXPECT_EQ(r->get_header_value("X-Content-Type-Options"), "nosniff") << r->status;
      EXPECT_EQ(r->get_header_value("X-Frame-Options"), "deny") << r->status;
      EXPECT_EQ(r->get_header_value_count("X-Frame-Options"), 1u);
    }
  }
}

using testing::RawExchange;

// A client that half-closes after its request is answered, then the
// connection ends: the answer must say so (Connection: close), whether an
// inline route or a worker answers.
TEST_F(HttpServerTest, HalfClosedConnectionIsAnsweredWithConnectionClose) {
  StartServer();
  for (const char* path : {"/healthz", "/metrics"}) {
    SCOPED_TRACE(path);
    int fd = testing::ConnectLoopback(server_->port(), 3);
    ASSERT_GE(fd, 0);
    const std::string request = absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: a\r\n\r\n");
    // Corked, the request waits in the send queue and the FIN rides on its
    // segment: the server reads the request and the end together, always.
    int on = 1;
    ASSERT_EQ(::setsockopt(fd, IPPROTO_TCP, TCP_CORK, &on, sizeof on), 0);
    ASSERT_EQ(::send(fd, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
    ::shutdown(fd, SHUT_WR);
    std::string out;
    char buf[65536];
    for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) out.append(buf, static_cast<size_t>(n));
    ::close(fd);
    ASSERT_TRUE(absl::StartsWith(out, "HTTP/1.1 200")) << out.substr(0, 200);
    const std::string head = out.substr(0, out.find("\r\n\r\n"));
    EXPECT_TRUE(absl::StrContains(head, "Connection: close")) << head;
    EXPECT_FALSE(absl::StrContains(head, "keep-alive")) << head;
  }
}

TEST_F(HttpServerTest, PipelinedRequestsAndHeadAreAnsweredInOrder) {
  StartServer();
  std::string out = RawExchange(server_->port(),
                                "GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n"
                                "HEAD /metrics HTTP/1.1\r\nHost: a\r\n\r\n"
                                "GET /nope HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
  size_t first = out.find("HTTP/1.1 200 OK"), second = out.find("HTTP/1.1 200 OK", first + 1),
         third = out.find("HTTP/1.1 404");
  ASSERT_NE(first, std::string::npos) << out;
  ASSERT_NE(second, std::string::npos) << out;
  ASSERT_NE(third, std::string::npos) << out;
  EXPECT_LT(second, third);
  // HEAD: the length of the body that GET would send, and no body.
  absl::string_view head_reply = absl::string_view(out).substr(second, third - second);
  EXPECT_TRUE(absl::StrContains(head_reply, "Content-Length: ")) << head_reply;
  EXPECT_TRUE(absl::EndsWith(head_reply, "\r\n\r\n")) << head_reply;
  EXPECT_TRUE(absl::StrContains(out.substr(third), "Connection: close"));
}

TEST_F(HttpServerTest, UnfinishedHeadGets408AtTheDeadline) {
  StartServer({}, /*timeout_seconds=*/1);
  absl::Time start = absl::Now();
  std::string out = RawExchange(server_->port(), "GET /metrics HTTP/1.1\r\nHost: a\r\n");
  double took = absl::ToDoubleSeconds(absl::Now() - start);
  EXPECT_TRUE(absl::StartsWith(out, "HTTP/1.1 408")) << out;
  EXPECT_GE(took, 0.9);
  EXPECT_LT(took, 2.9) << "closed by the whole-request deadline, not the client's 3 s receive timeout";
}

TEST(RequestHeadTest, RefusesBodiesAndBadHeads) {
  RequestHead h;
  EXPECT_EQ(ParseRequestHead("GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\nAccept-Encoding: gzip", &h).status, 0);
  EXPECT_EQ(h.path, "/metrics");
  EXPECT_EQ(h.query, "x=1");
  EXPECT_EQ(h.Header("accept-encoding"), "gzip");
  EXPECT_TRUE(h.keep_alive);
  RequestHead close;
  EXPECT_EQ(ParseRequestHead("GET / HTTP/1.0", &close).status, 0);
  EXPECT_FALSE(close.keep_alive);
  auto status = [](absl::string_view head) {
    RequestHead r;
    return ParseRequestHead(head, &r).status;
  };
  EXPECT_EQ(status("GARBAGE"), 400);
  EXPECT_EQ(status("GET /a HTTP/1.1\r\nno colon"), 400);
  EXPECT_EQ(status("GET /a HTTP/2.0"), 505);
  EXPECT_EQ(status("GET * HTTP/1.1"), 400);
  EXPECT_EQ(status("TRACE /a HTTP/1.1"), 405);
  EXPECT_EQ(status("POST /a HTTP/1.1\r\nContent-Length: 10485760"), 413);
  EXPECT_EQ(status("POST /a HTTP/1.1\r\nContent-Length: -1"), 400);
  EXPECT_EQ(status("POST /a HTTP/1.1\r\nContent-Length: 99999999999999999999999"), 400);
  EXPECT_EQ(status("GET /a HTTP/1.1\r\nTransfer-Encoding: chunked"), 501);
  EXPECT_EQ(status("GET /a HTTP/1.1\r\nHost: a\r\nContent-Length: 0"), 0);
  // RFC 9112 3.2: an HTTP/1.1 request without exactly one Host is a 400.
  EXPECT_EQ(status("GET /a HTTP/1.1"), 400);
  EXPECT_EQ(status("GET /a HTTP/1.1\r\nHost: a\r\nHost: b"), 400);
  EXPECT_EQ(status("GET /a HTTP/1.0"), 0) << "HTTP/1.0 needs no Host";
}

TEST(RequestHeadTest, GzipHonoursQValues) {
  EXPECT_TRUE(AcceptsGzip("gzip"));
  EXPECT_TRUE(AcceptsGzip("deflate, GZIP;q=0.5"));
  EXPECT_TRUE(AcceptsGzip("*"));
  EXPECT_FALSE(AcceptsGzip(""));
  EXPECT_FALSE(AcceptsGzip("gzip;q=0"));
  EXPECT_FALSE(AcceptsGzip("gzip; q=0.000, identity"));
  EXPECT_FALSE(AcceptsGzip("deflate"));
  // A coding named explicitly takes precedence over "*" (RFC 9110 12.5.3).
  EXPECT_FALSE(AcceptsGzip("gzip;q=0, *"));
  EXPECT_FALSE(AcceptsGzip("*, gzip;q=0"));
  EXPECT_TRUE(AcceptsGzip("*;q=0, gzip"));
  EXPECT_FALSE(AcceptsGzip("identity, *;q=0"));
}

TEST(ListenAddressTest, Forms) {
  auto a = ParseListenAddress(":19100");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "0.0.0.0");
  EXPECT_EQ(a->port, 19100);
  auto b = ParseListenAddress("[::1]:80");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->host, "::1");
  EXPECT_FALSE(ParseListenAddress("19100").ok());
  EXPECT_FALSE(ParseListenAddress(":99999").ok());
}

}  // namespace
}  // namespace sockpressure
