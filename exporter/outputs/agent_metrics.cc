// The agent's own families: one row each, in exposition order
// (docs/metrics.md, "The agent"). The HTTP counters are not here: they are
// counted as requests come, by prometheus-cpp (metrics_endpoint.cc).
#include <string>

#include "absl/strings/string_view.h"
#include "exporter/outputs/snapshot_families.h"

namespace sockpressure {
namespace {

using Out = SeriesOut;

constexpr SnapshotFamily kAgentFamilies[] = {
    {"sockpressure_build_info", MetricKind::kGauge, "Version of sockpressure_exporter; always 1.",
     [](const Snapshot&, const BuildInfo& build, Out& out) {
       out.Add({{"version", build.version}, {"revision", build.revision}, {"compiler", build.compiler}}, 1);
     }},
    {"sockpressure_signal_source", MetricKind::kGauge,
     "1 for the source (tier) that produced each signal in the last sample; source=\"none\" when no tier can "
     "produce it on this node.",
     [](const Snapshot& s, const BuildInfo&, Out& out) {
       for (int i = 0; i < kSignalCount; ++i) {
         out.Add({{"signal", SignalName(static_cast<Signal>(i))}, {"source", TierName(s.signal_tier[i])}}, 1);
       }
     }},
    {"sockpressure_collector_success", MetricKind::kGauge, "1 when the collector's last run succeeded.",
     [](const Snapshot& s, const BuildInfo&, Out& out) {
       for (const CollectorResult& c : s.collectors) out.Add({{"collector", c.name}}, c.success ? 1 : 0);
     }},
    {"sockpressure_collector_duration_seconds", MetricKind::kGauge, "Wall time of the collector's last run.",
     [](const Snapshot& s, const BuildInfo&, Out& out) {
       for (const CollectorResult& c : s.collectors) out.Add({{"collector", c.name}}, c.duration_seconds);
     }},
    {"sockpressure_collector_last_run_timestamp_seconds", MetricKind::kGauge,
     "Unix time of the collector's last run; older than the last sample for a context collector whose last reading "
     "is held while the node is idle (--sample.context-interval).",
     [](const Snapshot& s, const BuildInfo&, Out& out) {
       for (const CollectorResult& c : s.collectors) {
         out.Add({{"collector", c.name}}, static_cast<double>(c.ran_unix_millis) / 1000.0);
       }
     }},
    {"sockpressure_cgroups_tracked", MetricKind::kGauge, "Memory cgroups with series.",
     [](const Snapshot& s, const BuildInfo&, Out& out) { out.Add(static_cast<double>(s.cgroups.size())); }},
    {"sockpressure_cgroups_untracked", MetricKind::kGauge,
     "Memory cgroups beyond --cgroup.max, not read in the last sample.",
     [](const Snapshot& s, const BuildInfo&, Out& out) { out.Add(static_cast<double>(s.cgroups_untracked)); }},
    {"sockpressure_cgroups_skipped_total", MetricKind::kCounter,
     "Cgroups left out of a sample (with their subtrees) by reason: path_too_long, symlink, unreadable.",
     [](const Snapshot& s, const BuildInfo&, Out& out) {
       // Every reason has a series from the start, so that increase() sees the first one.
       for (absl::string_view reason : {"path_too_long", "symlink", "unreadable"}) {
         auto it = s.cgroups_skipped_total.find(std::string(reason));
         out.Add({{"reason", reason}}, it == s.cgroups_skipped_total.end() ? 0.0 : static_cast<double>(it->second));
       }
     }},
    {"sockpressure_cgroups_overflow_total", MetricKind::kCounter, "Samples in which --cgroup.max left cgroups out.",
     [](const Snapshot& s, const BuildInfo&, Out& out) { out.Add(static_cast<double>(s.cgroups_overflow_total)); }},
    {"sockpressure_samples_total", MetricKind::kCounter, "Sampling cycles completed.",
     [](const Snapshot& s, const BuildInfo&, Out& out) { out.Add(static_cast<double>(s.samples_total)); }},
    {"sockpressure_sample_cpu_seconds", MetricKind::kGauge, "CPU time of the last sampling cycle.",
     [](const Snapshot& s, const BuildInfo&, Out& out) { out.Add(s.sample_cpu_seconds); }},
    {"sockpressure_sample_duration_seconds", MetricKind::kGauge,
     "Wall time of the sampling cycle before the last one, from its first collector to the last use of its "
     "snapshot; above --sample.interval, the next cycle started late.",
     [](const Snapshot& s, const BuildInfo&, Out& out) { out.Add(s.sample_duration_seconds); }},
    {"sockpressure_sample_interval_seconds", MetricKind::kGauge,
     "Seconds from the last sampling cycle to the next: --sample.interval, or --sample.context-interval while no "
     "signal on this node can move unseen between cycles (cgroup v1 where no memory cgroup charges sockets, so none "
     "can throttle one).",
     [](const Snapshot& s, const BuildInfo&, Out& out) { out.Add(s.next_sample_seconds); }},
    {"sockpressure_sample_overruns_total", MetricKind::kCounter,
     "Sampling cycles that started late because the cycle before ran past their start; each starts as soon as the "
     "one before ends, and the ticks missed are not caught up.",
     [](const Snapshot& s, const BuildInfo&, Out& out) { out.Add(static_cast<double>(s.sample_overruns_total)); }},
    // The tier judge's verdicts (state/tier_judge.h): one series per signal
    // and tier that fell short at least once.
    {"sockpressure_tier_disagreements_total", MetricKind::kCounter,
     "Spans in which a tier counted less than the kernel's own count from a second source: under a sixteenth of the "
     "pages memory.stat says the cgroup scanned (reclaim), or no socket-pressure assertion while "
     "memory.events.local sock_throttled moved (socket_pressure). After two, the tier is not used for that signal "
     "(sockpressure_signal_source says which is).",
     [](const Snapshot& s, const BuildInfo&, Out& out) {
       for (const TierDisagreement& d : s.tier_disagreements) {
         out.Add({{"signal", SignalName(d.signal)}, {"tier", TierName(d.tier)}}, static_cast<double>(d.total));
       }
     }},
    {"sockpressure_last_sample_timestamp_seconds", MetricKind::kGauge, "Unix time of the last sample.",
     [](const Snapshot& s, const BuildInfo&, Out& out) { out.Add(static_cast<double>(s.unix_millis) / 1000.0); }},
    // The eBPF families, while the bpf collector has probes.
    {"sockpressure_probe_attached", MetricKind::kGauge,
     "1 when the eBPF probe's programs are attached now at this attach type (they run); 0 when it was tried and "
     "skipped, or is loaded but detached while no memcg is under socket pressure.",
     [](const Snapshot& s, const BuildInfo&, Out& out) {
       for (const ProbeStatus& p : s.probes) out.Add({{"probe", p.probe}, {"attach", p.attach}}, p.attached);
     }},
    {"sockpressure_probe_loaded", MetricKind::kGauge,
     "1 when the eBPF probe is loaded and in use at this attach type (attached now, or detached until socket "
     "pressure appears), 0 when it was tried and skipped (see the log).",
     [](const Snapshot& s, const BuildInfo&, Out& out) {
       for (const ProbeStatus& p : s.probes) out.Add({{"probe", p.probe}, {"attach", p.attach}}, p.loaded);
     }},
    {"sockpressure_bpf_events_lost_total", MetricKind::kCounter,
     "Events the eBPF programs could not record (map full).",
     [](const Snapshot& s, const BuildInfo&, Out& out) {
       if (!s.probes.empty()) out.Add(static_cast<double>(s.events_lost));
     }},
    {"sockpressure_bpf_program_missed_runs_total", MetricKind::kCounter,
     "Runs of each eBPF program the kernel skipped because a BPF program was already running on that CPU; their "
     "events are in no counter (kprobes count it from kernel 6.7).",
     [](const Snapshot& s, const BuildInfo&, Out& out) {
       for (const ProgramStats& p : s.program_stats) {
         out.Add({{"program", p.program}}, static_cast<double>(p.missed_runs));
       }
     }},
    // Each program's link: the window-clamp program is attached only while
    // socket pressure is live or about to be (sources/bpf/clamp_arming.h),
    // every other one once.
    {"sockpressure_bpf_program_attached_seconds_total", MetricKind::kCounter,
     "Seconds each eBPF program was attached (ran on its hook) since the agent loaded it.",
     [](const Snapshot& s, const BuildInfo&, Out& out) {
       for (const ProgramStats& p : s.program_stats) out.Add({{"program", p.program}}, p.attached_seconds);
     }},
    {"sockpressure_bpf_program_attaches_total", MetricKind::kCounter,
     "Times each eBPF program was attached: once at start-up, and for the window-clamp program again each time "
     "socket pressure appeared after it was detached.",
     [](const Snapshot& s, const BuildInfo&, Out& out) {
       for (const ProgramStats& p : s.program_stats) out.Add({{"program", p.program}}, static_cast<double>(p.attaches));
     }},
    {"sockpressure_bpf_program_attach_failures_total", MetricKind::kCounter,
     "Times attaching an eBPF program again was refused by the kernel (logged once); the agent goes on with the "
     "other tiers and tries again next sample.",
     [](const Snapshot& s, const BuildInfo&, Out& out) {
       for (const ProgramStats& p : s.program_stats) {
         out.Add({{"program", p.program}}, static_cast<double>(p.attach_failures));
       }
     }},
    // Run counts and times only with kernel.bpf_stats_enabled=1.
    {"sockpressure_bpf_program_runs_total", MetricKind::kCounter,
     "Runs of each eBPF program (kernel.bpf_stats_enabled=1).",
     [](const Snapshot& s, const BuildInfo&, Out& out) {
       if (s.program_stats.empty() || !s.program_stats.front().timed) return;
       for (const ProgramStats& p : s.program_stats) out.Add({{"program", p.program}}, static_cast<double>(p.run_count));
     }},
    {"sockpressure_bpf_program_run_seconds_total", MetricKind::kCounter,
     "Time spent in each eBPF program (kernel.bpf_stats_enabled=1).",
     [](const Snapshot& s, const BuildInfo&, Out& out) {
       if (s.program_stats.empty() || !s.program_stats.front().timed) return;
       for (const ProgramStats& p : s.program_stats) {
         out.Add({{"program", p.program}}, static_cast<double>(p.run_time_ns) / 1e9);
       }
     }},
};

}  // namespace

std::span<const SnapshotFamily> AgentFamilies() { return kAgentFamilies; }

}  // namespace sockpressure
