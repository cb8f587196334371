#include "exporter/state/tier_judge.h"

#include "exporter/common/logging.h"

namespace sockpressure {

void TierJudge::Observe(Signal s, Tier t, uint64_t reference, uint64_t seen, JudgeMark& mark,
                        const std::string& where) {
  // A new tier, or counters that went back (a recreated map entry or
  // cgroup): the span starts over.
  if (mark.tier != t || reference < mark.reference || seen < mark.seen) {
    mark = {t, reference, seen, 0};
    return;
  }
  ++mark.samples;
  const uint64_t ref = reference - mark.reference;
  const uint64_t saw = seen - mark.seen;
  const uint64_t span = s == Signal::kReclaim ? kReclaimSpanPages : kThrottleSpanChecks;
  if (ref < span || mark.samples < kSpanSamples) return;
  // Socket pressure: the tier counts assertions, the kernel checks; any
  // assertion in a span of a thousand throttled checks agrees.
  const bool short_of = s == Signal::kReclaim ? ReclaimShort(ref, saw) : saw == 0;
  if (short_of) Disagree(s, t, ref, saw, where);
  mark = {t, reference, seen, 0};
}

void TierJudge::Disagree(Signal s, Tier t, uint64_t reference, uint64_t seen, const std::string& where) {
  uint64_t& n = count_[Index(s, t)];
  ++n;
  if (n != kBlindAfter) return;
  // The vmpressure program produces both reclaim and socket pressure: a
  // program blind to one is not trusted with the other.
  const Signal sibling = s == Signal::kReclaim ? Signal::kSocketPressure : Signal::kReclaim;
  blind_[Index(s, t)] = true;
  blind_[Index(sibling, t)] = true;
  const bool reclaim = s == Signal::kReclaim;
  SP_LOG_WARN("tier ", TierName(t), " is blind to ", SignalName(s), ": for ", where, " it counted ", seen,
              reclaim ? " pages where memory.stat counted " : " socket-pressure assertions where sock_throttled moved ",
              reference, reclaim ? " scanned" : "", "; it is no longer used for ", SignalName(s), " or ",
              SignalName(sibling), " (sockpressure_tier_disagreements_total; docs/kernel.md)");
}

Tier TierJudge::Choose(const Sample& sample, Signal s) const {
  for (int t = 0; t < kTierCount - 1; ++t) {
    const Tier tier = static_cast<Tier>(t);
    if (sample.IsLive(s, tier) && !Blind(s, tier)) return tier;
  }
  return Tier::kNone;
}

std::vector<TierDisagreement> TierJudge::Disagreements() const {
  std::vector<TierDisagreement> out;
  for (int s = 0; s < kSignalCount; ++s) {
    for (int t = 0; t < kTierCount; ++t) {
      const size_t i = Index(static_cast<Signal>(s), static_cast<Tier>(t));
      if (count_[i] > 0 || blind_[i]) out.push_back({static_cast<Signal>(s), static_cast<Tier>(t), count_[i], blind_[i]});
    }
  }
  return out;
}

}  // namespace sockpressure
