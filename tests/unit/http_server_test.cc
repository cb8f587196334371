#include "exporter/outputs/http_server.h"

#include <crypt.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include "absl/strings/match.h"
#include "exporter/sampler/sampler.h"
#include "exporter/sources/cgroupfs_source.h"
#include "test_util.h"

namespace sockpressure {
namespace {

class HttpServerTest : public ::testing::Test {
 protected:
  void StartServer(WebConfig web = {}) {
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
    server_ = std::make_unique<HttpServer>(opt, endpoint_.get(), [] { return true; });
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
  EXPECT_TRUE(absl::StrContains(text->body, "sockpressure_memcg_anon_bytes{cgroup=\"/workload.slice/proxy.service\"}"));

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

  sampler_->SampleOnce();  // the rendering is cached per snapshot
  auto again = client_->Get("/metrics");
  ASSERT_TRUE(again);
  EXPECT_TRUE(absl::StrContains(again->body, "sockpressure_http_requests_total{code=\"404\",handler=\"other\"}") ||
              absl::StrContains(again->body, "sockpressure_http_requests_total{handler=\"other\",code=\"404\"}"))
      << "request counter appears once a new snapshot is rendered";
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
  EXPECT_EQ(client_->Get("/healthz")->status, 401);
  client_->set_basic_auth("prometheus", "pw");
  auto ok = client_->Get("/metrics");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
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
