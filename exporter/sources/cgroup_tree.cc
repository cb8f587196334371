#include "exporter/sources/cgroup_tree.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace sockpressure {

size_t FdBudget::FromRlimit() {
  struct rlimit rl;
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return 0;
  if (rl.rlim_cur < rl.rlim_max) {
    struct rlimit raised = rl;
    raised.rlim_cur = rl.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) rl = raised;
  }
  if (rl.rlim_cur == RLIM_INFINITY) return size_t{1} << 20;
  return rl.rlim_cur > 2 * kFdReserve ? static_cast<size_t>(rl.rlim_cur) - kFdReserve : 0;
}

void CgroupNode::CloseFds() {
  for (int* fd : {&dir_fd, &stat_fd}) {
    if (*fd >= 0) {
      ::close(*fd);
      budget->Give();
      *fd = -1;
    }
  }
}

const char* CgroupNode::name() const {
  size_t slash = path.rfind('/');
  return path.c_str() + (slash == std::string::npos ? 0 : slash + 1);
}

bool ReconcileChildren(CgroupNode& n, const std::vector<std::pair<std::string, uint64_t>>& listing) {
  std::vector<std::unique_ptr<CgroupNode>> old = std::move(n.children);
  n.children.clear();
  n.children.reserve(listing.size());
  size_t j = 0;
  size_t kept = 0;
  for (const auto& [name, ino] : listing) {
    // Both sorted by name: advance through the old children once.
    while (j < old.size() && std::strcmp(old[j]->name(), name.c_str()) < 0) ++j;
    if (j < old.size() && old[j]->name() == name && old[j]->id == ino) {
      n.children.push_back(std::move(old[j++]));
      ++kept;
      continue;
    }
    std::string path = n.path == "/" ? "/" + name : n.path.str() + "/" + name;
    n.children.push_back(std::make_unique<CgroupNode>(std::move(path), ino, &n, n.budget));
  }
  // What is left in `old` is gone: its descriptors close with it (after the
  // hot list no longer points at it).
  bool changed = kept != old.size() || kept != n.children.size();
  ChildrenChanged(n, changed);
  return changed;
}

void ChildrenChanged(CgroupNode& n, bool changed) {
  if (changed) n.split_known = false;
  n.hot.clear();
  for (const auto& c : n.children) {
    if (c->in_hot) n.hot.push_back(c.get());
  }
}

void NoteMoved(CgroupNode& n, uint64_t walk) {
  n.moved_walk = walk;
  if (n.parent == nullptr || n.in_hot) return;
  n.in_hot = true;
  n.parent->hot.push_back(&n);
}

namespace {

// A reading with both counters: the check needs them on both sides.
bool HasCounters(const CgroupNode& n) { return n.have_reading && !n.last.v1 && n.last.pgscan && n.last.pgsteal; }

}  // namespace

bool HotChildrenExplain(CgroupNode& n, uint64_t walk, const std::function<bool(CgroupNode&)>& visit) {
  if (!n.split_known || n.visit.events_moved || !HasCounters(n)) return false;
  uint64_t scan = n.kids_scan, steal = n.kids_steal;
  bool all_read = true;
  size_t keep = 0;
  for (size_t i = 0; i < n.hot.size(); ++i) {
    CgroupNode& c = *n.hot[i];
    uint64_t old_scan = *c.last.pgscan, old_steal = *c.last.pgsteal;  // hot: it had counters
    bool ok = c.ReadIn(walk) ? c.visit.ok : visit(c);
    if (!ok || !HasCounters(c)) {
      all_read = false;  // gone or unreadable: the walk reads every child and reports it
      n.hot[keep++] = &c;
      continue;
    }
    scan += *c.last.pgscan - old_scan;
    steal += *c.last.pgsteal - old_steal;
    if (walk - c.moved_walk > kHotWalks) {
      c.in_hot = false;  // still for a while: read again only when the parent's sums say so
    } else {
      n.hot[keep++] = &c;
    }
  }
  n.hot.resize(keep);
  if (!all_read) return false;
  // The children read here keep their new readings whatever the outcome;
  // the sums follow them, so that a fallback's LearnSplit starts from the truth.
  n.kids_scan = scan;
  n.kids_steal = steal;
  return *n.last.pgscan == n.rem_scan + scan && *n.last.pgsteal == n.rem_steal + steal;
}

void TrustSplit(CgroupNode& n) {
  n.split_known = false;
  if (!HasCounters(n)) return;
  uint64_t scan = 0, steal = 0;
  for (const auto& c : n.children) {
    if (!HasCounters(*c)) return;
    scan += *c->last.pgscan;
    steal += *c->last.pgsteal;
  }
  n.kids_scan = scan;
  n.kids_steal = steal;
  n.rem_scan = *n.last.pgscan - scan;
  n.rem_steal = *n.last.pgsteal - steal;
  n.split_known = true;
}

void LearnSplit(CgroupNode& n, uint64_t walk) {
  for (const auto& c : n.children) {
    if (!c->ReadIn(walk) || !c->visit.ok) {
      n.split_known = false;
      return;
    }
  }
  TrustSplit(n);
}

std::vector<bool> SelectWithinMax(const std::vector<CgroupNode*>& order, size_t max) {
  std::vector<bool> keep(order.size(), order.size() <= max);
  if (order.size() <= max) return keep;
  size_t kept = 0;
  auto ancestors_missing = [&](const CgroupNode* n) {
    size_t missing = 0;
    for (const CgroupNode* p = n; p != nullptr && !keep[static_cast<size_t>(p->visit.order)]; p = p->parent) ++missing;
    return missing;
  };
  auto take = [&](const CgroupNode* n) {
    for (const CgroupNode* p = n; p != nullptr && !keep[static_cast<size_t>(p->visit.order)]; p = p->parent) {
      keep[static_cast<size_t>(p->visit.order)] = true;
      ++kept;
    }
  };
  // Where throttling happens first: cgroups with reclaim or sockets, with
  // the ancestors the hierarchy needs (and the root) above them.
  for (int priority : {2, 1}) {
    for (const CgroupNode* n : order) {
      if (n->priority < priority || keep[static_cast<size_t>(n->visit.order)]) continue;
      if (kept + ancestors_missing(n) <= max) take(n);
    }
  }
  // Then the rest, shallowest first (order is breadth-first).
  for (const CgroupNode* n : order) {
    if (kept >= max) break;
    if (keep[static_cast<size_t>(n->visit.order)]) continue;
    if (n->parent == nullptr || keep[static_cast<size_t>(n->parent->visit.order)]) take(n);
  }
  return keep;
}

size_t EmitSample(const std::vector<CgroupNode*>& order, size_t max, const IdIndex& ids, Sample& sample) {
  std::vector<bool> keep = SelectWithinMax(order, max);
  std::vector<int> index(order.size(), -1);
  sample.cgroups.reserve(order.size());
  const bool share = ids.size() == order.size() && order.size() <= max;
  if (share) {
    ids.ShareWith(sample.id_index);
  } else {
    sample.id_index.reserve(order.size());
  }
  size_t skipped = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    if (!keep[i]) {
      ++skipped;
      continue;
    }
    const CgroupNode* n = order[i];
    index[i] = static_cast<int>(sample.cgroups.size());
    CgroupReading& c = sample.cgroups.emplace_back(n->last);
    c.parent = n->parent == nullptr ? -1 : index[static_cast<size_t>(n->parent->visit.order)];
    c.exported = n->exported;
    if (!share) sample.id_index[c.id] = index[i];
  }
  for (const CgroupReading& c : sample.cgroups) {
    // memory.stat pgscan/pgsteal exist on v2 only; v1 has no per-memcg scan counters.
    if (c.pgscan && c.pgsteal) {
      sample.MarkLive(Signal::kReclaim, Tier::kMemoryStat);
      sample.MarkLive(Signal::kSocketPressure, Tier::kMemoryStat);
    }
    if (c.sock_throttled_local) sample.MarkLive(Signal::kSockThrottled, Tier::kMemoryEvents);
  }
  return skipped;
}

}  // namespace sockpressure
