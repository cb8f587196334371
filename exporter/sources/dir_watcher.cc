#include "exporter/sources/dir_watcher.h"

#include <sys/inotify.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace sockpressure {
namespace {

// Entries coming and going; no IN_MODIFY: memory.stat changing is what the
// walk reads, not a change of the tree.
constexpr uint32_t kMask = IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ONLYDIR;

}  // namespace

DirWatcher::DirWatcher() : fd_(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC)) {}

DirWatcher::~DirWatcher() {
  if (fd_ >= 0) ::close(fd_);  // removes every watch
}

int DirWatcher::Watch(int dirfd, void* owner) {
  if (fd_ < 0) return -1;
  // inotify takes a path; the descriptor's /proc link names the directory
  // already open, so a cgroup renamed or replaced meanwhile is not mixed up.
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/self/fd/%d", dirfd);
  int wd = ::inotify_add_watch(fd_, path, kMask);
  if (wd < 0) return -1;
  // The same directory watched twice gets the same descriptor: the newer
  // owner wins (the older one is leaving the tree).
  owners_[wd] = owner;
  return wd;
}

void DirWatcher::Unwatch(int wd) {
  if (wd < 0 || fd_ < 0) return;
  if (owners_.erase(wd) > 0) ::inotify_rm_watch(fd_, wd);  // EINVAL when the kernel removed it first: fine
}

bool DirWatcher::Drain(const std::function<void(void*)>& changed, const std::function<void(void*)>& gone) {
  if (fd_ < 0) return true;
  bool complete = true;
  alignas(struct inotify_event) char buf[16384];
  for (;;) {
    ssize_t n = ::read(fd_, buf, sizeof(buf));
    if (n <= 0) break;  // EAGAIN: drained
    for (ssize_t off = 0; off < n;) {
      const auto* ev = reinterpret_cast<const struct inotify_event*>(buf + off);
      off += static_cast<ssize_t>(sizeof(struct inotify_event) + ev->len);
      if (ev->mask & IN_Q_OVERFLOW) {
        complete = false;
        continue;
      }
      auto it = owners_.find(ev->wd);
      if (it == owners_.end()) continue;  // unwatched since: its owner is gone
      if (ev->mask & IN_IGNORED) {
        void* owner = it->second;
        owners_.erase(it);
        gone(owner);
        continue;
      }
      changed(it->second);
    }
  }
  return complete;
}

}  // namespace sockpressure
