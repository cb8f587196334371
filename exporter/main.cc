// sockpressure_exporter: exports per-cgroup evidence of TCP receive windows
// throttled by memory-cgroup socket pressure (mm/vmpressure.c ->
// memcg->socket_pressure -> tcp_under_memory_pressure()).
//
// Data flows one way: sources -> sampler -> state -> snapshot -> outputs.
#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <memory>
#include <pthread.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
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
  KubeletOptions kubelet;  // namespace/pod/container labels (exporter/identity)
};

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
  flags.String("log.level", &opt.log_level, "Only log messages with the given severity or above: debug, info, warn, error.");
  RegisterKubeletFlags(&flags, &opt.kubelet);
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
  std::shared_ptr<const Snapshot> first = sampler.SampleOnce();
  SP_LOG_INFO("first sample: ", first->cgroups.size(), " memory cgroups (", CgroupModeName(first->cgroup_mode),
              " hierarchy); signal sources: reclaim=", TierName(first->signal_tier[0]),
              " socket_pressure=", TierName(first->signal_tier[1]), " window_clamps=", TierName(first->signal_tier[2]),
              " clamped_sockets=", TierName(first->signal_tier[3]), " sock_throttled=", TierName(first->signal_tier[4]));

  MetricsEndpoint metrics(&sampler, {kVersion, kRevision, kCompiler}, {opt.all_tiers});
  const double interval = ctx.interval_seconds;
  HttpServer server(http, &metrics, [&sampler, interval] {
    std::shared_ptr<const Snapshot> s = sampler.Latest();
    if (!s) return false;
    double age = absl::ToDoubleSeconds(absl::Now() - absl::FromUnixMillis(s->unix_millis));
    return age < 3 * interval + 5;
  });
  absl::Status started = server.Start();
  if (!started.ok()) {
    SP_LOG_ERROR(started.message());
    return 1;
  }
  sampler.Start();

  int sig = 0;
  sigwait(&stop_signals, &sig);
  SP_LOG_INFO("received signal ", sig, ", shutting down");
  server.Stop();
  sampler.Stop();
  return 0;
}

}  // namespace
}  // namespace sockpressure

int main(int argc, char** argv) { return sockpressure::Run(argc, argv); }
