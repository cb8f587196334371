// The per-cgroup pruning and memory-drop families (bpf/prunes.bpf.c):
// sockpressure_tcp_rcv_mem_drops_total, _ofo_pruned_segments_total,
// _prune_collapses_total, _ofo_prunes_total, and their per-tier twins.
// Kept apart from snapshot_metrics.cc, which calls these two functions.
#pragma once

#include "exporter/common/metric_writer.h"
#include "exporter/state/snapshot.h"

namespace sockpressure {

// Thread-safe: read only their arguments. A family is written only for
// cgroups whose signal has a live tier (no tier: no series, not zero).
void WritePruneFamilies(const Snapshot& s, MetricWriter& out);
// --signal.all-tiers: sockpressure_tier_<same>{source}.
void WritePruneTiers(const Snapshot& s, MetricWriter& out);

}  // namespace sockpressure
