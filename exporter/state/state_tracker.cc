#include "exporter/state/state_tracker.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

namespace sockpressure {
namespace {

// Delta of a cumulative counter kept by a source; a smaller value means the
// source restarted (map recreated), and everything since the restart is new.
uint64_t CounterDelta(uint64_t now, uint64_t before) { return now >= before ? now - before : now; }

double SecondsDelta(double now, double before) { return now >= before ? now - before : now; }

// own - children + carry, never negative; a negative rest is carried into
// the next interval (see CgroupState::scan_carry). Computed in 128 bits:
// counters near 2^64 must neither overflow nor wrap into a false delta.
uint64_t LocalDelta(uint64_t own, uint64_t children, int64_t& carry) {
  __int128 local = static_cast<__int128>(own) - static_cast<__int128>(children) + carry;
  if (local < 0) {
    carry = local < INT64_MIN ? INT64_MIN : static_cast<int64_t>(local);
    return 0;
  }
  carry = 0;
  return local > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(local);
}

uint64_t SaturatingAdd(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

// For every tier that read cgroup `id` this sample: apply(values, previous,
// current) with that tier's previous reading, which then becomes `current`.
// Cumulative counters of all tiers are turned into totals this one way.
// Every live tier gets values for the cgroup, read or not: its counters are
// exported from the first sample on, at 0.
template <typename Counters, typename Apply>
void ApplyCounterTiers(const ByTier<Counters>& sample, uint64_t id, std::map<Tier, TierValues>& values,
                       std::map<Tier, Counters>& previous, Apply apply) {
  for (const auto& [tier, by_id] : sample) {
    TierValues& v = values[tier];
    auto it = by_id.find(id);
    if (it == by_id.end()) continue;
    Counters& prev = previous[tier];
    apply(v, prev, it->second);
    prev = it->second;
  }
}

// The counter tiers' ways of adding one reading, shared by the whole-sample
// and the by-entry paths.
void AddReclaim(TierValues& v, const ReclaimCounters& prev, const ReclaimCounters& cur) {
  uint64_t ds = CounterDelta(cur.scanned, prev.scanned);
  uint64_t dr = CounterDelta(cur.reclaimed, prev.reclaimed);
  v.scanned_total += ds;
  v.reclaimed_total += dr;
  for (int l = 0; l < 3; ++l) v.windows_total[l] += CounterDelta(cur.windows[l], prev.windows[l]);
  if (ds >= kVmpressureWindowPages) v.ratio = dr >= ds ? 0.0 : 1.0 - static_cast<double>(dr) / ds;
}
void AddClamps(TierValues& v, const ClampCounters& prev, const ClampCounters& cur) {
  v.clamps_total += CounterDelta(cur.clamps, prev.clamps);
}
void AddPrunes(TierValues& v, const PruneCounters& prev, const PruneCounters& cur) {
  PruneCounters& t = v.prunes_total;
  t.rcv_mem_drops += CounterDelta(cur.rcv_mem_drops, prev.rcv_mem_drops);
  t.ofo_pruned_segs += CounterDelta(cur.ofo_pruned_segs, prev.ofo_pruned_segs);
  t.collapses += CounterDelta(cur.collapses, prev.collapses);
  t.ofo_prunes += CounterDelta(cur.ofo_prunes, prev.ofo_prunes);
}
// Adds a tier's socket-pressure reading; false when it equals the last one.
bool AddPressure(TierValues& v, PressureState& prev, const PressureState& cur, bool socket_accounting) {
  bool same = cur.assertions == prev.assertions && cur.seconds == prev.seconds && cur.active == prev.active;
  // With cgroup.memory=nosocket vmpressure still writes
  // memcg->socket_pressure, but no socket has an sk_memcg to be
  // throttled by it: count only what throttles (mm/memcontrol.c,
  // mem_cgroup_sockets_enabled).
  if (socket_accounting) {
    v.pressure_events_total += CounterDelta(cur.assertions, prev.assertions);
    v.pressure_seconds_total += SecondsDelta(cur.seconds, prev.seconds);
  }
  v.pressure_asserted = socket_accounting && cur.active;
  prev = cur;
  return !same;
}

// Counters of plain uint64_t fields: equal when every field is.
template <typename Counters>
bool SameCounters(const Counters& a, const Counters& b) {
  static_assert(std::is_trivially_copyable_v<Counters> && sizeof(Counters) % sizeof(uint64_t) == 0);
  return std::memcmp(&a, &b, sizeof(Counters)) == 0;
}

Tier BestLive(const Sample& sample, Signal s) {
  for (int t = 0; t < kTierCount - 1; ++t) {
    if (sample.IsLive(s, static_cast<Tier>(t))) return static_cast<Tier>(t);
  }
  return Tier::kNone;
}

}  // namespace

void StateTracker::ApplyMemoryStat(const Sample& sample, const std::vector<CgroupState*>& states,
                                   double interval, bool can_throttle_v2, bool incremental,
                                   std::vector<uint8_t>& dirty) {
  if (!sample.IsLive(Signal::kReclaim, Tier::kMemoryStat)) return;
  const size_t n = sample.cgroups.size();
  // Hierarchical deltas first: local = own - sum(children), so every
  // cgroup's own delta must be known before its parent's local is computed.
  std::vector<uint64_t> d_scan(n, 0), d_steal(n, 0);
  std::vector<bool> have(n, false);
  for (size_t i = 0; i < n; ++i) {
    const CgroupReading& c = sample.cgroups[i];
    if (!c.pgscan || !c.pgsteal) continue;
    // Proactive reclaim (memory.reclaim) is excluded from vmpressure since
    // v6.0 (mm/vmscan.c: if (!sc->proactive) vmpressure(...)).
    uint64_t scan = *c.pgscan - std::min(*c.pgscan, c.pgscan_proactive.value_or(0));
    uint64_t steal = *c.pgsteal - std::min(*c.pgsteal, c.pgsteal_proactive.value_or(0));
    CgroupState& st = *states[i];
    if (st.have_prev) {
      d_scan[i] = CounterDelta(scan, st.prev_scan);
      d_steal[i] = CounterDelta(steal, st.prev_steal);
      have[i] = true;
    } else if (sequence_ > 0 && !st.rebaseline) {
      // Created since the last (complete) sample: all of its counts are new.
      d_scan[i] = scan;
      d_steal[i] = steal;
      have[i] = true;
    }
    st.prev_scan = scan;
    st.prev_steal = steal;
    st.have_prev = true;
  }
  std::vector<uint64_t> child_scan(n, 0), child_steal(n, 0);
  for (size_t i = 0; i < n; ++i) {
    int p = sample.cgroups[i].parent;
    if (p >= 0 && have[i]) {
      child_scan[p] = SaturatingAdd(child_scan[p], d_scan[i]);
      child_steal[p] = SaturatingAdd(child_steal[p], d_steal[i]);
    }
  }
  for (size_t i = 0; i < n; ++i) {
    CgroupState& st = *states[i];
    // Nothing moved here or below and nothing to clear: a zero delta changes
    // no total, window or carry, so the values stand.
    const bool still = !have[i] || (d_scan[i] == 0 && d_steal[i] == 0 && child_scan[i] == 0 && child_steal[i] == 0);
    if (incremental && still && !st.memory_stat_asserted) continue;
    dirty[i] = 1;
    TierValues& v = st.values[Tier::kMemoryStat];
    v.pressure_asserted = false;
    st.memory_stat_asserted = false;
    if (!have[i]) continue;
    uint64_t local_scan = LocalDelta(d_scan[i], child_scan[i], st.scan_carry);
    uint64_t local_steal = LocalDelta(d_steal[i], child_steal[i], st.steal_carry);
    v.scanned_total = SaturatingAdd(v.scanned_total, local_scan);
    v.reclaimed_total = SaturatingAdd(v.reclaimed_total, local_steal);
    std::optional<VmpressureWindow::Verdict> verdict = st.window.Add(local_scan, local_steal);
    if (!verdict) continue;
    v.windows_total[static_cast<int>(verdict->level)] += verdict->windows;
    v.ratio = verdict->ratio;
    // The root memcg never gets socket pressure (vmpressure(): "if (!memcg
    // || mem_cgroup_is_root(memcg)) return"), and on kernels with
    // ac8a52962164 (v6.6, backported) the v1 hierarchy never does either.
    bool root = sample.cgroups[i].parent < 0;
    if (verdict->level != PressureLevel::kLow && can_throttle_v2 && !root && !sample.cgroups[i].v1) {
      // Each kernel window at medium+ re-arms the 1 s deadline; the interval
      // cannot be under pressure for longer than it lasted.
      v.pressure_events_total += verdict->windows;
      v.pressure_seconds_total += std::min(interval, static_cast<double>(verdict->windows));
      v.pressure_asserted = true;
      st.memory_stat_asserted = true;
    }
  }
}

void StateTracker::ApplyTiers(const Sample& sample, const std::vector<CgroupState*>& states,
                              bool socket_accounting, bool incremental, std::vector<uint8_t>& dirty) {
  if (incremental) {
    ApplyTierEntries(sample, states, socket_accounting, dirty);
  } else {
    for (size_t i = 0; i < sample.cgroups.size(); ++i) {
      CgroupState& st = *states[i];
      uint64_t id = sample.cgroups[i].id;
      ApplyCounterTiers(sample.reclaim, id, st.values, st.prev_reclaim, AddReclaim);
      for (const auto& [tier, by_id] : sample.pressure) {
        TierValues& v = st.values[tier];
        auto it = by_id.find(id);
        if (it == by_id.end()) {
          v.pressure_asserted = false;
          continue;
        }
        AddPressure(v, st.prev_pressure[tier], it->second, socket_accounting);
      }
      ApplyCounterTiers(sample.clamps, id, st.values, st.prev_clamps, AddClamps);
      ApplyCounterTiers(sample.prunes, id, st.values, st.prev_prunes, AddPrunes);
      for (const auto& [tier, by_id] : sample.census) {
        TierValues& v = st.values[tier];
        auto it = by_id.find(id);
        v.census = it == by_id.end() ? SocketCensus{} : it->second;
      }
    }
  }
  // memory.events.local, on every cgroup the walk read it for (6.19+).
  for (size_t i = 0; i < sample.cgroups.size(); ++i) {
    const std::optional<uint64_t>& local = sample.cgroups[i].sock_throttled_local;
    CgroupState& st = *states[i];
    if (local == st.prev_sock_throttled && incremental) continue;
    if (local) st.values[Tier::kMemoryEvents].sock_throttled_total = local;
    st.prev_sock_throttled = local;
    dirty[i] = 1;
  }
  // What the next incremental sample must clear if its entries do not
  // repeat it: a census count, a tier's asserted pressure.
  revisit_.clear();
  auto note = [&](uint64_t id) {
    int i = sample.IndexOfId(id);
    if (i >= 0) revisit_.push_back(static_cast<uint32_t>(i));
  };
  for (const auto& [tier, by_id] : sample.census) {
    for (const auto& [id, c] : by_id) note(id);
  }
  for (const auto& [tier, by_id] : sample.pressure) {
    for (const auto& [id, p] : by_id) {
      if (p.active) note(id);
    }
  }
}

void StateTracker::ApplyTierEntries(const Sample& sample, const std::vector<CgroupState*>& states,
                                    bool socket_accounting, std::vector<uint8_t>& dirty) {
  const size_t n = states.size();
  // First clear what the last sample's entries set: this one sets it again
  // where its entries still say so.
  for (uint32_t i : revisit_) {
    if (i >= n) continue;
    CgroupState& st = *states[i];
    for (const auto& [tier, by_id] : sample.pressure) st.values[tier].pressure_asserted = false;
    for (const auto& [tier, by_id] : sample.census) st.values[tier].census = SocketCensus{};
    dirty[i] = 1;
  }
  // Each (tier, cgroup id) entry whose reading moved; the others stand.
  // Every live tier already has values for every cgroup (the last full
  // sample made them, and the cgroups and tiers are the same).
  auto each = [&](const auto& by_tier, auto apply) {
    for (const auto& [tier, by_id] : by_tier) {
      for (const auto& [id, cur] : by_id) {
        int i = sample.IndexOfId(id);
        if (i < 0) continue;
        if (apply(*states[static_cast<size_t>(i)], tier, cur)) dirty[static_cast<size_t>(i)] = 1;
      }
    }
  };
  auto counters = [](auto add, auto member) {
    return [add, member](CgroupState& st, Tier tier, const auto& cur) {
      auto& prev = (st.*member)[tier];
      if (SameCounters(prev, cur)) return false;
      add(st.values[tier], prev, cur);
      prev = cur;
      return true;
    };
  };
  each(sample.reclaim, counters(AddReclaim, &CgroupState::prev_reclaim));
  each(sample.clamps, counters(AddClamps, &CgroupState::prev_clamps));
  each(sample.prunes, counters(AddPrunes, &CgroupState::prev_prunes));
  each(sample.pressure, [&](CgroupState& st, Tier tier, const PressureState& cur) {
    TierValues& v = st.values[tier];
    bool was = v.pressure_asserted;
    return AddPressure(v, st.prev_pressure[tier], cur, socket_accounting) || v.pressure_asserted != was;
  });
  each(sample.census, [](CgroupState& st, Tier tier, const SocketCensus& cur) {
    std::optional<SocketCensus>& c = st.values[tier].census;
    if (c && SameCounters(*c, cur)) return false;
    c = cur;
    return true;
  });
}

// Matches states to the sample's cgroups by path and id (see Update()).
std::vector<StateTracker::CgroupState*> StateTracker::MatchStates(const Sample& sample, uint64_t stamp) {
  std::vector<CgroupState*> states;
  states.reserve(sample.cgroups.size());
  for (const CgroupReading& c : sample.cgroups) {
    auto it = states_.find(c.path);
    if (it != states_.end() && it->second.id == c.id) {
      // Seen last time: the same cgroup.
      it->second.seen = stamp;
      states.push_back(&it->second);
      continue;
    }
    CgroupState st;
    auto gone = unseen_.find(c.path);
    if (it != states_.end()) {
      // Recreated under the same name since the last sample: starts over.
    } else if (gone != unseen_.end() && gone->second.state.id == c.id) {
      st = std::move(gone->second.state);
      st.have_prev = false;
      st.rebaseline = true;
      st.scan_carry = st.steal_carry = 0;
    } else if (!last_complete_) {
      st.rebaseline = true;  // may have been there, unseen, all along
    }
    if (gone != unseen_.end()) unseen_.erase(gone);
    st.id = c.id;
    st.seen = stamp;
    if (it != states_.end()) {
      it->second = std::move(st);
      states.push_back(&it->second);
    } else {
      states.push_back(&states_.emplace(c.path, std::move(st)).first->second);
    }
  }
  return states;
}

std::shared_ptr<const Snapshot> StateTracker::Update(Sample sample, std::vector<CollectorResult> collectors,
                                                     double sample_cpu_seconds) {
  auto snap = std::make_shared<Snapshot>();
  double interval = sequence_ == 0 ? 0.0 : std::max(0.0, sample.monotonic_seconds - last_monotonic_);
  last_monotonic_ = sample.monotonic_seconds;
  NodeFacts(sample, *snap);
  const uint64_t stamp = sequence_ + 1;
  bool reused = false;
  std::vector<CgroupState*> states = Match(sample, stamp, &reused);
  for (int s = 0; s < kSignalCount; ++s) snap->signal_tier[s] = judge_.Choose(sample, static_cast<Signal>(s));
  const bool incremental = Incremental(sample, reused, *snap);
  // Pointers into states_ stay valid: an unordered_map's rehash moves no element.
  std::vector<uint8_t> dirty(sample.cgroups.size(), incremental ? 0 : 1);
  ApplyMemoryStat(sample, states, interval, snap->socket_accounting_enabled, incremental, dirty);
  ApplyTiers(sample, states, snap->socket_accounting_enabled, incremental, dirty);
  Judge(sample, states, dirty);
  if (!reused) {
    for (CgroupState* st : states) st->rebaseline = false;
  }
  const std::vector<int64_t> sockets = SubtreeSockets(
      sample, states, incremental ? last_snap_.get() : nullptr,
      snap->signal_tier[static_cast<int>(Signal::kClampedSockets)], dirty);
  Views(sample, states, incremental, dirty, sockets, *snap);
  Fold(sample, states, *snap);
  ForgetUnseen(sample, stamp);
  last_complete_ = sample.cgroups_complete;
  // Pointers into states_ (an unordered_map moves no element on rehash);
  // everything not in `states` was extracted by ForgetUnseen.
  last_states_ = std::move(states);
  Stamp(sample, std::move(collectors), interval, sample_cpu_seconds, *snap);
  last_snap_ = snap;
  return snap;
}

bool StateTracker::Incremental(const Sample& sample, bool reused, const Snapshot& snap) {
  const uint64_t version = identity_ != nullptr ? identity_->Version() : 0;
  const bool incremental = reused && last_snap_ != nullptr && !folding_ && !keep_all_tiers_ &&
                           last_snap_->cgroups.size() == sample.cgroups.size() &&
                           snap.signal_tier == last_snap_->signal_tier &&
                           snap.socket_accounting_enabled == last_snap_->socket_accounting_enabled &&
                           sample.live == last_live_ && version == last_identity_version_ &&
                           since_full_ + 1 < kIdentityRefreshSamples;
  last_identity_version_ = version;
  last_live_ = sample.live;
  since_full_ = incremental ? since_full_ + 1 : 0;
  return incremental;
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

void StateTracker::NodeFacts(const Sample& sample, Snapshot& snap) const {
  snap.node = sample.node;
  snap.swap_enabled = sample.node.swaps && sample.node.swaps->devices > 0;
  snap.socket_accounting_enabled = !sample.node.nosocket.value_or(false);
  if (sample.node.tcp_mem_pages && sample.node.tcp_mem_limits && sample.node.tcp_mem_limits->size() == 3) {
    // tcp_mem[1] is the pressure threshold (net/ipv4/tcp.c, sk_enter_memory_pressure).
    snap.tcp_memory_pressure = *sample.node.tcp_mem_pages > (*sample.node.tcp_mem_limits)[1];
  }
}

std::vector<StateTracker::CgroupState*> StateTracker::Match(const Sample& sample, uint64_t stamp, bool* reused) {
  // Match states to this sample's cgroups; a path whose id changed is a new
  // cgroup with the old name, so its state starts over.
  // In place: a cgroup seen last time keeps its entry (no copy of 10,000
  // paths and states per sample); what is not stamped with this sample's
  // number afterwards was not seen.
  if (sample.cgroups_same_as_last && last_states_.size() == sample.cgroups.size()) {
    // The collector vouches for the same cgroups in the same order: the
    // last matching stands (no lookup of 10,000 paths when nothing came or went).
    std::vector<CgroupState*> states = std::move(last_states_);
    for (CgroupState* st : states) st->seen = stamp;
    *reused = true;
    return states;
  }
  return MatchStates(sample, stamp);
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

void StateTracker::Judge(const Sample& sample, const std::vector<CgroupState*>& states,
                         const std::vector<uint8_t>& dirty) {
  // The tiers judged are the best live ones above the sources they are held
  // to; memory_stat itself has nothing below it to fall back to.
  const Tier reclaim = BestLive(sample, Signal::kReclaim);
  const Tier pressure = BestLive(sample, Signal::kSocketPressure);
  const bool judge_reclaim = reclaim < Tier::kMemoryEvents && !judge_.Blind(Signal::kReclaim, reclaim) &&
                             sample.IsLive(Signal::kReclaim, Tier::kMemoryStat);
  const bool judge_pressure = pressure < Tier::kMemoryEvents && !judge_.Blind(Signal::kSocketPressure, pressure) &&
                              sample.IsLive(Signal::kSockThrottled, Tier::kMemoryEvents);
  if (!judge_reclaim && !judge_pressure) return;
  auto total = [](const CgroupState& st, Tier t, auto field) -> std::optional<uint64_t> {
    auto it = st.values.find(t);
    if (it == st.values.end()) return std::nullopt;
    return field(it->second);
  };
  for (size_t i = 0; i < states.size(); ++i) {
    if (!dirty[i]) continue;  // nothing of it moved this sample
    CgroupState& st = *states[i];
    const std::string& path = sample.cgroups[i].path;
    if (judge_reclaim) {
      auto ref = total(st, Tier::kMemoryStat, [](const TierValues& v) { return v.scanned_total; });
      auto seen = total(st, reclaim, [](const TierValues& v) { return v.scanned_total; });
      if (ref && seen) judge_.Observe(Signal::kReclaim, reclaim, *ref, *seen, st.judge_reclaim, path);
    }
    if (judge_pressure) {
      auto ref = total(st, Tier::kMemoryEvents, [](const TierValues& v) { return v.sock_throttled_total.value_or(0); });
      if (!ref) continue;
      // sock_throttled counts the checks of this cgroup's sockets, which
      // ask this cgroup and every ancestor: their assertions all count.
      uint64_t seen = 0;
      for (int a = static_cast<int>(i); a >= 0; a = sample.cgroups[static_cast<size_t>(a)].parent) {
        seen += total(*states[static_cast<size_t>(a)], pressure,
                      [](const TierValues& v) { return v.pressure_events_total; }).value_or(0);
      }
      judge_.Observe(Signal::kSocketPressure, pressure, *ref, seen, st.judge_pressure, path);
    }
  }
}

void StateTracker::Fold(const Sample& sample, const std::vector<CgroupState*>& states, Snapshot& snap) {
  // Once a cgroup was folded, its ancestors carry folded counts for good.
  folding_ = folding_ || !std::all_of(sample.cgroups.begin(), sample.cgroups.end(),
                                      [](const CgroupReading& c) { return c.exported; });
  if (!folding_) return;
  std::vector<FoldMemory*> memory;
  memory.reserve(states.size());
  for (CgroupState* st : states) memory.push_back(&st->fold);
  // Folding re-indexes the views: never incremental (Incremental()), so
  // this sample's views are its own and move.
  std::vector<CgroupView> views = std::move(snap.cgroups).Release();
  snap.cgroups = CgroupTable();
  for (CgroupView& v : FoldUnexported(sample, memory, std::move(views))) snap.cgroups.push_back(std::move(v));
}

void StateTracker::ForgetUnseen(const Sample& sample, uint64_t stamp) {
  // What is not stamped was not seen this time: gone after a complete walk,
  // possibly only unseen after an incomplete one.
  std::unordered_map<std::string, CgroupState> vanished;
  if (states_.size() > sample.cgroups.size()) {
    for (auto it = states_.begin(); it != states_.end();) {
      if (it->second.seen == stamp) {
        ++it;
        continue;
      }
      auto node = states_.extract(it++);
      vanished.insert(std::move(node));
    }
    // An unordered_map never shrinks its bucket array by itself.
    if (states_.bucket_count() > 2 * states_.size() + 1024) states_.rehash(0);
  }
  KeepUnseen(vanished, sample);
}

void StateTracker::Stamp(Sample& sample, std::vector<CollectorResult> collectors, double interval,
                         double sample_cpu_seconds, Snapshot& snap) {
  if (sample.cgroups_skipped > 0) ++overflow_total_;
  for (const auto& [reason, n] : sample.cgroups_left_out) skipped_total_[reason] += n;
  snap.cgroups_skipped_total = skipped_total_;
  snap.sequence = ++sequence_;
  snap.unix_millis = sample.unix_millis;
  snap.interval_seconds = interval;
  snap.cgroup_mode = sample.cgroup_mode;
  snap.collectors = std::move(collectors);
  snap.probes = std::move(sample.probes);
  snap.program_stats = std::move(sample.program_stats);
  snap.events_lost = sample.events_lost;
  snap.cgroups_untracked = sample.cgroups_skipped;
  snap.cgroups_overflow_total = overflow_total_;
  snap.samples_total = sequence_;
  snap.sample_cpu_seconds = sample_cpu_seconds;
  snap.sample_duration_seconds = sample.previous_cycle_seconds;
  snap.sample_overruns_total = sample.overruns_total;
  snap.tier_disagreements = judge_.Disagreements();
}

void StateTracker::KeepUnseen(std::unordered_map<std::string, CgroupState>& vanished, const Sample& sample) {
  if (sample.cgroups_complete) {
    // Every cgroup was read: whatever is missing was removed.
    unseen_.clear();
    if (unseen_.bucket_count() > kMinUnseenCapacity) unseen_.rehash(0);
    return;
  }
  for (auto& [path, st] : vanished) {
    if (sample.IndexOfId(st.id) >= 0) continue;  // moved under a new path? never merge
    unseen_[path] = Unseen{std::move(st), sample.monotonic_seconds};
  }
  for (auto it = unseen_.begin(); it != unseen_.end();) {
    bool expired = sample.monotonic_seconds - it->second.since > kUnseenExpirySeconds;
    it = expired ? unseen_.erase(it) : std::next(it);
  }
  size_t cap = std::max(kMinUnseenCapacity, sample.cgroups.size());
  if (unseen_.size() <= cap) return;
  // Over capacity: forget the longest unseen first.
  std::vector<std::pair<double, std::string>> by_age;
  by_age.reserve(unseen_.size());
  for (const auto& [path, u] : unseen_) by_age.emplace_back(u.since, path);
  std::sort(by_age.begin(), by_age.end());
  for (size_t i = 0; i < by_age.size() - cap; ++i) unseen_.erase(by_age[i].second);
}

}  // namespace sockpressure
