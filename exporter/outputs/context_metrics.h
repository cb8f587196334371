// The context profile (--collector.context): what explains a cgroup's
// socket pressure, but duplicates cAdvisor or node-level sources or is
// mostly constant (sizes, limits, PSI, vmpressure windows by level, OOM
// kills, socket counts, cgroup v1 kmem.tcp). Off by default: it is two thirds
// of the series per cgroup (README "Metrics").
#pragma once

#include <vector>

#include "exporter/common/metric_writer.h"
#include "exporter/state/snapshot.h"

namespace sockpressure {

// Thread-safe: reads only its arguments. `labels[i]` is the label set of
// snapshot.cgroups[i].
void WriteContextFamilies(const Snapshot& snapshot, const std::vector<std::vector<LabelRef>>& labels,
                          MetricWriter& out);

}  // namespace sockpressure
