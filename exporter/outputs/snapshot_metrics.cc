#include "absl/strings/string_view.h"
#include "exporter/outputs/snapshot_metrics.h"

#include "exporter/outputs/prune_metrics.h"

#include <cctype>
#include <cmath>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "exporter/outputs/cgroup_series.h"
#include "exporter/outputs/context_metrics.h"
#include "exporter/outputs/snapshot_families.h"

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
  parts.push_back([s, build](MetricWriter& out) { WriteSnapshotFamilies(NodeFamilies(), *s, build, out); });
  parts.push_back([s, build](MetricWriter& out) { WriteSnapshotFamilies(AgentFamilies(), *s, build, out); });
  return parts;
}

void WriteSnapshotMetrics(const Snapshot& snapshot, const BuildInfo& build, const EmitOptions& options,
                          MetricWriter& out) {
  for (const MetricsPart& part : SnapshotParts(snapshot, build, options)) part(out);
}

}  // namespace sockpressure
