// StateTracker: the snapshot's per-cgroup views, built from the states
// (or shared with the last snapshot where nothing changed).
#include "exporter/state/state_tracker.h"

#include <algorithm>

namespace sockpressure {

void StateTracker::Views(Sample& sample, const std::vector<CgroupState*>& states, bool incremental,
                         const std::vector<uint8_t>& dirty, const std::vector<int64_t>& sockets,
                         Snapshot& snap) const {
  const size_t n = sample.cgroups.size();
  snap.cgroups.reserve(n);
  const Snapshot* last = incremental ? last_snap_.get() : nullptr;
  snap.same_cgroups_as_previous = last != nullptr;
  for (size_t i = 0; i < n; ++i) {
    CgroupReading& c = sample.cgroups[i];
    // `sockets` holds totals without a last snapshot, changes from its counts with one.
    auto with_sockets = [&](CgroupView v, const CgroupView* before) {
      if (!sockets.empty()) {
        const int64_t base = before != nullptr ? static_cast<int64_t>(before->subtree_sockets.value_or(0)) : 0;
        v.subtree_sockets = static_cast<uint64_t>(std::max<int64_t>(0, base + sockets[i]));
      }
      return v;
    };
    if (last == nullptr) {
      snap.cgroups.push_back(with_sockets(ViewOf(c, *states[i], snap, nullptr), nullptr));
      continue;
    }
    const CgroupView& before = last->cgroups[i];
    // A parent whose pressure flag changed changes every descendant's
    // (mem_cgroup_under_socket_pressure walks up); parents come first.
    const size_t p = static_cast<size_t>(c.parent);
    const bool inherited = c.parent >= 0 && snap.cgroups[p].pressure_active != last->cgroups[p].pressure_active;
    const bool same_reading = c.limits.get() == before.limits.get() && c.anon_bytes == before.anon_bytes &&
                              c.file_bytes == before.file_bytes && c.sock_bytes == before.sock_bytes &&
                              c.swap_bytes == before.swap_bytes;
    if (!dirty[i] && !inherited && same_reading) {
      snap.cgroups.push_back(last->cgroups.shared(i));
      continue;
    }
    snap.cgroups.push_back(with_sockets(ViewOf(c, *states[i], snap, &before), &before));
    snap.changed.push_back(static_cast<uint32_t>(i));
  }
}

CgroupView StateTracker::ViewOf(CgroupReading& c, const CgroupState& st, const Snapshot& snap,
                               const CgroupView* before) const {
  CgroupView v;
  if (before != nullptr) {
    v.identity = before->identity;
  } else if (identity_ != nullptr) {
    v.identity = identity_->Resolve(c.path);
  }
  // The walk's own string (shared_path.h); moved, as nothing after this
  // reads the sample's paths.
  v.path = std::move(c.path);
  v.id = c.id;
  v.parent = c.parent;
  v.v1 = c.v1;
  for (int s = 0; s < kSignalCount; ++s) {
    Tier t = snap.signal_tier[s];
    v.tier[s] = st.values.count(t) ? t : Tier::kNone;
  }
  BestOf(st, v);
  // mem_cgroup_under_socket_pressure() walks up to the root: a live
  // deadline on any ancestor throttles this cgroup's sockets too.
  v.pressure_active = v.best.pressure_asserted ||
                      (c.parent >= 0 && snap.cgroups[static_cast<size_t>(c.parent)].pressure_active);
  if (keep_all_tiers_) v.tiers = st.values;
  v.anon_bytes = c.anon_bytes;
  v.file_bytes = c.file_bytes;
  v.sock_bytes = c.sock_bytes;
  v.swap_bytes = c.swap_bytes;
  v.limits = std::move(c.limits);
  return v;
}

void StateTracker::BestOf(const CgroupState& st, CgroupView& v) {
  auto from = [&](Signal s) -> const TierValues* {
    auto it = st.values.find(v.tier[static_cast<int>(s)]);
    return it == st.values.end() ? nullptr : &it->second;
  };
  if (const TierValues* r = from(Signal::kReclaim)) {
    v.best.scanned_total = r->scanned_total;
    v.best.reclaimed_total = r->reclaimed_total;
    std::copy(std::begin(r->windows_total), std::end(r->windows_total), v.best.windows_total);
    v.best.ratio = r->ratio;
  }
  if (const TierValues* p = from(Signal::kSocketPressure)) {
    v.best.pressure_events_total = p->pressure_events_total;
    v.best.pressure_seconds_total = p->pressure_seconds_total;
    v.best.pressure_asserted = p->pressure_asserted;
  }
  if (const TierValues* k = from(Signal::kWindowClamps)) v.best.clamps_total = k->clamps_total;
  if (const TierValues* k = from(Signal::kClampedSockets)) v.best.census = k->census;
  // Drops and prunes come from different programs (and tiers): each half
  // from its own signal's best tier.
  if (const TierValues* k = from(Signal::kRcvMemDrops)) {
    v.best.prunes_total.rcv_mem_drops = k->prunes_total.rcv_mem_drops;
    v.best.prunes_total.ofo_pruned_segs = k->prunes_total.ofo_pruned_segs;
  }
  if (const TierValues* k = from(Signal::kTcpPrunes)) {
    v.best.prunes_total.collapses = k->prunes_total.collapses;
    v.best.prunes_total.ofo_prunes = k->prunes_total.ofo_prunes;
  }
  if (const TierValues* k = from(Signal::kSockThrottled)) v.best.sock_throttled_total = k->sock_throttled_total;
}

std::vector<int64_t> StateTracker::SubtreeSockets(const Sample& sample, const std::vector<CgroupState*>& states,
                                                  const Snapshot* last, Tier census,
                                                  std::vector<uint8_t>& dirty) const {
  if (census == Tier::kNone) return {};
  const size_t n = sample.cgroups.size();
  auto own = [&](size_t i) -> int64_t {
    auto it = states[i]->values.find(census);
    if (it == states[i]->values.end() || !it->second.census) return 0;
    return static_cast<int64_t>(it->second.census->sockets);
  };
  std::vector<int64_t> sockets(n, 0);
  if (last == nullptr) {
    // Children come after their parents: summed from the end, each
    // cgroup's total is complete before it is added to its parent's.
    for (size_t i = n; i-- > 0;) {
      sockets[i] += own(i);
      if (sample.cgroups[i].parent >= 0) sockets[static_cast<size_t>(sample.cgroups[i].parent)] += sockets[i];
    }
    return sockets;
  }
  // Only a dirty cgroup's own census can have moved; its change moves every
  // ancestor's count, so those get new views too. Ancestors come first, so
  // one marked here was already passed and is not taken for a mover.
  for (size_t i = 0; i < n; ++i) {
    if (!dirty[i]) continue;
    const std::optional<SocketCensus>& before = last->cgroups[i].best.census;
    const int64_t moved = own(i) - (before ? static_cast<int64_t>(before->sockets) : 0);
    if (moved == 0) continue;
    for (int a = static_cast<int>(i); a >= 0; a = sample.cgroups[static_cast<size_t>(a)].parent) {
      sockets[static_cast<size_t>(a)] += moved;
      dirty[static_cast<size_t>(a)] = 1;
    }
  }
  return sockets;
}

}  // namespace sockpressure
