// The cgroupfs collector's memory of the hierarchy between samples: one node
// per memory cgroup with its last reading and, on a real cgroupfs, the
// descriptors of its directory and memory.stat kept open, so that a
// per-second read is one pread() and no path lookup.
//
// Not thread-safe: owned by the cgroupfs collector (the sampler thread).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "exporter/sources/dir_watcher.h"
#include "exporter/sources/sample.h"

namespace sockpressure {

// How many descriptors the collector may keep open. At start the soft
// RLIMIT_NOFILE is raised to the hard one (as Go programs such as
// node_exporter do); the collector keeps at most that minus kFdReserve for
// the rest of the agent (HTTP connections, netlink, eBPF maps). Cgroups
// beyond the budget are read with open/read/close.
class FdBudget {
 public:
  static constexpr size_t kFdReserve = 1024;
  explicit FdBudget(size_t limit) : limit_(limit) {}
  static size_t FromRlimit();  // raises the soft limit; returns the budget
  bool Take(size_t n = 1) {
    if (used_ + n > limit_) return false;
    used_ += n;
    return true;
  }
  void Give(size_t n = 1) { used_ -= n; }
  size_t used() const { return used_; }

 private:
  size_t limit_;
  size_t used_ = 0;
};

// Which children of a cgroup the walk reads after the cgroup itself.
enum class ChildReads {
  kHot,      // at most its hot children, for the remainder check (HotChildrenExplain)
  kAll,      // every child: a full read, or the check failed or could not be made
  kScanned,  // the children the eBPF vmpressure tier saw reclaim in (CgroupfsSource::MarkScanned)
};

// What one walk did with a cgroup. Reset once per walk, when the walk first
// reaches the cgroup (CgroupNode::BeginVisit): at its turn in the
// breadth-first order, or before it, when its parent reads it as a hot child.
struct CgroupVisit {
  uint64_t walk = 0;  // the walk these fields are of (CgroupfsSource's walk count)
  bool read = false;  // it was read in this walk (CgroupReader::Read) ...
  bool ok = false;    // ... and the read succeeded
  bool gone = false;  // vanished between its parent's listing and its read
  // Its hierarchical reclaim counters (or memory.events sock_throttled)
  // moved since its last reading: something in its subtree moved.
  bool moved = false;
  bool events_moved = false;  // memory.events sock_throttled moved (6.19+)
  bool stat_failed = false;   // the read failed on memory.stat (the directory opened)
  int err = 0;                // errno of a failed read or listing
  ChildReads children = ChildReads::kHot;
  int order = -1;  // position in this walk's order
};

struct CgroupNode {
  // A child shares its parent's watcher; the root gets the collector's.
  CgroupNode(SharedPath path_in, uint64_t id_in, CgroupNode* parent_in, FdBudget* budget_in,
             DirWatcher* watcher_in = nullptr)
      : path(std::move(path_in)), id(id_in), parent(parent_in), budget(budget_in),
        watcher(parent_in != nullptr ? parent_in->watcher : watcher_in) {}
  ~CgroupNode() {
    CloseFds();
    if (watcher != nullptr) watcher->Unwatch(wd);
  }
  CgroupNode(const CgroupNode&) = delete;
  CgroupNode& operator=(const CgroupNode&) = delete;

  void CloseFds();
  // Starts this walk's visit, once: the first call in a walk resets `visit`,
  // later ones (its turn in the breadth-first order after its parent read it
  // as a hot child) return it as it stands.
  CgroupVisit& BeginVisit(uint64_t walk) {
    if (visit.walk != walk) visit = CgroupVisit{walk};
    return visit;
  }
  // It was read in walk `walk` (successfully or not: visit.ok).
  bool ReadIn(uint64_t walk) const { return visit.walk == walk && visit.read; }
  // The directory's name within its parent.
  const char* name() const;

  SharedPath path;  // relative to the hierarchy root, "/" for the root
  uint64_t id = 0;   // d_ino from the parent's listing == cgroup id
  CgroupNode* parent = nullptr;
  FdBudget* budget = nullptr;
  std::vector<std::unique_ptr<CgroupNode>> children;  // sorted by name

  int dir_fd = -1;   // kept directory (listing, slow files, nlink)
  int stat_fd = -1;  // kept memory.stat
  nlink_t nlink = 0; // 2 + subdirectories at the last listing
  bool listed = false;
  // The directory's inotify watch (dir_watcher.h), -1 when it has none.
  // While it has one, only an event (dirty) makes it list again.
  DirWatcher* watcher = nullptr;
  int wd = -1;
  bool dirty = false;  // an entry came or went since the last listing
  bool recheck = false;  // a child had no memory.stat: listed on every full pass
  std::vector<std::string> links;  // symlinks among the children at the last listing
  bool filtered = false;  // `exported` decided

  CgroupReading last;   // last reading: reused while the subtree is still
  bool have_reading = false;
  std::optional<uint64_t> sock_throttled_tree;  // memory.events (hierarchical), 6.19+
  bool exported = true;  // --cgroup.include/exclude/level, decided once per node
  // What --cgroup.max keeps first: 2 held socket memory (where throttling
  // bites), 1 was reclaimed from, 0 neither, at any reading so far.
  int priority = 0;
  // The walk in which the eBPF vmpressure tier last saw reclaim in this
  // subtree (CgroupfsSource::MarkScanned, before the walk reaches it).
  uint64_t scanned_walk = 0;
  CgroupVisit visit;  // what the walk it was last reached in did with it

  // The own share (docs/sampling.md, "The remainder check"): on v2 a
  // cgroup's pgscan/pgsteal are its own reclaim plus its children's
  // (removed children's included). kids_* is the sum of the children's last
  // readings, rem_* this cgroup's reading less that sum, both known after a
  // walk that read every child. uint64 arithmetic wraps; the check is an
  // exact equality, so the wrap does not matter.
  bool split_known = false;
  uint64_t kids_scan = 0, kids_steal = 0, rem_scan = 0, rem_steal = 0;
  // Children that moved within the last kHotWalks walks (in_hot on the
  // child): what a moving parent reads first.
  std::vector<CgroupNode*> hot;
  bool in_hot = false;
  uint64_t moved_walk = 0;  // the walk in which this cgroup last moved
};

// A child that has not moved for this many walks leaves its parent's hot
// list. Reclaim comes in bursts of seconds; a child that pauses for a sample
// or two stays hot, so its next move costs one read instead of a read of
// every sibling.
constexpr uint64_t kHotWalks = 8;

// Notes that `n` moved in walk `walk`: it joins its parent's hot list.
void NoteMoved(CgroupNode& n, uint64_t walk);

// Reads `n`'s hot children with `visit` (one not yet read in this walk) and
// says whether they account for all of `n`'s movement: n's pgscan and
// pgsteal equal its own share plus the children's latest readings. Then no
// other child moved, and the others need not be read. False (read every
// child) when the split is not known, a hot child could not be read, or the
// sums differ: a silent child started, a child came or went, or the kernel
// flushed statistics between the reads (rstat).
bool HotChildrenExplain(CgroupNode& n, uint64_t walk, const std::function<bool(CgroupNode&)>& visit);

// After a walk that read only the children the eBPF vmpressure tier saw
// reclaimed (ChildReads::kScanned): the others did not move, so the split is the
// children's latest readings, read now or kept. Forgets it when a child has
// no counters.
void TrustSplit(CgroupNode& n);

// After a walk that read every child of `n` (ChildReads::kAll): learns the split
// afresh, or forgets it when a child could not be read or counters are
// missing. Call after the gone children left the tree.
void LearnSplit(CgroupNode& n, uint64_t walk);

// Rebuilds n.hot from the children flagged in_hot (after the children
// changed) and forgets the split when `changed`.
void ChildrenChanged(CgroupNode& n, bool changed);

// Replaces `n`'s children with `listing` (name, inode; sorted by name):
// children with the same name and inode are kept with their state, the others
// dropped (removed, or recreated under the same name) or added. Returns
// whether the set of children changed.
bool ReconcileChildren(CgroupNode& n, const std::vector<std::pair<std::string, uint64_t>>& listing);

// Which of `order` (parents before children) a sample of at most `max`
// cgroups keeps: every active cgroup with its ancestors first (in order),
// then the others shallowest first. Returns flags parallel to `order`.
std::vector<bool> SelectWithinMax(const std::vector<CgroupNode*>& order, size_t max);

// Puts the walk's cgroups (`order`, each with its position in n->visit.order) that
// SelectWithinMax keeps into sample.cgroups with their last readings and
// parent indices, and marks the memory.stat/memory.events tiers live.
// Returns how many were left out.
// `ids`: the last sample's id index when its cgroups are these, in this
// order (then shared, not rebuilt); empty otherwise.
size_t EmitSample(const std::vector<CgroupNode*>& order, size_t max, const IdIndex& ids, Sample& sample);

}  // namespace sockpressure
