#include "exporter/state/state_tracker.h"

#include <algorithm>

namespace sockpressure {
namespace {

// Delta of a cumulative counter kept by a source; a smaller value means the
// source restarted (map recreated), and everything since the restart is new.
uint64_t CounterDelta(uint64_t now, uint64_t before) { return now >= before ? now - before : now; }

double SecondsDelta(double now, double before) { return now >= before ? now - before : now; }

// own - children + carry, never negative; a negative rest is carried into
// the next interval (see CgroupState::scan_carry).
uint64_t LocalDelta(uint64_t own, uint64_t children, int64_t& carry) {
  int64_t local = static_cast<int64_t>(own) - static_cast<int64_t>(children) + carry;
  if (local < 0) {
    carry = local;
    return 0;
  }
  carry = 0;
  return static_cast<uint64_t>(local);
}

Tier BestLive(const Sample& sample, Signal s) {
  for (int t = 0; t < kTierCount - 1; ++t) {
    if (sample.IsLive(s, static_cast<Tier>(t))) return static_cast<Tier>(t);
  }
  return Tier::kNone;
}

}  // namespace

void StateTracker::ApplyMemoryStat(const Sample& sample, const std::vector<CgroupState*>& states,
                                   double interval, bool can_throttle_v2) {
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
    } else if (sequence_ > 0) {
      // Appeared since the last sample: all of its counts are new.
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
      child_scan[p] += d_scan[i];
      child_steal[p] += d_steal[i];
    }
  }
  for (size_t i = 0; i < n; ++i) {
    CgroupState& st = *states[i];
    TierValues& v = st.values[Tier::kMemoryStat];
    v.pressure_asserted = false;
    if (!have[i]) continue;
    uint64_t local_scan = LocalDelta(d_scan[i], child_scan[i], st.scan_carry);
    uint64_t local_steal = LocalDelta(d_steal[i], child_steal[i], st.steal_carry);
    v.scanned_total += local_scan;
    v.reclaimed_total += local_steal;
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
    }
  }
}

void StateTracker::ApplyTiers(const Sample& sample, const std::vector<CgroupState*>& states,
                              bool socket_accounting) {
  for (size_t i = 0; i < sample.cgroups.size(); ++i) {
    CgroupState& st = *states[i];
    uint64_t id = sample.cgroups[i].id;
    for (const auto& [tier, by_id] : sample.reclaim) {
      TierValues& v = st.values[tier];
      auto it = by_id.find(id);
      if (it == by_id.end()) continue;
      ReclaimCounters& prev = st.prev_reclaim[tier];
      const ReclaimCounters& cur = it->second;
      uint64_t ds = CounterDelta(cur.scanned, prev.scanned);
      uint64_t dr = CounterDelta(cur.reclaimed, prev.reclaimed);
      v.scanned_total += ds;
      v.reclaimed_total += dr;
      for (int l = 0; l < 3; ++l) v.windows_total[l] += CounterDelta(cur.windows[l], prev.windows[l]);
      if (ds >= kVmpressureWindowPages) v.ratio = dr >= ds ? 0.0 : 1.0 - static_cast<double>(dr) / ds;
      prev = cur;
    }
    for (const auto& [tier, by_id] : sample.pressure) {
      TierValues& v = st.values[tier];
      auto it = by_id.find(id);
      if (it == by_id.end()) {
        v.pressure_asserted = false;
        continue;
      }
      PressureState& prev = st.prev_pressure[tier];
      // With cgroup.memory=nosocket vmpressure still writes
      // memcg->socket_pressure, but no socket has an sk_memcg to be
      // throttled by it: count only what throttles (mm/memcontrol.c,
      // mem_cgroup_sockets_enabled).
      if (socket_accounting) {
        v.pressure_events_total += CounterDelta(it->second.assertions, prev.assertions);
        v.pressure_seconds_total += SecondsDelta(it->second.seconds, prev.seconds);
      }
      v.pressure_asserted = socket_accounting && it->second.active;
      prev = it->second;
    }
    for (const auto& [tier, by_id] : sample.clamps) {
      TierValues& v = st.values[tier];
      auto it = by_id.find(id);
      if (it == by_id.end()) continue;
      ClampCounters& prev = st.prev_clamps[tier];
      v.clamps_total += CounterDelta(it->second.clamps, prev.clamps);
      prev = it->second;
    }
    for (const auto& [tier, by_id] : sample.census) {
      TierValues& v = st.values[tier];
      auto it = by_id.find(id);
      v.census = it == by_id.end() ? SocketCensus{} : it->second;
    }
    if (sample.cgroups[i].sock_throttled_local) {
      st.values[Tier::kMemoryEvents].sock_throttled_total = sample.cgroups[i].sock_throttled_local;
    }
  }
}

std::shared_ptr<const Snapshot> StateTracker::Update(Sample sample, std::vector<CollectorResult> collectors,
                                                     double sample_cpu_seconds) {
  auto snap = std::make_shared<Snapshot>();
  double interval = sequence_ == 0 ? 0.0 : std::max(0.0, sample.monotonic_seconds - last_monotonic_);
  last_monotonic_ = sample.monotonic_seconds;

  snap->node = sample.node;
  snap->swap_enabled = sample.node.swaps && sample.node.swaps->devices > 0;
  snap->socket_accounting_enabled = !sample.node.nosocket.value_or(false);
  if (sample.node.tcp_mem_pages && sample.node.tcp_mem_limits && sample.node.tcp_mem_limits->size() == 3) {
    // tcp_mem[1] is the pressure threshold (net/ipv4/tcp.c, sk_enter_memory_pressure).
    snap->tcp_memory_pressure = *sample.node.tcp_mem_pages > (*sample.node.tcp_mem_limits)[1];
  }

  // Match states to this sample's cgroups; a path whose id changed is a new
  // cgroup with the old name, so its state starts over.
  std::unordered_map<std::string, CgroupState> next;
  next.reserve(sample.cgroups.size());
  std::vector<CgroupState*> states;
  states.reserve(sample.cgroups.size());
  for (const CgroupReading& c : sample.cgroups) {
    auto it = states_.find(c.path);
    CgroupState st;
    if (it != states_.end() && it->second.id == c.id) st = std::move(it->second);
    st.id = c.id;
    auto [pos, inserted] = next.emplace(c.path, std::move(st));
    (void)inserted;
    states.push_back(&pos->second);
  }
  // pointers into `next` stay valid: no rehash happens after reserve+emplace
  // of at most sample.cgroups.size() elements.
  ApplyMemoryStat(sample, states, interval, snap->socket_accounting_enabled);
  ApplyTiers(sample, states, snap->socket_accounting_enabled);

  for (int s = 0; s < kSignalCount; ++s) snap->signal_tier[s] = BestLive(sample, static_cast<Signal>(s));

  snap->cgroups.reserve(sample.cgroups.size());
  for (size_t i = 0; i < sample.cgroups.size(); ++i) {
    CgroupReading& c = sample.cgroups[i];
    CgroupState& st = *states[i];
    CgroupView v;
    v.path = c.path;
    v.id = c.id;
    v.parent = c.parent;
    v.v1 = c.v1;
    if (identity_ != nullptr) v.identity = identity_->Resolve(c.path);
    for (int s = 0; s < kSignalCount; ++s) {
      Tier t = snap->signal_tier[s];
      v.tier[s] = st.values.count(t) ? t : Tier::kNone;
    }
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
    if (const TierValues* k = from(Signal::kSockThrottled)) v.best.sock_throttled_total = k->sock_throttled_total;
    // mem_cgroup_under_socket_pressure() walks up to the root: a live
    // deadline on any ancestor throttles this cgroup's sockets too.
    v.pressure_active = v.best.pressure_asserted ||
                        (c.parent >= 0 && snap->cgroups[static_cast<size_t>(c.parent)].pressure_active);
    if (keep_all_tiers_) v.tiers = st.values;
    v.anon_bytes = c.anon_bytes;
    v.file_bytes = c.file_bytes;
    v.sock_bytes = c.sock_bytes;
    v.swap_bytes = c.swap_bytes;
    v.memory_current = c.memory_current;
    v.memory_max = c.memory_max;
    v.memory_high = c.memory_high;
    v.memory_low = c.memory_low;
    v.memory_min = c.memory_min;
    v.swap_max = c.swap_max;
    v.events_oom_kill = c.events_oom_kill;
    v.psi_some = c.psi_some;
    v.psi_full = c.psi_full;
    v.kmem_tcp_usage = c.kmem_tcp_usage;
    v.kmem_tcp_limit = c.kmem_tcp_limit;
    v.kmem_tcp_failcnt = c.kmem_tcp_failcnt;
    snap->cgroups.push_back(std::move(v));
  }
  states_ = std::move(next);  // cgroups that vanished lose their state and series

  if (sample.cgroups_skipped > 0) ++overflow_total_;
  snap->sequence = ++sequence_;
  snap->unix_millis = sample.unix_millis;
  snap->interval_seconds = interval;
  snap->cgroup_mode = sample.cgroup_mode;
  snap->collectors = std::move(collectors);
  snap->probes = std::move(sample.probes);
  snap->program_stats = std::move(sample.program_stats);
  snap->events_lost = sample.events_lost;
  snap->cgroups_untracked = sample.cgroups_skipped;
  snap->cgroups_overflow_total = overflow_total_;
  snap->samples_total = sequence_;
  snap->sample_cpu_seconds = sample_cpu_seconds;
  return snap;
}

}  // namespace sockpressure
