// The cgroupfs collector's walk: which cgroups of the tree are read in a
// sample, in what order, and what the sample gets. What reading one cgroup
// is belongs to cgroup_reader.cc, the tree's bookkeeping to cgroup_tree.cc.
#include "exporter/sources/cgroupfs_source.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <deque>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "exporter/common/file_reader.h"
#include "exporter/common/logging.h"
#include "exporter/sources/cgroup_files.h"
#include "exporter/sources/cgroup_reader.h"
#include "exporter/sources/cgroup_tree.h"
#include "exporter/sources/memory_hierarchy.h"
#include "exporter/sources/tree_lister.h"

namespace sockpressure {
namespace {

// What the walk does with one cgroup, and why; decided in this order
// (CgroupfsSource::Decide). A cgroup is read when something below it may
// have moved; else its last reading stands, as nothing below a still
// cgroup moved and no silent sibling of a hot child did.
enum class ReadDecision {
  kReadEarlier,  // already read in this walk, as a hot child of its parent (HotChildrenExplain)
  kReadAll,      // the full read: every cgroup is read on this full pass
  kReadRoot,     // the root: the walk starts from its counters (with none, v1: on the full pass)
  kReadNew,      // no reading to keep: new, or its last read failed
  kReadSibling,  // its parent moved and reads every child (ChildReads::kAll)
  kReadScanned,  // the eBPF vmpressure tier saw reclaim in it, and its parent reads those (ChildReads::kScanned)
  kList,         // kept, but listed again: its directory had an event, events were lost, or the full pass
  kKeep,         // kept: its last reading and listing stand
};

class CgroupfsSource final : public Source {
 public:
  CgroupfsSource(const Paths& paths, CgroupfsOptions options)
      : paths_(paths), options_(std::move(options)),
        budget_(options_.fd_budget > 0 ? options_.fd_budget : FdBudget::FromRlimit()),
        lister_(options_.watch_dirs), reader_(&budget_, &lister_, &malformed_, options_.read_context) {}

  absl::string_view name() const override { return "cgroupfs"; }

  // One sample: find the hierarchy on the full pass (FindRoot), walk it
  // (Walk), drop what vanished, emit (Emit).
  absl::Status Collect(Sample& sample) override;

 private:
  // No memory hierarchy under the root: an error when the root is not a
  // cgroupfs at all, else said once and an empty sample.
  absl::Status NoHierarchy();
  // Top-down, breadth-first, each cgroup as Decide() says. Fills order_,
  // read_all_ and read_scanned_; true when a cgroup (and its subtree) could
  // not be read. A moving parent whose hot children do not account for its
  // move reads every child, or, when `scanned_known`, only those in which
  // the eBPF vmpressure tier saw reclaim (MarkScanned).
  bool Walk(Sample& sample, bool slow_pass, bool read_all, bool scanned_known);
  // Which children of `n`, just read, the walk reads.
  ChildReads ChildrenToRead(const CgroupNode& n, bool read_all, bool scanned_known) const;
  // Marks the cgroups (and their ancestors) in which this sample's eBPF
  // vmpressure tier saw reclaim since the last walk, with scanned_walk =
  // `walk` (its row runs after bpf's, registry.cc). True when that tier can
  // stand in for the remainder check: attached now and at the last walk, with
  // no event lost and no program run missed in between (a missed run is a
  // reclaim it did not see).
  bool MarkScanned(const Sample& sample, uint64_t walk);
  // One cgroup of the walk: read, only listed, or its last reading kept.
  // False when it could not be read or vanished (visit.gone).
  bool WalkStep(CgroupNode& n, bool slow_pass, bool read_all);
  // What the walk does with `n` (ReadDecision), reached in its turn.
  ReadDecision Decide(const CgroupNode& n, bool slow_pass, bool read_all) const;
  // Counts a cgroup that could not be read in cgroups_left_out by reason.
  void CountUnreadable(Sample& sample, const CgroupNode& n);
  // Vanished cgroups leave the tree with their descriptors.
  void DropVanished();
  // The walked cgroups into the sample, at most --cgroup.max of them, and
  // what the sample says about itself (complete, same as the last).
  absl::Status Emit(Sample& sample, size_t previous_emitted, bool incomplete);
  void NoteMalformed(const std::string& what) { malformed_.Note(what); }
  // Counts a cgroup left out of the sample by reason and reports it.
  void LeaveOut(Sample& sample, const char* reason, const std::string& what);
  // Finds the memory hierarchy and opens its root (hierarchy_), with a new
  // tree when it is another one: on the first sample, on every full pass
  // and after a failed one. A mount does not move between samples; a
  // remount or a v1/v2 switch is seen at the next full pass (until then the
  // old tree's descriptors read the old tree, or fail as a vanished
  // cgroup's do). Between passes a sample looks up no path of the hierarchy.
  absl::Status FindRoot();

  Paths paths_;
  CgroupfsOptions options_;
  FdBudget budget_;
  // Before root_: the nodes unwatch themselves when they go.
  TreeLister lister_;
  MalformedFiles malformed_;
  CgroupReader reader_;
  std::unique_ptr<CgroupNode> root_;
  HierarchyRoot hierarchy_;
  std::vector<CgroupNode*> order_;
  uint64_t cycle_ = 0;  // samples of this tree, for the full pass
  uint64_t walk_ = 0;   // walks ever, never reset: CgroupVisit::walk
  std::vector<CgroupNode*> read_all_;  // this walk's nodes with ChildReads::kAll
  std::vector<CgroupNode*> read_scanned_;  // this walk's nodes with ChildReads::kScanned
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
  bool logged_missing_ = false;
};

void CgroupfsSource::LeaveOut(Sample& sample, const char* reason, const std::string& what) {
  ++sample.cgroups_left_out[reason];
  NoteMalformed(what);
}

absl::Status CgroupfsSource::FindRoot() {
  const bool another = hierarchy_.Find(paths_.cgroupfs);
  const MemoryHierarchy& h = hierarchy_.hierarchy();
  if (h.root.empty()) return NoHierarchy();
  if (hierarchy_.fd() < 0 || (root_ && !another)) return absl::OkStatus();
  // Another tree at the path (remounted, or v1 and v2 switched), or the
  // first: nothing known about an old one applies.
  by_id_.clear();
  root_.reset();
  root_ = std::make_unique<CgroupNode>("/", hierarchy_.ino(), nullptr, &budget_, lister_.watcher());
  root_->last.v1 = h.v1;
  reader_.NewTree(options_.keep_files == CgroupfsOptions::KeepFiles::kAlways ||
                  (options_.keep_files == CgroupfsOptions::KeepFiles::kAuto && hierarchy_.cgroupfs()));
  cycle_ = 0;
  reshaped_ = true;
  return absl::OkStatus();
}

absl::Status CgroupfsSource::Collect(Sample& sample) {
  // Set again when this walk emits a complete sample.
  const size_t previous_emitted = std::exchange(last_emitted_, SIZE_MAX);
  reshaped_ = false;
  const uint64_t slow_every = std::max<uint64_t>(1, options_.slow_every);
  if (!root_ || hierarchy_.fd() < 0 || sample.after_wait || cycle_ % slow_every == 0) {
    absl::Status found = FindRoot();
    if (!found.ok() || !root_ || hierarchy_.fd() < 0) {
      sample.cgroup_mode = hierarchy_.hierarchy().mode;
      return found;
    }
  }
  sample.cgroup_mode = hierarchy_.hierarchy().mode;
  malformed_.Clear();
  lister_.Drain();
  // After an idle wait, the full pass the skipped samples would have made.
  const bool slow_pass = cycle_++ % slow_every == 0 || sample.after_wait;
  // The full pass lists every directory; it reads every cgroup's files only
  // when their values are wanted: the context series (sizes, limits, PSI),
  // or --cgroup.max cutting the tree (what it keeps first depends on socket
  // memory, which changes without reclaim). The core signal needs no read of
  // a still subtree: its counters cannot have moved.
  const bool read_all = slow_pass && (options_.read_context || cut_);
  ++walk_;
  // Not on a full pass: reclaim that vmpressure never sees (GFP_NOIO/NOFS
  // allocations, memory.reclaim) moves memory.stat alone, and is read then.
  const bool scanned_known = MarkScanned(sample, walk_) && !slow_pass;
  reader_.BeginWalk(walk_, hierarchy_.fd(), slow_pass, root_->last.v1);
  const bool incomplete = Walk(sample, slow_pass, read_all, scanned_known);
  reader_.EndWalk();
  if (reader_.TakeReshaped()) reshaped_ = true;
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
  if (order_.empty()) {
    // Without the root there is no walk: 0 cgroups is a failure, not a fact.
    std::string why = malformed_.first.empty() ? "no memory.stat" : malformed_.first;
    root_.reset();
    return absl::UnavailableError(absl::StrCat("root cgroup ", hierarchy_.hierarchy().root, " not readable: ", why));
  }
  absl::Status emitted = Emit(sample, previous_emitted, incomplete);
  // Without reclaim counters (v1) nothing is read between full passes: no
  // signal of this collector moves between samples (Sample::signal_collectors_quiet).
  if (emitted.ok() && root_ && root_->have_reading && !HasReclaimCounters(root_->last)) ++sample.signal_collectors_quiet;
  return emitted;
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

bool CgroupfsSource::Walk(Sample& sample, bool slow_pass, bool read_all, bool scanned_known) {
  order_.clear();
  read_all_.clear();
  read_scanned_.clear();
  bool incomplete = false;  // a cgroup (and its subtree) could not be read
  auto visit = [&](CgroupNode& c) { return reader_.Read(c); };
  std::deque<CgroupNode*> queue{root_.get()};
  while (!queue.empty()) {
    CgroupNode* n = queue.front();
    queue.pop_front();
    if (!WalkStep(*n, slow_pass, read_all)) {
      n->have_reading = false;
      if (n->visit.gone) continue;  // vanished between listing and reading: no episode, no error
      incomplete = true;
      CountUnreadable(sample, *n);
      continue;
    }
    if (read_all || (n->visit.moved && !HotChildrenExplain(*n, walk_, visit))) {
      n->visit.children = ChildrenToRead(*n, read_all, scanned_known);
      (n->visit.children == ChildReads::kScanned ? read_scanned_ : read_all_).push_back(n);
    }
    n->visit.order = static_cast<int>(order_.size());
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

ChildReads CgroupfsSource::ChildrenToRead(const CgroupNode& n, bool read_all, bool scanned_known) const {
  if (!read_all && scanned_known && n.split_known && !n.visit.events_moved) {
    // The sums disagree, but the eBPF tier saw each reclaim the kernel
    // accounted: a child it did not see stood still. Under steady reclaim
    // the kernel flushes its statistics (rstat) between a parent's read
    // and its children's nearly every time, and a kubepods slice would
    // read all its pods each sample.
    return ChildReads::kScanned;
  }
  return ChildReads::kAll;
}

ReadDecision CgroupfsSource::Decide(const CgroupNode& n, bool slow_pass, bool read_all) const {
  if (n.ReadIn(walk_)) return ReadDecision::kReadEarlier;
  if (read_all) return ReadDecision::kReadAll;
  if (n.parent == nullptr) {
    if (!n.have_reading || slow_pass || HasReclaimCounters(n.last)) return ReadDecision::kReadRoot;
    // Between full passes a root without reclaim counters (v1) has nothing
    // to read: only a child that came or went is looked for.
    return n.dirty || lister_.list_all() ? ReadDecision::kList : ReadDecision::kKeep;
  }
  if (!n.have_reading) return ReadDecision::kReadNew;
  if (n.parent->visit.children == ChildReads::kAll) return ReadDecision::kReadSibling;
  if (n.parent->visit.children == ChildReads::kScanned && n.scanned_walk == walk_) return ReadDecision::kReadScanned;
  // A cgroup came or went in it (watched), or the full pass (unwatched).
  if (slow_pass || n.dirty || lister_.list_all()) return ReadDecision::kList;
  return ReadDecision::kKeep;
}

bool CgroupfsSource::WalkStep(CgroupNode& n, bool slow_pass, bool read_all) {
  n.BeginVisit(walk_);
  if (!n.filtered) {
    n.exported = !options_.exported || options_.exported(n.path.str());
    n.filtered = true;
  }
  switch (Decide(n, slow_pass, read_all)) {
    case ReadDecision::kReadEarlier:
      // Relisted then if its directory had an event or events were lost (list_all).
      return n.visit.ok;
    case ReadDecision::kReadAll:
    case ReadDecision::kReadRoot:
    case ReadDecision::kReadNew:
    case ReadDecision::kReadSibling:
    case ReadDecision::kReadScanned:
      return reader_.Read(n);
    case ReadDecision::kList:
      return reader_.ListOnly(n);
    case ReadDecision::kKeep:
      break;
  }
  return true;
}

void CgroupfsSource::CountUnreadable(Sample& sample, const CgroupNode& n) {
  if (n.visit.stat_failed) {
    ++sample.cgroups_left_out["unreadable"];
    return;
  }
  // Deeper than PATH_MAX below the root (reachable only through a chain of
  // parent descriptors): counted, never silently dropped.
  LeaveOut(sample, n.visit.err == ENAMETOOLONG ? "path_too_long" : "unreadable",
           absl::StrCat(n.path.substr(0, 200), n.path.size() > 200 ? "...: " : ": ", ReadErrorText(n.visit.err)));
}

void CgroupfsSource::DropVanished() {
  for (CgroupNode* n : order_) {
    auto& ch = n->children;
    size_t before = ch.size();
    ch.erase(std::remove_if(ch.begin(), ch.end(), [](const auto& c) { return c->visit.gone; }), ch.end());
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
