// When and how the cgroupfs collector lists a cgroup directory again: new
// and removed child cgroups, from an inotify event on a watched directory
// (dir_watcher.h) or, for a directory without a watch, from the full pass
// and a changed link count.
//
// Not thread-safe: owned by the cgroupfs collector (the sampler thread).
#pragma once

#include <memory>

#include "exporter/sources/cgroup_files.h"
#include "exporter/sources/cgroup_tree.h"
#include "exporter/sources/dir_watcher.h"

namespace sockpressure {

class TreeLister {
 public:
  explicit TreeLister(bool watch);

  // What the root node is given, so that every node of its tree can be watched.
  DirWatcher* watcher() { return watcher_.get(); }
  // A watched directory with no event since its last listing: its
  // subdirectories are as listed, and no syscall is needed to know it.
  // Except after lost events (every directory is listed once), and on the
  // full pass for one with a child that had no memory.stat (n.recheck): on
  // v2, enabling memory in cgroup.subtree_control gives the children their
  // memory files from kernfs, which inotify does not report.
  bool Unchanged(const CgroupNode& n, bool full) const {
    return !list_all_ && n.wd >= 0 && n.listed && !n.dirty && !(full && n.recheck);
  }
  // At the start of a walk: marks the nodes whose directories had events
  // (dirty); after lost events every node must be listed in this walk
  // (list_all(), until WalkDone()).
  void Drain();
  bool list_all() const { return list_all_; }
  void WalkDone() { list_all_ = false; }

  // Lists n (open at `dirfd`) when its subdirectories may have changed and
  // reconciles its children; `full`: the full pass. Returns whether the
  // children or links changed.
  bool Relist(CgroupNode& n, int dirfd, bool full);

 private:
  std::unique_ptr<DirWatcher> watcher_;
  ChildLister lister_;
  bool list_all_ = false;
  bool logged_ = false;
};

}  // namespace sockpressure
