#include "exporter/sources/tree_lister.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "exporter/common/logging.h"

namespace sockpressure {

TreeLister::TreeLister(bool watch) {
  if (!watch) return;
  watcher_ = std::make_unique<DirWatcher>();
  if (!watcher_->live()) {
    SP_LOG_WARN("inotify unavailable (", std::strerror(errno),
                "): cgroup directories are listed on every full pass instead of on change");
  }
}

void TreeLister::Drain() {
  if (watcher_ == nullptr) return;
  auto changed = [](void* owner) { static_cast<CgroupNode*>(owner)->dirty = true; };
  // Its directory was removed: it leaves with its parent's listing (the
  // parent's watch reported the removal); until then it has no watch.
  auto gone = [](void* owner) {
    auto* n = static_cast<CgroupNode*>(owner);
    n->wd = -1;
    n->dirty = true;
  };
  if (!watcher_->Drain(changed, gone)) list_all_ = true;
}

bool TreeLister::Relist(CgroupNode& n, int dirfd, bool full) {
  if (Unchanged(n, full)) return false;
  // Watched before it is listed, so that an entry made in between is
  // reported and not lost.
  if (n.wd < 0 && watcher_ != nullptr && watcher_->live()) {
    n.wd = watcher_->Watch(dirfd, &n);
    if (n.wd < 0 && !logged_) {
      SP_LOG_WARN("cannot watch cgroup directory ", n.path.str(), ": ", std::strerror(errno),
                  " (fs.inotify.max_user_watches?); directories without a watch are listed on every full pass");
      logged_ = true;
    }
  }
  const bool dirty = std::exchange(n.dirty, false) || list_all_;
  // Without a watch: new subdirectories every full pass, and when the cgroup
  // moved and its link count (2 + subdirectories) changed, so that a new
  // cgroup that reclaims at once is read within the interval. A directory
  // that has no subdirectories (2 links) and had none is not listed even on
  // a full pass: most cgroups are leaves. (A filesystem whose directories do
  // not count links, such as btrfs, is listed each time.)
  struct stat st;
  nlink_t nlink = ::fstat(dirfd, &st) == 0 ? st.st_nlink : 0;
  if (n.listed && !dirty && nlink == n.nlink && (!full || (nlink == 2 && n.children.empty() && n.links.empty()))) {
    return false;
  }
  n.nlink = nlink;
  if (n.dir_fd >= 0) ::lseek(dirfd, 0, SEEK_SET);
  lister_.List(dirfd);
  bool changed = ReconcileChildren(n, lister_.names());
  changed = changed || lister_.links() != n.links;
  n.links = lister_.links();
  n.listed = true;
  return changed;
}

}  // namespace sockpressure
