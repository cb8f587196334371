// When the per-packet window-clamp program (bpf/clamps.bpf.c) should be
// attached: only while some memcg's socket pressure is live or about to be,
// and for a quiet period after (issue 48, "No tax on a healthy node"). The
// program stays loaded; only its bpf_link comes and goes (clamps_loader.h).
//
// The decision reads what the bpf collector already read in the same
// sample, from one pressure tier:
//   vmpressure (Tier::kFentry/kKprobe)  a cgroup's pressure is active, its
//       assertions moved, or its reclaim scanned moved with at least
//       kArmScanWithoutReclaimShare of the scanned pages not reclaimed (the
//       kernel asserts socket pressure at vmpressure level "medium", 60 %
//       of a 512-page window unreclaimed: 40 % arms us before it does);
//   memcg iterator (Tier::kIter)  a cgroup's pressure is active (deadline
//       ahead, or v1 tcpmem_pressure) or its assertions moved.
// With no such tier (Tier::kNone), or when the tier produced nothing in a
// sample (its read failed), the program stays attached: there is nothing
// to gate on, and a clamp must not be missed for want of a signal.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <unordered_map>

#include "exporter/sources/sample.h"

namespace sockpressure {

// Not thread-safe: owned by the bpf collector, used on its collecting thread.
class ClampArming {
 public:
  // Seconds with no live pressure, no assertion and no arming reclaim after
  // which the program is detached.
  static constexpr double kQuietSeconds = 60;
  // Share of scanned pages not reclaimed (in one sample's delta) that counts
  // as "about to be" under socket pressure.
  static constexpr double kArmScanWithoutReclaimShare = 0.4;

  // `tier`: the pressure tier gated on, or Tier::kNone (always attached).
  explicit ClampArming(Tier tier, double quiet_seconds = kQuietSeconds) : tier_(tier), quiet_(quiet_seconds) {}

  // After the pressure tiers filled `sample` (at `now`, monotonic seconds):
  // whether the program should be attached from now on.
  bool Update(const Sample& sample, double now);

  Tier tier() const { return tier_; }
  // Why the last Update() decided as it did, for the log ("pressure active
  // in memcg 1234", "quiet for 61 s", ...).
  const std::string& why() const { return why_; }

 private:
  struct Seen {
    uint64_t assertions = 0, scanned = 0, reclaimed = 0;
  };
  // A reason when a cgroup's pressure is live or about to be, else "".
  std::string Live(const Sample& sample);
  Seen Before(uint64_t id) const {
    auto it = seen_.find(id);
    return it == seen_.end() ? Seen{} : it->second;
  }

  Tier tier_;
  double quiet_;
  double last_live_ = -std::numeric_limits<double>::infinity();
  // Per memcg, the counters of the previous sample: a cgroup first seen
  // counts from zero (the counters start when the program loads).
  std::unordered_map<uint64_t, Seen> seen_;
  std::string why_;
};

}  // namespace sockpressure
