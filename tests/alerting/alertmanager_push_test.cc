// The Alertmanager pusher against a fake Alertmanager on loopback: threshold,
// labels, retry with backoff after errors, resolve, periodic resend, bounds.
// (tests/alerting/alertmanager_test.py does the same against the real one.)
#include <google/protobuf/util/json_util.h>
#include <httplib.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <set>
#include <thread>

#include "absl/time/clock.h"
#include "exporter/alerting/alertmanager.h"
#include "exporter/alerting/alerting.pb.h"
#include "exporter/outputs/text_writer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sockpressure {
namespace {

using ::testing::HasSubstr;

class FakeAlertmanager {
 public:
  FakeAlertmanager() {
    server_.Post("/api/v2/alerts", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard<std::mutex> lock(mu_);
      if (fail_next_ > 0) {
        --fail_next_;
        res.status = 503;
        return;
      }
      api::v1::PostableAlerts batch;
      std::string wrapped = "{\"alerts\":" + req.body + "}";
      if (!google::protobuf::util::JsonStringToMessage(wrapped, &batch).ok()) {
        res.status = 400;
        return;
      }
      for (const auto& a : batch.alerts()) received_.push_back(a);
      res.status = 200;
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
  }
  ~FakeAlertmanager() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  void FailNext(int n) {
    std::lock_guard<std::mutex> lock(mu_);
    fail_next_ = n;
  }
  std::vector<api::v1::PostableAlert> Received() {
    std::lock_guard<std::mutex> lock(mu_);
    return received_;
  }

 private:
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  std::mutex mu_;
  int fail_next_ = 0;
  std::vector<api::v1::PostableAlert> received_;
};

template <typename F>
bool WaitFor(F cond, double seconds = 10) {
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int>(seconds * 1000));
  while (std::chrono::steady_clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return cond();
}

Episode MakeEpisode(double throttled, bool active = true) {
  Episode e;
  e.id = 7;
  e.cgroup = "/workload.slice/proxy.service";
  e.identity = {{"namespace", "web"}, {"pod", "proxy-0"}, {"container", "envoy"}};
  e.active = active;
  e.start_ms = absl::ToUnixMillis(absl::Now()) - 5000;
  e.last_throttled_ms = e.start_ms + 4000;
  e.end_ms = active ? 0 : e.last_throttled_ms;
  e.throttled_seconds = throttled;
  e.saw_pressure = true;
  return e;
}

AlertmanagerOptions Options(const std::string& url) {
  AlertmanagerOptions o;
  o.urls = {url};
  o.min_pressure_seconds = 3;
  o.resend_seconds = 0.3;
  o.max_backoff_seconds = 0.5;
  o.instance = "node-1:19100";
  o.extra_labels = {{"job", "sockpressure-exporter"}};
  o.external_url = "http://node-1:19100";
  return o;
}

TEST(AlertmanagerPush, FiresAfterThresholdWithRuleLabelsRetriesAndResolves) {
  FakeAlertmanager am;
  auto pusher = AlertmanagerPusher::Create(Options(am.url()));
  ASSERT_TRUE(pusher.ok()) << pusher.status();
  AlertmanagerPusher& p = **pusher;
  p.Start();

  p.Update({MakeEpisode(2.0)}, absl::ToUnixMillis(absl::Now()));
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  EXPECT_TRUE(am.Received().empty()) << "below --alertmanager.min-pressure-duration";

  am.FailNext(2);  // Alertmanager answers 503 twice: the pusher must retry
  p.Update({MakeEpisode(3.5)}, absl::ToUnixMillis(absl::Now()));
  ASSERT_TRUE(WaitFor([&] { return !am.Received().empty(); }));
  api::v1::PostableAlert a = am.Received().front();
  std::map<std::string, std::string> labels;
  for (const auto& [k, v] : a.labels()) labels[k] = v;
  std::map<std::string, std::string> want = {{"alertname", "SockPressureTCPThrottled"},
                                             {"severity", "warning"},
                                             {"cgroup", "/workload.slice/proxy.service"},
                                             {"namespace", "web"},
                                             {"pod", "proxy-0"},
                                             {"container", "envoy"},
                                             {"instance", "node-1:19100"},
                                             {"job", "sockpressure-exporter"}};
  EXPECT_EQ(labels, want);
  EXPECT_EQ(a.generator_url(), "http://node-1:19100/episodes#episode-7");
  EXPECT_GT(a.ends_at().seconds(), absl::ToUnixSeconds(absl::Now()));  // firing: endsAt ahead
  EXPECT_THAT(a.annotations().at("runbook_url"), HasSubstr("tcp-throttled.md"));
  // The tripping signal is an annotation, as in the rule: a label would make a
  // switch of signal a new alert (resolve + page again).
  EXPECT_EQ(a.annotations().at("signal"), "socket_pressure");

  // Firing alerts are refreshed every resend interval.
  size_t before = am.Received().size();
  ASSERT_TRUE(WaitFor([&] { return am.Received().size() >= before + 2; }));

  Episode closed = MakeEpisode(4.0, false);
  p.Update({closed}, absl::ToUnixMillis(absl::Now()));
  ASSERT_TRUE(WaitFor([&] {
    auto r = am.Received();
    return !r.empty() && r.back().ends_at().seconds() * 1000 + r.back().ends_at().nanos() / 1000000 == closed.end_ms;
  }));
  ASSERT_TRUE(WaitFor([&] { return p.Pending(0) == 0; }));
  std::unique_ptr<MetricWriter> w = NewTextWriter();
  p.WriteMetrics(*w);
  std::string m = w->Finish();
  EXPECT_THAT(m, HasSubstr("sockpressure_alertmanager_alerts{state=\"firing\"} 0\n"));
  EXPECT_THAT(m, HasSubstr("sockpressure_alertmanager_alerts{state=\"resolved\"} 0\n"));
  EXPECT_THAT(m, HasSubstr("sockpressure_alertmanager_errors_total{alertmanager=\"" + am.url() + "\"} 2\n"));
  EXPECT_THAT(m, HasSubstr("sockpressure_alertmanager_latency_seconds"));
  // Nothing more to send once resolved and acked.
  size_t n = am.Received().size();
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  EXPECT_EQ(am.Received().size(), n);
  p.Stop();
}

TEST(AlertmanagerPush, PushesCriticalPastItsThresholdAndResolvesBoth) {
  FakeAlertmanager am;
  AlertmanagerOptions o = Options(am.url());
  o.critical_min_pressure_seconds = 6;
  auto pusher = AlertmanagerPusher::Create(o);
  ASSERT_TRUE(pusher.ok()) << pusher.status();
  AlertmanagerPusher& p = **pusher;
  p.Start();
  auto names = [&](bool firing) {
    std::map<std::string, std::string> out;  // alertname -> severity
    for (const auto& a : am.Received()) {
      bool is_firing = a.ends_at().seconds() > absl::ToUnixSeconds(absl::Now());
      if (is_firing == firing) out[a.labels().at("alertname")] = a.labels().at("severity");
    }
    return out;
  };
  p.Update({MakeEpisode(4.0)}, absl::ToUnixMillis(absl::Now()));
  ASSERT_TRUE(WaitFor([&] { return names(true).count("SockPressureTCPThrottled") == 1; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(names(true).count("SockPressureTCPThrottledCritical"), 0u) << "below the critical threshold";

  p.Update({MakeEpisode(6.5)}, absl::ToUnixMillis(absl::Now()));
  ASSERT_TRUE(WaitFor([&] { return names(true).count("SockPressureTCPThrottledCritical") == 1; }));
  EXPECT_EQ(names(true)["SockPressureTCPThrottledCritical"], "critical");
  for (const auto& a : am.Received()) {
    if (a.labels().at("alertname") != "SockPressureTCPThrottledCritical") continue;
    EXPECT_THAT(a.annotations().at("runbook_url"), HasSubstr("#sockpressuretcpthrottledcritical"));
    EXPECT_EQ(a.labels().at("cgroup"), "/workload.slice/proxy.service");
    EXPECT_EQ(a.labels().at("instance"), "node-1:19100");
  }
  p.Update({MakeEpisode(7.0, false)}, absl::ToUnixMillis(absl::Now()));
  ASSERT_TRUE(WaitFor([&] {
    auto r = names(false);
    return r.count("SockPressureTCPThrottled") && r.count("SockPressureTCPThrottledCritical");
  })) << "both alerts resolve with the episode";
  p.Stop();
}

TEST(AlertmanagerPush, DefaultInstanceIsTheNodeNameWhenKnown) {
  // The ServiceMonitor relabels instance to the node name; with NODE_NAME set
  // (DaemonSet downward API) the pushed alert must carry the same value.
  EXPECT_EQ(DefaultAlertInstance("node-a", "host-1:19100"), "node-a");
  EXPECT_EQ(DefaultAlertInstance("", "host-1:19100"), "host-1:19100");
}

TEST(AlertmanagerPush, KeepsStateWhileAlertmanagerIsDownAndBoundsIt) {
  // Nothing listens on this port (bound once, then closed): every push is
  // refused, and the state is kept (bounded).
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  ::close(fd);
  AlertmanagerOptions o = Options("http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)));
  o.timeout_seconds = 2;
  o.max_alerts = 2;
  auto pusher = AlertmanagerPusher::Create(o);
  ASSERT_TRUE(pusher.ok());
  AlertmanagerPusher& p = **pusher;
  p.Start();
  std::vector<Episode> eps;
  for (int i = 0; i < 4; ++i) {
    Episode e = MakeEpisode(10);
    e.id = 100 + i;
    e.cgroup = "/c" + std::to_string(i);
    eps.push_back(e);
  }
  p.Update(eps, absl::ToUnixMillis(absl::Now()));
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));
  EXPECT_EQ(p.Pending(0), 2u);
  std::unique_ptr<MetricWriter> w = NewTextWriter();
  p.WriteMetrics(*w);
  std::string m = w->Finish();
  EXPECT_THAT(m, HasSubstr("sockpressure_alertmanager_dropped_total 2\n"));
  EXPECT_THAT(m, HasSubstr("sockpressure_alertmanager_up{alertmanager=\"" + o.urls[0] + "\"} 0\n"));
  EXPECT_THAT(p.Status(), HasSubstr("failing"));
  p.Stop();
}

TEST(AlertmanagerPush, StopsReadingAnOversizedAnswer) {
  // A broken or hostile Alertmanager answers 500 with an endless body (1 GiB
  // once took the agent to 2 GB): the pusher reads at most its cap, counts a
  // failure that says why, and the peer sees the connection closed long
  // before it has sent its body.
  constexpr size_t kOffered = size_t{256} << 20;
  std::atomic<size_t> sent{0};
  httplib::Server server;
  server.Post("/api/v2/alerts", [&](const httplib::Request&, httplib::Response& res) {
    res.status = 500;
    res.set_content_provider(kOffered, "text/plain", [&](size_t offset, size_t length, httplib::DataSink& sink) {
      static const std::string chunk(1 << 16, 'x');
      size_t n = std::min(length, chunk.size());
      if (!sink.write(chunk.data(), n)) return false;
      sent = offset + n;
      return true;
    });
  });
  int port = server.bind_to_any_port("127.0.0.1");
  std::thread serving([&] { server.listen_after_bind(); });
  AlertmanagerOptions o = Options("http://127.0.0.1:" + std::to_string(port));
  auto pusher = AlertmanagerPusher::Create(o);
  ASSERT_TRUE(pusher.ok());
  AlertmanagerPusher& p = **pusher;
  p.Start();
  p.Update({MakeEpisode(10)}, absl::ToUnixMillis(absl::Now()));
  EXPECT_TRUE(WaitFor([&] { return p.Status().find("larger than") != std::string::npos; }, 20)) << p.Status();
  p.Stop();
  server.stop();
  serving.join();
  // What the kernel buffers on both ends is a few MB; the rest is never sent.
  EXPECT_LT(sent.load(), kOffered / 8) << "the pusher kept reading the answer";
}

// An Alertmanager that reads the push and answers one byte every 200 ms,
// forever: its head (kHead), or, after a whole head, its body (kBody). Each
// recv() is quick, so only a deadline on the whole request ends it. Stop()
// closes its connections.
class TricklingAlertmanager {
 public:
  enum Mode { kHead, kBody };
  explicit TricklingAlertmanager(Mode mode = kHead) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    ::listen(fd_, 8);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this, mode] {
      const std::string answer = mode == kHead ? "HTTP/1.1 200 OK\r\nX-Slow: "
                                               : "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n";
      while (!stop_) {
        int c = ::accept(fd_, nullptr, nullptr);
        if (c < 0) return;
        {
          std::lock_guard<std::mutex> lock(mu_);
          conns_.push_back(c);
        }
        char buf[4096];
        (void)!::recv(c, buf, sizeof buf, 0);
        if (mode == kBody && ::send(c, answer.data(), answer.size(), MSG_NOSIGNAL) < 0) continue;
        for (size_t i = mode == kBody ? answer.size() : 0; !stop_; ++i) {
          char b = i < answer.size() ? answer[i] : 'x';
          if (::send(c, &b, 1, MSG_NOSIGNAL) != 1) break;
          std::this_thread::sleep_for(std::chrono::milliseconds(200));
        }
      }
    });
  }
  ~TricklingAlertmanager() { Stop(); }
  void Stop() {
    if (stop_.exchange(true)) return;
    ::shutdown(fd_, SHUT_RDWR);
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (int c : conns_) ::shutdown(c, SHUT_RDWR);
    }
    thread_.join();
    ::close(fd_);
    for (int c : conns_) ::close(c);
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::vector<int> conns_;
  std::thread thread_;
};

TEST(AlertmanagerPush, TricklingAlertmanagerMeetsTheDeadlineAndDoesNotHoldStop) {
  // A peer that trickles its answer used to wedge the pusher for good (the
  // timeout was per recv()) and SIGTERM waited 25-279 s. The whole request
  // now has --alertmanager.timeout, and Stop() cuts a request in flight.
  TricklingAlertmanager am;
  AlertmanagerOptions o = Options(am.url());
  o.timeout_seconds = 1;
  auto pusher = AlertmanagerPusher::Create(o);
  ASSERT_TRUE(pusher.ok());
  AlertmanagerPusher& p = **pusher;
  p.Start();
  p.Update({MakeEpisode(10)}, absl::ToUnixMillis(absl::Now()));
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(WaitFor([&] { return p.Status().find("failing") != std::string::npos; }, 4)) << p.Status();
  const double failed_after = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(failed_after, 2.5) << "a 1 s request deadline took " << failed_after << " s";
  EXPECT_THAT(p.Status(), HasSubstr("timeout")) << p.Status();
  // The retry is in flight again now (backoff 0.5 s): Stop() must not wait for it.
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  auto stop = std::async(std::launch::async, [&] { p.Stop(); });
  const bool stopped = stop.wait_for(std::chrono::seconds(2)) == std::future_status::ready;
  if (!stopped) am.Stop();  // let the wedged pusher go, so that the test can end
  EXPECT_TRUE(stopped) << "Stop() waited for a trickling Alertmanager";
}

TEST(AlertmanagerPush, AnAlertmanagerThatTricklesItsBodyMeetsTheDeadline) {
  // The same deadline once the head is whole: a 200 whose body comes a
  // byte at a time is no delivery, and fails at --alertmanager.timeout.
  TricklingAlertmanager am(TricklingAlertmanager::kBody);
  AlertmanagerOptions o = Options(am.url());
  o.timeout_seconds = 1;
  auto pusher = AlertmanagerPusher::Create(o);
  ASSERT_TRUE(pusher.ok());
  AlertmanagerPusher& p = **pusher;
  p.Start();
  p.Update({MakeEpisode(10)}, absl::ToUnixMillis(absl::Now()));
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(WaitFor([&] { return p.Status().find("failing") != std::string::npos; }, 4)) << p.Status();
  const double failed_after = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(failed_after, 2.5) << "a 1 s request deadline took " << failed_after << " s";
  EXPECT_THAT(p.Status(), HasSubstr("timeout")) << p.Status();
  EXPECT_EQ(p.Pending(0), 1u) << "a cut answer acknowledges nothing";
  auto stop = std::async(std::launch::async, [&] { p.Stop(); });
  const bool stopped = stop.wait_for(std::chrono::seconds(2)) == std::future_status::ready;
  if (!stopped) am.Stop();
  EXPECT_TRUE(stopped) << "Stop() waited for a trickling Alertmanager";
}

TEST(AlertmanagerPush, OverTheCapTheSameAlertsAreKept) {
  // 201 open episodes and room for 50: every push used to send a different
  // 50 (each sample re-admitted the dropped ones and evicted the oldest), and
  // the dropped counter rose by hundreds per second. The alerts that fired
  // first are kept while they fire; each refused alert is counted once.
  FakeAlertmanager am;
  AlertmanagerOptions o = Options(am.url());
  o.max_alerts = 50;
  o.critical_min_pressure_seconds = 0;
  auto pusher = AlertmanagerPusher::Create(o);
  ASSERT_TRUE(pusher.ok());
  AlertmanagerPusher& p = **pusher;
  p.Start();
  std::vector<Episode> eps;
  for (int i = 0; i < 201; ++i) {
    Episode e = MakeEpisode(10);
    e.id = 1000 + i;
    e.cgroup = "/c" + std::to_string(i);
    e.start_ms += i;  // they fired in this order
    eps.push_back(e);
  }
  for (int round = 0; round < 10; ++round) {
    p.Update(eps, absl::ToUnixMillis(absl::Now()));
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(WaitFor([&] { return p.Pending(0) == 0; }));
  std::set<std::string> pushed;
  for (const auto& a : am.Received()) pushed.insert(a.labels().at("cgroup"));
  std::set<std::string> first50;
  for (int i = 0; i < 50; ++i) first50.insert("/c" + std::to_string(i));
  EXPECT_EQ(pushed, first50) << pushed.size() << " identities pushed";
  std::unique_ptr<MetricWriter> w = NewTextWriter();
  p.WriteMetrics(*w);
  EXPECT_THAT(w->Finish(), HasSubstr("sockpressure_alertmanager_dropped_total 151\n"));
  p.Stop();
}

TEST(AlertmanagerPush, ASlowAlertmanagerDoesNotDelayTheOther) {
  // Both URLs get every alert; one trickles its answer. The other used to
  // wait behind it for the whole timeout (for ever, before the deadline).
  TricklingAlertmanager slow;
  FakeAlertmanager good;
  AlertmanagerOptions o = Options(slow.url());
  o.urls.push_back(good.url());
  o.timeout_seconds = 8;
  auto pusher = AlertmanagerPusher::Create(o);
  ASSERT_TRUE(pusher.ok());
  AlertmanagerPusher& p = **pusher;
  p.Start();
  // Let the slow one take its first push before the alert exists.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  p.Update({MakeEpisode(10)}, absl::ToUnixMillis(absl::Now()));
  EXPECT_TRUE(WaitFor([&] { return !good.Received().empty(); }, 2))
      << "the second Alertmanager waited behind the first: " << p.Status();
  p.Stop();
}

// Pressure on a cgroup with no TCP socket in it or below it never pages;
// the same episode pages once a socket is there.
TEST(AlertmanagerPush, PressureWithNothingToThrottleDoesNotPage) {
  FakeAlertmanager am;
  auto pusher = AlertmanagerPusher::Create(Options(am.url()));
  ASSERT_TRUE(pusher.ok()) << pusher.status();
  AlertmanagerPusher& p = **pusher;
  p.Start();
  Episode idle = MakeEpisode(10);
  idle.peak_subtree_sockets = 0;
  p.Update({idle}, absl::ToUnixMillis(absl::Now()));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_TRUE(am.Received().empty()) << "no socket to throttle";
  idle.peak_subtree_sockets = 1;
  // The remedy that fit goes out with the alert, with what it rests on.
  idle.remedy = Remedy{"swap_max", "set memory.swap.max=0 on /workload.slice/proxy.service", "swap on", "lab: x"};
  p.Update({idle}, absl::ToUnixMillis(absl::Now()));
  ASSERT_TRUE(WaitFor([&] { return !am.Received().empty(); }));
  const api::v1::PostableAlert sent = am.Received().front();
  ASSERT_EQ(sent.annotations().count("remedy"), 1u);
  EXPECT_EQ(sent.annotations().at("remedy"), "set memory.swap.max=0 on /workload.slice/proxy.service (seen: swap on; measured: lab: x)");
  p.Stop();
}

TEST(AlertmanagerPush, RejectsBadFlags) {
  EXPECT_FALSE(AlertmanagerPusher::Create(Options("alertmanager:9093")).ok());
  EXPECT_FALSE(ParseExtraLabels({"novalue"}).ok());
  EXPECT_FALSE(ParseExtraLabels({"1x=y"}).ok());
  auto ok = ParseExtraLabels({"job=sockpressure-exporter", "cluster=a=b"});
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ((*ok)[1].second, "a=b");
}

}  // namespace
}  // namespace sockpressure
