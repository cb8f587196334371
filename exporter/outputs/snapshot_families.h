// The families with no cgroup label, written from the snapshot as a whole:
// the node's (node_metrics.cc) and the agent's own (agent_metrics.cc). Each
// is a table with a row per family, in exposition order, and
// WriteSnapshotFamilies is the one writer of both. (The per-cgroup families
// are CgroupFamily rows, cgroup_series.h.)
#pragma once

#include <initializer_list>
#include <span>
#include <vector>

#include "exporter/common/metric_writer.h"
#include "exporter/outputs/snapshot_metrics.h"
#include "exporter/state/snapshot.h"

namespace sockpressure {

// Where a row puts its family's series, each with labels of its own.
class SeriesOut {
 public:
  explicit SeriesOut(MetricWriter& out) : out_(out) {}
  void Add(double value) { out_.Value(kNoLabels, {}, value); }
  void Add(std::initializer_list<LabelRef> labels, double value) { out_.Value(kNoLabels, labels, value); }

 private:
  inline static const std::vector<LabelRef> kNoLabels;
  MetricWriter& out_;
};

// One node or agent family. `values` adds its series from the snapshot (and
// the build, for build_info); a family it adds none to is not written.
struct SnapshotFamily {
  const char* name;
  MetricKind kind;
  const char* help;
  void (*values)(const Snapshot& s, const BuildInfo& build, SeriesOut& out);
};

std::span<const SnapshotFamily> NodeFamilies();   // node_metrics.cc
std::span<const SnapshotFamily> AgentFamilies();  // agent_metrics.cc

// Writes every family of `families` that has series, in order. Thread-safe:
// reads only its arguments.
inline void WriteSnapshotFamilies(std::span<const SnapshotFamily> families, const Snapshot& s,
                                  const BuildInfo& build, MetricWriter& out) {
  SeriesOut series(out);
  for (const SnapshotFamily& f : families) {
    out.Family(f.name, f.help, f.kind);  // written with its first series, if any (metric_writer.h)
    f.values(s, build, series);
  }
}

}  // namespace sockpressure
