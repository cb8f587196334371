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

// The counters of bpf/prunes.bpf.c, in exposition order; a family's signal is
// the one whose live tier counts it. HELP says what the kernel did
// (net/ipv4/tcp_input.c names in brackets).
constexpr PruneFamily kFamilies[] = {
    {"rcv_mem_drops_total", Signal::kRcvMemDrops,
     "TCP segments the kernel dropped on arrival at this cgroup's sockets because it could not get receive memory for "
     "them (drop reason PROTO_MEM after pruning failed; TcpExt TCPRcvQDrop + TCPOFODrop node-wide).",
     &PruneCounters::rcv_mem_drops},
    {"ofo_pruned_segments_total", Signal::kRcvMemDrops,
     "Out-of-order TCP segments already queued at this cgroup's sockets that the kernel threw away to free receive "
     "memory (drop reason TCP_OFO_QUEUE_PRUNE); the sender must retransmit them.",
     &PruneCounters::ofo_pruned_segs},
    {"prune_collapses_total", Signal::kTcpPrunes,
     "Times the kernel pruned a receive queue of this cgroup's sockets by collapsing it into fewer, fuller buffers "
     "(tcp_prune_queue -> tcp_collapse on the receive queue; at most TcpExt PruneCalled node-wide).",
     &PruneCounters::collapses},
    {"ofo_prunes_total", Signal::kTcpPrunes,
     "Times the kernel dropped out-of-order data queued at this cgroup's sockets to free receive memory "
     "(tcp_prune_ofo_queue; TcpExt OfoPruned node-wide).",
     &PruneCounters::ofo_prunes},
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
