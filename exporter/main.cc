// sockpressure_exporter: exports per-cgroup evidence of TCP receive windows
// throttled by memory-cgroup socket pressure (mm/vmpressure.c ->
// memcg->socket_pressure -> tcp_under_memory_pressure()).
//
// Data flows one way: sources -> sampler -> state -> snapshot -> outputs.
#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <memory>
#include <pthread.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "exporter/alerting/alertmanager.h"
#include "exporter/alerting/api.h"
#include "exporter/alerting/doctor.h"
#include "exporter/alerting/episodes.h"
#include "exporter/cli/flag_set.h"
#include "exporter/common/logging.h"
#include "exporter/identity/kubelet_client.h"
#include "exporter/outputs/http_server.h"
#include "exporter/outputs/metrics_endpoint.h"
#include "exporter/sampler/sampler.h"
#include "exporter/sources/source.h"
#include "exporter/state/state_tracker.h"
#include "exporter/version.h"

namespace sockpressure {
namespace {

struct Options {
  std::string listen_address = ":19100";
  std::string telemetry_path = "/metrics";
  std::string web_config_file;
  int64_t max_requests = 40;
  Paths paths;
  absl::Duration interval = absl::Seconds(1);
  int64_t cgroup_max = 5000;
  bool all_tiers = false;
  std::string log_level = "info";
  std::map<std::string, bool> collectors;
  std::string bpf_vmpressure_attach = "fentry,kprobe";
  std::string bpf_clamps_attach = "fexit,kprobe,tp_btf,raw_tp";
  KubeletOptions kubelet;  // namespace/pod/container labels (exporter/identity)
  // Alerting (exporter/alerting).
  bool doctor = false;
  absl::Duration episode_quiet = absl::Seconds(30);
  int64_t episode_history = 256;
  std::string external_url;
  std::vector<std::string> am_urls;
  absl::Duration am_min_pressure = absl::Seconds(10);
  absl::Duration am_resend = absl::Seconds(30);
  absl::Duration am_timeout = absl::Seconds(10);
  absl::Duration am_max_backoff = absl::Seconds(30);
  int64_t am_max_alerts = 1000;
  std::string am_instance;
  std::vector<std::string> am_extra_labels;
  std::string am_ca_file, am_basic_user, am_basic_password_file;
  bool am_insecure = false;
};

std::string Hostname() {
  char buf[256] = {0};
  if (gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

// Splits a comma list of eBPF attach types; false (after saying why) when
// one is not in `allowed`.
bool ParseAttachList(const char* flag, const std::string& text, std::initializer_list<absl::string_view> allowed,
                     std::vector<std::string>* out) {
  *out = absl::StrSplit(text, ',', absl::SkipEmpty());
  for (const std::string& a : *out) {
    if (std::find(allowed.begin(), allowed.end(), a) == allowed.end()) {
      std::fprintf(stderr, "sockpressure_exporter: --%s: unknown attach type '%s'\n", flag, a.c_str());
      return false;
    }
  }
  return true;
}

int Run(int argc, char** argv) {
  Options opt;
  FlagSet flags;
  flags.String("web.listen-address", &opt.listen_address, "Address to listen on for metrics and the API.");
  flags.String("web.telemetry-path", &opt.telemetry_path, "Path under which to expose metrics.");
  flags.String("web.config.file", &opt.web_config_file,
               "Path to a web configuration file (exporter-toolkit format) enabling TLS and/or basic auth.");
  flags.Int("web.max-requests", &opt.max_requests, "Maximum number of concurrent HTTP requests; more get 503.");
  flags.String("path.procfs", &opt.paths.procfs, "procfs mountpoint.");
  flags.String("path.sysfs", &opt.paths.sysfs, "sysfs mountpoint.");
  flags.String("path.cgroupfs", &opt.paths.cgroupfs, "cgroupfs mountpoint (cgroup v2, or the v1 tmpfs).");
  flags.Duration("sample.interval", &opt.interval, "How often the sampler reads every source.");
  flags.Int("cgroup.max", &opt.cgroup_max,
            "Maximum memory cgroups to track (breadth-first); the rest are counted in sockpressure_cgroups_untracked.");
  flags.Bool("signal.all-tiers", &opt.all_tiers,
             "Also export every live tier's per-cgroup verdicts side by side (sockpressure_tier_*{source}).");
  flags.String("bpf.vmpressure-attach", &opt.bpf_vmpressure_attach,
               "eBPF attach types to try for vmpressure(), best first (fentry, kprobe).");
  flags.String("bpf.clamps-attach", &opt.bpf_clamps_attach,
               "eBPF attach types to try for window clamps, best first (fexit, kprobe, tp_btf, raw_tp).");
  flags.String("log.level", &opt.log_level, "Only log messages with the given severity or above: debug, info, warn, error.");
  RegisterKubeletFlags(&flags, &opt.kubelet);
  flags.Bool("doctor", &opt.doctor,
             "Run the one-shot node report (same as the `doctor` command) and exit: 0 no throttling, 1 throttling "
             "found, 2 cannot tell.");
  flags.Duration("episodes.quiet-period", &opt.episode_quiet,
                 "A throttling episode ends after this long without socket pressure or clamps on its cgroup.");
  flags.Int("episodes.history", &opt.episode_history, "Recent throttling episodes kept for /api/v1/episodes and /episodes.");
  flags.String("web.external-url", &opt.external_url,
               "URL under which the agent is reachable (alert generatorURL links to <url>/episodes); default "
               "http://<hostname>:<listen port>.");
  flags.StringList("alertmanager.url", &opt.am_urls,
                   "Alertmanager to push SockPressureTCPThrottled alerts to (v2 API), e.g. http://alertmanager:9093.");
  flags.Duration("alertmanager.min-pressure-duration", &opt.am_min_pressure,
                 "Push an alert once an episode has been under socket pressure for this long.");
  flags.Duration("alertmanager.resend-interval", &opt.am_resend,
                 "Re-send firing alerts this often (their endsAt is 4 intervals ahead, so a dead agent's alerts expire).");
  flags.Duration("alertmanager.timeout", &opt.am_timeout, "Timeout of one push to Alertmanager.");
  flags.Duration("alertmanager.max-backoff", &opt.am_max_backoff,
                 "Upper bound of the retry backoff (from 500ms, doubling) while an Alertmanager fails.");
  flags.Int("alertmanager.max-alerts", &opt.am_max_alerts,
            "Alerts held for delivery at most; beyond it the oldest resolved ones are dropped.");
  flags.String("alertmanager.instance-label", &opt.am_instance,
               "`instance` label of pushed alerts; set it to the instance Prometheus gives this agent's target so "
               "pushed and rule-based alerts deduplicate (default <hostname>:<listen port>; \"none\" = no instance label).");
  flags.StringList("alertmanager.extra-label", &opt.am_extra_labels,
                   "NAME=VALUE label added to pushed alerts, e.g. job=sockpressure-exporter (what Prometheus adds to "
                   "the rule-based alert, plus any external_labels).");
  flags.String("alertmanager.ca-file", &opt.am_ca_file,
               "CA bundle that signed the certificates of https:// Alertmanagers (default: the system's roots).");
  flags.Bool("alertmanager.insecure-skip-verify", &opt.am_insecure,
             "Do not verify the certificates of https:// Alertmanagers (testing only).");
  flags.String("alertmanager.basic-auth.username", &opt.am_basic_user,
               "HTTP basic auth user for Alertmanager (its --web.config.file basic_auth_users).");
  flags.String("alertmanager.basic-auth.password-file", &opt.am_basic_password_file,
               "File holding the basic auth password (read at start; trailing newline ignored).");
  for (const SourceRegistration& r : RegisteredSources()) {
    opt.collectors[r.name] = r.enabled_by_default;
    flags.Bool(absl::StrCat("collector.", r.name), &opt.collectors[r.name],
               absl::StrCat("Enable the ", r.name, " collector: ", r.help, "."));
  }

  std::vector<std::string> positional;
  bool help = false, version = false;
  absl::Status parsed = flags.Parse(argc, argv, &positional, &help, &version);
  if (!parsed.ok()) {
    std::fprintf(stderr, "sockpressure_exporter: %s\n", std::string(parsed.message()).c_str());
    return 2;
  }
  if (help) {
    std::fputs(flags.Usage("sockpressure_exporter").c_str(), stdout);
    return 0;
  }
  if (version) {
    std::printf("sockpressure_exporter, version %s (revision: %s)\n  compiler: %s\n", kVersion, kRevision, kCompiler);
    return 0;
  }
  LogLevel level;
  if (!ParseLogLevel(opt.log_level, &level)) {
    std::fprintf(stderr, "sockpressure_exporter: --log.level must be debug, info, warn or error\n");
    return 2;
  }
  SetLogLevel(level);
  if (!positional.empty() && positional[0] == "doctor" && positional.size() == 1) {
    opt.doctor = true;
    positional.clear();
  }
  if (!positional.empty()) {
    std::fprintf(stderr, "sockpressure_exporter: unknown command '%s' (see --help)\n", positional[0].c_str());
    return 2;
  }
  if (opt.interval < absl::Milliseconds(100) || opt.cgroup_max < 1 || opt.max_requests < 1) {
    std::fprintf(stderr, "sockpressure_exporter: --sample.interval must be >= 100ms, --cgroup.max and "
                         "--web.max-requests >= 1\n");
    return 2;
  }

  HttpOptions http;
  http.listen_address = opt.listen_address;
  http.telemetry_path = opt.telemetry_path;
  http.max_requests = static_cast<int>(opt.max_requests);
  if (!opt.web_config_file.empty()) {
    absl::StatusOr<WebConfig> web = LoadWebConfig(opt.web_config_file);
    if (!web.ok()) {
      std::fprintf(stderr, "sockpressure_exporter: %s\n", std::string(web.status().message()).c_str());
      return 2;
    }
    http.web = *web;
  }

  // Block the stop signals before any thread starts, so that only the
  // sigwait() below receives them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  SourceContext ctx;
  ctx.paths = opt.paths;
  ctx.max_cgroups = static_cast<size_t>(opt.cgroup_max);
  ctx.interval_seconds = absl::ToDoubleSeconds(opt.interval);
  ctx.all_tiers = opt.all_tiers;
  ctx.bpf_enabled = opt.collectors["bpf"];
  if (!ParseAttachList("bpf.vmpressure-attach", opt.bpf_vmpressure_attach, {"fentry", "kprobe"},
                       &ctx.bpf_vmpressure_attach) ||
      !ParseAttachList("bpf.clamps-attach", opt.bpf_clamps_attach, {"fexit", "kprobe", "tp_btf", "raw_tp"},
                       &ctx.bpf_clamps_attach)) {
    return 2;
  }
  std::vector<std::unique_ptr<Source>> sources;
  std::vector<std::string> enabled;
  for (const SourceRegistration& r : RegisteredSources()) {
    if (!opt.collectors[r.name]) continue;
    if (std::unique_ptr<Source> s = r.factory(ctx)) {
      enabled.push_back(r.name);
      sources.push_back(std::move(s));
    }
  }
  SP_LOG_INFO("starting sockpressure_exporter ", kVersion, " (revision ", kRevision, "); collectors: ",
              absl::StrJoin(enabled, ","));

  // Declared before the sampler, which holds a raw pointer to it.
  absl::StatusOr<std::unique_ptr<KubeIdentityResolver>> identity = StartKubeIdentity(opt.kubelet, std::getenv("NODE_IP"));
  if (!identity.ok()) {
    std::fprintf(stderr, "sockpressure_exporter: %s\n", std::string(identity.status().message()).c_str());
    return 2;
  }
  // So that pods running at start-up have names from the first sample; an
  // absent kubelet delays start-up by at most this (the client's timeout).
  if (*identity) (*identity)->WaitForFirstAttempt(absl::Seconds(6));
  auto tracker = std::make_unique<StateTracker>(identity->get(), opt.all_tiers);
  Sampler sampler(std::move(sources), std::move(tracker), ctx.interval_seconds);
  if (opt.doctor) {
    DoctorOptions d;
    d.interval_seconds = ctx.interval_seconds;
    d.version = kVersion;
    d.paths_description = absl::StrCat("procfs=", opt.paths.procfs, " sysfs=", opt.paths.sysfs,
                                       " cgroupfs=", opt.paths.cgroupfs);
    return RunDoctor(sampler, d);
  }
  std::shared_ptr<const Snapshot> first = sampler.SampleOnce();
  SP_LOG_INFO("first sample: ", first->cgroups.size(), " memory cgroups (", CgroupModeName(first->cgroup_mode),
              " hierarchy); signal sources: reclaim=", TierName(first->signal_tier[0]),
              " socket_pressure=", TierName(first->signal_tier[1]), " window_clamps=", TierName(first->signal_tier[2]),
              " clamped_sockets=", TierName(first->signal_tier[3]), " sock_throttled=", TierName(first->signal_tier[4]));

  MetricsEndpoint metrics(&sampler, {kVersion, kRevision, kCompiler}, {opt.all_tiers});

  // Alerting: episodes from every snapshot, optional push to Alertmanager.
  EpisodeOptions episode_options;
  episode_options.quiet_seconds = absl::ToDoubleSeconds(opt.episode_quiet);
  episode_options.history = static_cast<size_t>(std::max<int64_t>(1, opt.episode_history));
  EpisodeTracker episodes(episode_options);
  episodes.Observe(*first);
  metrics.AddWriter([&episodes](const Snapshot& s, MetricWriter& w) { episodes.WriteMetrics(s, w); });
  std::unique_ptr<AlertmanagerPusher> pusher;
  if (!opt.am_urls.empty()) {
    absl::StatusOr<ListenAddress> listen = ParseListenAddress(opt.listen_address);
    std::string host_port = absl::StrCat(Hostname(), ":", listen.ok() ? listen->port : 19100);
    AlertmanagerOptions am;
    am.urls = opt.am_urls;
    am.min_pressure_seconds = absl::ToDoubleSeconds(opt.am_min_pressure);
    am.resend_seconds = std::max(0.1, absl::ToDoubleSeconds(opt.am_resend));
    am.timeout_seconds = absl::ToDoubleSeconds(opt.am_timeout);
    am.max_backoff_seconds = std::max(0.5, absl::ToDoubleSeconds(opt.am_max_backoff));
    am.max_alerts = static_cast<size_t>(std::max<int64_t>(1, opt.am_max_alerts));
    am.instance = opt.am_instance.empty() ? host_port : opt.am_instance == "none" ? "" : opt.am_instance;
    am.external_url = opt.external_url.empty()
                          ? absl::StrCat(http.web.tls() ? "https://" : "http://", host_port)
                          : opt.external_url;
    while (!am.external_url.empty() && am.external_url.back() == '/') am.external_url.pop_back();
    absl::StatusOr<LabelPairs> extra = ParseExtraLabels(opt.am_extra_labels);
    if (!extra.ok()) {
      std::fprintf(stderr, "sockpressure_exporter: %s\n", std::string(extra.status().message()).c_str());
      return 2;
    }
    am.extra_labels = *extra;
    am.ca_file = opt.am_ca_file;
    am.insecure_skip_verify = opt.am_insecure;
    am.basic_auth_username = opt.am_basic_user;
    am.basic_auth_password_file = opt.am_basic_password_file;
    absl::StatusOr<std::unique_ptr<AlertmanagerPusher>> created = AlertmanagerPusher::Create(am);
    if (!created.ok()) {
      std::fprintf(stderr, "sockpressure_exporter: %s\n", std::string(created.status().message()).c_str());
      return 2;
    }
    pusher = std::move(*created);
    metrics.AddWriter([p = pusher.get()](const Snapshot&, MetricWriter& w) { p->WriteMetrics(w); });
    SP_LOG_INFO("pushing alerts to ", absl::StrJoin(am.urls, ","), " as instance=\"", am.instance, "\"");
  }
  sampler.AddListener([&episodes, p = pusher.get()](const std::shared_ptr<const Snapshot>& s) {
    episodes.Observe(*s);
    if (p != nullptr) p->Update(episodes.OpenAndJustClosed(), s->unix_millis);
  });
  const double interval = ctx.interval_seconds;
  HttpServer server(http, &metrics, [&sampler, interval] {
    std::shared_ptr<const Snapshot> s = sampler.Latest();
    if (!s) return false;
    double age = absl::ToDoubleSeconds(absl::Now() - absl::FromUnixMillis(s->unix_millis));
    return age < 3 * interval + 5;
  });
  PageContext page;
  page.version = kVersion;
  if (pusher) page.alerting_status = [p = pusher.get()] { return p->Status(); };
  AddAlertingRoutes(server, sampler, episodes, page);
  absl::Status started = server.Start();
  if (!started.ok()) {
    SP_LOG_ERROR(started.message());
    return 1;
  }
  if (pusher) pusher->Start();
  sampler.Start();

  int sig = 0;
  sigwait(&stop_signals, &sig);
  SP_LOG_INFO("received signal ", sig, ", shutting down");
  server.Stop();
  sampler.Stop();
  if (pusher) pusher->Stop();
  return 0;
}

}  // namespace
}  // namespace sockpressure

int main(int argc, char** argv) { return sockpressure::Run(argc, argv); }
