// StateTracker: each tier's readings turned into the cgroups' totals
// (memory.stat's hierarchical deltas, the eBPF and memory.events tiers'
// counters), marking the cgroups whose values moved.
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

}  // namespace sockpressure
