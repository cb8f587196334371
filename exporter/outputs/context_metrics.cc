#include "exporter/outputs/context_metrics.h"

#include "exporter/outputs/cgroup_series.h"

namespace sockpressure {
namespace {

// The two families whose value is not one cgroup file's value as read.
std::optional<double> TcpSockets(const CgroupView& c) {
  return c.best.census ? OptValue<uint64_t>(c.best.census->sockets) : std::nullopt;
}

std::optional<double> KmemTcpLimit(const CgroupView& c) {
  const std::optional<uint64_t>& limit = LimitsOf(c.limits).kmem_tcp_limit;
  return limit ? std::optional<double>(LimitBytes(*limit)) : std::nullopt;
}

const std::vector<CgroupFamily>& ContextFamilies() {
  // In exposition order; a family names the CgroupView or CgroupLimits field
  // it exports as read, or the function above that computes its value.
  static const std::vector<CgroupFamily> families = {
      {"sockpressure_tcp_sockets", MetricKind::kGauge, "TCP sockets charged to this memory cgroup.", &TcpSockets},
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
       &KmemTcpLimit},
      {"sockpressure_memcg_kmem_tcp_failcnt_total", MetricKind::kCounter,
       "cgroup v1: times TCP buffer charges hit the limit (memory.kmem.tcp.failcnt), which sets tcpmem pressure.",
       &CgroupLimits::kmem_tcp_failcnt},
  };
  return families;
}

void WriteWindowsByLevel(const Snapshot& s, MetricWriter& out) {
  std::vector<LabelRef> labels;
  for (const CgroupView& c : s.cgroups) {
    if (!HasSignal(c, Signal::kReclaim)) continue;
    SetCgroupLabels(c, &labels);
    for (int l = 0; l < 3; ++l) {
      out.Value(labels, {{"level", PressureLevelName(static_cast<PressureLevel>(l))}},
                static_cast<double>(c.best.windows_total[l]));
    }
  }
}

void WriteLimits(const Snapshot& s, MetricWriter& out) {
  std::vector<LabelRef> labels;
  for (const CgroupView& view : s.cgroups) {
    const CgroupLimits& c = LimitsOf(view.limits);
    SetCgroupLabels(view, &labels);
    const std::pair<const char*, const std::optional<uint64_t>*> limits[] = {
        {"max", &c.memory_max}, {"high", &c.memory_high}, {"low", &c.memory_low},
        {"min", &c.memory_min}, {"swap_max", &c.swap_max}};
    for (const auto& [name, v] : limits) {
      if (*v) out.Value(labels, {{"limit", name}}, LimitBytes(**v));
    }
  }
}

void WritePsiStalls(const Snapshot& s, MetricWriter& out) {
  std::vector<LabelRef> labels;
  for (const CgroupView& view : s.cgroups) {
    const CgroupLimits& c = LimitsOf(view.limits);
    if (!c.psi_some && !c.psi_full) continue;
    SetCgroupLabels(view, &labels);
    if (c.psi_some) out.Value(labels, {{"kind", "some"}}, static_cast<double>(c.psi_some->total_us) / 1e6);
    if (c.psi_full) out.Value(labels, {{"kind", "full"}}, static_cast<double>(c.psi_full->total_us) / 1e6);
  }
}

// A family with a label of its own: its series come from `write`.
struct LabelFamily {
  const char* name;
  MetricKind kind;
  const char* help;
  void (*write)(const Snapshot& s, MetricWriter& out);
};

// Written after ContextFamilies(), in exposition order.
constexpr LabelFamily kLabelFamilies[] = {
    {"sockpressure_memcg_vmpressure_windows_total", MetricKind::kCounter,
     "vmpressure windows (>= 512 scanned pages of this cgroup) by the kernel's verdict; medium and critical set "
     "socket pressure.",
     &WriteWindowsByLevel},
    {"sockpressure_memcg_limit_bytes", MetricKind::kGauge,
     "Memory limits and protections of this cgroup (memory.max/high/low/min, memory.swap.max; v1 limit_in_bytes as "
     "max and soft_limit_in_bytes as high); +Inf when unlimited.",
     &WriteLimits},
    {"sockpressure_memcg_psi_stall_seconds_total", MetricKind::kCounter,
     "Time tasks of this cgroup stalled on memory (memory.pressure total); vmpressure socket pressure can fire while "
     "this stays near zero.",
     &WritePsiStalls},
};

}  // namespace

void AppendContextParts(const Snapshot& s, std::vector<MetricsPart>* parts) {
  for (const CgroupFamily& f : ContextFamilies()) {
    parts->push_back([&s, &f](MetricWriter& out) { WriteCgroupFamily(f, s, out); });
  }
  for (const LabelFamily& f : kLabelFamilies) {
    parts->push_back([&s, &f](MetricWriter& out) {
      out.Family(f.name, f.help, f.kind);
      f.write(s, out);
    });
  }
}

}  // namespace sockpressure
