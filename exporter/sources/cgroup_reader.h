// How the cgroupfs collector reads one cgroup of its walk: the directory
// (kept open or opened for the read), memory.stat, and when due the slow
// files, memory.events and the listing. Which cgroups are read, and in what
// order, is the walk's (cgroupfs_source.cc); this is what a read is.
//
// Not thread-safe: owned by the cgroupfs collector (the sampler thread).
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "exporter/sources/cgroup_files.h"
#include "exporter/sources/cgroup_tree.h"
#include "exporter/sources/tree_lister.h"

namespace sockpressure {

// Whether a reading has the hierarchical reclaim counters the walk follows
// (cgroup v2 with pgscan and pgsteal). Without them (v1, older kernels)
// memory.stat holds only sizes, which are context: read on the full pass.
inline bool HasReclaimCounters(const CgroupReading& c) { return !c.v1 && c.pgscan && c.pgsteal; }

class CgroupReader {
 public:
  // `read_context`: CgroupfsOptions::read_context. The pointers outlive the reader.
  CgroupReader(FdBudget* budget, TreeLister* lister, MalformedFiles* malformed, bool read_context)
      : budget_(budget), lister_(lister), malformed_(malformed), read_context_(read_context) {}

  // A new tree at the root: whether its descriptors are kept
  // (CgroupfsOptions::keep_files); its first full pass looks for
  // sock_throttled again.
  void NewTree(bool keep) {
    keep_ = keep;
    events_probed_ = false;
  }
  // Before each walk: its number, the descriptor of the hierarchy root that
  // every cgroup not kept open is opened from, whether it is the full pass,
  // and whether the tree is the v1 memory controller.
  void BeginWalk(uint64_t walk, int rootfd, bool slow_pass, bool v1);
  // After each walk.
  void EndWalk();

  // Reads `n` into n.last and records the outcome in n.visit (read, ok,
  // err, stat_failed, gone, moved). Returns false when it vanished
  // (visit.gone) or could not be read.
  bool Read(CgroupNode& n);
  // The full pass for a cgroup whose memory.stat need not be read: only its
  // listing. False when the directory could not be opened.
  bool ListOnly(CgroupNode& n);
  // Whether a listing changed some cgroup's children since the last call.
  bool TakeReshaped() { return std::exchange(reshaped_, false); }

 private:
  // The steps of Read(), in order.
  bool ReadCgroup(CgroupNode& n);
  // The cgroup's directory: kept, or opened for this read (*temp); -1 with
  // the error (and whether the cgroup is gone) in n.visit.
  int DirFd(CgroupNode& n, bool* temp);
  // memory.stat into `c`; false (with n.visit set) when it cannot be read.
  bool ReadMemoryStat(CgroupNode& n, int dirfd, CgroupReading& c);
  bool ReadStat(CgroupNode& n, int dirfd, int& err);
  // The limits, sizes, events and PSI files, when due; else the last ones.
  void ReadContext(const CgroupNode& n, int dirfd, bool moved, CgroupReading& c);
  // memory.events(.local) sock_throttled (6.19+); true when the
  // hierarchical count moved.
  bool ReadSockThrottled(CgroupNode& n, int dirfd, bool moved, CgroupReading& c);
  // Lists n's subdirectories when they may have changed (tree_lister.h).
  void Relist(CgroupNode& n, int dirfd, bool full) {
    if (lister_->Relist(n, dirfd, full)) reshaped_ = true;
  }
  // The reading becomes n's last one.
  void Keep(CgroupNode& n, bool moved, CgroupReading c);

  FdBudget* budget_;
  TreeLister* lister_;
  MalformedFiles* malformed_;
  bool read_context_;
  bool keep_ = false;  // descriptors are kept (see CgroupfsOptions::keep_files)
  uint64_t walk_ = 0;
  int rootfd_ = -1;
  bool slow_pass_ = false;
  bool v1_ = false;
  std::string buf_;
  bool reshaped_ = false;
  bool sock_throttled_seen_ = false;
  bool events_probed_ = false;  // a full pass looked for sock_throttled
};

}  // namespace sockpressure
