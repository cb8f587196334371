// Which memory hierarchy a cgroupfs mount holds (v2, hybrid, v1), and
// whether its root is a cgroupfs at all: what the cgroupfs collector walks
// and where the kernel tiers look up memory cgroups. The functions keep no
// state; HierarchyRoot keeps the root open (memory_hierarchy.cc).
#pragma once

#include <sys/types.h>

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

// The memory hierarchy's root directory, found and opened by Find() and
// kept open until the next Find(): every cgroup not kept open is opened
// relative to it, so a walk never mixes two trees mounted or swapped at the
// same path. Not thread-safe: one collector owns it.
class HierarchyRoot {
 public:
  HierarchyRoot() = default;
  HierarchyRoot(const HierarchyRoot&) = delete;
  HierarchyRoot& operator=(const HierarchyRoot&) = delete;
  ~HierarchyRoot() { Close(); }

  // Finds the hierarchy under `cgroupfs_root` and opens its root again.
  // Returns true when that is another tree than the last one found (another
  // path, device or inode, or v1 and v2 switched): nothing known about the
  // old one applies. fd() is -1 when no root could be opened.
  bool Find(const std::string& cgroupfs_root);
  void Close();

  int fd() const { return fd_; }
  const MemoryHierarchy& hierarchy() const { return h_; }
  ino_t ino() const { return ino_; }  // the root cgroup's id on cgroup v2
  // A real cgroupfs (fstatfs), not a plain directory tree such as a fixture.
  bool cgroupfs() const { return cgroupfs_; }

 private:
  MemoryHierarchy h_;
  int fd_ = -1;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
  bool cgroupfs_ = false;
};

// Why a root cgroup.controllers is not a list of controller names, or
// nullopt when it is (or is absent).
std::optional<std::string> MalformedControllers(const std::string& dir);

}  // namespace sockpressure
