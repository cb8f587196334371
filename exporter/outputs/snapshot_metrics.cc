#include "absl/strings/string_view.h"
#include "exporter/outputs/snapshot_metrics.h"

#include "exporter/outputs/prune_metrics.h"

#include <cctype>
#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "exporter/outputs/cgroup_series.h"
#include "exporter/outputs/context_metrics.h"

namespace sockpressure {
namespace {

// The core profile (the default): the signal itself, at most 8 series per
// cgroup (9 on 6.19+ with sock_throttled). What a cgroup where nothing
// happened shows, and why (README "Metrics"):
//  * counters are exported from the first sample on, at 0, so that rate()
//    and increase() count the first event after a quiet start (Prometheus
//    does not count the first sample of a new series as an increase);
//  * gauges that describe an episode appear with it: the ratio and `active`
//    from the first completed vmpressure window on (`active` also while an
//    ancestor's pressure covers the cgroup, as 1), clamped sockets
//    while the cgroup has sockets. A gauge has no rate() to break, and an
//    absent gauge reads as "nothing happened here".
bool HasReclaim(const CgroupView& c) { return HasSignal(c, Signal::kReclaim); }
bool HasPressure(const CgroupView& c) { return HasSignal(c, Signal::kSocketPressure); }

const std::vector<CgroupFamily>& CoreFamilies() {
  static const std::vector<CgroupFamily> families = {
      {"sockpressure_memcg_reclaim_scanned_pages_total", MetricKind::kCounter,
       "Pages that memory reclaim scanned on this cgroup's own LRU lists (not its descendants'), as fed to "
       "vmpressure().",
       [](const CgroupView& c) { return HasReclaim(c) ? OptValue<uint64_t>(c.best.scanned_total) : std::nullopt; }},
      {"sockpressure_memcg_reclaim_reclaimed_pages_total", MetricKind::kCounter,
       "Pages that memory reclaim freed from this cgroup's own LRU lists, as fed to vmpressure().",
       [](const CgroupView& c) { return HasReclaim(c) ? OptValue<uint64_t>(c.best.reclaimed_total) : std::nullopt; }},
      {"sockpressure_memcg_scan_without_reclaim_ratio", MetricKind::kGauge,
       "1 - reclaimed/scanned over the last completed vmpressure window (>= 512 scanned pages); the kernel "
       "asserts socket pressure at >= 0.60.",
       [](const CgroupView& c) { return c.best.ratio; }},
      {"sockpressure_memcg_socket_pressure_events_total", MetricKind::kCounter,
       "Times the kernel set memcg->socket_pressure on this cgroup (a vmpressure window at medium or critical), "
       "each throttling the TCP receive windows of its sockets and its descendants' for 1 s.",
       [](const CgroupView& c) {
         return HasPressure(c) ? OptValue<uint64_t>(c.best.pressure_events_total) : std::nullopt;
       }},
      {"sockpressure_memcg_socket_pressure_seconds_total", MetricKind::kCounter,
       "Seconds during which this cgroup's own socket-pressure deadline was in the future, i.e. the kernel "
       "clamped TCP receive windows of sockets charged to it or its descendants.",
       [](const CgroupView& c) {
         return HasPressure(c) ? std::optional<double>(c.best.pressure_seconds_total) : std::nullopt;
       }},
      {"sockpressure_memcg_socket_pressure_active", MetricKind::kGauge,
       "1 while the kernel treats this cgroup's sockets as under memory pressure: its own or an ancestor's "
       "socket-pressure deadline is live (mem_cgroup_under_socket_pressure walks up to the root).",
       [](const CgroupView& c) {
         if (!HasPressure(c) || !(c.best.ratio || c.pressure_active)) return std::optional<double>();
         return std::optional<double>(c.pressure_active ? 1 : 0);
       }},
      // Only where the kernel has asserted pressure: the alert needs it there
      // alone, and every cgroup's series would cost the core profile ~90 B each.
      {"sockpressure_memcg_socket_pressure_sockets", MetricKind::kGauge,
       "TCP sockets that this cgroup's socket pressure throttles: those charged to it or to any cgroup below "
       "it. 0 means the kernel asserted pressure on a cgroup with nothing to throttle. Present once the "
       "cgroup has been under socket pressure, while a socket census runs.",
       [](const CgroupView& c) {
         if (!HasPressure(c) || c.best.pressure_events_total == 0) return std::optional<double>();
         return OptValue(c.subtree_sockets);
       }},
      {"sockpressure_memcg_sock_throttled_total", MetricKind::kCounter,
       "Times the kernel found a socket of this cgroup under memcg socket pressure (memory.events.local "
       "sock_throttled, kernel 6.19+).",
       [](const CgroupView& c) { return OptValue(c.best.sock_throttled_total); }},
      {"sockpressure_tcp_window_clamps_total", MetricKind::kCounter,
       "Times the kernel pulled a TCP socket's rcv_ssthresh down to 4*advmss or less while its memory cgroup was "
       "under socket pressure, for sockets charged to this cgroup.",
       [](const CgroupView& c) {
         return HasSignal(c, Signal::kWindowClamps) ? OptValue<uint64_t>(c.best.clamps_total) : std::nullopt;
       }},
      {"sockpressure_tcp_clamped_sockets", MetricKind::kGauge,
       "TCP sockets of this cgroup whose receive window is clamped right now (rcv_ssthresh == 4*advmss while "
       "data flows).",
       [](const CgroupView& c) {
         if (!c.best.census || c.best.census->sockets == 0) return std::optional<double>();
         return OptValue<uint64_t>(c.best.census->clamped);
       }},
  };
  return families;
}

// --signal.all-tiers: every live tier's view of every cgroup, so the lab can
// check that each tier on its own reaches the right verdict.
void WriteAllTiers(const Snapshot& s, MetricWriter& out) {
  struct TierFamily {
    const char* name;
    MetricKind kind;
    const char* help;
    std::function<std::optional<double>(const TierValues&)> value;
  };
  const TierFamily families[] = {
      {"sockpressure_tier_scan_without_reclaim_ratio", MetricKind::kGauge,
       "Per tier: last completed vmpressure window ratio.", [](const TierValues& v) { return v.ratio; }},
      {"sockpressure_tier_socket_pressure_events_total", MetricKind::kCounter,
       "Per tier: socket-pressure assertions seen.",
       [](const TierValues& v) { return std::optional<double>(static_cast<double>(v.pressure_events_total)); }},
      {"sockpressure_tier_socket_pressure_seconds_total", MetricKind::kCounter,
       "Per tier: seconds under socket pressure.",
       [](const TierValues& v) { return std::optional<double>(v.pressure_seconds_total); }},
      {"sockpressure_tier_window_clamps_total", MetricKind::kCounter, "Per tier: window clamps.",
       [](const TierValues& v) { return std::optional<double>(static_cast<double>(v.clamps_total)); }},
      {"sockpressure_tier_clamped_sockets", MetricKind::kGauge, "Per tier: clamped sockets now.",
       [](const TierValues& v) {
         return v.census ? std::optional<double>(static_cast<double>(v.census->clamped)) : std::nullopt;
       }},
  };
  for (const TierFamily& f : families) {
    out.Family(f.name, f.help, f.kind);
    std::vector<LabelRef> labels;
    for (const CgroupView& c : s.cgroups) {
      SetCgroupLabels(c, &labels);
      for (const auto& [tier, values] : c.tiers) {
        if (std::optional<double> v = f.value(values)) out.Value(labels, {{"source", TierName(tier)}}, *v);
      }
    }
  }
}

// A node-wide family of one unlabelled series.
void WriteNodeSeries(MetricWriter& out, absl::string_view name, absl::string_view help, MetricKind kind,
                     double value) {
  out.Family(name, help, kind);
  out.Value({}, {}, value);
}

void WriteNode(const Snapshot& s, MetricWriter& out) {
  const NodeReading& n = s.node;
  const std::vector<LabelRef> none;
  out.Family("sockpressure_node_info", "Kernel release and cgroup mode of this node; always 1.", MetricKind::kGauge);
  out.Value(none,
            {{"kernel_release", n.kernel_release.value_or("unknown")}, {"cgroup_mode", CgroupModeName(s.cgroup_mode)}},
            1);
  if (n.swaps) {
    WriteNodeSeries(out, "sockpressure_node_swap_enabled",
                    "1 when a swap area is active. With swap, hot anonymous memory is scanned but not reclaimed, "
                    "which is what makes vmpressure report false pressure.",
                    MetricKind::kGauge, s.swap_enabled ? 1 : 0);
    WriteNodeSeries(out, "sockpressure_node_swap_size_bytes", "Total size of active swap areas.", MetricKind::kGauge,
                    static_cast<double>(n.swaps->size_bytes));
    WriteNodeSeries(out, "sockpressure_node_swap_used_bytes", "Used space of active swap areas.", MetricKind::kGauge,
                    static_cast<double>(n.swaps->used_bytes));
  }
  if (n.mglru_caps) {
    WriteNodeSeries(out, "sockpressure_node_mglru_enabled",
                    "1 when the multi-generational LRU does reclaim (/sys/kernel/mm/lru_gen/enabled bit 0); absent "
                    "without CONFIG_LRU_GEN. It changes which pages reclaim scans, and so how often hot anonymous "
                    "memory is scanned without being reclaimed, which arms socket pressure (measured per kernel: "
                    "README).",
                    MetricKind::kGauge, n.MglruOn() ? 1 : 0);
  }
  if (n.nosocket) {
    WriteNodeSeries(out, "sockpressure_node_socket_accounting_enabled",
                    "0 when the kernel was booted with cgroup.memory=nosocket: sockets are not charged to memory "
                    "cgroups and memcg pressure cannot throttle them.",
                    MetricKind::kGauge, s.socket_accounting_enabled ? 1 : 0);
  }
  if (s.tcp_memory_pressure) {
    WriteNodeSeries(out, "sockpressure_node_tcp_memory_pressure",
                    "1 when TCP memory (sockstat TCP mem) exceeds net.ipv4.tcp_mem[1]: global TCP memory pressure, "
                    "which clamps every socket on the node (a different cause from memcg socket pressure).",
                    MetricKind::kGauge, *s.tcp_memory_pressure ? 1 : 0);
  }
  if (n.tcp_mem_pages) {
    WriteNodeSeries(out, "sockpressure_node_tcp_memory_pages",
                    "Pages allocated to TCP socket buffers (sockstat TCP mem).", MetricKind::kGauge,
                    static_cast<double>(*n.tcp_mem_pages));
  }
  if (n.tcp_mem_limits && n.tcp_mem_limits->size() == 3) {
    out.Family("sockpressure_node_tcp_mem_limit_pages", "net.ipv4.tcp_mem thresholds in pages.",
               MetricKind::kGauge);
    const char* names[] = {"min", "pressure", "max"};
    for (int i = 0; i < 3; ++i) out.Value(none, {{"threshold", names[i]}}, static_cast<double>((*n.tcp_mem_limits)[i]));
  }
  for (absl::string_view name : ExportedTcpExtCounters()) {
    auto it = n.tcp_ext.find(name);
    if (it == n.tcp_ext.end()) continue;
    if (name == "TCPMemoryPressuresChrono") {
      WriteNodeSeries(out, "sockpressure_node_tcp_memory_pressure_seconds_total",
                      "Time the node spent under global TCP memory pressure (TcpExt TCPMemoryPressuresChrono).",
                      MetricKind::kCounter, static_cast<double>(it->second) / 1000.0);
      continue;
    }
    WriteNodeSeries(out, absl::StrCat("sockpressure_node_tcp_", TcpExtMetricPart(name), "_total"),
                    absl::StrCat("TcpExt ", name,
                                 " from /proc/net/netstat (node-wide; does not count memcg socket pressure)."),
                    MetricKind::kCounter, static_cast<double>(it->second));
  }
  if (n.vm_pgscan) {
    WriteNodeSeries(out, "sockpressure_node_vmscan_scanned_pages_total",
                    "Pages scanned by reclaim on the whole node (/proc/vmstat pgscan_*, without proactive).",
                    MetricKind::kCounter, static_cast<double>(*n.vm_pgscan));
    WriteNodeSeries(out, "sockpressure_node_vmscan_reclaimed_pages_total",
                    "Pages reclaimed on the whole node (/proc/vmstat pgsteal_*, without proactive).",
                    MetricKind::kCounter, static_cast<double>(n.vm_pgsteal.value_or(0)));
  }
  if (n.psi_some || n.psi_full) {
    out.Family("sockpressure_node_psi_memory_stall_seconds_total",
               "Time tasks on the node stalled on memory (/proc/pressure/memory total).", MetricKind::kCounter);
    if (n.psi_some) out.Value(none, {{"kind", "some"}}, static_cast<double>(n.psi_some->total_us) / 1e6);
    if (n.psi_full) out.Value(none, {{"kind", "full"}}, static_cast<double>(n.psi_full->total_us) / 1e6);
  }
}

// The tier judge's verdicts (state/tier_judge.h): one series per signal and
// tier that fell short at least once.
void WriteTierDisagreements(const Snapshot& s, MetricWriter& out) {
  if (s.tier_disagreements.empty()) return;
  const std::vector<LabelRef> none;
  out.Family("sockpressure_tier_disagreements_total",
             "Spans in which a tier counted less than the kernel's own count from a second source: under a "
             "quarter of the pages memory.stat says the cgroup scanned (reclaim), or no socket-pressure "
             "assertion while memory.events.local sock_throttled moved (socket_pressure). After two, the tier is "
             "not used for that signal (sockpressure_signal_source says which is).",
             MetricKind::kCounter);
  for (const TierDisagreement& d : s.tier_disagreements) {
    out.Value(none, {{"signal", std::string(SignalName(d.signal))}, {"tier", std::string(TierName(d.tier))}},
              static_cast<double>(d.total));
  }
}


// Each program's link: attached seconds, attaches and refused attaches. The
// window-clamp program is attached only while socket pressure is live or
// about to be (sources/bpf/clamp_arming.h); every other one once.
void WriteProgramLinks(const Snapshot& s, MetricWriter& out) {
  const std::vector<LabelRef> none;
  out.Family("sockpressure_bpf_program_attached_seconds_total",
             "Seconds each eBPF program was attached (ran on its hook) since the agent loaded it.",
             MetricKind::kCounter);
  for (const ProgramStats& p : s.program_stats) out.Value(none, {{"program", p.program}}, p.attached_seconds);
  out.Family("sockpressure_bpf_program_attaches_total",
             "Times each eBPF program was attached: once at start-up, and for the window-clamp program again "
             "each time socket pressure appeared after it was detached.",
             MetricKind::kCounter);
  for (const ProgramStats& p : s.program_stats) {
    out.Value(none, {{"program", p.program}}, static_cast<double>(p.attaches));
  }
  out.Family("sockpressure_bpf_program_attach_failures_total",
             "Times attaching an eBPF program again was refused by the kernel (logged once); the agent goes on "
             "with the other tiers and tries again next sample.",
             MetricKind::kCounter);
  for (const ProgramStats& p : s.program_stats) {
    out.Value(none, {{"program", p.program}}, static_cast<double>(p.attach_failures));
  }
}

void WriteAgent(const Snapshot& s, const BuildInfo& build, MetricWriter& out) {
  const std::vector<LabelRef> none;
  out.Family("sockpressure_build_info", "Version of sockpressure_exporter; always 1.", MetricKind::kGauge);
  out.Value(none, {{"version", build.version}, {"revision", build.revision}, {"compiler", build.compiler}}, 1);

  out.Family("sockpressure_signal_source",
             "1 for the source (tier) that produced each signal in the last sample; source=\"none\" when no tier "
             "can produce it on this node.",
             MetricKind::kGauge);
  for (int i = 0; i < kSignalCount; ++i) {
    out.Value(none, {{"signal", SignalName(static_cast<Signal>(i))}, {"source", TierName(s.signal_tier[i])}}, 1);
  }

  out.Family("sockpressure_collector_success", "1 when the collector's last run succeeded.", MetricKind::kGauge);
  for (const CollectorResult& c : s.collectors) out.Value(none, {{"collector", c.name}}, c.success ? 1 : 0);
  out.Family("sockpressure_collector_duration_seconds", "Wall time of the collector's last run.", MetricKind::kGauge);
  for (const CollectorResult& c : s.collectors) out.Value(none, {{"collector", c.name}}, c.duration_seconds);
  out.Family("sockpressure_collector_last_run_timestamp_seconds",
             "Unix time of the collector's last run; older than the last sample for a context collector whose "
             "last reading is held while the node is idle (--sample.context-interval).",
             MetricKind::kGauge);
  for (const CollectorResult& c : s.collectors) {
    out.Value(none, {{"collector", c.name}}, static_cast<double>(c.ran_unix_millis) / 1000.0);
  }

  out.Family("sockpressure_cgroups_tracked", "Memory cgroups with series.", MetricKind::kGauge);
  out.Value(none, {}, static_cast<double>(s.cgroups.size()));
  out.Family("sockpressure_cgroups_untracked", "Memory cgroups beyond --cgroup.max, not read in the last sample.",
             MetricKind::kGauge);
  out.Value(none, {}, static_cast<double>(s.cgroups_untracked));
  out.Family("sockpressure_cgroups_skipped_total",
             "Cgroups left out of a sample (with their subtrees) by reason: path_too_long, symlink, unreadable.",
             MetricKind::kCounter);
  // Every reason has a series from the start, so that increase() sees the first one.
  for (absl::string_view reason : {"path_too_long", "symlink", "unreadable"}) {
    auto it = s.cgroups_skipped_total.find(std::string(reason));
    out.Value(none, {{"reason", reason}}, it == s.cgroups_skipped_total.end() ? 0.0 : static_cast<double>(it->second));
  }
  out.Family("sockpressure_cgroups_overflow_total", "Samples in which --cgroup.max left cgroups out.",
             MetricKind::kCounter);
  out.Value(none, {}, static_cast<double>(s.cgroups_overflow_total));
  out.Family("sockpressure_samples_total", "Sampling cycles completed.", MetricKind::kCounter);
  out.Value(none, {}, static_cast<double>(s.samples_total));
  out.Family("sockpressure_sample_cpu_seconds", "CPU time of the last sampling cycle.", MetricKind::kGauge);
  out.Value(none, {}, s.sample_cpu_seconds);
  out.Family("sockpressure_sample_duration_seconds",
             "Wall time of the sampling cycle before the last one, from its first collector to the last use of its "
             "snapshot; above --sample.interval, the next cycle started late.",
             MetricKind::kGauge);
  out.Value(none, {}, s.sample_duration_seconds);
  out.Family("sockpressure_sample_overruns_total",
             "Sampling cycles that started late because the cycle before ran past their start; each starts as soon "
             "as the one before ends, and the ticks missed are not caught up.",
             MetricKind::kCounter);
  out.Value(none, {}, static_cast<double>(s.sample_overruns_total));
  WriteTierDisagreements(s, out);
  out.Family("sockpressure_last_sample_timestamp_seconds", "Unix time of the last sample.", MetricKind::kGauge);
  out.Value(none, {}, static_cast<double>(s.unix_millis) / 1000.0);

  if (!s.probes.empty()) {
    out.Family("sockpressure_probe_attached",
               "1 when the eBPF probe's programs are attached now at this attach type (they run); 0 when it was "
               "tried and skipped, or is loaded but detached while no memcg is under socket pressure.",
               MetricKind::kGauge);
    for (const ProbeStatus& p : s.probes) out.Value(none, {{"probe", p.probe}, {"attach", p.attach}}, p.attached);
    out.Family("sockpressure_probe_loaded",
               "1 when the eBPF probe is loaded and in use at this attach type (attached now, or detached until "
               "socket pressure appears), 0 when it was tried and skipped (see the log).",
               MetricKind::kGauge);
    for (const ProbeStatus& p : s.probes) out.Value(none, {{"probe", p.probe}, {"attach", p.attach}}, p.loaded);
    out.Family("sockpressure_bpf_events_lost_total", "Events the eBPF programs could not record (map full).",
               MetricKind::kCounter);
    out.Value(none, {}, static_cast<double>(s.events_lost));
  }
  if (!s.program_stats.empty()) {
    out.Family("sockpressure_bpf_program_missed_runs_total",
               "Runs of each eBPF program the kernel skipped because a BPF program was already running on that "
               "CPU; their events are in no counter (kprobes count it from kernel 6.7).",
               MetricKind::kCounter);
    for (const ProgramStats& p : s.program_stats) {
      out.Value(none, {{"program", p.program}}, static_cast<double>(p.missed_runs));
    }
    WriteProgramLinks(s, out);
  }
  if (!s.program_stats.empty() && s.program_stats.front().timed) {
    out.Family("sockpressure_bpf_program_runs_total", "Runs of each eBPF program (kernel.bpf_stats_enabled=1).",
               MetricKind::kCounter);
    for (const ProgramStats& p : s.program_stats) {
      out.Value(none, {{"program", p.program}}, static_cast<double>(p.run_count));
    }
    out.Family("sockpressure_bpf_program_run_seconds_total",
               "Time spent in each eBPF program (kernel.bpf_stats_enabled=1).", MetricKind::kCounter);
    for (const ProgramStats& p : s.program_stats) {
      out.Value(none, {{"program", p.program}}, static_cast<double>(p.run_time_ns) / 1e9);
    }
  }
}

}  // namespace

std::string TcpExtMetricPart(absl::string_view name) {
  if (absl::StartsWith(name, "TCP")) name.remove_prefix(3);
  auto is_upper = [&](size_t i) { return i < name.size() && std::isupper(static_cast<unsigned char>(name[i])); };
  auto is_lower = [&](size_t i) { return i < name.size() && std::islower(static_cast<unsigned char>(name[i])); };
  std::string out;
  for (size_t i = 0; i < name.size(); ++i) {
    // A word starts at an upper-case letter after a lower-case one
    // ("PruneCalled"), or at the last capital of an acronym that is followed
    // by lower case ("RcvQDrop" -> rcv_q_drop, "OFODrop" -> ofo_drop).
    if (i > 0 && is_upper(i) && (is_lower(i - 1) || (is_upper(i - 1) && is_lower(i + 1)))) out += '_';
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(name[i])));
  }
  return out;
}

std::vector<MetricsPart> SnapshotParts(const Snapshot& snapshot, const BuildInfo& build,
                                      const EmitOptions& options) {
  const Snapshot* s = &snapshot;
  std::vector<MetricsPart> parts;
  for (const CgroupFamily& f : CoreFamilies()) {
    parts.push_back([s, &f](MetricWriter& out) { WriteCgroupFamily(f, *s, out); });
  }
  if (options.context) AppendContextParts(snapshot, &parts);  // context_metrics.cc
  parts.push_back([s](MetricWriter& out) { WritePruneFamilies(*s, out); });  // prune_metrics.cc
  if (options.all_tiers) {
    parts.push_back([s](MetricWriter& out) { WriteAllTiers(*s, out); });
    parts.push_back([s](MetricWriter& out) { WritePruneTiers(*s, out); });
  }
  parts.push_back([s](MetricWriter& out) { WriteNode(*s, out); });
  parts.push_back([s, build](MetricWriter& out) { WriteAgent(*s, build, out); });
  return parts;
}

void WriteSnapshotMetrics(const Snapshot& snapshot, const BuildInfo& build, const EmitOptions& options,
                          MetricWriter& out) {
  for (const MetricsPart& part : SnapshotParts(snapshot, build, options)) part(out);
}

}  // namespace sockpressure
