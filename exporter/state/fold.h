// --cgroup.include/exclude/level: a cgroup that is not exported still takes
// part in the hierarchy (its scans are not its parent's own), and what it
// counted folds into its nearest exported ancestor, so that totals over the
// exported cgroups stay the totals of the node.
#pragma once

#include <vector>

#include "exporter/sources/sample.h"
#include "exporter/state/snapshot.h"

namespace sockpressure {

// Per cgroup, kept by the StateTracker from sample to sample.
struct FoldMemory {
  TierValues reported;  // a non-exported cgroup's counters when last folded
  TierValues folded;    // what non-exported descendants counted (cumulative)
};

// `views` parallel to sample.cgroups (parents first); `memory` likewise.
// Counters fold as deltas into the ancestor's FoldMemory, so that a folded
// cgroup that goes away lowers no exported counter. Sockets and the active
// flag fold as they are now; the ratio as the highest. Returns the exported
// views only, with parents re-pointed to the nearest exported ancestor.
// Not thread-safe: the sampler thread's.
std::vector<CgroupView> FoldUnexported(const Sample& sample, const std::vector<FoldMemory*>& memory,
                                       std::vector<CgroupView> views);

}  // namespace sockpressure
