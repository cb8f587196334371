#include "exporter/state/fold.h"

#include <algorithm>

namespace sockpressure {
namespace {

uint64_t Delta(uint64_t now, uint64_t before) { return now >= before ? now - before : now; }

// Adds what `now` counted since `before` to `into`.
void AddDelta(const TierValues& now, const TierValues& before, TierValues& into) {
  into.scanned_total += Delta(now.scanned_total, before.scanned_total);
  into.reclaimed_total += Delta(now.reclaimed_total, before.reclaimed_total);
  for (int l = 0; l < 3; ++l) into.windows_total[l] += Delta(now.windows_total[l], before.windows_total[l]);
  into.pressure_events_total += Delta(now.pressure_events_total, before.pressure_events_total);
  into.pressure_seconds_total += std::max(0.0, now.pressure_seconds_total - before.pressure_seconds_total);
  into.clamps_total += Delta(now.clamps_total, before.clamps_total);
  if (now.sock_throttled_total) {
    into.sock_throttled_total = into.sock_throttled_total.value_or(0) +
                                Delta(*now.sock_throttled_total, before.sock_throttled_total.value_or(0));
  }
}

void AddCounters(const TierValues& from, TierValues& into) {
  into.scanned_total += from.scanned_total;
  into.reclaimed_total += from.reclaimed_total;
  for (int l = 0; l < 3; ++l) into.windows_total[l] += from.windows_total[l];
  into.pressure_events_total += from.pressure_events_total;
  into.pressure_seconds_total += from.pressure_seconds_total;
  into.clamps_total += from.clamps_total;
  if (from.sock_throttled_total) {
    into.sock_throttled_total = into.sock_throttled_total.value_or(0) + *from.sock_throttled_total;
  }
}

}  // namespace

std::vector<CgroupView> FoldUnexported(const Sample& sample, const std::vector<FoldMemory*>& memory,
                                       std::vector<CgroupView> views) {
  const size_t n = sample.cgroups.size();
  // nearest[i]: index (in sample order) of the nearest exported cgroup at or above i, -1 if none.
  std::vector<int> nearest(n, -1);
  std::vector<int> out_index(n, -1);
  std::vector<CgroupView> out;
  for (size_t i = 0; i < n; ++i) {
    const CgroupReading& c = sample.cgroups[i];
    int up = c.parent >= 0 ? nearest[static_cast<size_t>(c.parent)] : -1;
    if (c.exported) {
      nearest[i] = static_cast<int>(i);
      continue;
    }
    nearest[i] = up;
    if (up < 0) continue;  // nothing exported above: not shown
    FoldMemory& mine = *memory[i];
    AddDelta(views[i].best, mine.reported, memory[static_cast<size_t>(up)]->folded);
    mine.reported = views[i].best;
    CgroupView& target = views[static_cast<size_t>(up)];
    target.pressure_active = target.pressure_active || views[i].pressure_active;
    target.best.pressure_asserted = target.best.pressure_asserted || views[i].best.pressure_asserted;
    if (views[i].best.ratio && (!target.best.ratio || *target.best.ratio < *views[i].best.ratio)) {
      target.best.ratio = views[i].best.ratio;
    }
    if (views[i].best.census) {
      SocketCensus sum = target.best.census.value_or(SocketCensus{});
      sum += *views[i].best.census;
      target.best.census = sum;
    }
  }
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (!sample.cgroups[i].exported) continue;
    CgroupView v = std::move(views[i]);
    AddCounters(memory[i]->folded, v.best);
    int p = sample.cgroups[i].parent >= 0 ? nearest[static_cast<size_t>(sample.cgroups[i].parent)] : -1;
    v.parent = p >= 0 ? out_index[static_cast<size_t>(p)] : -1;
    out_index[i] = static_cast<int>(out.size());
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace sockpressure
