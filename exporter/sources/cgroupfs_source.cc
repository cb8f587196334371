#include "absl/strings/string_view.h"
#include "exporter/sources/cgroupfs_source.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <fcntl.h>
#include <linux/magic.h>
#include <unordered_map>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>
#include <utility>

#include "absl/strings/str_cat.h"
#include "exporter/common/file_reader.h"
#include "exporter/common/logging.h"
#include "exporter/sources/cgroup_files.h"
#include "exporter/sources/cgroup_tree.h"
#include "exporter/sources/memory_hierarchy.h"
#include "exporter/sources/tree_lister.h"

namespace sockpressure {
namespace {

// Bounded, non-blocking and no-follow (see ReadKernelFileAt).
bool ReadAt(int dirfd, const char* name, std::string& buf, int& err) {
  return ReadKernelFileAt(dirfd, name, buf, err);
}

bool Gone(int err) { return err == ENOENT || err == ENODEV || err == ENOTDIR; }

class CgroupfsSource final : public Source {
 public:
  CgroupfsSource(const Paths& paths, CgroupfsOptions options)
      : paths_(paths), options_(std::move(options)),
        budget_(options_.fd_budget > 0 ? options_.fd_budget : FdBudget::FromRlimit()),
        lister_(options_.watch_dirs) {}

  absl::string_view name() const override { return "cgroupfs"; }

  // One sample: find the hierarchy, walk it (Walk), drop what vanished,
  // emit (Emit).
  absl::Status Collect(Sample& sample) override;

 private:
  // No memory hierarchy under the root: an error when the root is not a
  // cgroupfs at all, else said once and an empty sample.
  absl::Status NoHierarchy();
  // Top-down, breadth-first: a cgroup is read when it is the root, new, on
  // a full pass, or its parent moved and its hot children did not account
  // for all of it; otherwise its last reading stands (nothing below a still
  // cgroup moved, and no silent sibling moved). Fills order_ and read_all_;
  // true when a cgroup (and its subtree) could not be read.
  // A parent whose check fails reads every child, or, when `scanned_known`,
  // only those in which the eBPF vmpressure tier saw reclaim (MarkScanned).
  bool Walk(Sample& sample, int rootfd, bool slow_pass, bool read_all, bool scanned_known);
  // Marks the cgroups (and their ancestors) in which this sample's eBPF
  // vmpressure tier saw reclaim since the last walk, with scanned_walk =
  // `walk`; the bpf collector runs before this one. True when that tier can
  // stand in for the remainder check: attached now and at the last walk, with
  // no event lost and no program run missed in between (a missed run is a
  // reclaim it did not see).
  bool MarkScanned(const Sample& sample, uint64_t walk);
  // One cgroup of the walk: read, only listed, or its last reading kept.
  // False when it could not be read or vanished (n.gone).
  bool WalkStep(CgroupNode& n, int rootfd, bool slow_pass, bool read_all);
  // Counts a cgroup that could not be read in cgroups_left_out by reason.
  void CountUnreadable(Sample& sample, const CgroupNode& n);
  // Vanished cgroups leave the tree with their descriptors.
  void DropVanished();
  // The walked cgroups into the sample, at most --cgroup.max of them, and
  // what the sample says about itself (complete, same as the last).
  absl::Status Emit(Sample& sample, size_t previous_emitted, bool incomplete);
  // Reads one cgroup into n->last and records the outcome on the node
  // (visited_walk, visit_ok, read_err, stat_failed). Returns false when it
  // vanished (n->gone) or could not be read.
  bool Visit(CgroupNode& n, int rootfd, bool slow_pass);
  bool ReadCgroup(CgroupNode& n, int rootfd, bool slow_pass);
  // Lists n's subdirectories when they may have changed (tree_lister.h).
  void Relist(CgroupNode& n, int dirfd, bool full) {
    if (lister_.Relist(n, dirfd, full)) reshaped_ = true;
  }
  // The full pass for a cgroup whose memory.stat need not be read: only its
  // listing. False when the directory could not be opened.
  bool ListOnly(CgroupNode& n, int rootfd);
  // The cgroup's directory: kept, or opened for this visit (*temp).
  int DirFd(CgroupNode& n, int rootfd, bool* temp);
  bool ReadStat(CgroupNode& n, int dirfd, int& err);
  void NoteMalformed(const std::string& what) { malformed_.Note(what); }
  // Counts a cgroup left out of the sample by reason and reports it.
  void LeaveOut(Sample& sample, const char* reason, const std::string& what);
  // The tree of the hierarchy mounted at `root`, new when it changed.
  void UseRoot(const MemoryHierarchy& h, const struct stat& st, int rootfd);

  Paths paths_;
  CgroupfsOptions options_;
  FdBudget budget_;
  // Before root_: the nodes unwatch themselves when they go.
  TreeLister lister_;
  std::unique_ptr<CgroupNode> root_;
  std::string root_path_;
  dev_t root_dev_ = 0;
  ino_t root_ino_ = 0;
  bool keep_ = false;  // descriptors are kept (see CgroupfsOptions::keep_files)
  std::string buf_;
  std::vector<CgroupNode*> order_;
  uint64_t cycle_ = 0;  // samples of this tree, for the full pass
  uint64_t walk_ = 0;   // walks ever, never reset: CgroupNode::visited_walk
  std::vector<CgroupNode*> read_all_;  // this walk's nodes with read_kids
  std::vector<CgroupNode*> read_scanned_;  // this walk's nodes with read_scanned
  // Every walked node by cgroup id, rebuilt when the tree changes shape.
  std::unordered_map<uint64_t, CgroupNode*> by_id_;
  // The eBPF vmpressure tier at the last walk: which one, what it had
  // counted per cgroup id, its lost events and missed program runs.
  int scanned_tier_ = -1;
  std::unordered_map<uint64_t, uint64_t> scanned_by_id_;
  uint64_t scanned_lost_ = 0, scanned_missed_ = 0;
  bool cut_ = false;  // the last walk found more cgroups than --cgroup.max
  // The tree's shape changed in this walk (children came or went), and how
  // many cgroups the last walk put in its sample (SIZE_MAX: none, failed).
  bool reshaped_ = true;
  size_t last_emitted_ = SIZE_MAX;
  IdIndex ids_;  // the last sample's, shared with it (EmitSample)
  bool sock_throttled_seen_ = false;
  bool events_probed_ = false;  // a full pass looked for sock_throttled
  MalformedFiles malformed_;
  bool logged_missing_ = false;
};

int CgroupfsSource::DirFd(CgroupNode& n, int rootfd, bool* temp) {
  *temp = false;
  if (n.dir_fd >= 0) return n.dir_fd;
  // Below a kept parent the lookup is one component; else from the root.
  int at = n.parent != nullptr && n.parent->dir_fd >= 0 ? n.parent->dir_fd : rootfd;
  const char* rel = n.parent == nullptr ? "." : at == rootfd ? n.path.c_str() + 1 : n.name();
  int fd = ::openat(at, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return -1;
  if (keep_ && budget_.Take()) {
    n.dir_fd = fd;
  } else {
    *temp = true;
  }
  return fd;
}

bool CgroupfsSource::ReadStat(CgroupNode& n, int dirfd, int& err) {
  if (n.stat_fd < 0 && keep_ && budget_.Take()) {
    n.stat_fd = OpenKernelFileAt(dirfd, "memory.stat", err);
    if (n.stat_fd < 0) {
      budget_.Give();
      return false;
    }
  }
  if (n.stat_fd >= 0) return PreadKernelFile(n.stat_fd, buf_, err);
  return ReadAt(dirfd, "memory.stat", buf_, err);
}

bool CgroupfsSource::Visit(CgroupNode& n, int rootfd, bool slow_pass) {
  n.visited_walk = walk_;
  n.read_err = 0;
  n.stat_failed = false;
  n.visit_ok = ReadCgroup(n, rootfd, slow_pass);
  return n.visit_ok;
}

bool CgroupfsSource::ReadCgroup(CgroupNode& n, int rootfd, bool slow_pass) {
  int& err = n.read_err;
  bool temp = false;
  int dirfd = DirFd(n, rootfd, &temp);
  if (dirfd < 0) {
    err = errno;
    if (Gone(err)) n.gone = true;
    return false;
  }
  struct Closer {
    int fd;
    bool temp;
    ~Closer() {
      if (temp) ::close(fd);
    }
  } closer{dirfd, temp};
  CgroupReading c;
  c.path = n.path;
  c.id = n.id;
  c.v1 = root_->last.v1;
  c.exported = n.exported;
  if (!ReadStat(n, dirfd, err)) {
    // No memory.stat: memory is not enabled for this subtree on v2 (its
    // children cannot have it either), or the cgroup is being removed.
    if (Gone(err)) {
      n.gone = true;
      // Its directory opened: not removed, but without memory files, which
      // may come later without an event (tree_lister.h, recheck).
      if (n.parent != nullptr) n.parent->recheck = true;
    } else {
      n.stat_failed = true;
      NoteMalformed(absl::StrCat(c.path.str(), "/memory.stat: ", ReadErrorText(err)));
    }
    return false;
  }
  int bad = ParseMemoryStat(buf_, c.v1, c);
  if (bad > 0) NoteMalformed(absl::StrCat(c.path.str(), "/memory.stat: ", bad, " malformed line(s)"));

  // A cgroup whose hierarchical reclaim counters stood still has no
  // descendant whose counters moved: its subtree is skipped (v2 only; v1
  // and kernels without pgscan are read whole every time).
  bool moved = !n.have_reading || c.v1 || !c.pgscan || !c.pgsteal || c.pgscan != n.last.pgscan ||
               c.pgsteal != n.last.pgsteal;
  // The context files: on every full pass when their series are exported;
  // else only for a cgroup whose reclaim moved since its first reading, once
  // per full pass (the pages and the alerts API show its limits), so that
  // neither a still node nor the first sample reads any of them.
  const bool context =
      options_.read_context ? slow_pass : moved && n.have_reading && (slow_pass || !n.last.limits);
  if (context) {
    ReadSlowFiles(dirfd, c, buf_, malformed_);
  } else {
    c.limits = n.last.limits;
  }
  if (!c.v1) c.swap_bytes = LimitsOf(c.limits).swap_current;
  // sock_throttled (6.19+) is counted on the socket's own memcg, in
  // memory.events.local, and on every ancestor in memory.events: a still
  // hierarchical count means a still subtree, as for pgscan.
  c.sock_throttled_local = n.last.sock_throttled_local;
  // The first full pass tells whether the kernel counts sock_throttled at
  // all (6.19+); before 6.19 the file is not read again.
  if (!c.v1 && ((slow_pass && !events_probed_) || sock_throttled_seen_)) {
    int e = 0;
    n.events_moved = false;
    if (sock_throttled_seen_ && ReadAt(dirfd, "memory.events", buf_, e)) {
      std::optional<uint64_t> tree = ParseFlatKeyed(buf_).Get("sock_throttled");
      n.events_moved = tree != n.sock_throttled_tree;
      moved = moved || n.events_moved;
      n.sock_throttled_tree = tree;
    }
    if ((slow_pass || moved) && ReadAt(dirfd, "memory.events.local", buf_, e)) {
      c.sock_throttled_local = ParseFlatKeyed(buf_).Get("sock_throttled");
      if (c.sock_throttled_local) sock_throttled_seen_ = true;
    }
  }
  if (slow_pass || moved || !n.listed || n.dirty || lister_.list_all()) Relist(n, dirfd, slow_pass);
  n.moved = moved;
  // A first reading is not a move: only a change makes a child hot.
  if (moved && n.have_reading) NoteMoved(n, walk_);
  n.priority = std::max(n.priority, c.sock_bytes.value_or(0) > 0 ? 2 : c.pgscan.value_or(0) > 0 ? 1 : 0);
  n.last = std::move(c);
  n.have_reading = true;
  return true;
}

bool CgroupfsSource::ListOnly(CgroupNode& n, int rootfd) {
  if (lister_.Unchanged(n, /*full=*/true)) return true;
  bool temp = false;
  int dirfd = DirFd(n, rootfd, &temp);
  if (dirfd < 0) {
    n.read_err = errno;
    n.stat_failed = false;
    n.gone = Gone(n.read_err);
    return false;
  }
  Relist(n, dirfd, /*full=*/true);
  if (temp) ::close(dirfd);
  return true;
}

void CgroupfsSource::LeaveOut(Sample& sample, const char* reason, const std::string& what) {
  ++sample.cgroups_left_out[reason];
  NoteMalformed(what);
}

void CgroupfsSource::UseRoot(const MemoryHierarchy& h, const struct stat& st, int rootfd) {
  if (root_ && root_path_ == h.root && root_dev_ == st.st_dev && root_ino_ == st.st_ino && root_->last.v1 == h.v1) {
    return;
  }
  // Another tree at the path (remounted, or v1 and v2 switched): nothing
  // known about the old one applies.
  by_id_.clear();
  root_.reset();
  root_ = std::make_unique<CgroupNode>("/", st.st_ino, nullptr, &budget_, lister_.watcher());
  root_->last.v1 = h.v1;
  root_path_ = h.root;
  root_dev_ = st.st_dev;
  root_ino_ = st.st_ino;
  struct statfs fs;
  bool cgroupfs = ::fstatfs(rootfd, &fs) == 0 &&
                  (fs.f_type == CGROUP2_SUPER_MAGIC || fs.f_type == CGROUP_SUPER_MAGIC);
  keep_ = options_.keep_files == CgroupfsOptions::KeepFiles::kAlways ||
          (options_.keep_files == CgroupfsOptions::KeepFiles::kAuto && cgroupfs);
  cycle_ = 0;
  events_probed_ = false;
  reshaped_ = true;
}

absl::Status CgroupfsSource::Collect(Sample& sample) {
  MemoryHierarchy h = DetectMemoryHierarchy(paths_.cgroupfs);
  sample.cgroup_mode = h.mode;
  // Set again when this walk emits a complete sample.
  const size_t previous_emitted = std::exchange(last_emitted_, SIZE_MAX);
  if (h.root.empty()) return NoHierarchy();
  malformed_.Clear();

  // Every cgroup not kept open is opened relative to one descriptor of the
  // hierarchy root, so a walk never mixes two different trees mounted or
  // swapped at the same path while it runs.
  int rootfd = ::open(h.root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (rootfd < 0) return absl::OkStatus();  // unmounted under us: nothing to read this time
  struct stat root_st;
  if (::fstat(rootfd, &root_st) != 0) {
    ::close(rootfd);
    return absl::OkStatus();
  }
  reshaped_ = false;
  UseRoot(h, root_st, rootfd);
  lister_.Drain();
  const uint64_t slow_every = std::max<uint64_t>(1, options_.slow_every);
  const bool slow_pass = cycle_++ % slow_every == 0;
  // The full pass lists every directory; it reads every cgroup's files only
  // when their values are wanted: the context series (sizes, limits, PSI),
  // or --cgroup.max cutting the tree (what it keeps first depends on socket
  // memory, which changes without reclaim). The core signal needs no read of
  // a still subtree: its counters cannot have moved.
  const bool read_all = slow_pass && (options_.read_context || cut_);
  // Not on a full pass: reclaim that vmpressure never sees (GFP_NOIO/NOFS
  // allocations, memory.reclaim) moves memory.stat alone, and is read then.
  const bool scanned_known = MarkScanned(sample, walk_ + 1) && !slow_pass;
  const bool incomplete = Walk(sample, rootfd, slow_pass, read_all, scanned_known);
  if (slow_pass) events_probed_ = true;
  lister_.WalkDone();
  DropVanished();
  // What the parents that read every child learnt about their own share,
  // and what those that read the scanned ones take it to be.
  for (CgroupNode* n : read_all_) LearnSplit(*n, walk_);
  for (CgroupNode* n : read_scanned_) TrustSplit(*n);
  if (reshaped_ || by_id_.size() != order_.size()) {
    by_id_.clear();
    for (CgroupNode* n : order_) by_id_[n->id] = n;
  }
  ::close(rootfd);
  if (order_.empty()) {
    // Without the root there is no walk: 0 cgroups is a failure, not a fact.
    std::string why = malformed_.first.empty() ? "no memory.stat" : malformed_.first;
    root_.reset();
    return absl::UnavailableError(absl::StrCat("root cgroup ", h.root, " not readable: ", why));
  }
  return Emit(sample, previous_emitted, incomplete);
}

absl::Status CgroupfsSource::NoHierarchy() {
  if (std::optional<std::string> bad = MalformedControllers(paths_.cgroupfs)) return absl::DataLossError(*bad);
  if (!logged_missing_) {
    SP_LOG_WARN("no memory cgroup hierarchy under ", paths_.cgroupfs,
                " (neither cgroup v2 with the memory controller nor a v1 memory mount); "
                "per-cgroup metrics are unavailable");
    logged_missing_ = true;
  }
  root_.reset();
  return absl::OkStatus();
}

bool CgroupfsSource::MarkScanned(const Sample& sample, uint64_t walk) {
  int tier = -1;
  for (Tier t : {Tier::kFentry, Tier::kKprobe}) {
    if (sample.IsLive(Signal::kReclaim, t)) {
      tier = static_cast<int>(t);
      break;
    }
  }
  uint64_t missed = 0;
  for (const ProgramStats& p : sample.program_stats) missed += p.missed_runs;
  const bool steady = tier >= 0 && tier == scanned_tier_ && sample.events_lost == scanned_lost_ &&
                      missed == scanned_missed_;
  scanned_tier_ = tier;
  scanned_lost_ = sample.events_lost;
  scanned_missed_ = missed;
  auto counted = tier < 0 ? sample.reclaim.end() : sample.reclaim.find(static_cast<Tier>(tier));
  if (counted == sample.reclaim.end()) {
    scanned_by_id_.clear();
    return false;
  }
  for (const auto& [id, r] : counted->second) {
    uint64_t& seen = scanned_by_id_[id];
    if (seen == r.scanned) continue;
    seen = r.scanned;
    auto node = by_id_.find(id);
    if (node == by_id_.end()) continue;  // not walked yet: a new cgroup is read anyway
    for (CgroupNode* n = node->second; n != nullptr && n->scanned_walk != walk; n = n->parent) n->scanned_walk = walk;
  }
  return steady;
}

bool CgroupfsSource::Walk(Sample& sample, int rootfd, bool slow_pass, bool read_all, bool scanned_known) {
  ++walk_;
  order_.clear();
  read_all_.clear();
  read_scanned_.clear();
  bool incomplete = false;  // a cgroup (and its subtree) could not be read
  auto visit = [&](CgroupNode& c) { return Visit(c, rootfd, slow_pass); };
  std::deque<CgroupNode*> queue{root_.get()};
  while (!queue.empty()) {
    CgroupNode* n = queue.front();
    queue.pop_front();
    if (!WalkStep(*n, rootfd, slow_pass, read_all)) {
      n->have_reading = false;
      n->moved = false;
      if (n->gone) continue;  // vanished between listing and reading: no episode, no error
      incomplete = true;
      CountUnreadable(sample, *n);
      continue;
    }
    if (read_all || (n->moved && !HotChildrenExplain(*n, walk_, visit))) {
      if (!read_all && scanned_known && n->split_known && !n->events_moved) {
        // The sums disagree, but the eBPF tier saw each reclaim the kernel
        // accounted: a child it did not see stood still. Under steady reclaim
        // the kernel flushes its statistics (rstat) between a parent's read
        // and its children's nearly every time, and a kubepods slice would
        // read all its pods each sample.
        n->read_scanned = true;
        read_scanned_.push_back(n);
      } else {
        n->read_kids = true;
        read_all_.push_back(n);
      }
    }
    n->order = static_cast<int>(order_.size());
    order_.push_back(n);
    for (const std::string& link : n->links) {
      // cgroupfs has no symlinks; a tree that has one (a fixture, a bind
      // mount) is not what the agent can read as a cgroup.
      incomplete = true;
      LeaveOut(sample, "symlink", absl::StrCat(n->path == "/" ? "" : n->path.str(), "/", link, ": a symlink, not followed"));
    }
    for (const auto& child : n->children) queue.push_back(child.get());
  }
  return incomplete;
}

bool CgroupfsSource::WalkStep(CgroupNode& n, int rootfd, bool slow_pass, bool read_all) {
  n.gone = false;
  n.read_kids = false;
  n.read_scanned = false;
  if (!n.filtered) {
    n.exported = !options_.exported || options_.exported(n.path.str());
    n.filtered = true;
  }
  // Read as a hot child of its parent, and relisted then if its directory
  // had an event or events were lost (list_all).
  if (n.visited_walk == walk_) return n.visit_ok;
  if (read_all || n.parent == nullptr || !n.have_reading || n.parent->read_kids ||
      (n.parent->read_scanned && n.scanned_walk == walk_)) {
    return Visit(n, rootfd, slow_pass);
  }
  n.moved = false;
  // A cgroup came or went in it (watched), or the full pass (unwatched).
  if (slow_pass || n.dirty || lister_.list_all()) return ListOnly(n, rootfd);
  return true;
}

void CgroupfsSource::CountUnreadable(Sample& sample, const CgroupNode& n) {
  if (n.stat_failed) {
    ++sample.cgroups_left_out["unreadable"];
    return;
  }
  // Deeper than PATH_MAX below the root (reachable only through a chain of
  // parent descriptors): counted, never silently dropped.
  LeaveOut(sample, n.read_err == ENAMETOOLONG ? "path_too_long" : "unreadable",
           absl::StrCat(n.path.substr(0, 200), n.path.size() > 200 ? "...: " : ": ", ReadErrorText(n.read_err)));
}

void CgroupfsSource::DropVanished() {
  for (CgroupNode* n : order_) {
    auto& ch = n->children;
    size_t before = ch.size();
    ch.erase(std::remove_if(ch.begin(), ch.end(), [](const auto& c) { return c->gone; }), ch.end());
    if (ch.size() != before) {
      ChildrenChanged(*n, true);
      reshaped_ = true;
    }
  }
}

absl::Status CgroupfsSource::Emit(Sample& sample, size_t previous_emitted, bool incomplete) {
  // The last index holds when the same cgroups are walked in the same order:
  // nothing came or went (reshaped_) and the last sample was complete with
  // as many (an unreadable cgroup drops out of order_ and changes the count).
  if (reshaped_ || previous_emitted != order_.size()) ids_ = IdIndex();
  size_t skipped = EmitSample(order_, options_.max_cgroups, ids_, sample);
  sample.id_index.ShareWith(ids_);
  // One large file must not keep its buffer for good.
  if (buf_.capacity() > 65536) std::string().swap(buf_);
  sample.cgroups_skipped = skipped;
  cut_ = skipped > 0;
  sample.cgroups_complete = skipped == 0 && !incomplete;
  sample.cgroups_same_as_last = sample.cgroups_complete && !reshaped_ && previous_emitted == sample.cgroups.size();
  last_emitted_ = sample.cgroups_complete ? sample.cgroups.size() : SIZE_MAX;
  if (malformed_.count > 0 || !malformed_.first.empty()) {
    return absl::DataLossError(absl::StrCat(malformed_.count, " malformed cgroup file(s); first: ", malformed_.first));
  }
  return absl::OkStatus();
}

}  // namespace

std::unique_ptr<Source> NewCgroupfsSource(const Paths& paths, CgroupfsOptions options) {
  return std::make_unique<CgroupfsSource>(paths, options);
}

}  // namespace sockpressure
