// The kubelet client against a local HTTPS server that speaks the kubelet's
// /pods format: certificate verification with a test CA made at test time by
// the openssl CLI, bearer token checks and rotation, kubelet down then up.
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "exporter/identity/kubelet_client.h"
#include "exporter/identity/pod_index.h"
#include "tests/identity/fixture_util.h"

namespace sockpressure {
namespace {

namespace fs = std::filesystem;

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
}

// A fake kubelet: GET /pods with "Authorization: Bearer <token>" answers
// the fixture PodList, anything else 401, like the kubelet's authenticator.
class FakeKubeletServer {
 public:
  FakeKubeletServer(const std::string& dir, std::string body)
      : cert_(dir + "/server.crt"), key_(dir + "/server.key"), body_(std::move(body)) {}
  ~FakeKubeletServer() { Stop(); }

  // port 0: any free port. Returns the port, or -1.
  int Start(int port = 0) {
    server_ = std::make_unique<httplib::SSLServer>(cert_.c_str(), key_.c_str());
    if (!server_->is_valid()) return -1;
    server_->Get("/pods", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard<std::mutex> lk(mu_);
      ++requests_;
      if (req.get_header_value("Authorization") != "Bearer " + token_) {
        res.status = 401;
        res.set_content("Unauthorized", "text/plain");
        return;
      }
      res.set_content(body_, "application/json");
    });
    if (port == 0) {
      port = server_->bind_to_any_port("127.0.0.1");
    } else if (!server_->bind_to_port("127.0.0.1", port)) {
      return -1;
    }
    thread_ = std::thread([this] { server_->listen_after_bind(); });
    // stop() before the accept loop runs would be lost (the loop starts by
    // setting is_running), so wait for it; 0.11.4 has no wait_until_ready.
    for (int i = 0; i < 2000 && !server_->is_running(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return port;
  }
  void Stop() {
    if (server_) server_->stop();
    if (thread_.joinable()) thread_.join();
    server_.reset();
  }
  void SetToken(std::string t) {
    std::lock_guard<std::mutex> lk(mu_);
    token_ = std::move(t);
  }
  int requests() {
    std::lock_guard<std::mutex> lk(mu_);
    return requests_;
  }

 private:
  std::string cert_, key_, body_;
  std::unique_ptr<httplib::SSLServer> server_;
  std::thread thread_;
  std::mutex mu_;
  std::string token_ = "token-1";
  int requests_ = 0;
};

class KubeletTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = fs::temp_directory_path() / "sockpressure-kubelet-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    // A CA and a serving certificate for 127.0.0.1 signed by it (what
    // serverTLSBootstrap gives a kubelet), plus an unrelated CA.
    std::string ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    std::string cmd = absl::StrCat(
        "(cd '", dir_, "' && ",
        "openssl req -x509 ", ec, " -keyout ca.key -out ca.crt -days 2 -subj /CN=test-kubelet-ca && ",
        "openssl req ", ec, " -keyout server.key -out server.csr -subj /CN=system:node:node-1 && ",
        "printf 'subjectAltName=IP:127.0.0.1,DNS:node-1\\nextendedKeyUsage=serverAuth\\n' > ext.cnf && ",
        "openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt -days 2 "
        "-extfile ext.cnf && ",
        "openssl req -x509 ", ec, " -keyout other.key -out other-ca.crt -days 2 -subj /CN=other-ca)",
        " >/dev/null 2>&1");
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    WriteFile(dir_ + "/token", "token-1\n");
    options_.token_file = dir_ + "/token";
    options_.ca_file = dir_ + "/ca.crt";
    options_.timeout = absl::Seconds(2);
    server_ = std::make_unique<FakeKubeletServer>(dir_, testing::ReadAll(testing::FixturePath("pods-containerd.json")));
  }
  void TearDown() override {
    server_.reset();
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string Url(int port) { return absl::StrCat("https://127.0.0.1:", port); }

  std::string dir_;
  KubeletOptions options_;
  std::unique_ptr<FakeKubeletServer> server_;
};

TEST_F(KubeletTlsTest, VerifiedFetchAndTokenRotation) {
  int port = server_->Start();
  ASSERT_GT(port, 0);
  PodListFetcher fetch = KubeletPodListFetcher(options_, Url(port));  // no path: /pods
  absl::StatusOr<std::string> body = fetch();
  ASSERT_TRUE(body.ok()) << body.status();
  absl::StatusOr<PodIndex> pods = ParsePodList(*body);
  ASSERT_TRUE(pods.ok()) << pods.status();
  EXPECT_EQ(pods->size(), 5u);

  // The token rotates: the kubelet now wants the new one, the file still
  // has the old one.
  server_->SetToken("token-2");
  body = fetch();
  ASSERT_FALSE(body.ok());
  EXPECT_TRUE(absl::StrContains(body.status().message(), "HTTP 401")) << body.status();
  // The kubelet (projected volume) rewrites the file; the next request reads it.
  WriteFile(dir_ + "/token", "token-2\n");
  body = fetch();
  EXPECT_TRUE(body.ok()) << body.status();
}

TEST_F(KubeletTlsTest, VerificationIsOnByDefault) {
  int port = server_->Start();
  ASSERT_GT(port, 0);
  KubeletOptions o = options_;
  o.ca_file = dir_ + "/other-ca.crt";
  absl::StatusOr<std::string> body = KubeletPodListFetcher(o, Url(port))();
  ASSERT_FALSE(body.ok());
  EXPECT_TRUE(absl::StrContains(body.status().message(), "verif")) << body.status();

  o.ca_file = dir_ + "/missing.crt";
  body = KubeletPodListFetcher(o, Url(port))();
  ASSERT_FALSE(body.ok());
  EXPECT_TRUE(absl::StrContains(body.status().message(), "--kubelet.ca-file")) << body.status();

  o.insecure_skip_verify = true;
  body = KubeletPodListFetcher(o, Url(port) + "/pods")();
  EXPECT_TRUE(body.ok()) << body.status();

  // The certificate is for 127.0.0.1, not "localhost": the name is checked.
  body = KubeletPodListFetcher(options_, absl::StrCat("https://localhost:", port, "/pods"))();
  EXPECT_FALSE(body.ok());
}

TEST_F(KubeletTlsTest, KubeletDownThenUp) {
  // Learn a free port, then take the kubelet down.
  int port = server_->Start();
  ASSERT_GT(port, 0);
  server_->Stop();

  KubeIdentityOptions fast;
  fast.min_refresh_interval = absl::Milliseconds(20);
  fast.initial_backoff = absl::Milliseconds(50);
  fast.max_retries = 2;
  fast.max_backoff = absl::Milliseconds(100);
  KubeletOptions o = options_;
  o.url = Url(port);
  absl::StatusOr<std::unique_ptr<KubeIdentityResolver>> r = StartKubeIdentity(o, nullptr, fast);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_NE(*r, nullptr);
  ASSERT_TRUE((*r)->WaitForFirstAttempt(absl::Seconds(5)));
  EXPECT_EQ((*r)->stats().failures, 1u);
  const std::string pod =
      "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod6f1c2a4e_8b3d_4c5e_9f7a_1b2c3d4e5f60.slice";
  EXPECT_TRUE((*r)->Resolve(pod).empty());

  ASSERT_EQ(server_->Start(port), port);
  LabelPairs labels;
  for (int i = 0; i < 300 && labels.empty(); ++i) {
    labels = (*r)->Resolve(pod);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(labels, (LabelPairs{{"namespace", "default"}, {"pod", "web-0"}}));
  EXPECT_GE(server_->requests(), 1);
}

// A kubelet on loopback that answers GET /pods over plain TCP, whole or a
// byte a second: the response head, the body after a whole head, or, to an
// https:// client, a TLS record that never completes. A byte a second never
// trips a timeout per recv(). It gives up on a client after 15 s, so that
// a client without a total deadline fails its test rather than hanging it.
class TricklingKubelet {
 public:
  enum Mode { kWhole, kHead, kBody, kHandshake };
  explicit TricklingKubelet(std::string body) : body_(std::move(body)) {
    listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof sa;
    if (::bind(listener_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || ::listen(listener_, 8) != 0 ||
        ::getsockname(listener_, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
      return;
    }
    port_ = ntohs(sa.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~TricklingKubelet() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    ::close(listener_);
  }
  int port() const { return port_; }
  void SetMode(Mode m) { mode_ = m; }

 private:
  // Waits up to `ms` for `fd` to be readable; false once stop_ is set.
  bool WaitReadable(int fd, int ms) {
    for (int waited = 0; waited < ms && !stop_; waited += 50) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, std::min(50, ms - waited)) > 0) return true;
    }
    return false;
  }
  // One byte a second until all is sent, the client goes away, or 15 s.
  void Trickle(int fd, const std::string& bytes) {
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(15);
    for (char b : bytes) {
      if (std::chrono::steady_clock::now() > give_up) return;
      if (::send(fd, &b, 1, MSG_NOSIGNAL) != 1) return;
      if (WaitReadable(fd, 1000)) {
        char sink[4096];
        if (::recv(fd, sink, sizeof sink, MSG_DONTWAIT) <= 0) return;  // the client cut the request
      }
      if (stop_) return;
    }
  }
  void Serve() {
    while (!stop_) {
      if (!WaitReadable(listener_, 100)) continue;
      int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      std::string in;
      char buf[4096];
      const Mode mode = mode_;
      // The request head; a TLS client's hello is answered as it comes.
      while (mode == kHandshake ? in.empty() : in.find("\r\n\r\n") == std::string::npos) {
        if (!WaitReadable(fd, 5000)) break;
        ssize_t n = ::recv(fd, buf, sizeof buf, 0);
        if (n <= 0) break;
        in.append(buf, static_cast<size_t>(n));
      }
      const std::string head = absl::StrCat("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: ",
                                            body_.size(), "\r\nConnection: close\r\n\r\n");
      if (mode == kWhole) {
        const std::string all = head + body_;
        (void)!::send(fd, all.data(), all.size(), MSG_NOSIGNAL);
        ::shutdown(fd, SHUT_WR);
        WaitReadable(fd, 2000);  // the client's close, so that it reads the answer before any reset
      } else if (mode == kHead) {
        Trickle(fd, head + body_);
      } else if (mode == kBody) {
        (void)!::send(fd, head.data(), head.size(), MSG_NOSIGNAL);
        Trickle(fd, body_);
      } else {
        // A handshake record header announcing 16 KiB, then its bytes, slowly.
        Trickle(fd, std::string("\x16\x03\x03\x40\x00", 5) + std::string(1 << 14, '\0'));
      }
      ::close(fd);
    }
  }

  std::string body_;
  int listener_ = -1;
  int port_ = -1;
  std::atomic<bool> stop_{false};
  std::atomic<Mode> mode_{kWhole};
  std::thread thread_;
};

double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// httplib's timeouts are per recv(): a kubelet that sends a byte a second
// held the request, and the identity thread, for as long as it went on.
// The whole request now ends at the timeout (2 s here), with an error that
// names it; the same fetcher lists pods once the kubelet answers again.
TEST_F(KubeletTlsTest, AKubeletThatTricklesIsCutAtTheTimeout) {
  std::signal(SIGPIPE, SIG_IGN);  // as main() does: OpenSSL writes to a cut socket with write(2)
  TricklingKubelet kubelet(testing::ReadAll(testing::FixturePath("pods-containerd.json")));
  ASSERT_GT(kubelet.port(), 0);
  const std::string http = absl::StrCat("http://127.0.0.1:", kubelet.port(), "/pods");
  const std::string https = absl::StrCat("https://127.0.0.1:", kubelet.port(), "/pods");
  struct Case {
    const char* what;
    TricklingKubelet::Mode mode;
    std::string url;
  };
  for (const Case& c : {Case{"head", TricklingKubelet::kHead, http}, Case{"body", TricklingKubelet::kBody, http},
                        Case{"TLS handshake", TricklingKubelet::kHandshake, https}}) {
    SCOPED_TRACE(c.what);
    kubelet.SetMode(c.mode);
    PodListFetcher fetch = KubeletPodListFetcher(options_, c.url);
    const auto t0 = std::chrono::steady_clock::now();
    absl::StatusOr<std::string> body = fetch();
    const double took = SecondsSince(t0);
    ASSERT_FALSE(body.ok()) << "a trickled answer was taken";
    EXPECT_GE(took, 1.9) << body.status();
    EXPECT_LT(took, 3.0) << "the timeout is 2 s; " << body.status();
    EXPECT_EQ(body.status().code(), absl::StatusCode::kDeadlineExceeded) << body.status();
    EXPECT_TRUE(absl::StrContains(body.status().message(), "--kubelet.timeout (2s)")) << body.status();

    kubelet.SetMode(TricklingKubelet::kWhole);
    if (c.mode == TricklingKubelet::kHandshake) continue;  // a plain-TCP kubelet answers no https:// client
    body = fetch();
    ASSERT_TRUE(body.ok()) << body.status();
    EXPECT_TRUE(ParsePodList(*body).ok());
  }
}

// The identity thread (under its seccomp filter, which forbids new
// threads) meets the timeout too, keeps the last list meanwhile, and takes
// the next one once the kubelet behaves.
TEST_F(KubeletTlsTest, TheIdentityKeepsItsLastListWhileTheKubeletTrickles) {
  std::signal(SIGPIPE, SIG_IGN);  // as main() does: OpenSSL writes to a cut socket with write(2)
  TricklingKubelet kubelet(testing::ReadAll(testing::FixturePath("pods-containerd.json")));
  ASSERT_GT(kubelet.port(), 0);
  KubeIdentityOptions fast;
  fast.min_refresh_interval = absl::Milliseconds(20);
  fast.initial_backoff = absl::Milliseconds(50);
  fast.max_backoff = absl::Milliseconds(100);
  fast.settle = absl::Hours(1);  // a cgroup of a pod not listed asks for a list at each Resolve
  KubeletOptions o = options_;
  o.url = absl::StrCat("http://127.0.0.1:", kubelet.port(), "/pods");
  absl::StatusOr<std::unique_ptr<KubeIdentityResolver>> r = StartKubeIdentity(o, nullptr, fast);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_NE(*r, nullptr);
  KubeIdentityResolver& identity = **r;
  ASSERT_TRUE(identity.WaitForFirstAttempt(absl::Seconds(5)));
  ASSERT_EQ(identity.stats().successes, 1u);
  const std::string pod =
      "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod6f1c2a4e_8b3d_4c5e_9f7a_1b2c3d4e5f60.slice";
  const LabelPairs web0{{"namespace", "default"}, {"pod", "web-0"}};
  EXPECT_EQ(identity.Resolve(pod), web0);
  const std::string unlisted =
      "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod00000000_0000_0000_0000_000000000000.slice";

  for (TricklingKubelet::Mode mode : {TricklingKubelet::kHead, TricklingKubelet::kBody}) {
    SCOPED_TRACE(mode == TricklingKubelet::kHead ? "head" : "body");
    kubelet.SetMode(mode);
    const KubeIdentityResolver::Stats before = identity.stats();
    const auto t0 = std::chrono::steady_clock::now();
    identity.Resolve(unlisted);  // asks for a list
    while (identity.stats().failures == before.failures && SecondsSince(t0) < 20) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    const double took = SecondsSince(t0);
    EXPECT_EQ(identity.stats().failures, before.failures + 1);
    EXPECT_LT(took, 3.0) << "the timeout is 2 s";
    EXPECT_EQ(identity.Resolve(pod), web0) << "the last list, kept";

    kubelet.SetMode(TricklingKubelet::kWhole);
    const auto t1 = std::chrono::steady_clock::now();
    while (identity.stats().successes == before.successes && SecondsSince(t1) < 10) {
      identity.Resolve(unlisted);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_EQ(identity.stats().successes, before.successes + 1) << "the next list, once the kubelet behaves";
    EXPECT_EQ(identity.Resolve(pod), web0);
  }
}

TEST(KubeletFlagsTest, EffectiveUrl) {
  EXPECT_EQ(EffectiveKubeletUrl("", nullptr), "");
  EXPECT_EQ(EffectiveKubeletUrl("", ""), "");
  EXPECT_EQ(EffectiveKubeletUrl("", "10.0.0.11"), "https://10.0.0.11:10250/pods");
  EXPECT_EQ(EffectiveKubeletUrl("", "fd00::11"), "https://[fd00::11]:10250/pods");
  EXPECT_EQ(EffectiveKubeletUrl("none", "10.0.0.11"), "");
  EXPECT_EQ(EffectiveKubeletUrl("https://node-1:10250", "10.0.0.11"), "https://node-1:10250");

  KubeletOptions o;
  o.url = "ftp://node-1";
  EXPECT_FALSE(StartKubeIdentity(o, nullptr).ok());
  o.url = "";
  absl::StatusOr<std::unique_ptr<KubeIdentityResolver>> off = StartKubeIdentity(o, nullptr);
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(*off, nullptr);
}

}  // namespace
}  // namespace sockpressure

namespace sockpressure {
namespace {

TEST(KubeletBodyTest, RefusesAPodListNoNodeHas) {
  // A 60 MB pod list (the cap was 64 MB) took the agent from 26 MB to 765 MB
  // while it parsed. A node holds at most a few hundred pods, a few MB of
  // JSON: the fetch stops at the cap and says so, and the kubelet (here a
  // stand-in over plain http) never gets to send the rest.
  constexpr size_t kOffered = size_t{60} << 20;
  std::atomic<size_t> sent{0};
  httplib::Server server;
  server.Get("/pods", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content_provider(kOffered, "application/json", [&](size_t offset, size_t length, httplib::DataSink& sink) {
      static const std::string chunk(1 << 16, ' ');
      size_t n = std::min(length, chunk.size());
      if (!sink.write(chunk.data(), n)) return false;
      sent = offset + n;
      return true;
    });
  });
  int port = server.bind_to_any_port("127.0.0.1");
  std::thread serving([&] { server.listen_after_bind(); });
  absl::StatusOr<std::string> body =
      KubeletPodListFetcher(KubeletOptions{}, absl::StrCat("http://127.0.0.1:", port, "/pods"))();
  server.stop();
  serving.join();
  ASSERT_FALSE(body.ok()) << "a " << kOffered << "-byte pod list was accepted";
  EXPECT_TRUE(absl::StrContains(body.status().message(), "larger than")) << body.status();
  EXPECT_LT(sent.load(), kOffered / 2) << "the client kept reading";
}

}  // namespace
}  // namespace sockpressure
