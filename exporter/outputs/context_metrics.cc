#include "exporter/outputs/context_metrics.h"

#include "exporter/outputs/cgroup_series.h"

namespace sockpressure {
namespace {

const std::vector<CgroupFamily>& ContextFamilies() {
  static const std::vector<CgroupFamily> families = {
      {"sockpressure_tcp_sockets", MetricKind::kGauge, "TCP sockets charged to this memory cgroup.",
       [](const CgroupView& c) {
         return c.best.census ? OptValue<uint64_t>(c.best.census->sockets) : std::nullopt;
       }},
      {"sockpressure_memcg_anon_bytes", MetricKind::kGauge,
       "Anonymous memory of this cgroup and its descendants (memory.stat anon; v1 total_rss).",
       &CgroupView::anon_bytes},
      {"sockpressure_memcg_file_bytes", MetricKind::kGauge,
       "Page cache of this cgroup and its descendants (memory.stat file; v1 total_cache).",
       &CgroupView::file_bytes},
      {"sockpressure_memcg_sock_bytes", MetricKind::kGauge,
       "Memory charged for socket buffers (memory.stat sock; may lag, it is flushed lazily).",
       &CgroupView::sock_bytes},
      {"sockpressure_memcg_swap_bytes", MetricKind::kGauge,
       "Swap used by this cgroup and its descendants (memory.swap.current; v1 total_swap).",
       &CgroupView::swap_bytes},
      {"sockpressure_memcg_usage_bytes", MetricKind::kGauge,
       "Memory charged to this cgroup and its descendants (memory.current; v1 memory.usage_in_bytes).",
       &CgroupLimits::memory_current},
      {"sockpressure_memcg_oom_kills_total", MetricKind::kCounter,
       "Processes the OOM killer killed in this cgroup and its descendants (memory.events oom_kill).",
       &CgroupLimits::events_oom_kill},
      {"sockpressure_memcg_kmem_tcp_usage_bytes", MetricKind::kGauge,
       "cgroup v1: TCP buffer memory charged to this cgroup (memory.kmem.tcp.usage_in_bytes).",
       &CgroupLimits::kmem_tcp_usage},
      {"sockpressure_memcg_kmem_tcp_limit_bytes", MetricKind::kGauge,
       "cgroup v1: TCP buffer limit; only when it is set do v1 sockets get a memory cgroup and tcpmem pressure.",
       [](const CgroupView& c) {
         const std::optional<uint64_t>& limit = LimitsOf(c.limits).kmem_tcp_limit;
         return limit ? std::optional<double>(LimitBytes(*limit)) : std::nullopt;
       }},
      {"sockpressure_memcg_kmem_tcp_failcnt_total", MetricKind::kCounter,
       "cgroup v1: times TCP buffer charges hit the limit (memory.kmem.tcp.failcnt), which sets tcpmem pressure.",
       &CgroupLimits::kmem_tcp_failcnt},
  };
  return families;
}

}  // namespace

void WriteContextFamilies(const Snapshot& s, const std::vector<std::vector<LabelRef>>& labels, MetricWriter& out) {
  WriteCgroupFamilyList(ContextFamilies(), s, labels, out);

  out.Family("sockpressure_memcg_vmpressure_windows_total",
             "vmpressure windows (>= 512 scanned pages of this cgroup) by the kernel's verdict; medium and critical "
             "set socket pressure.",
             MetricKind::kCounter);
  for (size_t i = 0; i < s.cgroups.size(); ++i) {
    const CgroupView& c = s.cgroups[i];
    if (!HasSignal(c, Signal::kReclaim)) continue;
    for (int l = 0; l < 3; ++l) {
      out.Value(labels[i], {{"level", PressureLevelName(static_cast<PressureLevel>(l))}},
                static_cast<double>(c.best.windows_total[l]));
    }
  }

  out.Family("sockpressure_memcg_limit_bytes",
             "Memory limits and protections of this cgroup (memory.max/high/low/min, memory.swap.max; v1 "
             "limit_in_bytes as max and soft_limit_in_bytes as high); +Inf when unlimited.",
             MetricKind::kGauge);
  for (size_t i = 0; i < s.cgroups.size(); ++i) {
    const CgroupLimits& c = LimitsOf(s.cgroups[i].limits);
    const std::pair<const char*, const std::optional<uint64_t>*> limits[] = {
        {"max", &c.memory_max}, {"high", &c.memory_high}, {"low", &c.memory_low},
        {"min", &c.memory_min}, {"swap_max", &c.swap_max}};
    for (const auto& [name, v] : limits) {
      if (*v) out.Value(labels[i], {{"limit", name}}, LimitBytes(**v));
    }
  }

  out.Family("sockpressure_memcg_psi_stall_seconds_total",
             "Time tasks of this cgroup stalled on memory (memory.pressure total); vmpressure socket pressure can "
             "fire while this stays near zero.",
             MetricKind::kCounter);
  for (size_t i = 0; i < s.cgroups.size(); ++i) {
    const CgroupLimits& c = LimitsOf(s.cgroups[i].limits);
    if (c.psi_some) out.Value(labels[i], {{"kind", "some"}}, static_cast<double>(c.psi_some->total_us) / 1e6);
    if (c.psi_full) out.Value(labels[i], {{"kind", "full"}}, static_cast<double>(c.psi_full->total_us) / 1e6);
  }
}

}  // namespace sockpressure
