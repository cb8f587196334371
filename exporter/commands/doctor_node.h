// The node half of `doctor`'s report (doctor.h): what this node can and
// cannot show, from the second of its two snapshots.
#pragma once

#include <cstdint>
#include <string>

#include "exporter/state/snapshot.h"

namespace sockpressure::doctor {

// Kernel, cgroup mode, swap, reclaim, socket accounting, global tcp_mem.
void ReportNode(const Snapshot& s, std::string* r);
// Each signal's best tier and what it means, or why the signal has none.
void ReportSignals(const Snapshot& s, std::string* r);
// A best eBPF tier that counted under a sixteenth of what memory.stat counted
// for the same cgroup between the two samples, or that the agent's own
// judge (state/tier_judge.h) stopped using: it attached but does not see.
void ReportBlindTiers(const Snapshot& before, const Snapshot& s, std::string* r);
// Each collector's outcome and each eBPF probe's attachment.
void ReportCollectors(const Snapshot& s, std::string* r);

// The memory controller is on cgroup v1 (or the walk found v1 cgroups).
bool IsV1(const Snapshot& s);

}  // namespace sockpressure::doctor
