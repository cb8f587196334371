// `sockpressure_exporter doctor`: a one-shot report for a human on a node.
// It samples twice, one interval apart (so reclaim windows and clamp counters
// have deltas), with the same sources and --path.* flags as the agent, and
// says what the node can and cannot show, whether any cgroup's TCP sockets
// are throttled right now, and which remedies apply.
#pragma once

#include <string>

#include "exporter/state/snapshot.h"

namespace sockpressure {

class Sampler;

inline constexpr int kDoctorNoThrottling = 0;
inline constexpr int kDoctorThrottling = 1;
inline constexpr int kDoctorError = 2;

struct DoctorOptions {
  double interval_seconds = 1;
  std::string version;
  std::string paths_description;  // e.g. "procfs=/proc sysfs=/sys cgroupfs=/sys/fs/cgroup"
  std::string runbook_base = "https://github.com/sockpressure/sockpressure/blob/main/alerts/runbooks/";
};

// Renders the report from two consecutive snapshots; returns the exit code.
int RenderDoctorReport(const Snapshot& before, const Snapshot& now, const DoctorOptions& options, std::string* out);

// Takes the two samples (sleeping one interval between them), prints the
// report to stdout and returns the exit code.
int RunDoctor(Sampler& sampler, const DoctorOptions& options);

}  // namespace sockpressure
