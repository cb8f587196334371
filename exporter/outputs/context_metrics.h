// The context profile (--metrics.profile=context): what explains a cgroup's
// socket pressure, but duplicates cAdvisor or node-level sources or is
// mostly constant (sizes, limits, PSI, vmpressure windows by level, OOM
// kills, socket counts, cgroup v1 kmem.tcp). Off by default: it is two thirds
// of the series per cgroup (README "Metrics").
#pragma once

#include <vector>

#include "exporter/common/metric_writer.h"
#include "exporter/state/snapshot.h"

namespace sockpressure {

// Appends the context families to `parts`, a part each, in exposition
// order. The parts refer to `snapshot`, which must outlive them.
// Thread-safe: reads only its arguments.
void AppendContextParts(const Snapshot& snapshot, std::vector<MetricsPart>* parts);

}  // namespace sockpressure
