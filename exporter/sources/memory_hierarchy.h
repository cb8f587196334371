// Which memory hierarchy a cgroupfs mount holds (v2, hybrid, v1), and
// whether its root is a cgroupfs at all: what the cgroupfs collector walks
// and where the kernel tiers look up memory cgroups. The functions keep no
// state (memory_hierarchy.cc).
#pragma once

#include <optional>
#include <string>

#include "exporter/sources/sample.h"

namespace sockpressure {

// Where the memory controller lives under a cgroupfs root.
struct MemoryHierarchy {
  CgroupMode mode = CgroupMode::kUnknown;
  std::string root;  // absolute directory of the memory hierarchy root
  bool v1 = false;
};
MemoryHierarchy DetectMemoryHierarchy(const std::string& cgroupfs_root);

// Why a root cgroup.controllers is not a list of controller names, or
// nullopt when it is (or is absent).
std::optional<std::string> MalformedControllers(const std::string& dir);

}  // namespace sockpressure
