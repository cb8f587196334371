// Which remedy fits a throttled cgroup, chosen from what the agent sees of
// the cgroup and of its node, each with the evidence it used and what the
// lab measured of it. doctor, the JSON API and the alerts the agent pushes
// say the same. The agent never applies a remedy: it changes no cgroup and
// no sysctl.
// Thread-safe: pure functions of an immutable snapshot.
#pragma once

#include <string>
#include <vector>

#include "exporter/state/snapshot.h"

namespace sockpressure {

struct Remedy {
  std::string key;       // stable name: swap_max, swap_off, mglru, memory_low, nosocket
  std::string action;    // what to change, e.g. "set memory.swap.max=0 on /a"
  std::string evidence;  // what the agent saw that makes it fit
  std::string effect;    // what the lab measured, or that it did not
};

// The remedies that fit cgroup `c` of `s`, most specific first; empty when
// nothing throttles it (no own socket pressure, or nothing to throttle).
std::vector<Remedy> FittingRemedies(const Snapshot& s, const CgroupView& c);

}  // namespace sockpressure
