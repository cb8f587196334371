// StateTracker::Update() and its steps that take the sample whole (tiers,
// judging, folding, the snapshot's stamp). The other steps have a file each:
// the counters (state_tracker_counters.cc), matching states to cgroups
// (state_tracker_match.cc) and the views (state_tracker_views.cc).
#include "exporter/state/state_tracker.h"

#include <algorithm>

namespace sockpressure {
namespace {

Tier BestLive(const Sample& sample, Signal s) {
  for (int t = 0; t < kTierCount - 1; ++t) {
    if (sample.IsLive(s, static_cast<Tier>(t))) return static_cast<Tier>(t);
  }
  return Tier::kNone;
}

}  // namespace

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

void StateTracker::NodeFacts(const Sample& sample, Snapshot& snap) const {
  snap.node = sample.node;
  snap.swap_enabled = sample.node.swaps && sample.node.swaps->devices > 0;
  snap.socket_accounting_enabled = !sample.node.nosocket.value_or(false);
  if (sample.node.tcp_mem_pages && sample.node.tcp_mem_limits && sample.node.tcp_mem_limits->size() == 3) {
    // tcp_mem[1] is the pressure threshold (net/ipv4/tcp.c, sk_enter_memory_pressure).
    snap.tcp_memory_pressure = *sample.node.tcp_mem_pages > (*sample.node.tcp_mem_limits)[1];
  }
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
  // memory.stat's local scan of a cgroup with children is its hierarchical
  // count less theirs, right only when every child was read in the same
  // walk, which the eBPF-guided walk does not do: on 6.1 a kubepods slice,
  // where nothing runs, showed 3,616 pages of its "own" scan against the
  // tier's (right) 0 and made the tier blind. Reclaim is judged on leaves.
  std::vector<uint8_t> has_children(sample.cgroups.size(), 0);
  for (const CgroupReading& c : sample.cgroups) {
    if (c.parent >= 0) has_children[static_cast<size_t>(c.parent)] = 1;
  }
  auto total = [](const CgroupState& st, Tier t, auto field) -> std::optional<uint64_t> {
    auto it = st.values.find(t);
    if (it == st.values.end()) return std::nullopt;
    return field(it->second);
  };
  for (size_t i = 0; i < states.size(); ++i) {
    if (!dirty[i]) continue;  // nothing of it moved this sample
    CgroupState& st = *states[i];
    const std::string& path = sample.cgroups[i].path;
    if (judge_reclaim && !has_children[i]) {
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
  snap.next_sample_seconds = sample.next_sample_seconds;
  snap.tier_disagreements = judge_.Disagreements();
}

}  // namespace sockpressure
