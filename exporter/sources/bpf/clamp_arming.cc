#include "exporter/sources/bpf/clamp_arming.h"

#include "absl/strings/str_cat.h"

namespace sockpressure {

std::string ClampArming::Live(const Sample& sample) {
  std::unordered_map<uint64_t, Seen> now;
  std::string why;
  auto note = [&why](std::string reason) {
    if (why.empty()) why = std::move(reason);
  };
  auto pressure = sample.pressure.find(tier_);
  if (pressure != sample.pressure.end()) {
    for (const auto& [id, p] : pressure->second) {
      // The iterator lists every memcg: an idle one (no assertion yet) is
      // neither kept nor looked up, so an idle node allocates nothing here.
      if (p.assertions == 0 && !p.active) continue;
      const Seen before = Before(id);
      now[id].assertions = p.assertions;
      if (p.active) note(absl::StrCat("socket pressure active in memcg ", id));
      // A counter that went down restarted (program reloaded): any value is new.
      if (p.assertions != before.assertions && p.assertions > 0) {
        note(absl::StrCat("socket pressure asserted in memcg ", id));
      }
    }
  }
  auto reclaim = sample.reclaim.find(tier_);
  if (reclaim != sample.reclaim.end()) {
    for (const auto& [id, r] : reclaim->second) {
      if (r.scanned == 0) continue;
      const Seen before = Before(id);
      Seen& s = now[id];
      s.scanned = r.scanned;
      s.reclaimed = r.reclaimed;
      if (r.scanned < before.scanned || r.reclaimed < before.reclaimed) continue;  // restarted
      const uint64_t scanned = r.scanned - before.scanned;
      const uint64_t reclaimed = r.reclaimed - before.reclaimed;
      if (scanned == 0) continue;
      const double unreclaimed = reclaimed >= scanned ? 0 : static_cast<double>(scanned - reclaimed);
      if (unreclaimed >= kArmScanWithoutReclaimShare * static_cast<double>(scanned)) {
        note(absl::StrCat("reclaim in memcg ", id, " scanned ", scanned, " pages, reclaimed ", reclaimed));
      }
    }
  }
  seen_ = std::move(now);  // cgroups gone from the tier are forgotten
  return why;
}

bool ClampArming::Update(const Sample& sample, double now) {
  if (tier_ == Tier::kNone) {
    why_ = "no pressure tier to gate on";
    return true;
  }
  if (!sample.IsLive(Signal::kSocketPressure, tier_)) {
    why_ = "the pressure tier produced nothing in this sample";
    return true;
  }
  std::string live = Live(sample);
  if (!live.empty()) {
    last_live_ = now;
    why_ = std::move(live);
    return true;
  }
  const double quiet = now - last_live_;
  if (quiet < quiet_) {
    why_ = absl::StrCat("quiet for ", static_cast<int>(quiet), " s of ", static_cast<int>(quiet_), " s");
    return true;
  }
  why_ = "no socket pressure live or about to be";
  return false;
}

}  // namespace sockpressure
