#include "exporter/sources/cgroup_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/str_cat.h"
#include "exporter/common/file_reader.h"

namespace sockpressure {
namespace {

// Bounded, non-blocking and no-follow (see ReadKernelFileAt).
bool ReadAt(int dirfd, const char* name, std::string& buf, int& err) {
  return ReadKernelFileAt(dirfd, name, buf, err);
}

bool Gone(int err) { return err == ENOENT || err == ENODEV || err == ENOTDIR; }

// Closes a directory opened for one read (not a kept one) when the read ends.
struct TempFd {
  int fd;
  bool temp;
  ~TempFd() {
    if (temp) ::close(fd);
  }
};

}  // namespace

void CgroupReader::BeginWalk(uint64_t walk, int rootfd, bool slow_pass, bool v1) {
  walk_ = walk;
  rootfd_ = rootfd;
  slow_pass_ = slow_pass;
  v1_ = v1;
}

void CgroupReader::EndWalk() {
  if (slow_pass_) events_probed_ = true;
  // One large file must not keep its buffer for good.
  if (buf_.capacity() > 65536) std::string().swap(buf_);
}

int CgroupReader::DirFd(CgroupNode& n, bool* temp) {
  *temp = false;
  if (n.dir_fd >= 0) return n.dir_fd;
  // Below a kept parent the lookup is one component; else from the root.
  int at = n.parent != nullptr && n.parent->dir_fd >= 0 ? n.parent->dir_fd : rootfd_;
  const char* rel = n.parent == nullptr ? "." : at == rootfd_ ? n.path.c_str() + 1 : n.name();
  int fd = ::openat(at, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) {
    n.visit.err = errno;
    n.visit.gone = Gone(n.visit.err);
    return -1;
  }
  if (keep_ && budget_->Take()) {
    n.dir_fd = fd;
  } else {
    *temp = true;
  }
  return fd;
}

bool CgroupReader::ReadStat(CgroupNode& n, int dirfd, int& err) {
  if (n.stat_fd < 0 && keep_ && budget_->Take()) {
    n.stat_fd = OpenKernelFileAt(dirfd, "memory.stat", err);
    if (n.stat_fd < 0) {
      budget_->Give();
      return false;
    }
  }
  if (n.stat_fd >= 0) return PreadKernelFile(n.stat_fd, buf_, err);
  return ReadAt(dirfd, "memory.stat", buf_, err);
}

bool CgroupReader::Read(CgroupNode& n) {
  CgroupVisit& visit = n.BeginVisit(walk_);
  visit.read = true;
  visit.ok = ReadCgroup(n);
  return visit.ok;
}

bool CgroupReader::ReadCgroup(CgroupNode& n) {
  bool temp = false;
  int dirfd = DirFd(n, &temp);
  if (dirfd < 0) return false;
  TempFd closer{dirfd, temp};
  CgroupReading c;
  c.path = n.path;
  c.id = n.id;
  c.v1 = v1_;
  c.exported = n.exported;
  if (!ReadMemoryStat(n, dirfd, c)) return false;
  // A cgroup whose hierarchical reclaim counters stood still has no
  // descendant whose counters moved: its subtree is skipped. A tree without
  // them is read whole on the full pass only (HasReclaimCounters).
  bool moved = !n.have_reading || (HasReclaimCounters(c) ? c.pgscan != n.last.pgscan || c.pgsteal != n.last.pgsteal
                                                         : slow_pass_);
  ReadContext(n, dirfd, moved, c);
  moved = ReadSockThrottled(n, dirfd, moved, c) || moved;
  if (slow_pass_ || moved || !n.listed || n.dirty || lister_->list_all()) Relist(n, dirfd, slow_pass_);
  Keep(n, moved, std::move(c));
  return true;
}

bool CgroupReader::ReadMemoryStat(CgroupNode& n, int dirfd, CgroupReading& c) {
  if (!ReadStat(n, dirfd, n.visit.err)) {
    // No memory.stat: memory is not enabled for this subtree on v2 (its
    // children cannot have it either), or the cgroup is being removed.
    if (Gone(n.visit.err)) {
      n.visit.gone = true;
      // Its directory opened: not removed, but without memory files, which
      // may come later without an event (tree_lister.h, recheck).
      if (n.parent != nullptr) n.parent->recheck = true;
    } else {
      n.visit.stat_failed = true;
      malformed_->Note(absl::StrCat(c.path.str(), "/memory.stat: ", ReadErrorText(n.visit.err)));
    }
    return false;
  }
  int bad = ParseMemoryStat(buf_, c.v1, c);
  if (bad > 0) malformed_->Note(absl::StrCat(c.path.str(), "/memory.stat: ", bad, " malformed line(s)"));
  return true;
}

void CgroupReader::ReadContext(const CgroupNode& n, int dirfd, bool moved, CgroupReading& c) {
  // The context files: on every full pass when their series are exported;
  // else only for a cgroup whose reclaim moved since its first reading, once
  // per full pass (the pages and the alerts API show its limits), so that
  // neither a still node nor the first sample reads any of them.
  const bool context = read_context_ ? slow_pass_ : moved && n.have_reading && (slow_pass_ || !n.last.limits);
  if (context) {
    ReadSlowFiles(dirfd, c, buf_, *malformed_);
  } else {
    c.limits = n.last.limits;
  }
  if (!c.v1) c.swap_bytes = LimitsOf(c.limits).swap_current;
}

bool CgroupReader::ReadSockThrottled(CgroupNode& n, int dirfd, bool moved, CgroupReading& c) {
  // sock_throttled (6.19+) is counted on the socket's own memcg, in
  // memory.events.local, and on every ancestor in memory.events: a still
  // hierarchical count means a still subtree, as for pgscan.
  c.sock_throttled_local = n.last.sock_throttled_local;
  // The first full pass tells whether the kernel counts sock_throttled at
  // all (6.19+); before 6.19 the file is not read again.
  if (c.v1 || !((slow_pass_ && !events_probed_) || sock_throttled_seen_)) return false;
  int e = 0;
  if (sock_throttled_seen_ && ReadAt(dirfd, "memory.events", buf_, e)) {
    std::optional<uint64_t> tree = ParseFlatKeyed(buf_).Get("sock_throttled");
    n.visit.events_moved = tree != n.sock_throttled_tree;
    n.sock_throttled_tree = tree;
  }
  if ((slow_pass_ || moved || n.visit.events_moved) && ReadAt(dirfd, "memory.events.local", buf_, e)) {
    c.sock_throttled_local = ParseFlatKeyed(buf_).Get("sock_throttled");
    if (c.sock_throttled_local) sock_throttled_seen_ = true;
  }
  return n.visit.events_moved;
}

void CgroupReader::Keep(CgroupNode& n, bool moved, CgroupReading c) {
  n.visit.moved = moved;
  // A first reading is not a move: only a change makes a child hot.
  if (moved && n.have_reading) NoteMoved(n, walk_);
  n.priority = std::max(n.priority, c.sock_bytes.value_or(0) > 0 ? 2 : c.pgscan.value_or(0) > 0 ? 1 : 0);
  n.last = std::move(c);
  n.have_reading = true;
}

bool CgroupReader::ListOnly(CgroupNode& n) {
  if (lister_->Unchanged(n, /*full=*/true)) return true;
  bool temp = false;
  int dirfd = DirFd(n, &temp);
  if (dirfd < 0) return false;
  Relist(n, dirfd, /*full=*/true);
  if (temp) ::close(dirfd);
  return true;
}

}  // namespace sockpressure
