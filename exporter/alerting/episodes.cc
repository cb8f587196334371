// EpisodeTracker's write side (episodes.h): Observe() and its steps, which
// turn each snapshot into opened, followed and closed episodes. What readers
// take from it (copies, counters, metrics) is episodes_read.cc.
#include "exporter/alerting/episodes.h"

#include <algorithm>
#include <cmath>

namespace sockpressure {

EpisodePreconditions PreconditionsOf(const Snapshot& s) {
  EpisodePreconditions pre;
  pre.swap_enabled = s.swap_enabled;
  pre.socket_accounting_enabled = s.socket_accounting_enabled;
  if (s.node.mglru_caps) pre.mglru_enabled = s.node.MglruOn();
  pre.cgroup_mode = s.cgroup_mode;
  pre.kernel_release = s.node.kernel_release.value_or("");
  pre.signal_tier = s.signal_tier;
  return pre;
}

namespace {

constexpr size_t kMaxReclaimersTracked = 512;
constexpr long kMaxReclaimersPerSample = 64;

// Appends one sample to a bounded timeline, merging neighbours pairwise when
// it is full (see kEpisodeTimelinePoints).
void AppendTimeline(std::vector<EpisodePoint>& tl, const EpisodePoint& p) {
  if (tl.size() >= kEpisodeTimelinePoints) {
    std::vector<EpisodePoint> merged;
    merged.reserve(kEpisodeTimelinePoints / 2 + 1);
    for (size_t i = 0; i + 1 < tl.size(); i += 2) {
      merged.push_back({tl[i + 1].end_ms, tl[i].interval_seconds + tl[i + 1].interval_seconds,
                        tl[i].pressure_seconds + tl[i + 1].pressure_seconds, tl[i].clamps + tl[i + 1].clamps});
    }
    if (tl.size() % 2 == 1) merged.push_back(tl.back());
    tl = std::move(merged);
  }
  tl.push_back(p);
}

uint64_t Delta(uint64_t now, uint64_t before) { return now >= before ? now - before : now; }
double DeltaSeconds(double now, double before) { return now >= before ? now - before : now; }

// Keeps the `keep` biggest reclaimers; the map only needs the leaders, and
// trimming lazily (at twice the size) keeps Observe() amortised O(1) per entry.
template <typename ById>
void TrimReclaimers(ById& m, size_t keep) {
  if (m.size() <= 2 * keep) return;
  std::vector<std::pair<uint64_t, uint64_t>> order;
  order.reserve(m.size());
  for (const auto& [id, r] : m) order.emplace_back(r.reclaimed, id);
  std::nth_element(order.begin(), order.begin() + static_cast<long>(keep), order.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (size_t i = keep; i < order.size(); ++i) m.erase(order[i].second);
}

}  // namespace

double Episode::DurationSeconds() const {
  // To the last throttled sample even while open: the quiet tail is not
  // throttling, and counting it would make the duration counter shrink when
  // the episode closes.
  return static_cast<double>(std::max<int64_t>(0, last_throttled_ms - start_ms)) / 1000.0;
}

absl::string_view EpisodeSignalLabel(const Episode& e) {
  // The rule-based alert puts socket_pressure first ("A or on(...) B" keeps
  // A's series), so an episode with real pressure seconds reports that.
  return e.saw_pressure ? "socket_pressure" : "window_clamps";
}

bool NothingToThrottle(const Episode& e) {
  return e.peak_subtree_sockets == std::optional<uint64_t>(0) && e.clamps == 0 && e.peak_clamped_sockets == 0 &&
         e.sock_throttled == 0;
}

EpisodeTracker::EpisodeTracker(EpisodeOptions options) : options_(options) {}

void EpisodeTracker::Observe(const Snapshot& s) {
  std::lock_guard<std::mutex> lock(mu_);
  just_closed_.clear();
  last_ms_ = s.unix_millis;
  const SampleFacts facts{s.unix_millis, s.interval_seconds,
                          static_cast<int64_t>(std::llround(options_.quiet_seconds * 1000)), PreconditionsOf(s), &s};
  std::vector<uint32_t> visit = ToVisit(s);
  std::vector<Reclaim> reclaiming;
  std::vector<Deltas> deltas = TakeDeltas(s, visit, &reclaiming);
  KeepBiggestReclaimers(reclaiming);
  for (size_t k = 0; k < visit.size(); ++k) Follow(s.cgroups[visit[k]], *order_[visit[k]], deltas[k], reclaiming, facts);
  Rewatch(s, visit);
  last_sequence_ = s.sequence;
}

std::vector<uint32_t> EpisodeTracker::ToVisit(const Snapshot& s) {
  std::vector<uint32_t> visit;
  if (s.same_cgroups_as_previous && s.sequence == last_sequence_ + 1 && order_.size() == s.cgroups.size()) {
    // A still view has the counters it had: no delta, nothing to follow,
    // unless it is throttled as it stands or has an episode to close.
    std::set_union(s.changed.begin(), s.changed.end(), watched_.begin(), watched_.end(), std::back_inserter(visit));
    ++observed_;
    for (uint32_t i : s.changed) {
      if (order_[i]->identity != s.cgroups[i].identity) order_[i]->identity = s.cgroups[i].identity;
    }
    return visit;
  }
  MatchCgroups(s);
  visit.resize(s.cgroups.size());
  for (size_t i = 0; i < visit.size(); ++i) visit[i] = static_cast<uint32_t>(i);
  watched_.clear();
  return visit;
}

void EpisodeTracker::MatchCgroups(const Snapshot& s) {
  // In place: a cgroup seen last time keeps its entry. What is not stamped
  // with this sample's number afterwards was not in it.
  const uint64_t stamp = ++observed_;
  order_.clear();
  order_.reserve(s.cgroups.size());
  for (const CgroupView& c : s.cgroups) {
    auto [it, inserted] = cgroups_.try_emplace(c.id);
    PerCgroup& pc = it->second;
    if (!inserted && pc.path != c.path) {
      // The same id under another name: the kernel reuses ids only after a
      // cgroup is gone, so this is a new cgroup; its predecessor's episode
      // ends and its counters start over.
      if (pc.open) Close(pc);
      pc = PerCgroup();
    }
    pc.id = c.id;
    pc.path = c.path;
    pc.seen = stamp;
    if (pc.identity != c.identity) pc.identity = c.identity;
    order_.push_back(&pc);
  }
  // Cgroups that vanished end their episodes now; their metrics series go
  // away with them.
  if (cgroups_.size() > s.cgroups.size()) {
    for (auto it = cgroups_.begin(); it != cgroups_.end();) {
      if (it->second.seen == stamp) {
        ++it;
        continue;
      }
      if (it->second.open) Close(it->second);
      it = cgroups_.erase(it);
    }
  }
}

void EpisodeTracker::Rewatch(const Snapshot& s, const std::vector<uint32_t>& visit) {
  // Every watched cgroup was visited, so the visited ones decide.
  watched_.clear();
  for (uint32_t i : visit) {
    const CgroupView& c = s.cgroups[i];
    const bool clamped = c.best.census && c.best.census->clamped > 0;
    if (order_[i]->open || c.best.pressure_asserted || clamped) watched_.push_back(i);
  }
}

std::vector<EpisodeTracker::Deltas> EpisodeTracker::TakeDeltas(const Snapshot& s, const std::vector<uint32_t>& visit,
                                                                std::vector<Reclaim>* reclaiming) {
  // Per-sample reclaim of every visited cgroup (the others' is 0), computed
  // once and shared by all open episodes (who was reclaiming while this
  // cgroup was throttled).
  std::vector<Deltas> deltas(visit.size());
  for (size_t k = 0; k < visit.size(); ++k) {
    const size_t i = visit[k];
    const TierValues& b = s.cgroups[i].best;
    PerCgroup& pc = *order_[i];
    Deltas& d = deltas[k];
    if (pc.have_prev) {
      d.events = Delta(b.pressure_events_total, pc.prev_events);
      d.seconds = DeltaSeconds(b.pressure_seconds_total, pc.prev_seconds);
      d.clamps = Delta(b.clamps_total, pc.prev_clamps);
      d.throttled = Delta(b.sock_throttled_total.value_or(0), pc.prev_throttled);
      d.scanned = Delta(b.scanned_total, pc.prev_scanned);
      d.reclaimed = Delta(b.reclaimed_total, pc.prev_reclaimed);
      d.prunes.collapses = Delta(b.prunes_total.collapses, pc.prev_prunes.collapses);
      d.prunes.ofo_prunes = Delta(b.prunes_total.ofo_prunes, pc.prev_prunes.ofo_prunes);
      d.prunes.ofo_pruned_segs = Delta(b.prunes_total.ofo_pruned_segs, pc.prev_prunes.ofo_pruned_segs);
      d.prunes.rcv_mem_drops = Delta(b.prunes_total.rcv_mem_drops, pc.prev_prunes.rcv_mem_drops);
    }
    pc.prev_prunes = b.prunes_total;
    pc.prev_events = b.pressure_events_total;
    pc.prev_seconds = b.pressure_seconds_total;
    pc.prev_clamps = b.clamps_total;
    pc.prev_throttled = b.sock_throttled_total.value_or(0);
    pc.prev_scanned = b.scanned_total;
    pc.prev_reclaimed = b.reclaimed_total;
    pc.have_prev = true;
    if (d.reclaimed > 0 || d.scanned > 0) reclaiming->push_back({&s.cgroups[i].path, s.cgroups[i].id, d.scanned, d.reclaimed});
  }
  return deltas;
}

void EpisodeTracker::KeepBiggestReclaimers(std::vector<Reclaim>& reclaiming) {
  // Every open episode adds every reclaiming cgroup: bound that product by
  // keeping only this sample's biggest reclaimers (the ones that can make
  // an episode's top list anyway).
  if (reclaiming.size() > static_cast<size_t>(kMaxReclaimersPerSample)) {
    std::nth_element(reclaiming.begin(), reclaiming.begin() + kMaxReclaimersPerSample, reclaiming.end(),
                     [](const Reclaim& a, const Reclaim& b) { return a.reclaimed > b.reclaimed; });
    reclaiming.resize(kMaxReclaimersPerSample);
  }
}

void EpisodeTracker::Follow(const CgroupView& c, PerCgroup& pc, const Deltas& d,
                            const std::vector<Reclaim>& reclaiming, const SampleFacts& facts) {
  const uint64_t clamped_now = c.best.census ? c.best.census->clamped : 0;
  const bool pressure = c.best.pressure_asserted || d.events > 0 || d.seconds > 0;
  const bool throttled = pressure || d.clamps > 0 || clamped_now > 0 || d.throttled > 0;
  if (throttled) {
    if (!pc.open) Open(c, pc, d, pressure, clamped_now, facts);
    Episode& e = pc.open->e;
    e.last_throttled_ms = facts.now_ms;
    ++e.samples;
    // Pressure seconds are exact with eBPF tiers and estimated (capped at
    // the interval) from memory.stat; clamp-only samples count whole.
    e.throttled_seconds += d.seconds > 0 ? d.seconds : facts.interval;
    e.pressure_events += d.events;
    e.saw_pressure = e.saw_pressure || pressure;
    e.clamps += d.clamps;
    e.sock_throttled += d.throttled;
    e.peak_clamped_sockets = std::max(e.peak_clamped_sockets, clamped_now);
    if (c.best.census) e.peak_sockets = std::max(e.peak_sockets, c.best.census->sockets);
    if (c.subtree_sockets) e.peak_subtree_sockets = std::max(e.peak_subtree_sockets.value_or(0), *c.subtree_sockets);
    // Chosen once, from the first sample that has one (the cgroup's limits
    // and sockets may be read a sample after its pressure).
    if (!e.remedy && pressure) {
      std::vector<Remedy> fitting = FittingRemedies(*facts.snapshot, c);
      if (!fitting.empty()) e.remedy = std::move(fitting.front());
    }
  } else if (pc.open && facts.now_ms - pc.open->e.last_throttled_ms >= facts.quiet_ms) {
    Close(pc);
  }
  if (pc.open) Accumulate(c, *pc.open, d, pressure, reclaiming, facts);
}

void EpisodeTracker::Open(const CgroupView& c, PerCgroup& pc, const Deltas& d, bool pressure,
                          uint64_t clamped_now, const SampleFacts& facts) {
  auto r = std::make_shared<Record>();
  Episode& e = r->e;
  e.id = next_id_++;
  e.cgroup = c.path;
  e.cgroup_id = c.id;
  e.identity = c.identity;
  // The throttling happened somewhere in the interval that ended now;
  // starting the episode at the interval's beginning makes a one-sample
  // episode last one interval, not zero.
  e.start_ms = facts.now_ms - static_cast<int64_t>(std::llround(facts.interval * 1000));
  e.trigger = pressure ? "socket_pressure"
              : d.clamps > 0 ? "window_clamps"
              : clamped_now > 0 ? "clamped_sockets"
                                : "sock_throttled";
  e.preconditions = facts.pre;
  pc.open = r;
  ++pc.episodes_total;
  ++started_total_;
  history_.push_back(r);
  Trim();
}

void EpisodeTracker::Accumulate(const CgroupView& c, Record& r, const Deltas& d, bool pressure,
                                const std::vector<Reclaim>& reclaiming, const SampleFacts& facts) {
  Episode& e = r.e;
  AppendTimeline(e.timeline,
                 {facts.now_ms, facts.interval, d.seconds > 0 ? d.seconds : (pressure ? facts.interval : 0), d.clamps});
  if (c.best.ratio && (!e.peak_ratio || *c.best.ratio > *e.peak_ratio)) {
    // Only windows that completed while the episode was open count.
    if (d.scanned > 0) e.peak_ratio = c.best.ratio;
  }
  // Pruning and drops are what throttling costs the receiver; they do not
  // open an episode (a socket's own SO_RCVBUF overrun prunes too).
  e.prunes.collapses += d.prunes.collapses;
  e.prunes.ofo_prunes += d.prunes.ofo_prunes;
  e.prunes.ofo_pruned_segs += d.prunes.ofo_pruned_segs;
  e.prunes.rcv_mem_drops += d.prunes.rcv_mem_drops;
  e.own_scanned += d.scanned;
  e.own_reclaimed += d.reclaimed;
  for (const Reclaim& rc : reclaiming) {
    if (*rc.path == c.path) continue;
    Reclaimer& rp = r.reclaimed_by[rc.id];
    if (rp.cgroup.empty()) rp.cgroup = *rc.path;
    rp.reclaimed += rc.reclaimed;
    rp.scanned += rc.scanned;
  }
  TrimReclaimers(r.reclaimed_by, std::max(options_.top_reclaimers, kMaxReclaimersTracked / 2));
}

void EpisodeTracker::Close(PerCgroup& pc) {
  Episode& e = pc.open->e;
  e.active = false;
  e.end_ms = e.last_throttled_ms;
  pc.closed_seconds_total += e.DurationSeconds();
  just_closed_.push_back(pc.open);
  pc.open.reset();
}

void EpisodeTracker::Trim() {
  // Bounded history: drop the oldest closed episodes first; an open one is
  // still tracked by its cgroup even if it falls out of the list.
  while (history_.size() > options_.history) {
    auto closed = std::find_if(history_.begin(), history_.end(), [](const auto& r) { return !r->e.active; });
    history_.erase(closed != history_.end() ? closed : history_.begin());
  }
}

}  // namespace sockpressure
