#include "exporter/outputs/prune_metrics.h"

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "exporter/outputs/cgroup_series.h"

namespace sockpressure {
namespace {

struct PruneFamily {
  const char* name;  // after sockpressure_tcp_ / sockpressure_tier_
  Signal signal;
  const char* help;
  uint64_t PruneCounters::*field;
};

// One row a family, {name, signal, help, &counter}: the names and texts are
// data (prune_families.json), the build writes the rows.
constexpr PruneFamily kFamilies[] = {
#include "exporter/outputs/prune_families.inc"
};

// Part of the core profile, but only where TCP data can be lost: a cgroup
// with sockets now, or with a count already. Four zero series for every
// socket-less cgroup would double the core profile (docs/metrics.md).
bool MayLoseTcpData(const CgroupView& c) {
  const PruneCounters& p = c.best.prunes_total;
  return (c.best.census && c.best.census->sockets > 0) || p.rcv_mem_drops > 0 || p.ofo_pruned_segs > 0 ||
         p.collapses > 0 || p.ofo_prunes > 0;
}

}  // namespace

void WritePruneFamilies(const Snapshot& s, MetricWriter& out) {
  for (const PruneFamily& f : kFamilies) {
    out.Family(absl::StrCat("sockpressure_tcp_", f.name), f.help, MetricKind::kCounter);
    for (const CgroupView& c : s.cgroups) {
      if (c.tier[static_cast<int>(f.signal)] == Tier::kNone || !MayLoseTcpData(c)) continue;
      out.Value(CgroupLabels(c), {}, static_cast<double>(c.best.prunes_total.*f.field));
    }
  }
}

void WritePruneTiers(const Snapshot& s, MetricWriter& out) {
  for (const PruneFamily& f : kFamilies) {
    out.Family(absl::StrCat("sockpressure_tier_", f.name), absl::StrCat("Per tier: ", f.help), MetricKind::kCounter);
    // One program variant is attached per signal, so its live tier is the
    // only one with these counts; other tiers' TierValues carry other signals.
    const Tier live = s.signal_tier[static_cast<int>(f.signal)];
    if (live == Tier::kNone) continue;
    for (const CgroupView& c : s.cgroups) {
      auto it = c.tiers.find(live);
      if (it == c.tiers.end()) continue;
      out.Value(CgroupLabels(c), {{"source", TierName(live)}}, static_cast<double>(it->second.prunes_total.*f.field));
    }
  }
}

}  // namespace sockpressure
