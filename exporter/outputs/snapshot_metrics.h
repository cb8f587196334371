// Writes a Snapshot as Prometheus metric families (names: docs/metrics.md).
#pragma once

#include "absl/strings/string_view.h"
#include <string>
#include <vector>

#include "exporter/common/metric_writer.h"
#include "exporter/state/snapshot.h"

namespace sockpressure {

struct BuildInfo {
  std::string version;
  std::string revision;
  std::string compiler;
};

struct EmitOptions {
  bool all_tiers = false;  // --signal.all-tiers: sockpressure_tier_*{source}
  // --metrics.profile=context: the context series of every cgroup (sizes, limits,
  // PSI, vmpressure windows by level, OOM kills, sockets; context_metrics.h).
  bool context = false;
};

// The snapshot's families as parts of at most one family over every cgroup
// each, in exposition order. The parts refer to `snapshot`, which must
// outlive them; they copy `build` and `options`. Thread-safe: reads only its
// arguments.
std::vector<MetricsPart> SnapshotParts(const Snapshot& snapshot, const BuildInfo& build, const EmitOptions& options);

// Every part of SnapshotParts(), in order. Thread-safe: reads only its arguments.
void WriteSnapshotMetrics(const Snapshot& snapshot, const BuildInfo& build, const EmitOptions& options,
                          MetricWriter& out);

// "TCPRcvQDrop" -> "rcv_q_drop": TcpExt names as metric name parts.
std::string TcpExtMetricPart(absl::string_view tcp_ext_name);

}  // namespace sockpressure
