// Turns consecutive Samples into per-cgroup state and an immutable Snapshot:
// counter deltas, the vmpressure window replay, socket-pressure estimates,
// tier selection, and inheritance of pressure from ancestors.
#pragma once

#include <array>
#include <bitset>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "exporter/sources/sample.h"
#include "exporter/state/fold.h"
#include "exporter/state/identity.h"
#include "exporter/state/snapshot.h"
#include "exporter/state/tier_judge.h"
#include "exporter/state/vmpressure_window.h"

namespace sockpressure {

// Not thread-safe: owned and called by the sampler thread only. The
// snapshots it returns are immutable and may be shared freely.
class StateTracker {
 public:
  // keep_all_tiers: copy every tier's values into the snapshot (for
  // --signal.all-tiers); off by default because it costs a map per cgroup.
  explicit StateTracker(IdentityResolver* identity = nullptr, bool keep_all_tiers = false)
      : identity_(identity), keep_all_tiers_(keep_all_tiers) {}

  std::shared_ptr<const Snapshot> Update(Sample sample, std::vector<CollectorResult> collectors,
                                         double sample_cpu_seconds);

  size_t tracked() const { return states_.size(); }
  // Cgroups missing from recent incomplete walks whose baselines are kept.
  size_t unseen() const { return unseen_.size(); }

  // A cgroup unseen for longer than this (with every walk incomplete) is
  // forgotten; if it returns, it starts from a new baseline.
  static constexpr double kUnseenExpirySeconds = 600;
  // At most this many baselines (or as many as are tracked) are kept.
  static constexpr size_t kMinUnseenCapacity = 1024;

 private:
  struct CgroupState {
    uint64_t id = 0;
    uint64_t seen = 0;  // the sample (sequence + 1) that last saw it
    // memory.stat hierarchical counters less proactive reclaim, last sample.
    uint64_t prev_scan = 0, prev_steal = 0;
    bool have_prev = false;
    // The counts read this time are a baseline, not news: the cgroup returns
    // after a gap (its nearest seen ancestor already counted what happened
    // meanwhile), or it may have existed unseen behind an incomplete walk.
    bool rebaseline = false;
    // A parent and its children are read at slightly different moments, so
    // own - sum(children) can dip below zero in one interval and rise by the
    // same amount in the next. The dip is carried here instead of being
    // clamped away, so the local totals converge to the true ones.
    int64_t scan_carry = 0, steal_carry = 0;
    VmpressureWindow window;
    std::map<Tier, TierValues> values;
    std::map<Tier, ReclaimCounters> prev_reclaim;
    std::map<Tier, PressureState> prev_pressure;
    std::map<Tier, ClampCounters> prev_clamps;
    std::map<Tier, PruneCounters> prev_prunes;
    FoldMemory fold;  // --cgroup.include/exclude/level (fold.h)
    // Its memory_stat tier asserted pressure in the last sample: the next
    // one must clear that even when nothing moved.
    bool memory_stat_asserted = false;
    std::optional<uint64_t> prev_sock_throttled;  // memory.events.local, last sample
    JudgeMark judge_reclaim, judge_pressure;  // tier_judge.h
  };

  // A sample is applied incrementally when the cgroups are the ones of the
  // last sample at the same indices and nothing node-wide changed that every
  // view shows (tiers, identity, folding): then only the cgroups whose
  // counters moved, or that must be cleared, get a new view; the others
  // share the last snapshot's. Every so many samples all are rebuilt (the
  // identity resolver's cache lives by use).
  static constexpr uint64_t kIdentityRefreshSamples = 60;
  bool Incremental(const Sample& sample, bool reused, const Snapshot& snap);

  // Both mark in `dirty` the cgroups whose values they changed; with
  // `incremental`, they visit only what the sample says moved.
  void ApplyMemoryStat(const Sample& sample, const std::vector<CgroupState*>& states, double interval,
                       bool can_throttle_v2, bool incremental, std::vector<uint8_t>& dirty);
  void ApplyTiers(const Sample& sample, const std::vector<CgroupState*>& states, bool socket_accounting,
                  bool incremental, std::vector<uint8_t>& dirty);
  // The incremental half of ApplyTiers: the tiers' entries, by id.
  void ApplyTierEntries(const Sample& sample, const std::vector<CgroupState*>& states, bool socket_accounting,
                        std::vector<uint8_t>& dirty);
  // The snapshot's views: new ones for dirty cgroups (and those below a
  // cgroup whose pressure flag changed, and above one whose socket count
  // changed), the last snapshot's otherwise.
  void Views(Sample& sample, const std::vector<CgroupState*>& states, bool incremental,
             const std::vector<uint8_t>& dirty, const std::vector<int64_t>& sockets, Snapshot& snap) const;
  // Each cgroup's sockets and those below it (CgroupView::subtree_sockets):
  // with no last snapshot, summed over every cgroup; otherwise the last
  // snapshot's counts moved by the dirty cgroups' own changes, which also
  // mark their ancestors dirty. Empty without a census tier.
  std::vector<int64_t> SubtreeSockets(const Sample& sample, const std::vector<CgroupState*>& states,
                                      const Snapshot* last, Tier census, std::vector<uint8_t>& dirty) const;
  // The other steps of Update(), in order.
  void NodeFacts(const Sample& sample, Snapshot& snap) const;
  // *reused: the last sample's matching stands (the same cgroups, in order).
  std::vector<CgroupState*> Match(const Sample& sample, uint64_t stamp, bool* reused);
  // `before`: the cgroup's view in the last snapshot, whose identity is kept
  // (no Resolve); nullptr resolves it.
  CgroupView ViewOf(CgroupReading& c, const CgroupState& st, const Snapshot& snap, const CgroupView* before) const;
  static void BestOf(const CgroupState& st, CgroupView& v);  // each signal from its best tier
  // Holds the best eBPF tiers to memory.stat and sock_throttled (tier_judge.h).
  void Judge(const Sample& sample, const std::vector<CgroupState*>& states, const std::vector<uint8_t>& dirty);
  void Fold(const Sample& sample, const std::vector<CgroupState*>& states, Snapshot& snap);
  void ForgetUnseen(const Sample& sample, uint64_t stamp);
  void Stamp(Sample& sample, std::vector<CollectorResult> collectors, double interval, double sample_cpu_seconds,
             Snapshot& snap);

  IdentityResolver* identity_;
  bool keep_all_tiers_;
  TierJudge judge_;
  std::unordered_map<std::string, CgroupState> states_;
  // Cgroups that an incomplete walk (--cgroup.max cut, unreadable files) left
  // out, keyed by path; a returning cgroup is only recognised with the same
  // id (inode), so a recreated one is never taken for it.
  struct Unseen {
    CgroupState state;
    double since = 0;  // monotonic seconds of the first sample that missed it
  };
  std::unordered_map<std::string, Unseen> unseen_;
  bool last_complete_ = false;
  std::vector<CgroupState*> last_states_;  // the last sample's matching, parallel to its cgroups
  bool folding_ = false;  // some cgroup was not exported (fold.h)
  void KeepUnseen(std::unordered_map<std::string, CgroupState>& vanished, const Sample& sample);
  // This sample's cgroup -> state, by path and id; new and recreated cgroups get a fresh state.
  std::vector<CgroupState*> MatchStates(const Sample& sample, uint64_t stamp);
  // The last snapshot (its views are shared), what it was built with, and
  // the cgroups that must be visited in the next incremental sample: those
  // with a census entry or asserted pressure from a tier's entry.
  std::shared_ptr<const Snapshot> last_snap_;
  std::array<std::bitset<kTierCount>, kSignalCount> last_live_{};
  uint64_t last_identity_version_ = 0;
  uint64_t since_full_ = 0;
  std::vector<uint32_t> revisit_;
  double last_monotonic_ = 0;
  uint64_t sequence_ = 0;
  uint64_t overflow_total_ = 0;
  std::map<std::string, uint64_t> skipped_total_;
};

}  // namespace sockpressure
