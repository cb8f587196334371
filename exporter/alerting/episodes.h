// Throttling episodes: turns the per-sample snapshot stream into "cgroup X
// was throttled from T1 to T2" records, the unit a human (and an alert)
// cares about. An episode opens in the first sample where a cgroup's own
// socket pressure is asserted (or its sockets show clamps / sock_throttled)
// and closes after a quiet period without any of them.
//
// Only a cgroup's *own* signals open episodes, not pressure inherited from an
// ancestor: pressure on /a throttles every socket below it, and one episode on
// /a says that without flooding the history with one per descendant. This is
// also what the rule-based alert keys on (socket_pressure_seconds_total is
// the cgroup's own deadline).
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "exporter/common/metric_writer.h"
#include "exporter/state/remedy.h"
#include "exporter/state/snapshot.h"

namespace sockpressure {

struct EpisodeOptions {
  double quiet_seconds = 30;   // --episodes.quiet-period
  size_t history = 256;        // --episodes.history
  size_t top_reclaimers = 5;   // per episode
};

struct EpisodePreconditions {
  bool swap_enabled = false;
  bool socket_accounting_enabled = true;
  std::optional<bool> mglru_enabled;  // absent without CONFIG_LRU_GEN
  CgroupMode cgroup_mode = CgroupMode::kUnknown;
  std::string kernel_release;
  std::array<Tier, kSignalCount> signal_tier = NoTiers();
};

// The node's preconditions as the snapshot states them.
EpisodePreconditions PreconditionsOf(const Snapshot& s);

struct ReclaimerPages {
  std::string cgroup;
  uint64_t reclaimed = 0, scanned = 0;
};

// One step of an episode's timeline: what one sample interval (or, in a long
// episode, several merged ones) saw. Kept so the /episodes page can draw it.
struct EpisodePoint {
  int64_t end_ms = 0;
  double interval_seconds = 0;
  double pressure_seconds = 0;  // the cgroup's own socket-pressure seconds
  uint64_t clamps = 0;          // receive-window clamps
};
// Bound per episode: when a timeline reaches it, neighbouring points merge
// pairwise (half as many points, each twice as long), so memory stays fixed
// however long the episode runs and the whole episode stays visible.
inline constexpr size_t kEpisodeTimelinePoints = 120;

// A copy of one episode (the tracker's own records are never handed out).
struct Episode {
  uint64_t id = 0;
  std::string cgroup;
  uint64_t cgroup_id = 0;
  LabelPairs identity;
  bool active = true;
  int64_t start_ms = 0;
  int64_t last_throttled_ms = 0;
  int64_t end_ms = 0;  // 0 while active
  double throttled_seconds = 0;
  uint64_t pressure_events = 0;
  std::optional<double> peak_ratio;
  uint64_t clamps = 0;
  uint64_t peak_clamped_sockets = 0, peak_sockets = 0;
  // Most TCP sockets in the cgroup and below it (what its pressure throttles)
  // in a throttled sample; absent without a census.
  std::optional<uint64_t> peak_subtree_sockets;
  // The remedy that fit best when the episode opened (state/remedy.h);
  // empty when none did.
  std::optional<Remedy> remedy;
  uint64_t sock_throttled = 0;
  PruneCounters prunes;  // pruning and memory drops while open (not a trigger)
  std::string trigger;
  bool saw_pressure = false;  // the socket_pressure signal itself fired
  EpisodePreconditions preconditions;
  std::vector<ReclaimerPages> top_reclaimers;  // filled when copied out
  uint64_t own_scanned = 0, own_reclaimed = 0;
  uint32_t samples = 0;
  std::vector<EpisodePoint> timeline;  // oldest first, at most kEpisodeTimelinePoints

  // Start to the last throttled sample.
  double DurationSeconds() const;
};

// Thread-safe: Observe() runs on the sampler thread (as a Sampler listener);
// the readers run on HTTP threads. Observe() is O(cgroups) and never blocks
// on I/O, as sampler listeners must not; a cgroup seen before costs one
// lookup, and only the cgroups of open episodes do more.
class EpisodeTracker {
 public:
  explicit EpisodeTracker(EpisodeOptions options);

  void Observe(const Snapshot& snapshot);

  // Newest first, at most `limit` (0 = all kept), optionally one cgroup.
  std::vector<Episode> Recent(size_t limit = 0, const std::string& cgroup = "") const;  // cgroup: its path or label
  // Open episodes plus those closed by the last Observe() (for alert push).
  std::vector<Episode> OpenAndJustClosed() const;

  struct CgroupCounters {
    uint64_t episodes_total = 0;
    double duration_seconds_total = 0;  // closed episodes + the open one so far
    std::optional<uint64_t> active_episode_id;
  };
  // By cgroup id (the API, once per cgroup), or by path (a walk of every
  // cgroup tracked: tests and single lookups).
  std::optional<CgroupCounters> Counters(uint64_t cgroup_id) const;
  std::optional<CgroupCounters> Counters(const std::string& cgroup) const;

  uint64_t started_total() const;
  size_t active_count() const;
  const EpisodeOptions& options() const { return options_; }

  // sockpressure_episode* families for the cgroups of `snapshot` that have
  // had an episode (MetricsEndpoint::AddWriter).
  void WriteMetrics(const Snapshot& snapshot, MetricWriter& out) const;

 private:
  struct Record;  // an episode and the reclaimers it saw (below)
  struct PerCgroup {
    uint64_t id = 0;
    SharedPath path;
    bool have_prev = false;
    uint64_t prev_events = 0, prev_clamps = 0, prev_throttled = 0, prev_scanned = 0, prev_reclaimed = 0;
    double prev_seconds = 0;
    PruneCounters prev_prunes;
    uint64_t episodes_total = 0;
    double closed_seconds_total = 0;
    std::shared_ptr<Record> open;
    LabelPairs identity;
    uint64_t seen = 0;  // the Observe() that last saw it
  };
  // What every cgroup of one Observe() shares.
  struct SampleFacts {
    int64_t now_ms;
    double interval;
    int64_t quiet_ms;
    EpisodePreconditions pre;
    const Snapshot* snapshot;  // the one being observed (remedies read the node from it)
  };
  // One cgroup's reclaim in this sample, for the episodes open elsewhere.
  struct Reclaim {
    const SharedPath* path;
    uint64_t id;
    uint64_t scanned, reclaimed;
  };
  // Another cgroup's reclaim during one open episode. The path is the
  // walk's own string (shared_path.h), not a copy, and the key is the
  // cgroup id: with 100 open episodes each following the sample's 64
  // biggest reclaimers, a map keyed and valued by copied Kubernetes-length
  // paths held about 4 MB (a tenth of the agent's heap at 10,000 cgroups).
  struct Reclaimer {
    SharedPath cgroup;
    uint64_t reclaimed = 0, scanned = 0;
  };
  // Defined here, not in episodes.cc: the read side (episodes_read.cc) copies it out.
  struct Record {
    Episode e;
    // Other cgroups' reclaim while this episode was open. Bounded (see
    // Observe) because a node can have thousands of reclaiming cgroups.
    std::unordered_map<uint64_t, Reclaimer> reclaimed_by;  // by cgroup id
  };
  // One cgroup's counters since the last sample.
  struct Deltas {
    uint64_t events = 0, clamps = 0, throttled = 0, scanned = 0, reclaimed = 0;
    double seconds = 0;
    PruneCounters prunes;
  };
  // The steps of Observe(), in order (all under mu_).
  // Which cgroups this snapshot needs visited: every one, or, when it has
  // the same cgroups as the last one observed, only those whose view
  // changed and those watched (an open episode, asserted pressure or a
  // clamped socket in their last view: throttled again even if unchanged).
  std::vector<uint32_t> ToVisit(const Snapshot& s);
  // Every cgroup's entry, by id, in snapshot order (order_); vanished ones
  // end their episodes.
  void MatchCgroups(const Snapshot& s);
  std::vector<Deltas> TakeDeltas(const Snapshot& s, const std::vector<uint32_t>& visit,
                                 std::vector<Reclaim>* reclaiming);
  // The cgroups to visit next time even if their views do not change,
  // chosen among those just visited (which include every watched one).
  void Rewatch(const Snapshot& s, const std::vector<uint32_t>& visit);
  static void KeepBiggestReclaimers(std::vector<Reclaim>& reclaiming);
  void Follow(const CgroupView& c, PerCgroup& pc, const Deltas& d, const std::vector<Reclaim>& reclaiming,
              const SampleFacts& facts);
  void Open(const CgroupView& c, PerCgroup& pc, const Deltas& d, bool pressure, uint64_t clamped_now,
            const SampleFacts& facts);
  void Accumulate(const CgroupView& c, Record& r, const Deltas& d, bool pressure,
                  const std::vector<Reclaim>& reclaiming, const SampleFacts& facts);
  Episode CopyOut(const Record& r) const;
  static CgroupCounters CountersOf(const PerCgroup& pc);
  void Close(PerCgroup& pc);
  void Trim();

  EpisodeOptions options_;
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, PerCgroup> cgroups_;  // by cgroup id
  std::vector<PerCgroup*> order_;  // the last observed snapshot's cgroups, by index
  std::vector<uint32_t> watched_;  // indices into order_, ascending
  uint64_t last_sequence_ = 0;     // of the last observed snapshot
  std::deque<std::shared_ptr<Record>> history_;  // oldest first
  std::vector<std::shared_ptr<Record>> just_closed_;
  uint64_t next_id_ = 1;
  uint64_t observed_ = 0;  // Observe() calls, the stamp of PerCgroup::seen
  uint64_t started_total_ = 0;
  int64_t last_ms_ = 0;
};

absl::string_view EpisodeSignalLabel(const Episode& e);

// The kernel asserted socket pressure on the cgroup, but the census never
// counted a TCP socket in it or below it while the episode was throttled,
// and no socket showed a clamp: the truth is recorded, and nothing pages.
bool NothingToThrottle(const Episode& e);

}  // namespace sockpressure
