// Which cgroup directories gained or lost an entry since the last look, from
// inotify, so that the cgroupfs collector lists a directory again only when
// a cgroup was created or removed in it, instead of listing every directory
// (and fstat'ing every leaf) on each full pass.
//
// What it relies on (docs/kernel.md §7; docs/sampling.md, "Directory
// watches"): a cgroup is
// created by mkdir(2) and removed by rmdir(2) through the VFS, which reports
// both to the parent directory's watches (fsnotify_mkdir in vfs_mkdir,
// d_delete_notify in vfs_rmdir); the interface files inside a cgroup are made
// by kernfs itself and report nothing. A watch is removed by the kernel with
// its directory (IN_IGNORED). When the event queue overflows, nothing can be
// trusted: Drain says so and the caller lists everything again.
//
// Not thread-safe: owned by the cgroupfs collector (the sampler thread).
#pragma once

#include <functional>
#include <unordered_map>

namespace sockpressure {

class DirWatcher {
 public:
  DirWatcher();  // without inotify (or its instances used up), live() is false
  ~DirWatcher();
  DirWatcher(const DirWatcher&) = delete;
  DirWatcher& operator=(const DirWatcher&) = delete;

  bool live() const { return fd_ >= 0; }
  // Watches the directory open at `dirfd` for entries created, removed or
  // renamed; `owner` is handed back by Drain. Returns the watch descriptor,
  // or -1 (no inotify, the per-user watch limit reached, no /proc): that
  // directory is then listed the old way.
  int Watch(int dirfd, void* owner);
  // Stops watching `wd` (its owner leaves the tree). -1 is ignored.
  void Unwatch(int wd);
  // Reads every pending event without blocking: changed(owner) for each
  // directory that gained or lost an entry, gone(owner) for each watch the
  // kernel removed (its directory was deleted). Returns false when the queue
  // overflowed since the last call (events were lost).
  bool Drain(const std::function<void(void*)>& changed, const std::function<void(void*)>& gone);
  size_t watches() const { return owners_.size(); }

 private:
  int fd_ = -1;
  std::unordered_map<int, void*> owners_;  // watch descriptor -> owner
};

}  // namespace sockpressure
