#include "exporter/sampler/cadence.h"

#include <algorithm>

namespace sockpressure {
namespace {

// A sum of every cumulative counter of the verdict signals. The counters
// only grow (a source that restarts from zero changes the sum too), so an
// unchanged sum means nothing moved: cheaper than keeping every value.
// Wrapping arithmetic is fine, only equality matters.
uint64_t Fingerprint(const Sample& s) {
  uint64_t sum = 0;
  for (const auto& [tier, by_id] : s.reclaim) {
    for (const auto& [id, r] : by_id) {
      sum += r.scanned + r.reclaimed + r.windows[0] + r.windows[1] + r.windows[2] + r.assertions;
    }
  }
  for (const auto& [tier, by_id] : s.pressure) {
    for (const auto& [id, p] : by_id) sum += p.assertions;
  }
  for (const auto& [tier, by_id] : s.clamps) {
    for (const auto& [id, c] : by_id) sum += c.clamps;
  }
  for (const auto& [tier, by_id] : s.prunes) {
    for (const auto& [id, p] : by_id) sum += p.rcv_mem_drops + p.ofo_pruned_segs + p.collapses + p.ofo_prunes;
  }
  for (const CgroupReading& c : s.cgroups) {
    sum += c.pgscan.value_or(0) + c.pgsteal.value_or(0) + c.pgscan_proactive.value_or(0) +
           c.pgsteal_proactive.value_or(0) + c.sock_throttled_local.value_or(0);
  }
  return sum;
}

bool UnderSocketPressure(const Sample& s) {
  for (const auto& [tier, by_id] : s.pressure) {
    for (const auto& [id, p] : by_id) {
      if (p.active) return true;
    }
  }
  return false;
}

}  // namespace

CollectorCadence CadenceOf(absl::string_view collector) {
  for (const SourceRegistration& r : RegisteredSources()) {
    if (r.name == collector) return r.cadence;
  }
  return CollectorCadence::kEveryCycle;
}

ContextGate::ContextGate(uint64_t context_every) : every_(std::max<uint64_t>(1, context_every)) {}

bool ContextGate::Due(const Sample& sample) {
  uint64_t fp = Fingerprint(sample);
  active_ = first_ || fp != last_fingerprint_ || UnderSocketPressure(sample) || context_active_;
  last_fingerprint_ = fp;
  // After an idle wait the context collectors run as they would have in the
  // samples the wait skipped.
  bool due = first_ || active_ || sample.after_wait || since_run_ + 1 >= every_;
  first_ = false;
  since_run_ = due ? 0 : since_run_ + 1;
  return due;
}

void ContextGate::Saw(const Sample& sample) {
  // A clamped socket is the throttling itself: count it every cycle until
  // the census sees none, so the gauge falls back to 0 when it happens.
  context_active_ = false;
  for (const auto& [tier, by_id] : sample.census) {
    for (const auto& [id, c] : by_id) context_active_ = context_active_ || c.clamped > 0;
  }
  const NodeReading& n = sample.node;
  if (n.tcp_mem_pages && n.tcp_mem_limits && n.tcp_mem_limits->size() == 3) {
    context_active_ = context_active_ || *n.tcp_mem_pages > (*n.tcp_mem_limits)[1];
  }
}

void HeldContext::Begin(const Sample& sample) {
  live_before_ = sample.live;
  probes_before_ = sample.probes.size();
  stats_before_ = sample.program_stats.size();
  lost_before_ = sample.events_lost;
}

void HeldContext::Capture(const Sample& sample, std::vector<CollectorResult> results) {
  captured_ = true;
  node_ = sample.node;
  census_ = sample.census;
  for (size_t s = 0; s < live_.size(); ++s) live_[s] = sample.live[s] & ~live_before_[s];
  probes_.assign(sample.probes.begin() + static_cast<std::ptrdiff_t>(probes_before_), sample.probes.end());
  program_stats_.assign(sample.program_stats.begin() + static_cast<std::ptrdiff_t>(stats_before_),
                        sample.program_stats.end());
  events_lost_ = sample.events_lost - lost_before_;
  results_ = std::move(results);
}

std::vector<CollectorResult> HeldContext::Replay(Sample& sample) const {
  sample.node = node_;
  sample.census = census_;
  for (size_t s = 0; s < live_.size(); ++s) sample.live[s] |= live_[s];
  sample.probes.insert(sample.probes.end(), probes_.begin(), probes_.end());
  sample.program_stats.insert(sample.program_stats.end(), program_stats_.begin(), program_stats_.end());
  sample.events_lost += events_lost_;
  return results_;
}

}  // namespace sockpressure
