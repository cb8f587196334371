// EpisodeTracker's read side (episodes.h): what the JSON API, the pusher and
// /metrics take from it, each under its lock, as copies. The write side,
// Observe() and its steps, is episodes.cc.
#include "exporter/alerting/episodes.h"

#include <algorithm>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "exporter/common/cgroup_label.h"

namespace sockpressure {
namespace {

std::vector<LabelRef> Labels(const std::string& path, const LabelPairs& identity) {
  std::vector<LabelRef> labels;
  labels.push_back({"cgroup", CgroupLabel(path)});
  for (const auto& [k, v] : identity) labels.push_back({k, v});
  return labels;
}

}  // namespace

Episode EpisodeTracker::CopyOut(const Record& r) const {
  Episode e = r.e;
  // Kept by id, named by path: a cgroup recreated under its path (a
  // container restarted in place) is one reclaimer to the reader, with the
  // reclaim of both lives.
  std::unordered_map<std::string, size_t> by_path;
  std::vector<ReclaimerPages> all;
  all.reserve(r.reclaimed_by.size());
  for (const auto& [id, rp] : r.reclaimed_by) {
    if (rp.reclaimed == 0) continue;
    auto [it, fresh] = by_path.emplace(rp.cgroup.str(), all.size());
    if (fresh) {
      all.push_back({rp.cgroup.str(), rp.reclaimed, rp.scanned});
    } else {
      all[it->second].reclaimed += rp.reclaimed;
      all[it->second].scanned += rp.scanned;
    }
  }
  size_t n = std::min(all.size(), options_.top_reclaimers);
  std::partial_sort(all.begin(), all.begin() + static_cast<long>(n), all.end(), [](const auto& a, const auto& b) {
    return a.reclaimed != b.reclaimed ? a.reclaimed > b.reclaimed : a.cgroup < b.cgroup;
  });
  all.resize(n);
  e.top_reclaimers = std::move(all);
  return e;
}

std::vector<Episode> EpisodeTracker::Recent(size_t limit, const std::string& cgroup) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Episode> out;
  for (auto it = history_.rbegin(); it != history_.rend(); ++it) {
    if (!cgroup.empty() && !NamesCgroup(cgroup, (*it)->e.cgroup)) continue;
    out.push_back(CopyOut(**it));
    if (limit > 0 && out.size() >= limit) break;
  }
  return out;
}

std::vector<Episode> EpisodeTracker::OpenAndJustClosed() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Episode> out;
  for (const auto& [id, pc] : cgroups_) {
    if (pc.open) out.push_back(CopyOut(*pc.open));
  }
  for (const auto& r : just_closed_) out.push_back(CopyOut(*r));
  return out;
}

std::optional<EpisodeTracker::CgroupCounters> EpisodeTracker::Counters(uint64_t cgroup_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = cgroups_.find(cgroup_id);
  if (it == cgroups_.end()) return std::nullopt;
  return CountersOf(it->second);
}

std::optional<EpisodeTracker::CgroupCounters> EpisodeTracker::Counters(const std::string& cgroup) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [id, pc] : cgroups_) {
    if (pc.path == cgroup) return CountersOf(pc);
  }
  return std::nullopt;
}

EpisodeTracker::CgroupCounters EpisodeTracker::CountersOf(const PerCgroup& pc) {
  CgroupCounters c;
  c.episodes_total = pc.episodes_total;
  c.duration_seconds_total = pc.closed_seconds_total;
  if (pc.open) {
    c.duration_seconds_total += pc.open->e.DurationSeconds();
    c.active_episode_id = pc.open->e.id;
  }
  return c;
}

uint64_t EpisodeTracker::started_total() const {
  std::lock_guard<std::mutex> lock(mu_);
  return started_total_;
}

size_t EpisodeTracker::active_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& [id, pc] : cgroups_) n += pc.open ? 1 : 0;
  return n;
}

void EpisodeTracker::WriteMetrics(const Snapshot& snapshot, MetricWriter& out) const {
  (void)snapshot;  // the tracker's own view is at most one sample behind it
  std::lock_guard<std::mutex> lock(mu_);
  // Series only for cgroups that have had an episode: on a healthy node of
  // 5,000 cgroups that is none, and the exposition is unchanged (no
  // node-level total either; /api/v1/episodes has startedTotal).
  std::vector<std::pair<const std::string*, const PerCgroup*>> rows;
  for (const auto& [id, pc] : cgroups_) {
    if (pc.episodes_total > 0) rows.emplace_back(&pc.path.str(), &pc);
  }
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return *a.first < *b.first; });
  out.Family("sockpressure_episodes_total",
             "Throttling episodes started on this cgroup: its own socket pressure (or window clamps) began after "
             "a quiet period of --episodes.quiet-period.",
             MetricKind::kCounter);
  for (const auto& [path, pc] : rows) out.Value(Labels(*path, pc->identity), {}, static_cast<double>(pc->episodes_total));
  out.Family("sockpressure_episode_active", "1 while a throttling episode is open on this cgroup.", MetricKind::kGauge);
  for (const auto& [path, pc] : rows) out.Value(Labels(*path, pc->identity), {}, pc->open ? 1 : 0);
  out.Family("sockpressure_episode_duration_seconds_total",
             "Seconds covered by this cgroup's throttling episodes, from the start of each to its last throttled "
             "sample (the open episode counts up to now).",
             MetricKind::kCounter);
  for (const auto& [path, pc] : rows) {
    double total = pc->closed_seconds_total + (pc->open ? pc->open->e.DurationSeconds() : 0);
    out.Value(Labels(*path, pc->identity), {}, total);
  }
}

}  // namespace sockpressure
