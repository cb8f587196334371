// --cgroup.include, --cgroup.exclude and --cgroup.level: which memory
// cgroups are exported. The others are still read (the hierarchy needs
// them) and fold into their nearest exported ancestor (state/fold.h).
//
// The patterns are ECMAScript regular expressions (std::regex), matched
// against the whole cgroup path ("/kubepods.slice/..."), as node_exporter
// matches its include/exclude flags against whole names. Not RE2: the project
// links no RE2 and a new build dependency on every machine is not worth it
// for a match done once per cgroup when it is first seen (the collector
// caches the answer); the common syntax (., *, +, ?, [], (), |, ^, $) is the
// same in both.
// The returned predicate is thread-compatible (const; called from the
// sampler thread only).
#pragma once

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sockpressure {

// level: "all" (every cgroup), "pod" (Kubernetes pod cgroups; nothing below
// a pod) or "container" (container cgroups; not the pod cgroups above them).
// With "pod" or "container", cgroups outside any pod (the node's system
// services, kubepods and the QoS slices) are kept: they are what a node
// dashboard shows beside the pods. nullptr when every cgroup is exported.
absl::StatusOr<std::function<bool(absl::string_view)>> NewCgroupFilter(const std::string& include,
                                                                       const std::string& exclude,
                                                                       const std::string& level);

}  // namespace sockpressure
