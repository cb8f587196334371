// Maps unified-hierarchy (cgroup v2) cgroup ids of sockets to the memory
// cgroups of a sample. Used by both census tiers: sock_diag reports
// INET_DIAG_CGROUP_ID, the BPF census sk_cgrp_data for sockets that are not
// charged to a memcg.
//   v2: the id is a CgroupReading id unless the socket sits in a child
//       without the memory controller; then its nearest memory ancestor.
//   hybrid (memory on v1): unified ids are a different id space. The socket's
//       unified path is matched against the v1 memory tree (systemd and
//       container runtimes mirror paths); the deepest existing v1 ancestor
//       wins, "/" as the last resort.
//
// Not thread-safe: one instance per collector, used from the sampler thread.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>

#include "exporter/sources/sample.h"

namespace sockpressure {

class CgroupMapper {
 public:
  explicit CgroupMapper(std::string cgroupfs) : cgroupfs_(std::move(cgroupfs)) {}

  // Call once per sample before Map().
  void Begin();
  // Returns the memory cgroup id, or 0 when there are no memory cgroups.
  uint64_t Map(uint64_t id2, const Sample& sample);
  bool v1() const { return v1_; }
  // Adds census counts keyed by cgroup v2 id onto `out`, keyed by memory
  // cgroup id (the sample's). Counts that map nowhere are dropped.
  void AddCensus(const std::unordered_map<uint64_t, SocketCensus>& by_cgroup2, const Sample& sample,
                 std::unordered_map<uint64_t, SocketCensus>& out);

 private:
  // Walks the unified tree once: directory inode -> path. At most once per
  // sample, and only when an id is unknown (new cgroups).
  void Rescan();

  std::string cgroupfs_, unified_root_;
  bool v1_ = false, rescanned_ = false, by_path_built_ = false;
  std::unordered_map<std::string, uint64_t> by_path_;
  std::unordered_map<uint64_t, std::string> paths_;
};

}  // namespace sockpressure
