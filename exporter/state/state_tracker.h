// Turns consecutive Samples into per-cgroup state and an immutable Snapshot:
// counter deltas, the vmpressure window replay, socket-pressure estimates,
// tier selection, and inheritance of pressure from ancestors.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "exporter/sources/sample.h"
#include "exporter/state/identity.h"
#include "exporter/state/snapshot.h"
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

 private:
  struct CgroupState {
    uint64_t id = 0;
    // memory.stat hierarchical counters less proactive reclaim, last sample.
    uint64_t prev_scan = 0, prev_steal = 0;
    bool have_prev = false;
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
  };

  void ApplyMemoryStat(const Sample& sample, const std::vector<CgroupState*>& states, double interval,
                       bool can_throttle_v2);
  void ApplyTiers(const Sample& sample, const std::vector<CgroupState*>& states, bool socket_accounting);

  IdentityResolver* identity_;
  bool keep_all_tiers_;
  std::unordered_map<std::string, CgroupState> states_;
  double last_monotonic_ = 0;
  uint64_t sequence_ = 0;
  uint64_t overflow_total_ = 0;
};

}  // namespace sockpressure
