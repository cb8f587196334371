// Collector "cgroupfs": walks the memory cgroup hierarchy (v2, or the v1
// memory controller on hybrid/legacy hosts) and reads each cgroup's memory
// files into Sample::cgroups.
//
// Why these files: the vmpressure estimate needs memory.stat pgscan/pgsteal
// (docs/kernel-notes.md, "memory.stat as a vmpressure proxy"); sock_throttled in memory.events.local
// is the kernel's own throttle counter from 6.19; the rest are the context an
// SRE needs (swap, anon vs file, sockets, PSI, limits).
#pragma once

#include "absl/strings/string_view.h"
#include <memory>
#include <string>

#include "exporter/sources/source.h"

namespace sockpressure {

struct CgroupfsOptions {
  // Stop reading cgroups beyond this many (breadth-first, so the shallow,
  // more important levels are kept). The rest are counted, not read.
  size_t max_cgroups = 5000;
  // Read limits, sizes, events and PSI every this many samples (and on the
  // first); memory.stat is read every sample.
  uint64_t slow_every = 1;
};

// Where the memory controller lives under a cgroupfs root.
struct MemoryHierarchy {
  CgroupMode mode = CgroupMode::kUnknown;
  std::string root;  // absolute directory of the memory hierarchy root
  bool v1 = false;
};
MemoryHierarchy DetectMemoryHierarchy(const std::string& cgroupfs_root);

std::unique_ptr<Source> NewCgroupfsSource(const Paths& paths, CgroupfsOptions options);

// Parses one cgroup's memory.stat into `out`. v1 uses the hierarchical
// total_* keys. Returns the number of malformed lines.
int ParseMemoryStat(absl::string_view text, bool v1, CgroupReading& out);

}  // namespace sockpressure
