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
#include <optional>
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
#include "exporter/common/thread_privilege.h"
#include "exporter/identity/cgroup_filter.h"
#include "exporter/identity/kubelet_client.h"
#include "exporter/outputs/http_flags.h"
#include "exporter/outputs/http/http_server.h"
#include "exporter/outputs/metrics_endpoint.h"
#include "exporter/sampler/sampler.h"
#include "exporter/sources/shared/capabilities.h"
#include "exporter/sources/shared/privileged_worker.h"
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

// With glibc's default of 8 arenas per core, memory freed after thousands
// of cgroups are gone stays scattered over arenas that malloc_trim()
// cannot return; one arena can (bench/churn_rss.sh). The agent has few
// threads, so one arena costs no contention worth measuring.
// Large blocks (the cgroup vectors of a sample and a snapshot, MBs at
// thousands of cgroups) come and go with every sample. glibc raises its
// mmap threshold to the size of the first large block freed, after which
// such blocks are carved from the heap, where freed ones leave holes that
// the next does not fit into (when /metrics bodies were still rendered
// whole, bench/render.sh at 10,000 cgroups: peak RSS 78.9 -> 71.7 MiB with
// this). A fixed threshold keeps every block of 4 MiB or more in its own
// mapping, returned to the kernel when freed; the /metrics pieces (about
// 1 MB, outputs/metrics_endpoint.h) stay below it and reuse the heap.
void TuneMalloc() {
  mallopt(M_ARENA_MAX, 1);
  mallopt(M_MMAP_THRESHOLD, 4 << 20);
}

void RegisterFlags(FlagSet& flags, Options& opt) {
  RegisterHttpFlags(&flags, &opt.http);
  RegisterSourceFlags(&flags, &opt.sources);
  flags.String("log.level", &opt.log_level, "Only log messages with the given severity or above: debug, info, warn, error.");
  RegisterKubeletFlags(&flags, &opt.kubelet);
  flags.Bool("doctor", &opt.doctor, "Deprecated: the `doctor` command, which it runs.");
  RegisterAlertingFlags(&flags, &opt.alerting);
  RegisterCollectorFlags(&flags, &opt.sources);
}

// Parses the command line into `opt` and sets the log level; returns the
// exit code when there is nothing left to do (--help, --version, an error).
std::optional<int> ParseCommandLine(FlagSet& flags, int argc, char** argv, Options& opt) {
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
  if (absl::Status profile = MetricsProfileFromFlags(flags, &opt.http); !profile.ok()) return Fail(profile);
  // One way to run the report: the `doctor` command; --doctor is its old spelling.
  if (flags.Given("doctor")) SP_LOG_WARN("--doctor is deprecated: run `sockpressure_exporter doctor`");
  if (!positional.empty() && positional[0] == "doctor" && positional.size() == 1) {
    opt.doctor = true;
    positional.clear();
  }
  if (!positional.empty()) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("unknown command '", positional[0], "' (see --help)")));
  }
  return std::nullopt;
}

// The sources' context, with the cgroups --cgroup.include/exclude/level export.
absl::StatusOr<SourceContext> SourceContextOf(const SourceFlags& sources) {
  absl::StatusOr<SourceContext> ctx = SourceContextFromFlags(sources);
  if (!ctx.ok()) return ctx.status();
  absl::StatusOr<std::function<bool(absl::string_view)>> cgroup_filter =
      NewCgroupFilter(sources.cgroup_include, sources.cgroup_exclude, sources.cgroup_level);
  if (!cgroup_filter.ok()) return cgroup_filter.status();
  ctx->cgroup_exported = std::move(*cgroup_filter);
  return ctx;
}

// Bind and load TLS now, so that every HTTP start-up error (address, port
// in use, certificate or key) is reported with its reason before any
// collector is set up or thread started.
absl::Status OpenListenSocket(HttpOptions& http) {
  absl::StatusOr<std::unique_ptr<ListenSocket>> listener = ListenSocket::Open(http.listen_address, http.web);
  if (!listener.ok()) return listener.status();
  http.listen_socket = std::move(*listener);
  return absl::OkStatus();
}

// Blocks the stop signals, and SIGHUP, before any thread starts, so that
// only the sigwait() in WaitForStop receives them. SIGHUP's default action
// would end the agent without a word (a `systemctl reload`, a closed
// terminal); it is logged and ignored instead.
sigset_t BlockStopSignals() {
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  return stop_signals;
}

// Everything the agent runs, in the order it is built. Members are destroyed
// in reverse, so each outlives what holds a pointer to it: the sampler holds
// the identity resolver, and the server holds the sampler, the metrics
// endpoint, the episodes and the pusher.
struct Agent {
  std::unique_ptr<KubeIdentityResolver> identity;
  std::unique_ptr<Sampler> sampler;
  std::unique_ptr<MetricsEndpoint> metrics;
  std::unique_ptr<EpisodeTracker> episodes;
  std::unique_ptr<AlertmanagerPusher> pusher;
  std::unique_ptr<HttpServer> server;
};

// The kubelet identity and the sampler, still without collectors (those
// load eBPF programs, which takes seconds under emulation: the agent serves
// meanwhile).
absl::Status BuildSampler(const Options& opt, const SourceContext& ctx, Agent& agent) {
  absl::StatusOr<std::unique_ptr<KubeIdentityResolver>> identity = StartKubeIdentity(opt.kubelet, std::getenv("NODE_IP"));
  if (!identity.ok()) return identity.status();
  agent.identity = std::move(*identity);
  // doctor keeps every tier's values: it holds the best tier to memory.stat itself (doctor_node.h).
  auto tracker = std::make_unique<StateTracker>(agent.identity.get(), ctx.all_tiers || opt.doctor);
  // doctor compares two consecutive samples: every collector reads both.
  const uint64_t context_every =
      opt.doctor ? 1 : static_cast<uint64_t>(std::max(1.0, ctx.context_seconds / ctx.interval_seconds));
  agent.sampler = std::make_unique<Sampler>(std::vector<std::unique_ptr<Source>>{}, std::move(tracker),
                                            ctx.interval_seconds, context_every);
  return absl::OkStatus();
}

// The collectors. Their factories do the privileged set-up (eBPF loads and
// attaches) on this thread; then every capability no collector declared is
// dropped, the privileged worker starts with what is left (it inherits this
// thread's set), and this thread, which from here on only waits for
// signals, gives up the rest. The threads started before dropped everything
// when they started (common/thread_privilege.h).
void AddCollectors(const SourceContext& ctx, Agent& agent) {
  std::vector<std::string> enabled;
  std::vector<std::unique_ptr<Source>> sources = NewEnabledSources(ctx, &enabled);
  SP_LOG_INFO("collectors: ", absl::StrJoin(enabled, ","));
  DropUnneededCapabilities();
  if (CapabilityRequests() > 0) PrivilegedWorker::Get().Start();
  EnterUnprivilegedThread(nullptr);
  agent.sampler->SetWorkerRunner([](const std::function<void()>& job) {
    bool ran = false;
    PrivilegedWorker::Get().Run([&] {
      ran = true;
      job();
    });
    return ran;
  });
  agent.sampler->AddSources(std::move(sources));
}

// So that pods running at start-up have names from the first sample; an
// absent kubelet delays the first sample by at most this (the client's
// timeout).
constexpr absl::Duration kFirstKubeletAttempt = absl::Seconds(6);

int Doctor(const SourceContext& ctx, Agent& agent) {
  if (agent.identity) agent.identity->WaitForFirstAttempt(kFirstKubeletAttempt);
  DoctorOptions d;
  d.interval_seconds = ctx.interval_seconds;
  d.version = kVersion;
  d.paths_description = absl::StrCat("procfs=", ctx.paths.procfs, " sysfs=", ctx.paths.sysfs,
                                     " cgroupfs=", ctx.paths.cgroupfs);
  return RunDoctor(*agent.sampler, d);
}

// The start-up line for the first snapshot: what serves each signal here.
void LogFirstSample(Sampler& sampler) {
  sampler.AddListener([](const std::shared_ptr<const Snapshot>& s) {
    if (s->sequence != 1) return;
    SP_LOG_INFO("first sample: ", s->cgroups.size(), " memory cgroups (", CgroupModeName(s->cgroup_mode),
                " hierarchy); signal sources: ", SignalTiers(*s));
  });
}

// /metrics, and alerting: episodes from every snapshot from the first on,
// the optional push to Alertmanager, and their metrics.
absl::Status BuildOutputs(const Options& opt, const SourceContext& ctx, const HttpOptions& http, Agent& agent) {
  Sampler& sampler = *agent.sampler;
  agent.metrics = std::make_unique<MetricsEndpoint>(&sampler, BuildInfo{kVersion, kRevision, kCompiler},
                                                    EmitOptions{ctx.all_tiers, opt.http.context});
  agent.episodes = std::make_unique<EpisodeTracker>(EpisodeOptionsFromFlags(opt.alerting));
  EpisodeTracker& episodes = *agent.episodes;
  agent.metrics->AddWriter([&episodes](const Snapshot& s, MetricWriter& w) { episodes.WriteMetrics(s, w); });
  if (!opt.alerting.am_urls.empty()) {
    absl::StatusOr<AlertmanagerOptions> am =
        AlertmanagerOptionsFromFlags(opt.alerting, AgentHostPort(opt.http), http.web.tls());
    if (!am.ok()) return am.status();
    absl::StatusOr<std::unique_ptr<AlertmanagerPusher>> created = AlertmanagerPusher::Create(*am);
    if (!created.ok()) return created.status();
    agent.pusher = std::move(*created);
    agent.metrics->AddWriter([p = agent.pusher.get()](const Snapshot&, MetricWriter& w) { p->WriteMetrics(w); });
    SP_LOG_INFO("pushing alerts to ", absl::StrJoin(am->urls, ","), " as instance=\"", am->instance, "\"");
  }
  sampler.AddListener([&episodes, p = agent.pusher.get()](const std::shared_ptr<const Snapshot>& s) {
    episodes.Observe(*s);
    if (p != nullptr) p->Update(episodes.OpenAndJustClosed(), s->unix_millis);
  });
  return absl::OkStatus();
}

// Serves before the first sample: /healthz says the agent is alive,
// /readyz that it has a complete sample, and /metrics and the JSON API
// answer 503 until then.
absl::Status StartServing(HttpOptions http, Agent& agent) {
  const Sampler& sampler = *agent.sampler;
  agent.server = std::make_unique<HttpServer>(std::move(http), agent.metrics.get(), [&sampler] { return sampler.Healthy(); });
  agent.server->Probe(
      "/readyz",
      [&sampler] {
        if (sampler.Ready()) return absl::OkStatus();
        return absl::UnavailableError(sampler.Latest() ? "sampler stalled" : kNoSampleYet);
      },
      "Readiness");
  PageContext page;
  page.version = kVersion;
  if (agent.pusher) page.alerting_status = [p = agent.pusher.get()] { return p->Status(); };
  AddAlertingRoutes(*agent.server, *agent.sampler, *agent.episodes, page);
  return agent.server->Start();
}

// The first sample runs on the sampler thread, after the kubelet's first
// answer; nothing waits for it.
void StartSampling(Agent& agent) {
  if (agent.identity) {
    agent.sampler->AddBeforeCycle([s = agent.sampler.get(), identity = agent.identity.get()] {
      if (!s->Latest()) identity->WaitForFirstAttempt(kFirstKubeletAttempt);
    });
  }
  if (agent.pusher) agent.pusher->Start();
  agent.sampler->Start();
}

int WaitForStop(const sigset_t& stop_signals, Agent& agent) {
  int sig = 0;
  for (;;) {
    sigwait(&stop_signals, &sig);
    if (sig != SIGHUP) break;
    SP_LOG_INFO("received SIGHUP: ignored (the TLS certificate and key are reloaded when their files change; other settings need a restart)");
  }
  SP_LOG_INFO("received signal ", sig, ", shutting down");
  agent.server->Stop();
  if (!agent.sampler->Latest()) {
    // The first sample (tens of seconds on a big node) cannot be cut short,
    // and before it there is nothing to deliver: no episode, no alert. Leave
    // without joining it; the kernel detaches the eBPF programs with the
    // process.
    std::fflush(nullptr);
    std::_Exit(0);
  }
  agent.sampler->Stop();
  if (agent.pusher) agent.pusher->Stop();
  // Everything that serves or delivers has stopped. The kubelet client may
  // be in a request that a slow kubelet stretches for minutes (its timeouts
  // are per recv()); it holds nothing to flush, so the process ends without
  // joining it rather than wait.
  if (agent.identity && !agent.identity->StopWithin(absl::Seconds(1))) {
    SP_LOG_INFO("the kubelet request in progress is abandoned");
    std::fflush(nullptr);
    std::_Exit(0);
  }
  return 0;
}

int Run(int argc, char** argv) {
  TuneMalloc();
  Options opt;
  FlagSet flags;
  RegisterFlags(flags, opt);
  if (std::optional<int> done = ParseCommandLine(flags, argc, argv, opt)) return *done;
  absl::StatusOr<SourceContext> ctx = SourceContextOf(opt.sources);
  if (!ctx.ok()) return Fail(ctx.status());
  absl::StatusOr<HttpOptions> http = HttpOptionsFromFlags(opt.http);
  if (!http.ok()) return Fail(http.status());
  if (!opt.doctor) {
    absl::Status opened = OpenListenSocket(*http);
    if (!opened.ok()) {
      Fail(opened);
      return 1;
    }
  }
  // The context files (sizes, limits, PSI) of every cgroup are read on the
  // full pass only when their series are exported (or for doctor's report);
  // otherwise only a cgroup whose reclaim moved has them read.
  ctx->cgroup_context = opt.http.context || opt.doctor;
  const sigset_t stop_signals = BlockStopSignals();
  SP_LOG_INFO("starting sockpressure_exporter ", kVersion, " (revision ", kRevision, ")");
  Agent agent;
  absl::Status built = BuildSampler(opt, *ctx, agent);
  if (!built.ok()) return Fail(built);
  if (opt.doctor) {
    AddCollectors(*ctx, agent);
    return Doctor(*ctx, agent);
  }
  LogFirstSample(*agent.sampler);
  built = BuildOutputs(opt, *ctx, *http, agent);
  if (!built.ok()) return Fail(built);
  absl::Status serving = StartServing(std::move(*http), agent);
  if (!serving.ok()) {
    SP_LOG_ERROR(serving.message());
    return 1;
  }
  AddCollectors(*ctx, agent);
  StartSampling(agent);
  return WaitForStop(stop_signals, agent);
}

}  // namespace
}  // namespace sockpressure

int main(int argc, char** argv) { return sockpressure::Run(argc, argv); }
