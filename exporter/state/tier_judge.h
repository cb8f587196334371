// Holds a tier that attached to a second source that counts the same thing,
// so that a tier that loads but does not see never wins silently.
//
// Why: on Debian's 5.10 the vmpressure fentry tier attached, fired tens of
// thousands of times and counted one window of 960,816 scanned pages, while
// memory.stat showed the same cgroup scanned (docs/kernel.md, "A tier that
// loads is not a tier that sees"). Two comparisons exist:
//   - reclaim: a cgroup's local pages scanned by the memory.stat replay
//     against the eBPF tier's scanned pages for the same cgroup;
//   - socket pressure (6.19+): the kernel's memory.events.local
//     sock_throttled of a cgroup against the tier's socket-pressure
//     assertions on that cgroup or an ancestor (the check walks up).
// Each cgroup keeps a mark; when the reference has moved by a span's worth
// since the mark and the tier saw less than a sixteenth of it (reclaim) or
// nothing (socket pressure), that is one disagreement for (signal, tier).
// Two disagreements make the tier blind for that signal and for the other
// signal its program produces: the agent then takes the next live tier,
// logs it once, exports the count and doctor says so.
//
// Not thread-safe: owned by StateTracker, on the sampler thread.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "exporter/sources/sample.h"
#include "exporter/sources/signals.h"

namespace sockpressure {

// Per cgroup and signal: where the last span began.
struct JudgeMark {
  Tier tier = Tier::kNone;
  uint64_t reference = 0;  // the second source's total at the mark
  uint64_t seen = 0;       // the tier's total at the mark
  uint32_t samples = 0;    // observations since the mark
};

struct TierDisagreement {
  Signal signal;
  Tier tier;
  uint64_t total;  // spans the tier fell short in
  bool blind;      // no longer used for the signal
};

class TierJudge {
 public:
  // Pages of local scan (4 vmpressure windows) or sock_throttled checks
  // that make a span: big enough that sampling skew between two sources
  // (read moments apart) is small against it.
  static constexpr uint64_t kReclaimSpanPages = 2048;
  static constexpr uint64_t kThrottleSpanChecks = 1000;
  // A span also covers this many observations: the two sources are read a
  // moment apart, so one read's worth of lag must not be a span's verdict.
  static constexpr uint32_t kSpanSamples = 3;
  static constexpr uint64_t kBlindAfter = 2;

  // Whether a tier that saw `saw` of the `reference` pages memory.stat
  // counted scanned fell short: a span's worth scanned and under a
  // sixteenth seen. The two count the same scans read moments apart, and
  // one span can be far off while the next makes up for it: on 6.1 under
  // memory.high reclaim (bench/lab_scale.py, 10,000 cgroups, 1 %
  // reclaiming) 400 spans of the fentry tier, which saw 93 % of
  // memory.stat's pages in sum, ranged from 0.16 to 1.78 of them, and the
  // 23 under a quarter made it blind within seconds in every boot. A tier
  // that does not see counts next to nothing: 512 of 960,816 on 5.10.
  static constexpr uint64_t kReclaimShortOf = 16;
  static bool ReclaimShort(uint64_t reference, uint64_t saw) {
    return reference >= kReclaimSpanPages && saw * kReclaimShortOf < reference;
  }

  // One cgroup's totals: `reference` from the second source, `seen` from
  // the tier. `where` names the cgroup in the log line.
  void Observe(Signal s, Tier t, uint64_t reference, uint64_t seen, JudgeMark& mark, const std::string& where);

  // The best live tier for `s` that is not blind (sample.live order).
  Tier Choose(const Sample& sample, Signal s) const;
  bool Blind(Signal s, Tier t) const { return blind_[Index(s, t)]; }
  // Every (signal, tier) that disagreed at least once.
  std::vector<TierDisagreement> Disagreements() const;

 private:
  static size_t Index(Signal s, Tier t) {
    return static_cast<size_t>(s) * kTierCount + static_cast<size_t>(t);
  }
  void Disagree(Signal s, Tier t, uint64_t reference, uint64_t seen, const std::string& where);

  std::array<uint64_t, kSignalCount * kTierCount> count_{};
  std::array<bool, kSignalCount * kTierCount> blind_{};
};

}  // namespace sockpressure
