// sockpressure_exporter: exports per-cgroup evidence of TCP receive windows
// throttled by memory-cgroup socket pressure (mm/vmpressure.c ->
// memcg->socket_pressure -> tcp_under_memory_pressure()).
//
// Data flows one way: sources -> sampler -> state -> snapshot -> outputs.
#include <malloc.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <memory>
#include <pthread.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "exporter/alerting/alerting_flags.h"
#include "exporter/alerting/alertmanager.h"
#include "exporter/outputs/alerts_api.h"
#include "exporter/commands/doctor.h"
#include "exporter/alerting/episodes.h"
#include "exporter/cli/flag_set.h"
#include "exporter/common/logging.h"
#include "exporter/identity/cgroup_filter.h"
#include "exporter/identity/kubelet_client.h"
#include "exporter/outputs/http_flags.h"
#include "exporter/outputs/http/http_server.h"
#include "exporter/outputs/metrics_endpoint.h"
#include "exporter/sampler/sampler.h"
#include "exporter/sources/shared/capabilities.h"
#include "exporter/sources/source_flags.h"
#include "exporter/state/state_tracker.h"
#include "exporter/version.h"

namespace sockpressure {
namespace {

// Flags of what main itself decides; every area registers its own.
struct Options {
  HttpFlags http;
  SourceFlags sources;
  std::string log_level = "info";
  KubeletOptions kubelet;  // namespace/pod/container labels (exporter/identity)
  bool doctor = false;
  AlertingFlags alerting;
};

int Fail(const absl::Status& status) {
  std::fprintf(stderr, "sockpressure_exporter: %s\n", std::string(status.message()).c_str());
  return 2;
}

// The signal each tier serves on this node, for the start-up line.
std::string SignalTiers(const Snapshot& s) {
  std::vector<std::string> parts;
  for (int i = 0; i < kSignalCount; ++i) {
    parts.push_back(absl::StrCat(SignalName(static_cast<Signal>(i)), "=", TierName(s.signal_tier[i])));
  }
  return absl::StrJoin(parts, " ");
}

int Run(int argc, char** argv) {
  Options opt;
  // With glibc's default of 8 arenas per core, memory freed after thousands
  // of cgroups are gone stays scattered over arenas that malloc_trim()
  // cannot return; one arena can (bench/churn_rss.sh). The agent has few
  // threads, so one arena costs no contention worth measuring.
  mallopt(M_ARENA_MAX, 1);
  // Large blocks (the cgroup vectors of a sample and a snapshot, MBs at
  // thousands of cgroups) come and go with every sample. glibc raises its
  // mmap threshold to the size of the first large block freed, after which
  // such blocks are carved from the heap, where freed ones leave holes that
  // the next does not fit into (when /metrics bodies were still rendered
  // whole, bench/render.sh at 10,000 cgroups: peak RSS 78.9 -> 71.7 MiB with
  // this). A fixed threshold keeps every block of 4 MiB or more in its own
  // mapping, returned to the kernel when freed; the /metrics pieces (about
  // 1 MB, outputs/metrics_endpoint.h) stay below it and reuse the heap.
  mallopt(M_MMAP_THRESHOLD, 4 << 20);
  FlagSet flags;
  RegisterHttpFlags(&flags, &opt.http);
  RegisterSourceFlags(&flags, &opt.sources);
  flags.String("log.level", &opt.log_level, "Only log messages with the given severity or above: debug, info, warn, error.");
  RegisterKubeletFlags(&flags, &opt.kubelet);
  flags.Bool("doctor", &opt.doctor,
             "Run the one-shot node report (same as the `doctor` command) and exit: 0 no throttling, 1 throttling "
             "found, 2 cannot tell.");
  RegisterAlertingFlags(&flags, &opt.alerting);
  RegisterCollectorFlags(&flags, &opt.sources);

  std::vector<std::string> positional;
  bool help = false, version = false;
  absl::Status parsed = flags.Parse(argc, argv, &positional, &help, &version);
  if (!parsed.ok()) return Fail(parsed);
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
    return Fail(absl::InvalidArgumentError("--log.level must be debug, info, warn or error"));
  }
  SetLogLevel(level);
  if (!positional.empty() && positional[0] == "doctor" && positional.size() == 1) {
    opt.doctor = true;
    positional.clear();
  }
  if (!positional.empty()) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("unknown command '", positional[0], "' (see --help)")));
  }
  absl::StatusOr<SourceContext> ctx = SourceContextFromFlags(opt.sources);
  if (!ctx.ok()) return Fail(ctx.status());
  absl::StatusOr<std::function<bool(absl::string_view)>> cgroup_filter =
      NewCgroupFilter(opt.sources.cgroup_include, opt.sources.cgroup_exclude, opt.sources.cgroup_level);
  if (!cgroup_filter.ok()) return Fail(cgroup_filter.status());
  ctx->cgroup_exported = std::move(*cgroup_filter);
  absl::StatusOr<HttpOptions> http = HttpOptionsFromFlags(opt.http);
  if (!http.ok()) return Fail(http.status());
  // Bind and load TLS now, so that every HTTP start-up error (address, port
  // in use, certificate or key) is reported with its reason before any
  // sample is taken or thread started.
  if (!opt.doctor) {
    absl::StatusOr<std::unique_ptr<ListenSocket>> listener = ListenSocket::Open(http->listen_address, http->web);
    if (!listener.ok()) {
      Fail(listener.status());
      return 1;
    }
    http->listen_socket = std::move(*listener);
  }

  // Block the stop signals before any thread starts, so that only the
  // sigwait() below receives them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  std::vector<std::string> enabled;
  std::vector<std::unique_ptr<Source>> sources = NewEnabledSources(*ctx, &enabled);
  SP_LOG_INFO("starting sockpressure_exporter ", kVersion, " (revision ", kRevision, "); collectors: ",
              absl::StrJoin(enabled, ","));
  // Privileged set-up (eBPF loads and attaches) is done in the factories
  // above: drop every capability no collector declared, bounding set
  // included, before any thread starts, so that every thread inherits it.
  DropUnneededCapabilities();

  // Declared before the sampler, which holds a raw pointer to it.
  absl::StatusOr<std::unique_ptr<KubeIdentityResolver>> identity = StartKubeIdentity(opt.kubelet, std::getenv("NODE_IP"));
  if (!identity.ok()) return Fail(identity.status());
  // So that pods running at start-up have names from the first sample; an
  // absent kubelet delays start-up by at most this (the client's timeout).
  if (*identity) (*identity)->WaitForFirstAttempt(absl::Seconds(6));
  auto tracker = std::make_unique<StateTracker>(identity->get(), ctx->all_tiers);
  // doctor compares two consecutive samples: every collector reads both.
  const uint64_t context_every =
      opt.doctor ? 1 : static_cast<uint64_t>(std::max(1.0, ctx->context_seconds / ctx->interval_seconds));
  Sampler sampler(std::move(sources), std::move(tracker), ctx->interval_seconds, context_every);
  if (opt.doctor) {
    DoctorOptions d;
    d.interval_seconds = ctx->interval_seconds;
    d.version = kVersion;
    d.paths_description = absl::StrCat("procfs=", ctx->paths.procfs, " sysfs=", ctx->paths.sysfs,
                                       " cgroupfs=", ctx->paths.cgroupfs);
    return RunDoctor(sampler, d);
  }
  std::shared_ptr<const Snapshot> first = sampler.SampleOnce();
  SP_LOG_INFO("first sample: ", first->cgroups.size(), " memory cgroups (", CgroupModeName(first->cgroup_mode),
              " hierarchy); signal sources: ", SignalTiers(*first));

  MetricsEndpoint metrics(&sampler, {kVersion, kRevision, kCompiler}, {ctx->all_tiers, opt.http.context});

  // Alerting: episodes from every snapshot, optional push to Alertmanager.
  EpisodeTracker episodes(EpisodeOptionsFromFlags(opt.alerting));
  episodes.Observe(*first);
  // Not held for the agent's lifetime: the sampler keeps the latest snapshot,
  // and a second whole snapshot (8 MB at 10,000 cgroups) pinned here would
  // count toward every later peak.
  first.reset();
  metrics.AddWriter([&episodes](const Snapshot& s, MetricWriter& w) { episodes.WriteMetrics(s, w); });
  std::unique_ptr<AlertmanagerPusher> pusher;
  if (!opt.alerting.am_urls.empty()) {
    absl::StatusOr<AlertmanagerOptions> am =
        AlertmanagerOptionsFromFlags(opt.alerting, AgentHostPort(opt.http), http->web.tls());
    if (!am.ok()) return Fail(am.status());
    absl::StatusOr<std::unique_ptr<AlertmanagerPusher>> created = AlertmanagerPusher::Create(*am);
    if (!created.ok()) return Fail(created.status());
    pusher = std::move(*created);
    metrics.AddWriter([p = pusher.get()](const Snapshot&, MetricWriter& w) { p->WriteMetrics(w); });
    SP_LOG_INFO("pushing alerts to ", absl::StrJoin(am->urls, ","), " as instance=\"", am->instance, "\"");
  }
  sampler.AddListener([&episodes, p = pusher.get()](const std::shared_ptr<const Snapshot>& s) {
    episodes.Observe(*s);
    if (p != nullptr) p->Update(episodes.OpenAndJustClosed(), s->unix_millis);
  });
  HttpServer server(*http, &metrics, [&sampler] { return sampler.Healthy(); });
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
